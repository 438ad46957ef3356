//! What `/status` serves: the status document (what this instance
//! publishes, or would) with who publishes, whether this instance does,
//! why its last write failed (readers of the ConfigMap cannot see that: it
//! is the write that failed), the condition names no probed resource
//! carries, the probed collections still being listed for the first time,
//! the other writer the ConfigMap is left to, the one whose stale status
//! it writes over, the Kubernetes credentials this instance acts
//! with, and the changes held back under inertia with when each would be
//! published ([`crate::inertia`]), and the probed resources per condition
//! type and status. The agent leaves
//! the parts after each tick; they become JSON only when `/status` is asked
//! for, not on every tick.

use crate::inertia::PendingChange;
use crate::signals::probes::census::{ResourceConditions, STATUSES};
use crate::status::StatusDocument;
use crate::util::time::format_rfc3339;

#[derive(Clone, Debug)]
pub(crate) struct StatusView {
    pub doc: StatusDocument,
    pub publisher: Option<String>,
    pub publishing: bool,
    pub write_error: Option<String>,
    pub unseen: Vec<String>,
    /// The probed collections whose first list is under way, how far.
    pub listing: Vec<String>,
    pub yielded_to: Option<String>,
    /// Where the credentials came from (a kubeconfig's file, context and
    /// user, or the service account): what RBAC allows them is what
    /// opstatus can do.
    pub credentials: String,
    /// Another writer of a stale status that this instance writes over.
    pub overwriting: Option<String>,
    /// The changes held back under inertia.
    pub pending: Vec<PendingChange>,
    /// The probed resources per condition type and status (bounded: at
    /// most 32 resource types of at most 8 condition types).
    pub conditions: Vec<ResourceConditions>,
}

impl StatusView {
    /// The document's own JSON with the view's fields after it, written
    /// by hand: serde's `flatten` costs kilobytes of a binary with a size
    /// budget. Readers ignore fields they do not know.
    pub(crate) fn to_json(&self) -> String {
        let text = |v: &str| serde_json::to_string(v).expect("a string serialises");
        let texts = |v: &[String]| serde_json::to_string(v).expect("strings serialise");
        let mut json = serde_json::to_string(&self.doc).expect("a document serialises");
        json.pop(); // the closing brace
        let mut put = |key: &str, value: String| json.push_str(&format!(",\"{key}\":{value}"));
        put("publisher", self.publisher.as_deref().map_or("null".into(), text));
        put("publishing", self.publishing.to_string());
        if let Some(why) = &self.write_error {
            put("writeError", text(why));
        }
        if let Some(writer) = &self.yielded_to {
            put("yieldedTo", text(writer));
        }
        put("credentials", text(&self.credentials));
        if let Some(writer) = &self.overwriting {
            put("overwriting", text(writer));
        }
        if !self.unseen.is_empty() {
            put("unseenConditions", texts(&self.unseen));
        }
        if !self.listing.is_empty() {
            put("listing", texts(&self.listing));
        }
        if !self.pending.is_empty() {
            let pending: Vec<String> = self
                .pending
                .iter()
                .map(|p| {
                    let (output, state, since, due) =
                        (text(&p.output), text(&p.state), format_rfc3339(p.since), format_rfc3339(p.due));
                    format!("{{\"output\":{output},\"state\":{state},\"since\":\"{since}\",\"publishAt\":\"{due}\"}}")
                })
                .collect();
            put("pending", format!("[{}]", pending.join(",")));
        }
        if !self.conditions.is_empty() {
            json.push_str(",\"conditions\":");
            conditions_json(&mut json, &self.conditions);
        }
        json + "}"
    }
}

/// `[{"group":"example.com","kind":"Foo","types":{"Migrating":{"True":1,
/// "False":9,"Unknown":0,"Absent":0}},"untracked":0}]`.
fn conditions_json(json: &mut String, conditions: &[ResourceConditions]) {
    use std::fmt::Write;
    let text = |v: &str| serde_json::to_string(v).expect("a string serialises");
    json.push('[');
    for (i, r) in conditions.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(json, "{comma}{{\"group\":{},\"kind\":{},\"types\":{{", text(&r.group), text(&r.kind));
        for (j, t) in r.types.iter().enumerate() {
            let comma = if j == 0 { "" } else { "," };
            let _ = write!(json, "{comma}{}:{{", text(&t.name));
            for (k, (status, n)) in STATUSES.iter().zip(t.resources).enumerate() {
                let comma = if k == 0 { "" } else { "," };
                let _ = write!(json, "{comma}\"{status}\":{n}");
            }
            json.push('}');
        }
        let _ = write!(json, "}},\"untracked\":{}}}", r.untracked);
    }
    json.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_adds_its_fields_after_the_document() {
        let doc = StatusDocument { namespace: "ops".into(), ..StatusDocument::example() };
        let view = StatusView {
            doc,
            publisher: None,
            publishing: false,
            write_error: None,
            unseen: Vec::new(),
            listing: Vec::new(),
            yielded_to: None,
            credentials: "service account ops/opstatus".into(),
            overwriting: None,
            pending: Vec::new(),
            conditions: Vec::new(),
        };
        let plain: serde_json::Value = serde_json::from_str(&view.to_json()).unwrap();
        assert_eq!(
            (&plain["mode"], &plain["publisher"], &plain["publishing"]),
            (&"operated".into(), &serde_json::Value::Null, &false.into())
        );
        for absent in ["writeError", "unseenConditions", "yieldedTo", "overwriting", "listing", "pending", "conditions"]
        {
            assert!(plain.get(absent).is_none(), "{plain}");
        }
        let all = StatusView {
            publisher: Some("pod-\"a".into()),
            publishing: true,
            write_error: Some("Failed to write".into()),
            unseen: vec!["No Foo carries X".into()],
            listing: vec!["listing foos.example.com: 31500 so far".into()],
            yielded_to: Some("kube9-operator (Update)".into()),
            overwriting: Some("helm (Update)".into()),
            pending: vec![PendingChange {
                output: "ConfigMap ops/kube9-operator-status".into(),
                state: "health=degraded".into(),
                since: std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_849_262),
                due: std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_849_292),
            }],
            conditions: vec![ResourceConditions {
                group: "example.com".into(),
                kind: "Foo".into(),
                types: vec![crate::signals::probes::census::TypeCounts {
                    name: "Migrating".into(),
                    resources: [0, 1, 9, 2],
                    oldest: [0; 4],
                }],
                untracked: 3,
                untracked_names: vec![],
            }],
            ..view
        };
        let all: serde_json::Value = serde_json::from_str(&all.to_json()).unwrap();
        assert_eq!(all["publisher"], "pod-\"a");
        assert_eq!(all["credentials"], "service account ops/opstatus");
        assert_eq!(all["writeError"], "Failed to write");
        assert_eq!(all["unseenConditions"], serde_json::json!(["No Foo carries X"]));
        assert_eq!(all["namespace"], "ops");
        assert_eq!(all["yieldedTo"], "kube9-operator (Update)");
        assert_eq!(all["overwriting"], "helm (Update)");
        assert_eq!(all["listing"], serde_json::json!(["listing foos.example.com: 31500 so far"]));
        assert_eq!(
            all["pending"],
            serde_json::json!([{"output": "ConfigMap ops/kube9-operator-status", "state": "health=degraded",
                                "since": "2026-11-28T07:01:02Z", "publishAt": "2026-11-28T07:01:32Z"}])
        );
        assert_eq!(
            all["conditions"],
            serde_json::json!([{"group": "example.com", "kind": "Foo", "untracked": 3,
                "types": {"Migrating": {"Absent": 0, "True": 1, "False": 9, "Unknown": 2}}}])
        );
    }
}
