//! Kubernetes Events on the real API server: a Pod object for them to be
//! about (nothing runs it: there is no scheduler or kubelet), the events
//! opstatus recorded, and its event requests in the audit log.

use super::control_plane::{AuditEvent, ControlPlane};
use serde_json::Value;

/// Creates Pod `name` in `ns` (never scheduled) and returns its uid.
pub fn create_pod(cp: &ControlPlane, ns: &str, name: &str) -> String {
    // The ServiceAccount the manifests create: there is no controller
    // manager to make `default`, which admission would otherwise require.
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  serviceAccountName: opstatus\n  automountServiceAccountToken: false\n  \
         containers: [{{name: opstatus, image: opstatus:0.1.0}}]\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&pod));
    cp.kubectl_ok(&["-n", ns, "get", "pod", name, "-o", "jsonpath={.metadata.uid}"])
}

/// The events opstatus recorded in `ns`, oldest first.
pub fn opstatus_events(cp: &ControlPlane, ns: &str) -> Vec<Value> {
    let list = cp.get_json(&format!("/api/v1/namespaces/{ns}/events")).unwrap_or_else(|| panic!("no events in {ns}"));
    let mut items: Vec<Value> =
        list["items"].as_array().unwrap().iter().filter(|e| e["source"]["component"] == "opstatus").cloned().collect();
    items.sort_by_key(|e| e["firstTimestamp"].as_str().unwrap_or_default().to_string());
    items
}

/// `(type, reason, message)` of each event.
pub fn summaries(events: &[Value]) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    events.iter().map(|e| (s(&e["type"]), s(&e["reason"]), s(&e["message"]))).collect()
}

/// The requests `user` made on events (the collection or one event; not a
/// namespace whose name starts with "events").
pub fn event_requests(cp: &ControlPlane, user: &str) -> Vec<AuditEvent> {
    let on_events = |e: &AuditEvent| {
        let path = e.uri.split('?').next().unwrap_or_default();
        path.ends_with("/events") || path.contains("/events/")
    };
    cp.audit_events(user).into_iter().filter(on_events).collect()
}
