//! The agent: the loop that keeps the status ConfigMap (and the readiness
//! file, probe endpoint, OperatorCondition and ClusterOperator) current.
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

use crate::backoff::{Backoff, Jitter};
use crate::condition_sinks::{AgentState, ConditionSinks};
use crate::kube::{Client, KubeError};
use crate::metrics::Metrics;
use crate::pro_tier::{ProTier, ProView};
use crate::ready_file;
use crate::serve::{Shared, Snapshot};
use crate::shutdown::Shutdown;
use crate::sinks::configmap::StatusConfigMap;
use crate::status::{
    Health, HealthInputs, MAX_INTERVAL, MIN_INTERVAL, Mode, StatusDocument, Tier, Verdict, evaluate_health,
};
use crate::time::format_rfc3339;
use crate::watch::Watches;
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
    /// A failing watch makes the status `unhealthy` instead of `degraded`.
    pub watch_critical: bool,
    /// Publish `unhealthy` / "Shutting down" when stopped by a signal.
    pub final_status: bool,
}

pub struct Agent {
    client: Client,
    config: AgentConfig,
    watches: Watches,
    /// The API key and registration; `None` when no key source is set.
    pro: Option<ProTier>,
    /// The probes, the OperatorCondition and the ClusterOperator.
    condition_sinks: ConditionSinks,
    backoff: Backoff,
    jitter: Jitter,
    /// Why the last status write failed; `None` after a success.
    write_error: Option<String>,
    /// Why the operator itself is not well (a watch failed).
    operator_problem: Option<String>,
    /// The last status written, without its timestamp.
    published: Option<StatusDocument>,
    /// The last readiness-file error logged, so a broken mount is reported
    /// once, not every tick.
    ready_file_error: Option<String>,
    shared: Shared,
}

impl Agent {
    pub fn new(
        client: Client,
        config: AgentConfig,
        watches: Watches,
        pro: Option<ProTier>,
        condition_sinks: ConditionSinks,
    ) -> Agent {
        let shared = Arc::new(Mutex::new(Snapshot {
            verdict: Verdict { health: Health::Unhealthy, error: Some("Starting".into()) },
            status_json: String::new(),
            metrics: Metrics::default(),
            last_tick: Instant::now(),
            // `/healthz` fails only when the loop has not completed a tick
            // for three heartbeat intervals.
            liveness_window: config.interval * 3,
        }));
        Agent {
            client,
            backoff: Backoff::new(BACKOFF_BASE, config.interval),
            config,
            watches,
            pro,
            condition_sinks,
            jitter: Jitter::from_os(),
            write_error: None,
            operator_problem: None,
            published: None,
            ready_file_error: None,
            shared,
        }
    }

    /// What the probe endpoint serves; updated on every tick.
    pub fn shared(&self) -> Shared {
        self.shared.clone()
    }

    /// The health rules applied to the agent's state, with this status-write
    /// failure (or none).
    fn verdict_with(&self, status_write_error: Option<&str>) -> Verdict {
        self.evaluate(status_write_error, true)
    }

    /// The health rules; `include_cluster_operator` false leaves the
    /// ClusterOperator's own write failure out (what it says about itself).
    fn evaluate(&self, status_write_error: Option<&str>, include_cluster_operator: bool) -> Verdict {
        let pro = self.pro_view();
        evaluate_health(&HealthInputs {
            status_write_error,
            sink_problem: self.condition_sinks.sink_problem(include_cluster_operator),
            resources_problem: self.condition_sinks.resources_problem(),
            config_error: pro.config_error,
            operator_problem: self.operator_problem.as_deref(),
            operator_problem_critical: self.config.watch_critical,
            api_key_configured: pro.key_configured,
            registered: pro.registered,
            registration_failures: pro.registration_failures,
            registration_error: pro.registration_error,
        })
    }

    fn pro_view(&self) -> ProView<'_> {
        match &self.pro {
            Some(pro) => pro.view(),
            None => ProView {
                mode: Mode::Operated,
                tier: Tier::Free,
                registered: false,
                cluster_id: None,
                key_configured: false,
                config_error: None,
                registration_failures: 0,
                registration_error: None,
            },
        }
    }

    /// The heartbeat: kube9-server's `statusUpdateIntervalSeconds` while
    /// registered (within the allowed range), else `--interval`.
    fn interval(&self) -> Duration {
        let asked = self.pro.as_ref().and_then(ProTier::status_interval);
        asked.map_or(self.config.interval, |d| d.clamp(MIN_INTERVAL, MAX_INTERVAL))
    }

    /// The health as the agent sees it now, write failures included.
    pub fn verdict(&self) -> Verdict {
        self.verdict_with(self.write_error.as_deref())
    }

    /// The health to publish: the status write's own failure is left out,
    /// because if this write succeeds, writing works.
    fn publishable(&self) -> Verdict {
        self.verdict_with(None)
    }

    fn document(&self, verdict: Verdict, now: SystemTime) -> StatusDocument {
        let pro = self.pro_view();
        StatusDocument {
            mode: pro.mode,
            tier: pro.tier,
            version: self.config.operator_version.clone(),
            health: verdict.health,
            last_update: format_rfc3339(now),
            registered: pro.registered,
            error: verdict.error,
            namespace: self.config.target.namespace.clone(),
            cluster_id: pro.cluster_id.map(String::from),
        }
    }

    /// The status as it would be written now, without its timestamp: what
    /// a change is measured against (health, reason, mode, tier,
    /// registration, clusterId).
    fn content(&self) -> StatusDocument {
        StatusDocument { last_update: String::new(), ..self.document(self.publishable(), SystemTime::UNIX_EPOCH) }
    }

    /// Checks the watched signals, the API key, and registers when due;
    /// probes the operator's resources and brings the OperatorCondition
    /// and ClusterOperator up to date.
    pub fn check(&mut self) {
        if let Some(pro) = &mut self.pro {
            pro.check(&mut self.client, Instant::now());
        }
        if !self.watches.is_empty() {
            let problem = self.watches.check(SystemTime::now());
            if problem != self.operator_problem {
                match &problem {
                    Some(why) => log::warn!("{why}"),
                    None => log::info!("The operator's health checks pass again"),
                }
            }
            self.operator_problem = problem;
        }
        if self.condition_sinks.is_empty() {
            return;
        }
        let now = Instant::now();
        self.condition_sinks.probe(&mut self.client, now);
        self.condition_sinks.sync_operator_condition(&mut self.client, now);
        let verdict = self.evaluate(self.write_error.as_deref(), false);
        let state =
            AgentState { operator_problem: self.operator_problem.as_deref(), watched: !self.watches.is_empty() };
        self.condition_sinks.sync_cluster_operator(&mut self.client, state, &verdict, now);
        self.condition_sinks.after_sync(now, self.interval());
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
                self.write_error = Some(e.to_string());
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
            if error.is_some() && error != self.ready_file_error {
                log::warn!("{}", error.as_deref().unwrap_or_default());
            }
            self.ready_file_error = error;
        }
        let status_json = StatusDocument { last_update: format_rfc3339(now), ..content }.to_json();
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.verdict = verdict;
        shared.status_json = status_json;
        shared.metrics.conditions = self.condition_sinks.metrics();
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
