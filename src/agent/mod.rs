//! The agent: the loop that keeps the status ConfigMap (and the readiness
//! file, probe endpoint, OperatorCondition and ClusterOperator) current.
//!
//! One tick is the pipeline: the signals make one [`Observation`], the
//! health rules make one verdict of it, and the sinks publish that verdict.
//! The agent owns the schedule and the primary sink, the status ConfigMap;
//! it knows the signals and the other sinks only as the values in its two
//! lists ([`Signal`], [`Sinks`]).
//!
//! Two cadences drive it. Every check interval (5 s by default) it checks
//! the watched signals (the operator's health URLs and heartbeat file),
//! refreshes the readiness file and what the endpoint serves. Every
//! heartbeat interval (60 s) it writes the status, and it writes at once
//! when the health it would publish changed. A failed write is retried with
//! exponential backoff and full jitter (base 1 s, cap = the interval,
//! `Retry-After` honoured); the agent never exits on an API error and never
//! spins. While writes fail its health is `unhealthy` with the failure as
//! the reason (spec rule 1): that is what its logs, `/readyz` and metrics
//! say, and readers of the ConfigMap see it as a `lastUpdate` that stops
//! moving. The first write that succeeds again publishes the state as it is
//! then, not the outage that just ended: the document describes the present.

mod liveness;

use crate::endpoint::prometheus::Metrics;
use crate::endpoint::{Shared, Snapshot};
use crate::kube::{Client, KubeError};
use crate::ready_file;
use crate::signals::{Observation, Signal};
use crate::sinks::Sinks;
use crate::sinks::configmap::StatusConfigMap;
use crate::status::{Health, MAX_INTERVAL, MIN_INTERVAL, Problem, StatusDocument, Verdict, evaluate_health};
use crate::util::backoff::{Backoff, Jitter};
use crate::util::reported::Reported;
use crate::util::shutdown::Shutdown;
use crate::util::time::format_rfc3339;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The first retry after a failed write waits at least this long.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// The reason published when the agent stops.
pub const SHUTDOWN_REASON: &str = "Shutting down";

/// What the agent needs to know, fixed at start.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub target: StatusConfigMap,
    pub interval: Duration,
    pub check_interval: Duration,
    pub operator_version: String,
    pub ready_file: Option<PathBuf>,
    /// Publish `unhealthy` / "Shutting down" when stopped by a signal.
    pub final_status: bool,
}

pub struct Agent {
    client: Client,
    config: AgentConfig,
    /// What is looked at on each check, in order.
    signals: Vec<Box<dyn Signal>>,
    /// What the signals saw on the last check.
    observation: Observation,
    /// Every published resource but the status ConfigMap.
    sinks: Sinks,
    backoff: Backoff,
    jitter: Jitter,
    /// Why the last status write failed (rule 1); `None` after a success.
    write_error: Option<Problem>,
    /// The last status written, without its timestamp.
    published: Option<StatusDocument>,
    /// A broken readiness-file mount is reported once, not every tick.
    ready_file_error: Reported,
    shared: Shared,
}

impl Agent {
    pub fn new(client: Client, config: AgentConfig, signals: Vec<Box<dyn Signal>>, sinks: Sinks) -> Agent {
        let shared = Arc::new(Mutex::new(Snapshot {
            verdict: Verdict { health: Health::Unhealthy, error: Some("Starting".into()) },
            status_json: String::new(),
            metrics: Metrics::default(),
            last_tick: Instant::now(),
            liveness_window: liveness::of(config.interval, &signals, &sinks),
        }));
        Agent {
            client,
            backoff: Backoff::new(BACKOFF_BASE, config.interval),
            config,
            signals,
            observation: Observation::default(),
            sinks,
            jitter: Jitter::from_os(),
            write_error: None,
            published: None,
            ready_file_error: Reported::default(),
            shared,
        }
    }

    /// What the probe endpoint serves; updated on every tick.
    pub fn shared(&self) -> Shared {
        self.shared.clone()
    }

    /// The heartbeat: kube9-server's `statusUpdateIntervalSeconds` while
    /// registered (within the allowed range), else `--interval`.
    fn interval(&self) -> Duration {
        let asked = self.observation.asked_interval;
        asked.map_or(self.config.interval, |d| d.clamp(MIN_INTERVAL, MAX_INTERVAL))
    }

    /// The health as the agent sees it now, write failures included.
    pub fn verdict(&self) -> Verdict {
        let problems = self.observation.problems.iter().chain(self.sinks.problems());
        evaluate_health(self.write_error.iter().chain(problems))
    }

    /// The health to publish: the status write's own failure is left out,
    /// because if this write succeeds, writing works.
    fn publishable(&self) -> Verdict {
        evaluate_health(self.observation.problems.iter().chain(self.sinks.problems()))
    }

    fn document(&self, verdict: Verdict, now: SystemTime) -> StatusDocument {
        let pro = &self.observation.pro;
        StatusDocument {
            mode: pro.mode,
            tier: pro.tier,
            version: self.config.operator_version.clone(),
            health: verdict.health,
            last_update: format_rfc3339(now),
            registered: pro.registered,
            error: verdict.error,
            namespace: self.config.target.namespace.clone(),
            cluster_id: pro.cluster_id.clone(),
        }
    }

    /// The status as it would be written now, without its timestamp: what
    /// a change is measured against (health, reason, mode, tier,
    /// registration, clusterId).
    fn content(&self) -> StatusDocument {
        StatusDocument { last_update: String::new(), ..self.document(self.publishable(), SystemTime::UNIX_EPOCH) }
    }

    /// One check: every signal looks again (one observation), then every
    /// sink is brought up to date with it.
    pub fn check(&mut self) {
        let now = Instant::now();
        let mut observation = Observation::default();
        for signal in &mut self.signals {
            signal.observe(&mut self.client, now, &mut observation);
        }
        self.observation = observation;
        if self.sinks.is_empty() {
            return;
        }
        let mut problems = self.observation.problems.clone();
        problems.extend(self.write_error.clone());
        let interval = self.interval();
        self.sinks.sync_all(&mut self.client, &self.observation, &problems, now, interval);
    }

    /// Writes the status: one request. Logs the outcome in the spec's words.
    pub fn heartbeat(&mut self) -> Result<(), KubeError> {
        self.write(self.publishable())
    }

    fn write(&mut self, verdict: Verdict) -> Result<(), KubeError> {
        let now = SystemTime::now();
        let doc = self.document(verdict.clone(), now);
        let started = Instant::now();
        let result = self.config.target.publish(&mut self.client, &doc);
        let took = started.elapsed();
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(()) => {
                shared.metrics.record_update(doc.mode, doc.health, took, now);
                drop(shared);
                if self.write_error.take().is_some() {
                    log::info!(
                        "Status ConfigMap {}/{} is writable again after {} failed attempts",
                        self.config.target.namespace,
                        self.config.target.name,
                        self.backoff.failures()
                    );
                }
                self.backoff.reset();
                self.published = Some(StatusDocument { last_update: String::new(), ..doc.clone() });
                log::info!(
                    "Status updated: mode={}, tier={}, health={}, registered={}",
                    doc.mode.as_str(),
                    doc.tier.as_str(),
                    doc.health,
                    doc.registered
                );
                Ok(())
            }
            Err(e) => {
                shared.metrics.record_error(e.kind(), took);
                drop(shared);
                self.write_error = Some(Problem::status_write(&e.to_string()));
                Err(e)
            }
        }
    }

    /// After each tick: the readiness file and what the endpoint serves.
    /// `content` is this tick's [`Self::content`], reused rather than
    /// rendered again.
    fn after_tick(&mut self, content: StatusDocument) {
        let verdict = self.verdict();
        let now = SystemTime::now();
        if let Some(path) = &self.config.ready_file {
            let result = match verdict.health {
                Health::Unhealthy => ready_file::remove(path),
                _ => ready_file::write(path, verdict.health, now),
            };
            let error = result.err().map(|e| format!("Cannot update the readiness file {}: {e}", path.display()));
            self.ready_file_error.update(error, log::Level::Warn, "");
        }
        let status_json = StatusDocument { last_update: format_rfc3339(now), ..content }.to_json();
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.verdict = verdict;
        shared.status_json = status_json;
        shared.metrics.sinks = self.sinks.counts();
        shared.metrics.probes = self.observation.probes.as_ref().and_then(|p| p.counts);
        shared.last_tick = Instant::now();
    }

    /// The loop, until SIGTERM or SIGINT; then the final status.
    pub fn run(&mut self, shutdown: &mut Shutdown) {
        log::info!(
            "Publishing status to ConfigMap {}/{} on {} every {}s (checks every {}s)",
            self.config.target.namespace,
            self.config.target.name,
            self.client.server(),
            self.config.interval.as_secs(),
            self.config.check_interval.as_secs()
        );
        let start = Instant::now();
        let (mut next_check, mut next_write) = (start, start);
        while !shutdown.wait_until(next_check.min(next_write)) {
            let now = Instant::now();
            if now >= next_check {
                self.check();
                next_check = now + self.config.check_interval.min(self.interval());
            }
            // A change (anything but the timestamp) is published at once,
            // unless writes are failing: then it goes out with the next
            // retry, on the backoff schedule.
            // A write never changes the content (its own failure is left
            // out of it), so this serves after_tick too.
            let content = self.content();
            let changed = self.published.as_ref() != Some(&content);
            if now >= next_write || (changed && self.write_error.is_none()) {
                next_write = match self.heartbeat() {
                    // Scheduled from the attempt's start, so the cadence does
                    // not drift by the request's duration.
                    Ok(()) => now + self.interval(),
                    Err(e) => {
                        let delay = self.backoff.next_delay(self.jitter.next_u64(), e.retry_after());
                        log::warn!(
                            "Failed to write status ConfigMap {}/{}: {e}; health={}; retrying in {:.1}s (attempt {})",
                            self.config.target.namespace,
                            self.config.target.name,
                            self.verdict().health,
                            delay.as_secs_f64(),
                            self.backoff.failures()
                        );
                        Instant::now() + delay
                    }
                };
            }
            self.after_tick(content);
        }
        self.stop();
    }

    /// After a signal: the last status (unless disabled) and no readiness
    /// file. The shutdown watchdog bounds how long this may take.
    fn stop(&mut self) {
        log::info!("Shutting down");
        if let Some(path) = &self.config.ready_file {
            let _ = ready_file::remove(path);
        }
        if self.config.final_status {
            let last = Verdict { health: Health::Unhealthy, error: Some(SHUTDOWN_REASON.into()) };
            if let Err(e) = self.write(last) {
                log::warn!("Could not publish the final status: {e}");
            }
        }
    }
}
