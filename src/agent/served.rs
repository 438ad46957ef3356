//! What the agent leaves after each tick for kubelet and the endpoint: the
//! readiness file, and the snapshot `/readyz`, `/status` and `/metrics`
//! answer from. Readiness answers for the operator, not for opstatus's own
//! publishing ([`Agent::readiness`]).

use super::{Agent, AgentSettings, Content};
use crate::endpoint::prometheus::Metrics;
use crate::endpoint::status_view::StatusView;
use crate::endpoint::{Shared, Snapshot};
use crate::ready_file;
use crate::sinks::events::Events;
use crate::status::{Health, Rule, Verdict, evaluate_health};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

impl Agent {
    /// What readiness (`/readyz`, the readiness file) answers for. By
    /// default the operator alone: its watched health URLs and heartbeat
    /// file. opstatus's own publishing (the API server, RBAC, kube9-server,
    /// the sinks) is what every pod shares; an outage of it must not take
    /// the operator's pods out of their Services (webhooks included), and
    /// it stays visible in the status, `/status`, `/metrics`, Events and
    /// the log. `--strict-readiness`: the whole verdict.
    ///
    /// While the operator has not answered since opstatus started (within
    /// the start-up allowance, [`super::startup`]) readiness is what it is
    /// before the first check, `Starting` (503): the operator's pod joins
    /// its Services once its operator answers, as its own readiness probe
    /// would have it, and nothing says `degraded` of an operator that is
    /// only starting.
    pub(super) fn readiness(&self) -> Verdict {
        if self.publisher.startup().waiting() {
            let allowance = self.config.settings.startup_allowance.as_secs();
            let why =
                format!("Starting: waiting for the operator's first answer (a start-up allowance of {allowance}s)");
            return Verdict { health: Health::Unhealthy, error: Some(why) };
        }
        if self.config.settings.strict_readiness {
            return self.verdict();
        }
        evaluate_health(self.observation.problems.iter().filter(|p| p.rule == Rule::Operator))
    }

    /// After each tick: the readiness file and what the endpoint serves.
    /// `content` is this tick's [`Self::content`], reused rather than
    /// rendered again.
    pub(super) fn after_tick(&mut self, content: Content) {
        let verdict = self.verdict();
        let readiness = self.readiness();
        let now = SystemTime::now();
        if let Some(path) = &self.config.settings.ready_file {
            let result = match readiness.health {
                Health::Unhealthy => ready_file::remove(path),
                _ => ready_file::write(path, readiness.health, now),
            };
            let error = result.err().map(|e| format!("Cannot update the readiness file {}: {e}", path.display()));
            self.ready_file_error.update(error, log::Level::Warn, "");
        }
        let publishing = self.publisher.publishing();
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.verdict = verdict;
        shared.readiness = readiness;
        shared.status = Some(self.view(&content, now, publishing));
        shared.metrics.sinks = self.sinks.counts();
        shared.metrics.probes = self.observation.probes.as_ref().and_then(|p| p.counts);
        shared.metrics.unseen_conditions = self.observation.probes.as_ref().map(|p| p.unseen.len());
        shared.metrics.resource_conditions =
            self.observation.probes.as_ref().map_or_else(Vec::new, |p| p.conditions.clone());
        shared.metrics.publishing = publishing;
        shared.metrics.yielded = self.publisher.yielding_to().is_some();
        shared.metrics.events = self.events.as_ref().map(Events::counts);
        shared.last_tick = Instant::now();
    }

    /// What `/status` serves: the document with who publishes added
    /// (readers ignore fields they do not know; the ConfigMap holds the
    /// document alone). Rendered when asked for, not here.
    pub(super) fn view(&self, content: &Content, now: SystemTime, publishing: bool) -> StatusView {
        StatusView {
            doc: self.document(content, now),
            publisher: self.publisher.holder().map(String::from),
            publishing,
            write_error: self.write_error.as_ref().map(|p| p.reason.clone()),
            unseen: self.observation.probes.as_ref().map_or_else(Vec::new, |p| p.unseen.clone()),
            listing: self.observation.probes.as_ref().map_or_else(Vec::new, |p| p.listing.clone()),
            yielded_to: self.publisher.yielding_to().map(ToString::to_string),
            credentials: self.config.credentials.clone(),
            overwriting: self.publisher.overwriting().map(ToString::to_string),
            pending: self.pending(),
            conditions: self.observation.probes.as_ref().map_or_else(Vec::new, |p| p.conditions.clone()),
        }
    }
}

/// What the endpoint serves before the agent's first tick: "Starting"
/// (`/readyz` 503, `/healthz` 200), so the endpoint can listen before the
/// agent is built and answer kubelet's first probe. The agent widens the
/// liveness window by its worst tick once it knows its signals and sinks.
pub(crate) fn starting(settings: &AgentSettings) -> Shared {
    let starting = Verdict { health: Health::Unhealthy, error: Some("Starting".into()) };
    Arc::new(Mutex::new(Snapshot {
        verdict: starting.clone(),
        readiness: starting,
        status: None,
        metrics: Metrics::default(),
        last_tick: Instant::now(),
        liveness_window: super::liveness::window(settings.interval, Duration::ZERO),
        pod_stopping: false,
        leader: None,
    }))
}
