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

/// What `/status` serves: the status document (what this instance
/// publishes, or would) with who publishes, whether this instance does,
/// why its last write failed (readers of the ConfigMap cannot see that: it
/// is the write that failed) and the condition names no probed resource
/// carries. Written by hand after the document's own JSON: serde's
/// `flatten` costs kilobytes of a binary with a size budget.
fn served_json(
    doc: &StatusDocument,
    publisher: Option<&str>,
    publishing: bool,
    write_error: Option<&str>,
    unseen: &[String],
    yielded_to: Option<String>,
) -> String {
    let text = |v: &str| serde_json::to_string(v).expect("a string serialises");
    let mut json = serde_json::to_string(doc).expect("a document serialises");
    json.pop(); // the closing brace
    json.push_str(",\"publisher\":");
    json.push_str(&publisher.map_or("null".into(), text));
    json.push_str(if publishing { ",\"publishing\":true" } else { ",\"publishing\":false" });
    if let Some(why) = write_error {
        json.push_str(",\"writeError\":");
        json.push_str(&text(why));
    }
    if let Some(writer) = yielded_to {
        json.push_str(",\"yieldedTo\":");
        json.push_str(&text(&writer));
    }
    if !unseen.is_empty() {
        json.push_str(",\"unseenConditions\":");
        json.push_str(&serde_json::to_string(unseen).expect("strings serialise"));
    }
    json + "}"
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
        if self.config.settings.strict_readiness {
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
        if let Some(path) = &self.config.settings.ready_file {
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
        let status_json = served_json(
            &doc,
            self.publisher.holder(),
            publishing,
            self.write_error.as_ref().map(|p| p.reason.as_str()),
            self.observation.probes.as_ref().map_or(&[], |p| &p.unseen),
            self.publisher.yielding_to().map(ToString::to_string),
        );
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.verdict = verdict;
        shared.readiness = readiness;
        shared.status_json = status_json;
        shared.metrics.sinks = self.sinks.counts();
        shared.metrics.probes = self.observation.probes.as_ref().and_then(|p| p.counts);
        shared.metrics.unseen_conditions = self.observation.probes.as_ref().map(|p| p.unseen.len());
        shared.metrics.publishing = publishing;
        shared.metrics.yielded = self.publisher.yielding_to().is_some();
        shared.metrics.events = self.events.as_ref().map(Events::counts);
        shared.last_tick = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Health, Mode, Tier};

    #[test]
    fn status_adds_its_fields_after_the_document() {
        let doc = StatusDocument {
            mode: Mode::Operated,
            tier: Tier::Free,
            version: "1.0.0".into(),
            health: Health::Healthy,
            last_update: "2026-11-24T10:00:00Z".into(),
            registered: false,
            error: None,
            namespace: "ops".into(),
            cluster_id: None,
        };
        let plain: serde_json::Value = serde_json::from_str(&served_json(&doc, None, false, None, &[], None)).unwrap();
        assert_eq!(
            (&plain["mode"], &plain["publisher"], &plain["publishing"]),
            (&"operated".into(), &serde_json::Value::Null, &false.into())
        );
        for absent in ["writeError", "unseenConditions", "yieldedTo"] {
            assert!(plain.get(absent).is_none(), "{plain}");
        }
        let unseen = ["No Foo carries X".into()];
        let yielded = Some("kube9-operator (Update)".into());
        let all = served_json(&doc, Some("pod-\"a"), true, Some("Failed to write"), &unseen, yielded);
        let all: serde_json::Value = serde_json::from_str(&all).unwrap();
        assert_eq!(all["publisher"], "pod-\"a");
        assert_eq!(all["writeError"], "Failed to write");
        assert_eq!(all["unseenConditions"], serde_json::json!(["No Foo carries X"]));
        assert_eq!(all["namespace"], "ops");
        assert_eq!(all["yieldedTo"], "kube9-operator (Update)");
    }
}
