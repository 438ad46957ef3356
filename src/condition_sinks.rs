//! The probes and the two condition-bearing sinks (OLM's OperatorCondition,
//! OpenShift's ClusterOperator), run on each check tick.
//!
//! Each check: the probes list the operator's resources; then each sink
//! writes only when what it would say changed since its last write, or
//! when a drift check is due (once per heartbeat interval: a read, and a
//! write only if someone changed what opstatus owns). A failed write is
//! retried on the next check (at most every check interval: no hot loop)
//! and is reported as a problem that degrades the status.

use crate::conditions::Desired;
use crate::kube::Client;
use crate::metrics::ConditionMetrics;
use crate::probes::{Outcome, Prober};
use crate::sinks::Written;
use crate::sinks::cluster_operator::{
    ClusterOperatorSink, DegradedInertia, Intent, RelatedObject, Signals, Version, parse_version_file,
};
use crate::sinks::operator_condition::OperatorConditionSink;
use crate::status::{Health, Verdict};
use crate::time::format_rfc3339;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// The ClusterOperator and what feeds its versions and conditions.
pub struct ClusterOperatorSetup {
    pub sink: ClusterOperatorSink,
    /// `operator` first, then the operands.
    pub targets: Vec<Version>,
    pub version_file: Option<PathBuf>,
    pub related: Vec<RelatedObject>,
    pub inertia: Duration,
}

/// What the agent tells the sinks on each check.
#[derive(Clone, Copy, Debug)]
pub struct AgentState<'a> {
    /// Why the operator is down (its watches fail), if it is.
    pub operator_problem: Option<&'a str>,
    pub watched: bool,
}

pub struct ConditionSinks {
    prober: Option<Prober>,
    outcome: Outcome,
    operator_condition: Option<OperatorConditionSink>,
    operator_condition_problem: Option<String>,
    cluster_operator: Option<ClusterOperatorSetup>,
    cluster_operator_problem: Option<String>,
    inertia: DegradedInertia,
    /// The last version-file error logged, so it is logged once.
    version_file_error: Option<String>,
    next_drift_check: Instant,
    metrics: ConditionMetrics,
}

impl ConditionSinks {
    /// `prober` is kept only when it has something to probe.
    pub fn new(
        prober: Prober,
        operator_condition: Option<OperatorConditionSink>,
        cluster_operator: Option<ClusterOperatorSetup>,
    ) -> ConditionSinks {
        let metrics = ConditionMetrics {
            operator_condition: operator_condition.as_ref().map(|_| [0; 3]),
            cluster_operator: cluster_operator.as_ref().map(|_| [0; 3]),
            probes: None,
        };
        ConditionSinks {
            metrics,
            prober: (!prober.is_empty()).then_some(prober),
            outcome: Outcome::default(),
            operator_condition,
            operator_condition_problem: None,
            cluster_operator,
            cluster_operator_problem: None,
            inertia: DegradedInertia::default(),
            version_file_error: None,
            next_drift_check: Instant::now(),
        }
    }

    /// Counters and gauges for `/metrics`.
    pub fn metrics(&self) -> ConditionMetrics {
        self.metrics
    }

    pub fn is_empty(&self) -> bool {
        self.prober.is_none() && self.operator_condition.is_none() && self.cluster_operator.is_none()
    }

    /// Why the operator's resources need attention: a probe failed, or an
    /// `Important` expression holds.
    pub fn resources_problem(&self) -> Option<&str> {
        self.outcome.problem.as_deref().or_else(|| {
            self.outcome
                .important
                .as_ref()
                .filter(|c| c.status == crate::conditions::Status::True)
                .map(|c| c.message.as_str())
        })
    }

    /// Why a sink cannot be written; the ClusterOperator's own failure left
    /// out when computing what the ClusterOperator says.
    pub fn sink_problem(&self, include_cluster_operator: bool) -> Option<&str> {
        self.operator_condition_problem.as_deref().or(if include_cluster_operator {
            self.cluster_operator_problem.as_deref()
        } else {
            None
        })
    }

    /// Evaluates the probes. Called first on each check.
    pub fn probe(&mut self, client: &mut Client, now: Instant) {
        let Some(prober) = &mut self.prober else { return };
        let outcome = prober.evaluate(client, now);
        if outcome.problem != self.outcome.problem {
            match &outcome.problem {
                Some(why) => log::warn!("{why}"),
                None => log::info!("Probing the operator's resources works again"),
            }
        }
        if outcome.counts.is_some() {
            self.metrics.probes = outcome.counts;
        }
        self.outcome = outcome;
    }

    /// Writes the OperatorCondition if its conditions changed (or a drift
    /// check is due).
    pub fn sync_operator_condition(&mut self, client: &mut Client, now: Instant) {
        let Some(sink) = &mut self.operator_condition else { return };
        let desired: Vec<Desired> =
            [&self.outcome.upgradeable, &self.outcome.important].into_iter().flatten().cloned().collect();
        if desired.is_empty() || (sink.is_current(&desired) && now < self.next_drift_check) {
            return;
        }
        let result = sink.sync(client, &desired, &format_rfc3339(SystemTime::now()));
        let counts = self.metrics.operator_condition.get_or_insert([0; 3]);
        report(&sink.describe(), result, &mut self.operator_condition_problem, &desired, counts);
    }

    /// Writes the ClusterOperator if what it says changed (or a drift check
    /// is due). `verdict` is the health without the ClusterOperator's own
    /// failure.
    pub fn sync_cluster_operator(
        &mut self,
        client: &mut Client,
        state: AgentState<'_>,
        verdict: &Verdict,
        now: Instant,
    ) {
        let Some(setup) = &mut self.cluster_operator else { return };
        let bad = verdict.health != Health::Healthy;
        let degraded = self.inertia.observe(bad, now, setup.inertia);
        let running = setup.version_file.as_ref().map(|path| {
            let read = std::fs::read_to_string(path);
            let parsed = match read {
                Ok(text) => parse_version_file(&text).map_err(|e| format!("Version file {}: {e}", path.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(format!("Cannot read the version file {}: {e}", path.display())),
            };
            let error = parsed.as_ref().err().cloned();
            if error.is_some() && error != self.version_file_error {
                log::warn!("{}; reporting only the versions known to run", error.as_deref().unwrap_or_default());
            }
            self.version_file_error = error;
            parsed.unwrap_or_default()
        });
        // No Upgradeable expression: True. One that cannot be evaluated
        // yet (a failed list, an unread CRD): leave what is published.
        let upgradeable = match (self.outcome.declares_upgradeable, &self.outcome.upgradeable) {
            (false, _) => Ok(None),
            (true, Some(c)) => Ok(Some(c)),
            (true, None) => Err(()),
        };
        let signals =
            Signals { operator_down: state.operator_problem, watched: state.watched, verdict, degraded, upgradeable };
        // Built on every check (a few small strings per check interval, not
        // per heartbeat) and compared with what was last written: simpler
        // and surer than tracking each input's changes.
        let intent = Intent::new(&signals, setup.targets.clone(), running, setup.related.clone());
        if setup.sink.is_current(&intent) && now < self.next_drift_check {
            return;
        }
        let result = setup.sink.sync(client, &intent, &format_rfc3339(SystemTime::now()));
        let counts = self.metrics.cluster_operator.get_or_insert([0; 3]);
        report(&setup.sink.describe(), result, &mut self.cluster_operator_problem, &intent.conditions, counts);
    }

    /// After both syncs: schedules the next drift check.
    pub fn after_sync(&mut self, now: Instant, interval: Duration) {
        if now >= self.next_drift_check {
            self.next_drift_check = now + interval;
        }
    }
}

/// Logs a sink's outcome in one line, records its problem and counts it
/// (updated, unchanged, failed).
fn report(
    what: &str,
    result: Result<Written, String>,
    problem: &mut Option<String>,
    said: &[Desired],
    counts: &mut [u64; 3],
) {
    match result {
        Ok(written) => {
            counts[if written == Written::Updated { 0 } else { 1 }] += 1;
            if problem.take().is_some() {
                log::info!("{what} is writable again");
            }
            if written == Written::Updated {
                let summary: Vec<String> = said.iter().map(|c| format!("{}={}", c.kind, c.status.as_str())).collect();
                log::info!("{what} updated: {}", summary.join(", "));
            }
        }
        Err(why) => {
            counts[2] += 1;
            if problem.as_deref() != Some(why.as_str()) {
                log::warn!("{why}");
            }
            *problem = Some(why);
        }
    }
}
