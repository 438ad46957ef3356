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
use crate::status::{Health, Rule, StatusDocument, Verdict, evaluate_health};
use crate::util::time::write_rfc3339;
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
        match &mut shared.status {
            Some(view) => self.renew_view(view, &content, now, publishing),
            None => shared.status = Some(self.view(&content, now, publishing)),
        }
        shared.metrics.sinks = self.sinks.counts();
        shared.metrics.probes = self.observation.probes.as_ref().and_then(|p| p.counts);
        shared.metrics.unseen_conditions = self.observation.probes.as_ref().map(|p| p.unseen.len());
        match self.observation.probes.as_ref() {
            Some(p) => shared.metrics.resource_conditions.clone_from(&p.conditions),
            None => shared.metrics.resource_conditions.clear(),
        }
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

    /// [`Self::view`] written over the last tick's, its strings' buffers
    /// reused: a new view each tick cost a dozen allocations and frees.
    pub(super) fn renew_view(&self, view: &mut StatusView, content: &Content, now: SystemTime, publishing: bool) {
        let Content { verdict, pro } = content;
        let StatusDocument { mode, tier, version, health, last_update, registered, error, namespace, cluster_id } =
            &mut view.doc;
        (*mode, *tier, *health, *registered) = (pro.mode, pro.tier, verdict.health, pro.registered);
        version.clone_from(&self.config.settings.operator_version);
        last_update.clear();
        write_rfc3339(last_update, now);
        renew(error, verdict.error.as_deref());
        namespace.clone_from(&self.config.operator_namespace);
        renew(cluster_id, pro.cluster_id.as_deref());
        renew(&mut view.publisher, self.publisher.holder());
        view.publishing = publishing;
        renew(&mut view.write_error, self.write_error.as_ref().map(|p| p.reason.as_str()));
        let probes = self.observation.probes.as_ref();
        view.unseen.clone_from(probes.map_or(&Vec::new(), |p| &p.unseen));
        view.listing.clone_from(probes.map_or(&Vec::new(), |p| &p.listing));
        view.yielded_to = self.publisher.yielding_to().map(ToString::to_string);
        view.overwriting = self.publisher.overwriting().map(ToString::to_string);
        view.pending = self.pending();
        view.conditions.clone_from(probes.map_or(&Vec::new(), |p| &p.conditions));
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

/// `slot` set to `text`, its buffer reused when it has one.
fn renew(slot: &mut Option<String>, text: Option<&str>) {
    match (slot.as_mut(), text) {
        (Some(kept), Some(text)) => {
            kept.clear();
            kept.push_str(text);
        }
        (_, text) => *slot = text.map(String::from),
    }
}
