//! What the downward API says of the sidecar's own pod, read once at
//! start: its name and uid (the Events' object; the pod the operator's
//! leader Lease names), its IP (the leader's Service) and the host's name.

use super::{ConfigError, Env, variable};

/// What the downward API says of the sidecar's own pod (`POD_NAME`,
/// `POD_UID`) and the host's name (`HOSTNAME`: the pod's name in
/// Kubernetes). A value that is not text is a usage error; one that is no
/// pod name or uid is not used.
pub(crate) struct Pod {
    pub(crate) name: Option<String>,
    pub(crate) uid: Option<String>,
    pub(crate) hostname: Option<String>,
    /// `POD_IP` (the downward API's `status.podIP`) as given: checked where
    /// it is used ([`crate::sinks::leader_endpoints::pod_ip`]).
    pub(crate) ip: Option<String>,
}

impl Pod {
    pub(crate) fn read(env: Env<'_>) -> Result<Pod, ConfigError> {
        let var = |name, check: fn(&str) -> Result<(), &'static str>| {
            Ok::<_, ConfigError>(variable(env, name)?.filter(|v| check(v).is_ok()))
        };
        let usable = |v: &str| super::check_identity(v.trim()).map(drop).map_err(|_| "not an identity");
        Ok(Pod {
            name: var("POD_NAME", crate::kube::names::check_dns_subdomain)?,
            uid: var("POD_UID", check_uid)?,
            hostname: var("HOSTNAME", usable)?.map(|h| h.trim().to_string()),
            ip: variable(env, "POD_IP")?,
        })
    }
}

/// A uid as the downward API gives it (a UUID); anything else is not used.
fn check_uid(v: &str) -> Result<(), &'static str> {
    let uuid = !v.is_empty() && v.len() <= 64 && v.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    uuid.then_some(()).ok_or("is not a uid")
}
