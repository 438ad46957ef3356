//! End to end, real kube-apiserver: another writer that takes the status
//! over while a stopping holder waits for a standby (here nobody stands
//! by, so the wait runs its course) is not written over. The stand-in
//! writes as kube9-operator's own status writer does: a GET, then a PUT of
//! the whole object under its own field manager, with a fresh status and
//! without opstatus's lock. On SIGTERM the holder leaves it alone: no
//! final "Shutting down" over it. At kubelet's preStop hook, where an
//! instance nobody took over from publishes on, its next heartbeats leave
//! it alone too, and it says so once.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, SystemTime};
use support::control_plane::{ControlPlane, release_bin, shared};
use support::http::endpoint_from_log;
use support::replicas::replica_env;
use support::{RunningAgent, run_to_end, wait_for};

const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
const STANDIN_VERSION: &str = "9.9.9-standin";

/// The lock's holder as the ConfigMap says now (`""`: released).
fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

/// kube9-operator's writer, once: GET, then PUT of the whole object with
/// its own fresh status and without opstatus's annotation.
fn replace_whole_object(cp: &ControlPlane, ns: &str) {
    let mut client = cp.admin_client();
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let cm: Value = serde_json::from_slice(&client.get_path(&path, "get the status").unwrap().unwrap()).unwrap();
    let status = json!({"mode": "operated", "tier": "free", "version": STANDIN_VERSION, "health": "healthy",
        "lastUpdate": opstatus::testing::format_rfc3339(SystemTime::now()), "registered": false, "error": null,
        "namespace": ns});
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM, "namespace": ns, "resourceVersion": cm["metadata"]["resourceVersion"],
                     "labels": cm["metadata"]["labels"]},
        "data": {"status": status.to_string()},
    });
    let put = format!("{path}?fieldManager=kube9-operator");
    client.put(&put, body.to_string().as_bytes(), "replace the status ConfigMap").expect("the stand-in's PUT");
}

/// The status holds the stand-in's version.
fn standin_holds(cp: &ControlPlane, ns: &str) -> bool {
    cp.status_document(ns, CM).is_some_and(|doc| doc["version"] == STANDIN_VERSION)
}

/// The holder released the lock: its handover wait has begun.
fn wait_released(cp: &ControlPlane, ns: &str, agent: &RunningAgent) {
    wait_for(Duration::from_secs(10), Duration::from_millis(10), || (holder(cp, ns)?.is_empty()).then_some(()))
        .unwrap_or_else(|| panic!("the lock was never released:\n{}", agent.stderr()));
}

#[test]
fn e2e_another_writer_during_the_handover_wait_is_left_alone_at_stop_and_after_the_prestop_hook() {
    let cp = shared();
    let pod = cp.deploy("handover-writer");
    let ns = pod.namespace.as_str();
    let args = ["run", "--interval", "2s", "--check-interval", "1s", "--listen", "127.0.0.1:0"];
    let env = replica_env(cp, &pod.sa, "pod-a");

    // SIGTERM: the handover wait (a check interval, its checks, 2 s) runs
    // out with nobody taking over; the final status would follow.
    let mut a = RunningAgent::start(&release_bin(), &args, &env);
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (holder(cp, ns)? == "pod-a").then_some(()))
        .unwrap_or_else(|| panic!("pod-a never published:\n{}", a.stderr()));
    a.signal("TERM");
    wait_released(cp, ns, &a);
    replace_whole_object(cp, ns);
    assert_eq!(a.wait_exit(Duration::from_secs(30)).and_then(|s| s.code()), Some(0), "{}", a.stderr());
    let doc = cp.status_document(ns, CM).unwrap();
    assert_eq!(
        doc["version"],
        STANDIN_VERSION,
        "the stopping holder wrote over the other writer: {doc}\n{}",
        a.stderr()
    );
    assert!(a.logged("Another writer replaces the status"), "{}", a.stderr());
    assert!(!a.stderr().contains("Nobody took the status over"), "{}", a.stderr());

    // The preStop hook: an instance nobody takes over from publishes on,
    // but not over another writer that took the status meanwhile.
    let _ = cp.kubectl(&["-n", ns, "delete", "configmap", CM], None);
    let b = RunningAgent::start(&release_bin(), &args, &env);
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (holder(cp, ns)? == "pod-a").then_some(()))
        .unwrap_or_else(|| panic!("pod-a never published again:\n{}", b.stderr()));
    let listen = endpoint_from_log(&b.stderr()).expect("the endpoint's address").to_string();
    let hook = run_to_end(&release_bin(), &["prestop", "--listen", &listen], &[], Duration::from_secs(10));
    assert_eq!(hook.status.code(), Some(0), "{}", String::from_utf8_lossy(&hook.stderr));
    wait_released(cp, ns, &b);
    replace_whole_object(cp, ns);
    // The wait (3 s) and more heartbeats, well within the quiet period
    // (five heartbeats, 10 s) after which the status would be taken back.
    std::thread::sleep(Duration::from_secs(6));
    assert!(standin_holds(cp, ns), "{:?}\n{}", cp.status_document(ns, CM), b.stderr());
    assert!(b.logged("Another writer replaces the status"), "{}", b.stderr());
    let written = |e: &&support::control_plane::AuditEvent| e.verb == "patch" && e.code < 300;
    println!(
        "e2e another writer during the handover wait: left alone at SIGTERM and after the preStop hook ({} status \
         writes by opstatus in all)",
        cp.audit_events(&pod.user).iter().filter(written).count()
    );
}
