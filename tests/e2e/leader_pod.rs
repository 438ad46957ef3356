//! `--follow-leader-lease` with an `--identity` that is not the pod's name
//! (`POD_NAME=op-a`, `OPSTATUS_IDENTITY=op-a-sidecar`, the Lease held by
//! `op-a_1234`): the sidecar in the leader's pod publishes, under its own
//! identity in the lock. Before, it compared the identity with the pod the
//! Lease names and stood by for ever: nobody published while the operator
//! renewed its Lease. And the start line names the service account the
//! API server's own token is for.

use crate::support;

use serde_json::Value;
use std::time::Duration;
use support::control_plane::{ControlPlane, shared};
use support::replicas::replica_env;
use support::{RunningAgent, opstatus_bin, wait_for};

const CM: &str = "kube9-operator-status";
const LEASE: &str = "demo-operator-leader";

fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value =
        serde_json::from_str(cm["metadata"]["annotations"]["opstatus.kube9.dev/publisher"].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

#[test]
fn e2e_the_leaders_sidecar_publishes_under_an_identity_that_is_not_its_pod_name() {
    let cp = shared();
    let pod = cp.deploy("leader-pod");
    let ns = pod.namespace.as_str();
    let role = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: opstatus-leader-lease, namespace: {ns}}}\n\
         rules:\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  resourceNames: [{LEASE}]\n  verbs: [get]\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&role));
    let binding = format!("--serviceaccount={ns}:opstatus");
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "opstatus-leader-lease",
        "--role=opstatus-leader-lease",
        &binding,
    ]);
    let lease = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {LEASE}, namespace: {ns}}}\n\
         spec: {{holderIdentity: op-a_1234, leaseDurationSeconds: 15}}\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&lease));

    let mut env = replica_env(cp, &pod.sa, "op-a");
    env.push(("OPSTATUS_IDENTITY".into(), "op-a-sidecar".into()));
    let args = ["run", "--interval", "2s", "--check-interval", "1s", "--follow-leader-lease", LEASE];
    let agent = RunningAgent::start(&opstatus_bin(), &args, &env);
    let published = wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        (holder(cp, ns).as_deref() == Some("op-a-sidecar")).then_some(())
    });
    assert!(published.is_some(), "the leader's sidecar never published:\n{}", agent.stderr());
    assert_eq!(cp.status_document(ns, CM).unwrap()["health"], "healthy");
    assert!(!agent.stderr().contains("Standing by"), "{}", agent.stderr());
    let said = format!("Kubernetes credentials: service account {ns}/opstatus (in-cluster, token in ");
    assert!(agent.logged(&said), "{}", agent.stderr());
}
