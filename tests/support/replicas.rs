//! More than one opstatus beside the same status ConfigMap, as replicas of
//! an operator's Deployment run: each with a ServiceAccount of its own, so
//! the API server's audit log tells their requests apart.

use super::ServiceAccountDir;
use super::control_plane::{ControlPlane, Deployed, service_account_user};

/// A second replica's credentials in `d`'s namespace: ServiceAccount `sa`
/// bound to the same Role as the first (manifests/base).
pub fn another_replica(cp: &ControlPlane, d: &Deployed, sa: &str) -> (ServiceAccountDir, String) {
    let ns = d.namespace.as_str();
    cp.kubectl_ok(&["-n", ns, "create", "serviceaccount", sa]);
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        &format!("{sa}-status-writer"),
        "--role=opstatus-status-writer",
        &format!("--serviceaccount={ns}:{sa}"),
    ]);
    let token = cp.token(ns, sa);
    (ServiceAccountDir::new(&token, &cp.ca_pem(), ns), service_account_user(ns, sa))
}

/// The pod environment for credentials `sa`, named `pod` (the downward
/// API's `POD_NAME`).
pub fn replica_env(cp: &ControlPlane, sa: &ServiceAccountDir, pod: &str) -> Vec<(String, String)> {
    let mut env = super::pod_env(cp.port(), sa);
    env.push(("POD_NAME".into(), pod.into()));
    env
}

/// Binds ServiceAccount `sa` in `ns` to the Role `role` there too: a
/// second replica gets the permissions the first has beyond manifests/base
/// (manifests/olm's probe reader, OLM's Role on the OperatorCondition).
pub fn bind_role(cp: &ControlPlane, ns: &str, sa: &str, role: &str) {
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        &format!("{sa}-{role}"),
        &format!("--role={role}"),
        &format!("--serviceaccount={ns}:{sa}"),
    ]);
}
