//! End to end, real kube-apiserver: `--watch-container` reads the
//! sidecar's own Pod with exactly the RBAC of
//! `manifests/components/opstatus-watch-container`, and the operator
//! container's crash loop and OOM kill make the status `degraded` in
//! kubelet's words, cleared once it has run cleanly for ten minutes. There
//! is no kubelet: the cluster admin writes the Pod's status as kubelet
//! would (the `status` subresource).

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, SystemTime};
use support::control_plane::{ControlPlane, ROOT, release_bin, shared};
use support::run_args::Run;
use support::wait_for;

const CM: &str = "kube9-operator-status";
const POD: &str = "operator-pod-1";

/// The Pod, never scheduled: the operator's container and the sidecar.
fn create_pod(cp: &ControlPlane, ns: &str) {
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {POD}, namespace: {ns}}}\n\
         spec:\n  serviceAccountName: opstatus\n  automountServiceAccountToken: false\n  \
         containers: [{{name: manager, image: operator:1.0.0}}, {{name: opstatus, image: opstatus:0.1.0}}]\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&pod));
}

/// Writes the manager container's status as kubelet would.
fn set_manager_status(cp: &ControlPlane, ns: &str, restarts: u64, state: Value, last_state: Value) {
    let container = |name: &str, restarts: u64, state: Value, last: Value| {
        json!({"name": name, "ready": false, "restartCount": restarts, "image": "operator:1.0.0",
               "imageID": "", "state": state, "lastState": last})
    };
    let running_now = json!({"running": {"startedAt": opstatus::testing::format_rfc3339(SystemTime::now())}});
    let body = json!({"status": {"phase": "Running", "containerStatuses": [
        container("manager", restarts, state, last_state),
        container("opstatus", 0, running_now, json!({})),
    ]}});
    let path = format!("/api/v1/namespaces/{ns}/pods/{POD}/status");
    cp.admin_client().merge_patch(&path, body.to_string().as_bytes(), "patch the pod's status").expect("status patch");
}

fn started(ago: Duration) -> Value {
    json!({"running": {"startedAt": opstatus::testing::format_rfc3339(SystemTime::now() - ago)}})
}

#[test]
fn e2e_the_operator_containers_crash_loop_and_oom_kill_degrade_the_status_until_it_runs_cleanly() {
    let cp = shared();
    let pod = cp.deploy("watch-container");
    let ns = pod.namespace.clone();
    // The component's RBAC as shipped, bound to this test's ServiceAccount
    // (the component's replacement binds the operator's).
    let rbac = std::fs::read_to_string(format!("{ROOT}/manifests/components/opstatus-watch-container/rbac.yaml"))
        .unwrap()
        .replace("  name: operator # the kustomization's replacement names the pod's account", "  name: opstatus");
    cp.kubectl_stdin_ok(&["-n", &ns, "apply", "-f", "-"], Some(&rbac));
    create_pod(cp, &ns);
    set_manager_status(cp, &ns, 0, started(Duration::from_secs(5)), json!({}));

    let mut env = cp.pod_env(&pod);
    env.push(("POD_NAME".into(), POD.into()));
    let agent = Run::every("60s").checks("1s").flag("--watch-container", "manager").start(&release_bin(), &env);
    let status = || cp.status_document(&ns, CM);
    let wait = |what: &str, check: &dyn Fn(&Value) -> bool| {
        wait_for(Duration::from_secs(15), Duration::from_millis(100), || status().filter(|s| check(s)))
            .unwrap_or_else(|| panic!("{what}: {:?}\n{}", status(), agent.stderr()))
    };
    wait("healthy while the container runs", &|s| s["health"] == "healthy");

    let crashed = json!({"terminated": {"reason": "Error", "exitCode": 1, "message": "panic: lost the leader"}});
    let backoff =
        json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}});
    set_manager_status(cp, &ns, 3, backoff, crashed);
    let s = wait("a crash loop degrades", &|s| s["health"] == "degraded");
    assert_eq!(
        s["error"],
        "Container manager is CrashLoopBackOff: back-off 40s restarting failed container (3 restarts; last \
         terminated Error, exit code 1: panic: lost the leader)"
    );

    let oom = json!({"terminated": {"reason": "OOMKilled", "exitCode": 137}});
    set_manager_status(cp, &ns, 4, started(Duration::from_secs(30)), oom.clone());
    let s = wait("an OOM kill is said", &|s| s["error"].as_str().is_some_and(|e| e.contains("OOMKilled")));
    assert_eq!(s["health"], "degraded");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .starts_with("Container manager restarted (4 restarts; last terminated OOMKilled, exit code 137)")
    );

    // Ten minutes of running since: well again, restart count or not.
    set_manager_status(cp, &ns, 4, started(Duration::from_secs(11 * 60)), oom);
    wait("healthy once it ran cleanly", &|s| s["health"] == "healthy");

    // One Pod, by name: a read and a watch, never the namespace's pods.
    let on_pods: Vec<_> = cp
        .audit_events(&pod.user)
        .into_iter()
        .filter(|e| e.uri.starts_with(&format!("/api/v1/namespaces/{ns}/pods")))
        .collect();
    assert!(!on_pods.is_empty());
    for e in &on_pods {
        assert!(e.uri.contains(&format!("fieldSelector=metadata.name%3D{POD}")), "{} {}", e.verb, e.uri);
        assert!(e.code < 300, "{} {} answered {}", e.verb, e.uri, e.code);
    }
    // The shipped Role grants `list` and `watch` only: nothing else is asked.
    assert!(on_pods.iter().all(|e| e.verb == "list" || e.verb == "watch"), "{on_pods:?}");
    let reads = on_pods.iter().filter(|e| e.verb == "list").count();
    assert_eq!(reads, 1, "the Pod was read again instead of watched: {on_pods:?}");
    println!("e2e watch-container: {} requests on pods, all for {POD} by name", on_pods.len());
}
