//! What one opstatus instance's audited requests must look like: the first
//! look at the status ConfigMap (a read that finds nothing, then the apply
//! that creates and labels it holding no lock), then status writes only —
//! one per heartbeat, and at a stop the release of the publisher lock —
//! and at most a few reads while it hands over.

use super::control_plane::AuditEvent;

/// Asserts that pattern for `events`, `heartbeats` being the "Status
/// updated" lines the instance logged (its final status among them), all
/// on `configmap`.
pub fn assert_first_look_then_one_write_per_heartbeat(events: &[AuditEvent], heartbeats: usize, configmap: &str) {
    let calls: Vec<(&str, u16)> = events.iter().map(|e| (e.verb.as_str(), e.code)).collect();
    assert!(calls.len() >= 2, "{events:?}");
    assert_eq!(calls[..2], [("get", 404), ("patch", 201)], "the first look: {events:?}");
    assert!(events[1].uri.contains("fieldManager=opstatus-init"), "{events:?}");
    assert!(events.iter().all(|e| e.uri.contains(configmap)), "only the status ConfigMap: {events:?}");
    let rest = &events[2..];
    let writes: Vec<_> = rest.iter().filter(|e| e.verb == "patch").collect();
    assert!(writes.iter().all(|e| e.code == 200 && e.uri.contains("fieldManager=opstatus&force=true")), "{events:?}");
    assert_eq!(writes.len(), heartbeats + 1, "one write per heartbeat, and the release: {events:?}");
    let reads = rest.iter().filter(|e| e.verb == "get").count();
    assert!(reads <= 3 && rest.len() == writes.len() + reads, "only the handover's reads besides: {events:?}");
}
