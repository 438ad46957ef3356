//! End to end, real kube-apiserver: the status ConfigMap deleted under
//! three replicas (`kubectl delete`, a namespace clean-up) leaves one
//! publisher. The deletion releases no lock: the standbys go on standing by
//! for the holder, whose next heartbeat creates the ConfigMap again (a
//! server-side apply creates what is missing). With the holder gone as
//! well, one standby takes over once the holder's lease has run out, and
//! one only: a claim on a missing ConfigMap first creates it holding no
//! lock, then claims against its `resourceVersion`, so two claims cannot
//! both win.
//!
//! Every instance runs with `--interval 2s --check-interval 1s` (a 14 s
//! lease).

use crate::support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{AuditEvent, ControlPlane, release_bin, shared};
use support::replicas::{another_replica, replica_env};
use support::{RunningAgent, ServiceAccountDir, wait_for};

const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
const FAST: [&str; 5] = ["run", "--interval", "2s", "--check-interval", "1s"];

fn start(cp: &ControlPlane, sa: &ServiceAccountDir, pod: &str) -> RunningAgent {
    RunningAgent::start(&release_bin(), &FAST, &replica_env(cp, sa, pod))
}

fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

/// The status writes `user` made that went through, from `since` on.
fn written_since(cp: &ControlPlane, user: &str, since: SystemTime) -> Vec<AuditEvent> {
    let written =
        |e: &AuditEvent| e.verb == "patch" && e.code < 300 && e.uri.contains("/configmaps/") && e.received >= since;
    cp.audit_events(user).into_iter().filter(written).collect()
}

#[test]
fn e2e_a_deleted_status_configmap_leaves_one_publisher() {
    let cp = shared();
    let pod = cp.deploy("status-deleted");
    let ns = pod.namespace.as_str();
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    let (sa_c, user_c) = another_replica(cp, &pod, "opstatus-c");
    let a = start(cp, &pod.sa, "pod-a");
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (holder(cp, ns)? == "pod-a").then_some(()))
        .unwrap_or_else(|| panic!("pod-a never published:\n{}", a.stderr()));
    let (b, c) = (start(cp, &sa_b, "pod-b"), start(cp, &sa_c, "pod-c"));
    for standby in [&b, &c] {
        assert!(standby.logged_within("Standing by: pod-a publishes", Duration::from_secs(10)), "{}", standby.stderr());
    }
    let log = || format!("pod-a:\n{}\npod-b:\n{}\npod-c:\n{}", a.stderr(), b.stderr(), c.stderr());

    let deleted = SystemTime::now();
    cp.kubectl_ok(&["-n", ns, "delete", "configmap", CM]);
    // Half the lease: the standbys look every second, pod-a writes every 2 s.
    std::thread::sleep(Duration::from_secs(7));
    let by_standbys: Vec<_> = [&user_b, &user_c].iter().flat_map(|u| written_since(cp, u, deleted)).collect();
    assert!(by_standbys.is_empty(), "a standby wrote the deleted ConfigMap: {by_standbys:?}\n{}", log());
    assert!(written_since(cp, &pod.user, deleted).len() >= 2, "pod-a writes on\n{}", log());
    assert_eq!(holder(cp, ns).as_deref(), Some("pod-a"), "written again by its holder\n{}", log());
    assert_eq!(cp.status_document(ns, CM).unwrap()["health"], "healthy");

    // The holder gone and the ConfigMap deleted again: one standby takes
    // over once pod-a's lease (14 s) has run out, and only one.
    a.signal("KILL");
    std::thread::sleep(Duration::from_millis(300));
    cp.kubectl_ok(&["-n", ns, "delete", "configmap", CM]);
    let gone = Instant::now();
    let took = wait_for(Duration::from_secs(40), Duration::from_millis(50), || {
        let h = holder(cp, ns)?;
        (h == "pod-b" || h == "pod-c").then(|| gone.elapsed())
    })
    .unwrap_or_else(|| panic!("nobody took over:\n{}", log()));
    // pod-a last renewed about a heartbeat (2 s) before it was killed, a
    // few seconds more when a loaded machine delays its writes; a claim on
    // the missing ConfigMap that ignored the lease came within a second.
    assert!(took >= Duration::from_secs(8), "taken {took:?} after the deletion: before the lease ran out\n{}", log());
    std::thread::sleep(Duration::from_secs(2));
    let settled = SystemTime::now();
    std::thread::sleep(Duration::from_secs(4));
    let publishing = [&b, &c].iter().filter(|s| s.stderr().contains("Publishing as")).count();
    assert_eq!(publishing, 1, "two publishers after the deletion:\n{}", log());
    let writers: BTreeSet<&str> = [(&user_b, "pod-b"), (&user_c, "pod-c")]
        .iter()
        .filter(|(user, _)| !written_since(cp, user, settled).is_empty())
        .map(|(_, pod)| *pod)
        .collect();
    assert_eq!(writers.len(), 1, "writers after the takeover: {writers:?}\n{}", log());
    assert_eq!(cp.status_document(ns, CM).unwrap()["health"], "healthy");
    println!(
        "e2e deleted status ConfigMap: one publisher throughout; with its holder gone, taken over after {took:.1?}"
    );
}
