//! The status write, the agent's primary sink: one request per heartbeat
//! ([`Agent::write`]), whose outcome ([`Written`]) the agent turns into
//! metrics, Events and log lines ([`Agent::record`]); a new holder's first
//! write is followed by its other sinks ([`Agent::publish`]).

use super::write_log::HEARTBEAT_TARGET;
use super::{Agent, SHUTDOWN_REASON};
use crate::kube::KubeError;
use crate::sinks::events::correlator as events;
use crate::status::{Health, Problem, StatusDocument, Verdict};
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
        self.note_yield();
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
                self.note_events(before, &doc, at);
                if changed {
                    log::info!("Status updated: {}", said(&doc));
                } else if self.heartbeat_lines {
                    log::info!(target: HEARTBEAT_TARGET, "Status updated: {}", said(&doc));
                }
                if let Some(summary) = self.write_log.wrote(Instant::now()) {
                    log::info!(
                        "Status kept current: {} writes in the last {} min ({})",
                        summary.writes,
                        summary.over.as_secs() / 60,
                        said(&doc)
                    );
                }
                self.last_written = Some(doc);
                Ok(())
            }
        }
    }

    /// Another writer took the status key over (seen on a check or a
    /// write): counted, and said in one Event.
    pub(super) fn note_yield(&mut self) {
        self.note_overwrite();
        let Some(writer) = self.publisher.take_yield_news() else { return };
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).metrics.foreign_writer_yields += 1;
        if let Some(recorder) = &self.events {
            let target = format!("{}/{}", self.config.target.namespace, self.config.target.name);
            let quiet = crate::writers::quiet_period(self.interval());
            recorder
                .record(events::foreign_writer(&writer.to_string(), &target, quiet, SystemTime::now()), Instant::now());
        }
    }

    /// Another writer keeps writing a status stale to readers, which this
    /// instance writes over: counted, and said in one Event per episode.
    fn note_overwrite(&mut self) {
        let Some((writer, why)) = self.publisher.take_overwrite_news() else { return };
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).metrics.foreign_writer_overwrites += 1;
        if let Some(recorder) = &self.events {
            let target = format!("{}/{}", self.config.target.namespace, self.config.target.name);
            let event = events::foreign_writer_overwritten(&writer.to_string(), &target, &why, SystemTime::now());
            recorder.record(event, Instant::now());
        }
    }

    /// After a successful write: the events it makes, queued (sent by their
    /// own thread). The final "Shutting down" status makes none:
    /// kubelet's own events say the pod is stopping, and the stop must
    /// stay quick.
    fn note_events(&mut self, before: Option<Health>, doc: &StatusDocument, wall: SystemTime) {
        let Some(recorder) = &self.events else { return };
        if let Some(uid) = self.publisher.configmap_uid() {
            recorder.configmap_uid(uid);
        }
        let now = Instant::now();
        if let Some(from) = self.publisher.take_over_news() {
            let target = format!("{}/{}", self.config.target.namespace, self.config.target.name);
            let because = self.publisher.problem(now).filter(|_| self.publisher.silent_leader().is_some());
            let because = because.as_ref().map(|p| p.reason.as_str());
            let event = events::became_publisher(&self.config.identity, &target, from.as_deref(), because, wall);
            recorder.record(event, now);
        }
        if doc.error.as_deref() == Some(SHUTDOWN_REASON) {
            return;
        }
        if let Some(o) = events::health_changed(before, doc.health, doc.error.as_deref(), wall) {
            recorder.record(o, now);
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
