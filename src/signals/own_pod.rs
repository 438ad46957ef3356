//! Whether this instance's own Pod is being deleted: read by name, once,
//! when the operator's port refuses a check right after passing.
//!
//! When a pod is deleted, kubelet sends its operator SIGTERM and runs
//! opstatus's preStop hook at the same time, in no fixed order; on a busy
//! node the hook can reach opstatus seconds after the operator's port went
//! away. The API server set the Pod's `deletionTimestamp` before kubelet
//! did either, so one GET of the Pod tells an operator exiting with its pod
//! from one that went down: the watch signal ([`super::watch`]) asks only
//! on that event (never on a heartbeat), once the Pod is known to be going
//! never again, and after it found the Pod staying not again for
//! [`REREAD_AFTER`] (an operator in a restart loop refuses a check every
//! few seconds; its Pod is not being deleted). Needs `get` on pods in the operator's namespace
//! (manifests/base/role.yaml); without it the preStop hook alone says so,
//! as before, and opstatus warns once.

use crate::kube::Client;
use crate::util::reported::Reported;
use std::time::{Duration, Instant};

/// After a read that found the Pod staying, refusals are not asked about
/// again for this long (kubelet's preStop hook still says a deletion).
pub(crate) const REREAD_AFTER: Duration = Duration::from_secs(30);

/// Where the permission is granted, for a 403's message.
const GRANT: &str = "see the Role opstatus-own-pod in manifests/base/role.yaml";

/// This instance's own Pod, as the downward API names it.
pub(crate) struct OwnPod {
    namespace: String,
    name: String,
    /// Seen being deleted: not read again.
    deleted: bool,
    /// Seen staying: not read again before then.
    quiet_until: Option<Instant>,
    /// A read that failed, said once until one succeeds.
    unreadable: Reported,
}

impl OwnPod {
    pub(crate) fn new(namespace: String, name: String) -> OwnPod {
        OwnPod { namespace, name, deleted: false, quiet_until: None, unreadable: Reported::default() }
    }

    /// Whether the Pod is being deleted at `now`: one GET, until the answer
    /// is yes, and none within [`REREAD_AFTER`] of a no. A read that fails
    /// says "no" (the preStop hook still comes) and is logged once.
    pub(crate) fn deleted(&mut self, client: &mut Client, now: Instant) -> bool {
        if self.deleted || self.quiet_until.is_some_and(|until| now < until) {
            return self.deleted;
        }
        let (ns, name) = (&self.namespace, &self.name);
        let action = format!("get pod {name:?} in namespace {ns:?}");
        let read = match client.get_path(&format!("/api/v1/namespaces/{ns}/pods/{name}"), &action) {
            Ok(Some(body)) => deletion_requested(&body),
            // POD_NAME names no Pod here: nothing to tell by.
            Ok(None) => Err(format!("no Pod {name:?} in namespace {ns:?} (POD_NAME)")),
            Err(e) => Err(e.granted_by(GRANT).to_string()),
        };
        let why = read.as_ref().err().map(|e| {
            format!(
                "Cannot read this instance's own Pod, to tell a pod being deleted from an operator that went down: \
                 {e}; relying on kubelet's preStop hook alone"
            )
        });
        self.unreadable.update(why, log::Level::Warn, "This instance's own Pod is readable again");
        self.deleted = read.unwrap_or(false);
        self.quiet_until = (!self.deleted).then(|| now + REREAD_AFTER);
        if self.deleted {
            log::info!("This Pod ({ns}/{name}) is being deleted: its operator is exiting with it, not failing");
        }
        self.deleted
    }
}

/// Whether a Pod's JSON has a `deletionTimestamp` (its deletion
/// requested): a time, as the API writes it. Anything else there (`false`,
/// a number, an object) is no Pod the API would send, and no deletion.
fn deletion_requested(body: &[u8]) -> Result<bool, String> {
    #[derive(serde::Deserialize)]
    struct Pod {
        metadata: Metadata,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(rename = "deletionTimestamp")]
        deletion_timestamp: Option<String>,
    }
    let pod: Pod = serde_json::from_slice(body)
        .map_err(|e| format!("the Pod is not what the API promises ({})", crate::lock::error_kind(&e)))?;
    let at = pod.metadata.deletion_timestamp;
    match at.as_deref().map(crate::util::time::parse_rfc3339) {
        Some(None) => Err("the Pod's deletionTimestamp is not a time".into()),
        at => Ok(at.is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_deleted_once_its_deletion_timestamp_is_set() {
        let running = br#"{"kind":"Pod","metadata":{"name":"op-1","namespace":"ops","uid":"u"},"spec":{},"status":{}}"#;
        assert_eq!(deletion_requested(running), Ok(false));
        let going = br#"{"kind":"Pod","metadata":{"name":"op-1","deletionTimestamp":"2026-11-28T12:00:00Z","deletionGracePeriodSeconds":30}}"#;
        assert_eq!(deletion_requested(going), Ok(true));
        // A null is no deletion: serde's Option reads it as absent.
        assert_eq!(deletion_requested(br#"{"metadata":{"deletionTimestamp":null}}"#), Ok(false));
        let broken = deletion_requested(b"{\"metadata\":").unwrap_err();
        assert!(broken.starts_with("the Pod is not what the API promises ("), "{broken}");
        assert!(deletion_requested(br#"{"kind":"Status"}"#).is_err(), "no metadata at all");
        // Not a time: no deletion, and said.
        for odd in ["false", "true", "0", "{}", "[]", r#""""#, r#""soon""#] {
            let pod = format!(r#"{{"metadata":{{"name":"op-1","deletionTimestamp":{odd}}}}}"#);
            let read = deletion_requested(pod.as_bytes());
            assert!(read.is_err(), "{odd}: {read:?}");
        }
    }
}
