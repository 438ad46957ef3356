//! The status write, the agent's primary sink: one request per heartbeat
//! ([`Agent::write`]), whose outcome ([`Written`]) the agent turns into
//! metrics, Events and log lines ([`Agent::record`]); a new holder's first
//! write is followed by its other sinks ([`Agent::publish`]).

use super::publisher::Action;
use super::write_log::HEARTBEAT_TARGET;
use super::{Agent, SHUTDOWN_REASON};
use crate::kube::KubeError;
use crate::sinks::events::event as events;
use crate::status::{Health, Problem, StatusDocument, Verdict};
use crate::writers::quiet_period;
use std::time::{Duration, Instant, SystemTime};

/// What one status write came to: [`Agent::write`] makes the request,
/// [`Agent::record`] turns this into metrics, Events and log lines.
pub(super) enum Written {
    /// Another instance publishes: nothing was written.
    NotOurs,
    /// The document went out at `at`; `before` is the health published
    /// before it, `changed` whether the document (its timestamp aside)
    /// differs from the last one published, `ended_failures` the failed
    /// attempts this write ended.
    Done {
        doc: StatusDocument,
        at: SystemTime,
        took: Duration,
        before: Option<Health>,
        changed: bool,
        ended_failures: Option<u32>,
    },
    Failed {
        error: KubeError,
        took: Duration,
    },
}

/// A document as the log says it: `mode=…, tier=…, health=…, registered=…`.
fn said(doc: &StatusDocument) -> String {
    let (mode, tier, health, registered) = (doc.mode.as_str(), doc.tier.as_str(), doc.health, doc.registered);
    format!("mode={mode}, tier={tier}, health={health}, registered={registered}")
}

impl Agent {
    /// Writes the status if this instance publishes: one request. Logs the
    /// outcome in the spec's words.
    pub(crate) fn heartbeat(&mut self) -> Result<(), KubeError> {
        self.publish(self.publishable(), false)
    }

    /// `opstatus once`: one write that leaves the lock free, so a running
    /// instance is not held up; `Ok(false)` when another instance publishes.
    pub(crate) fn write_once(&mut self) -> Result<bool, KubeError> {
        self.publish(self.publishable(), true)?;
        Ok(self.last_written.is_some())
    }

    /// One write and what follows from it: its outcome recorded, and after
    /// a new holder's first write its sinks brought up to date (what they
    /// report, such as a sink that cannot be written, goes out at once).
    pub(super) fn publish(&mut self, verdict: Verdict, release: bool) -> Result<(), KubeError> {
        let shutting_down = verdict.error.as_deref() == Some(SHUTDOWN_REASON);
        let was_publishing = self.publisher.publishing();
        let written = self.write(verdict, release);
        self.note_news();
        self.note_stepped_down(was_publishing);
        let first_as_holder = matches!(written, Written::Done { .. }) && !self.sinks_synced;
        self.record(written)?;
        if first_as_holder && self.publisher.publishing() {
            // The signals that waited for the lock look at once.
            self.check_soon = self.signals.iter().any(|s| s.waits_for_the_lock());
            self.sync_sinks(Instant::now());
            self.hold_health(Instant::now());
            if !shutting_down && self.published != Some(self.content()) {
                return self.publish(self.publishable(), release);
            }
        }
        Ok(())
    }

    /// The request itself, and what the agent must remember of it (what
    /// was published, why a write failed); [`Self::record`] does the rest.
    fn write(&mut self, verdict: Verdict, release: bool) -> Written {
        let at = SystemTime::now();
        let content = self.content_with(verdict);
        let doc = self.document(&content, at);
        let started = Instant::now();
        let result = self.publisher.write(&mut self.client, &self.config.target, &doc, release);
        let took = started.elapsed();
        match result {
            Ok(false) => {
                self.published = None;
                Written::NotOurs
            }
            Ok(true) => {
                let ended_failures = self.write_error.take().map(|_| self.backoff.failures());
                self.backoff.reset();
                let previous = self.published.replace(content);
                let changed = previous.as_ref() != self.published.as_ref();
                let before = previous.map(|p| p.verdict.health);
                Written::Done { doc, at, took, before, changed, ended_failures }
            }
            Err(error) => {
                self.write_error = Some(Problem::status_write(&error.to_string()));
                Written::Failed { error, took }
            }
        }
    }

    /// A write's outcome as metrics, Events and log lines (and, for a
    /// success, the document kept as the last written): a line when the
    /// published status changed, each heartbeat only when asked for
    /// ([`super::write_log`]).
    fn record(&mut self, written: Written) -> Result<(), KubeError> {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        match written {
            Written::NotOurs => Ok(()),
            Written::Failed { error, took } => {
                shared.metrics.record_error(error.kind(), took);
                Err(error)
            }
            Written::Done { doc, at, took, before, changed, ended_failures } => {
                shared.metrics.record_update(doc.mode, doc.health, took, at);
                drop(shared);
                if let Some(failures) = ended_failures {
                    log::info!(
                        "Status ConfigMap {}/{} is writable again after {failures} failed attempts",
                        self.config.target.namespace,
                        self.config.target.name,
                    );
                }
                // The Event of a change of health (news of the publisher's
                // own: [`Self::note_news`]). The final "Shutting down" status
                // makes none: kubelet's own events say the pod is stopping, and
                // the stop must stay quick.
                let shutdown = doc.error.as_deref() == Some(SHUTDOWN_REASON);
                let change = events::health_changed(before, doc.health, doc.error.as_deref(), at);
                if let (Some(recorder), Some(change)) = (&self.events, change.filter(|_| !shutdown)) {
                    recorder.record(change, Instant::now());
                }
                if changed {
                    log::info!("Status updated: {}", said(&doc));
                } else if self.heartbeat_lines {
                    log::info!(target: HEARTBEAT_TARGET, "Status updated: {}", said(&doc));
                }
                if let Some((writes, over)) = self.write_log.wrote(Instant::now()) {
                    let minutes = over.as_secs() / 60;
                    log::info!("Status kept current: {writes} writes in the last {minutes} min ({})", said(&doc));
                }
                self.last_written = Some(doc);
                Ok(())
            }
        }
    }

    /// After each check, write or handover of the publisher's: the Events'
    /// ConfigMap, and what the cluster hears of
    /// ([`super::publisher::Publisher::take_news`]), each said in one Event,
    /// a yield to another writer and one written over counted too.
    pub(super) fn note_news(&mut self) {
        let (now, wall) = (Instant::now(), SystemTime::now());
        if let (Some(recorder), Some(uid)) = (&self.events, self.publisher.configmap_uid()) {
            recorder.configmap_uid(uid);
        }
        for news in self.publisher.take_news() {
            let target = format!("{}/{}", self.config.target.namespace, self.config.target.name);
            let shared = || self.shared.lock().unwrap_or_else(|p| p.into_inner());
            let event = match news {
                Action::Yield { writer, .. } => {
                    shared().metrics.foreign_writer_yields += 1;
                    events::foreign_writer(&writer.to_string(), &target, quiet_period(self.interval()), wall)
                }
                Action::Overwrite { writer, why } => {
                    shared().metrics.foreign_writer_overwrites += 1;
                    events::foreign_writer_overwritten(&writer.to_string(), &target, &why, wall)
                }
                Action::Publish { took_over: Some(from) } => {
                    let because = self.publisher.standing_in();
                    events::became_publisher(&self.config.identity, &target, from.as_deref(), because.as_deref(), wall)
                }
                _ => continue,
            };
            if let Some(recorder) = &self.events {
                recorder.record(event, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentConfig, AgentSettings};
    use crate::kube::{Auth, Client, Credentials};
    use crate::sinks::Sinks;
    use crate::sinks::configmap::StatusConfigMap;
    use crate::status::Mode;

    /// An agent whose client is never used: the outcomes are handed in.
    fn agent() -> Agent {
        let creds = Credentials {
            server: "https://127.0.0.1:1".into(),
            ca_pem: include_bytes!("../../tests/fixtures/fixture-ca.crt").to_vec(),
            ca_source: "the fixture CA".into(),
            tls_server_name: None,
            proxy_url: None,
            auth: Auth::Anonymous,
            namespace: None,
        };
        let settings = AgentSettings {
            interval: Duration::from_secs(60),
            check_interval: Duration::from_secs(5),
            operator_version: "1.0.0".into(),
            ready_file: None,
            final_status: true,
            strict_readiness: false,
            follow_leader_lease: None,
            startup_allowance: Duration::from_secs(60),
            health_inertia: crate::inertia::Windows::default(),
            upgradeable_inertia: crate::inertia::Windows::default(),
        };
        let config = AgentConfig {
            target: StatusConfigMap {
                namespace: "ns".into(),
                name: "kube9-operator-status".into(),
                operator_elsewhere: false,
            },
            operator_namespace: "ns".into(),
            identity: "pod-a".into(),
            pod: "pod-a".into(),
            credentials: "kubeconfig test".into(),
            settings,
            leader_endpoints: None,
        };
        let shared = super::super::starting(&config.settings);
        Agent::new(Client::new(&creds).expect("a client"), config, Vec::new(), Sinks::default(), None, shared)
    }

    fn metrics(agent: &Agent) -> String {
        agent.shared.lock().unwrap().metrics.render(Health::Healthy)
    }

    #[test]
    fn a_write_outcome_becomes_metrics_and_only_a_failure_is_an_error() {
        let mut agent = agent();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let content = agent.content_with(Verdict { health: Health::Degraded, error: Some("why".into()) });
        let doc = agent.document(&content, at);
        assert_eq!(doc.mode, Mode::Operated);
        let took = Duration::from_millis(3);
        agent
            .record(Written::Done { doc, at, took, before: None, changed: true, ended_failures: Some(2) })
            .expect("a success");
        assert!(agent.record(Written::NotOurs).is_ok(), "a standby's write is no failure");
        let error = KubeError::Api {
            code: 403,
            reason: "Forbidden".into(),
            message: "no".into(),
            action: "patch".into(),
            grant: None,
            retry_after: None,
        };
        let failed = agent.record(Written::Failed { error, took }).expect_err("a failure is returned");
        assert_eq!(failed.code(), Some(403));
        let text = metrics(&agent);
        assert!(
            text.contains("kube9_operator_status_updates_total{mode=\"operated\",health=\"degraded\"} 1"),
            "{text}"
        );
        assert!(text.contains("kube9_operator_status_update_errors_total{error_type=\"forbidden\"} 1"), "{text}");
    }
}
