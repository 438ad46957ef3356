//! What the agent leaves after each tick for kubelet and the endpoint: the
//! readiness file, and the snapshot `/readyz`, `/status` and `/metrics`
//! answer from. Readiness answers for the operator, not for opstatus's own
//! publishing ([`Agent::readiness`]).

use super::{Agent, Content};
use crate::endpoint::status_view::StatusView;
use crate::ready_file;
use crate::sinks::events::Events;
use crate::status::{Health, Rule, Verdict, evaluate_health};
use std::time::{Instant, SystemTime};

impl Agent {
    /// What readiness (`/readyz`, the readiness file) answers for. By
    /// default the operator alone: its watched health URLs and heartbeat
    /// file. opstatus's own publishing (the API server, RBAC, kube9-server,
    /// the sinks) is what every pod shares; an outage of it must not take
    /// the operator's pods out of their Services (webhooks included), and
    /// it stays visible in the status, `/status`, `/metrics`, Events and
    /// the log. `--strict-readiness`: the whole verdict.
    pub(super) fn readiness(&self) -> Verdict {
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
        // `/status` adds who publishes to the document (readers ignore
        // fields they do not know); the ConfigMap holds the document alone.
        // Rendered when asked for, not here.
        let status = StatusView {
            doc: self.document(&content, now),
            publisher: self.publisher.holder().map(String::from),
            publishing,
            write_error: self.write_error.as_ref().map(|p| p.reason.clone()),
            unseen: self.observation.probes.as_ref().map_or_else(Vec::new, |p| p.unseen.clone()),
            listing: self.observation.probes.as_ref().map_or_else(Vec::new, |p| p.listing.clone()),
            yielded_to: self.publisher.yielding_to().map(ToString::to_string),
        };
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.verdict = verdict;
        shared.readiness = readiness;
        shared.status = Some(status);
        shared.metrics.sinks = self.sinks.counts();
        shared.metrics.probes = self.observation.probes.as_ref().and_then(|p| p.counts);
        shared.metrics.unseen_conditions = self.observation.probes.as_ref().map(|p| p.unseen.len());
        shared.metrics.publishing = publishing;
        shared.metrics.yielded = self.publisher.yielding_to().is_some();
        shared.metrics.events = self.events.as_ref().map(Events::counts);
        shared.last_tick = Instant::now();
    }
}
