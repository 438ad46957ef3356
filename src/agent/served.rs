//! What the agent leaves after each tick for kubelet and the endpoint: the
//! readiness file, and the snapshot `/readyz`, `/status` and `/metrics`
//! answer from. Readiness answers for the operator, not for opstatus's own
//! publishing ([`Agent::readiness`]).

use super::Agent;
use crate::ready_file;
use crate::sinks::events::Events;
use crate::status::{Health, Rule, StatusDocument, Verdict, evaluate_health};
use crate::util::time::format_rfc3339;
use std::time::{Instant, SystemTime};

/// What `/status` serves.
#[derive(serde::Serialize)]
struct Served<'a> {
    #[serde(flatten)]
    doc: &'a StatusDocument,
    /// Who publishes, as last seen.
    publisher: Option<&'a str>,
    /// Whether this instance does.
    publishing: bool,
    /// Why the last status write failed, while it does: what readers of
    /// the published status cannot see (it is the write that failed).
    #[serde(rename = "writeError", skip_serializing_if = "Option::is_none")]
    write_error: Option<&'a str>,
    /// Condition names the probes' expressions use that no resource of
    /// their type carries (a likely typo); absent when there are none.
    #[serde(rename = "unseenConditions", skip_serializing_if = "<[String]>::is_empty")]
    unseen_conditions: &'a [String],
}

impl Agent {
    /// What readiness (`/readyz`, the readiness file) answers for. By
    /// default the operator alone: its watched health URLs and heartbeat
    /// file. opstatus's own publishing (the API server, RBAC, kube9-server,
    /// the sinks) is what every pod shares; an outage of it must not take
    /// the operator's pods out of their Services (webhooks included), and
    /// it stays visible in the status, `/status`, `/metrics`, Events and
    /// the log. `--strict-readiness`: the whole verdict.
    pub(super) fn readiness(&self) -> Verdict {
        if self.config.strict_readiness {
            return self.verdict();
        }
        evaluate_health(self.observation.problems.iter().filter(|p| p.rule == Rule::Operator))
    }

    /// After each tick: the readiness file and what the endpoint serves.
    /// `content` is this tick's [`Self::content`], reused rather than
    /// rendered again.
    pub(super) fn after_tick(&mut self, content: StatusDocument) {
        let verdict = self.verdict();
        let readiness = self.readiness();
        let now = SystemTime::now();
        if let Some(path) = &self.config.ready_file {
            let result = match readiness.health {
                Health::Unhealthy => ready_file::remove(path),
                _ => ready_file::write(path, readiness.health, now),
            };
            let error = result.err().map(|e| format!("Cannot update the readiness file {}: {e}", path.display()));
            self.ready_file_error.update(error, log::Level::Warn, "");
        }
        let doc = StatusDocument { last_update: format_rfc3339(now), ..content };
        let publishing = self.publisher.publishing();
        // `/status` adds who publishes to the document (readers ignore
        // fields they do not know); the ConfigMap holds the document alone.
        let served = Served {
            doc: &doc,
            publisher: self.publisher.holder(),
            publishing,
            write_error: self.write_error.as_ref().map(|p| p.reason.as_str()),
            unseen_conditions: self.observation.probes.as_ref().map_or(&[], |p| &p.unseen),
        };
        let status_json = serde_json::to_string(&served).expect("a document and two plain fields serialise");
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.verdict = verdict;
        shared.readiness = readiness;
        shared.status_json = status_json;
        shared.metrics.sinks = self.sinks.counts();
        shared.metrics.probes = self.observation.probes.as_ref().and_then(|p| p.counts);
        shared.metrics.unseen_conditions = self.observation.probes.as_ref().map(|p| p.unseen.len());
        shared.metrics.publishing = publishing;
        shared.metrics.events = self.events.as_ref().map(Events::counts);
        shared.last_tick = Instant::now();
    }
}
