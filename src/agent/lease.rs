//! The operator's own leader-election Lease, read over the API: who
//! leads ([`LeaseRead`]), its text from outside sanitised and bounded.
//! What that means for publishing is [`super::leader`]'s (pure).

use super::leader::{DEFAULT_LEASE_DURATION, Held, LeaseRead};
use crate::kube::{Client, Fields, unreadable};
use std::time::Duration;

/// Where the permission to read the operator's Lease is granted.
const LEASE_GRANT: &str = "see manifests/examples/sidecar/role-leader-lease.yaml";

/// The pod the operator's leader runs in, from its Lease's
/// `spec.holderIdentity`; or that nobody leads, or that it cannot be told.
/// `name` is `NAMESPACE/NAME` where the operator runs elsewhere than the
/// status (`namespace`).
pub(super) fn read_leader(client: &mut Client, namespace: &str, name: &str) -> LeaseRead {
    let (namespace, name) = name.split_once('/').unwrap_or((namespace, name));
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}");
    let action = format!("get leases {name:?} in namespace {namespace:?}");
    let lease = match client.get_path(&path, &action) {
        Ok(Some(body)) => body,
        Ok(None) => {
            let why = format!("Lease {namespace}/{name} does not exist: the operator has not elected a leader (yet)");
            return LeaseRead::NoLeader(why);
        }
        Err(e) => {
            return LeaseRead::Failed(format!("Cannot read Lease {namespace}/{name}: {}", e.granted_by(LEASE_GRANT)));
        }
    };
    // Only the three fields used are parsed; labels, annotations and the
    // rest are skipped.
    let spec = Fields::parse(&lease).and_then(|lease| lease.object("spec"));
    let read = spec.and_then(|spec| {
        Ok((
            spec.get::<String>("holderIdentity")?,
            spec.get::<String>("renewTime")?,
            spec.get::<u64>("leaseDurationSeconds")?,
        ))
    });
    let (holder, renew_time, duration) = match read {
        Ok(read) => read,
        Err(e) => return LeaseRead::Failed(unreadable(&format!("Lease {namespace}/{name}"), &e).to_string()),
    };
    // The Lease is the operator's (anyone with its RBAC may write it): its
    // holder reaches logs and messages sanitised and bounded.
    let text = |found: Option<String>, limit: usize| {
        found.filter(|s| !s.is_empty()).map(|s| crate::util::text::sanitize(&s, limit))
    };
    // `<pod name>_<uuid>`: a pod name's limit and room for the suffix.
    match text(holder, crate::lock::MAX_IDENTITY + 64) {
        Some(holder) => LeaseRead::Held(Held {
            lease: format!("{namespace}/{name}"),
            holder,
            // RFC 3339 with microseconds is 27 characters.
            renew_time: text(renew_time, 64),
            // Bounded as the lock's own leases are: no Lease keeps the
            // publishers silent for longer than readers' patience.
            duration: duration
                .map_or(DEFAULT_LEASE_DURATION, Duration::from_secs)
                .clamp(crate::lock::LEASE_RANGE.0, crate::lock::LEASE_RANGE.1),
        }),
        _ => {
            LeaseRead::NoLeader(format!("Lease {namespace}/{name} has no holder: the operator has no leader right now"))
        }
    }
}
