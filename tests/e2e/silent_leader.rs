//! End to end, real kube-apiserver: with `--follow-leader-lease`, a Lease
//! renewed by a pod whose sidecar does not publish (here `pod-c`, renewed
//! by the test every 2 s, as a leader without the sidecar would: during
//! the rollout that adds it, with a crash-looping sidecar, a `hostNetwork`
//! operator). Once nobody has written the publisher lock for its lease
//! (14 s at `--interval 2s`), one follower publishes what it sees,
//! `degraded` with the reason naming the leader, and says so once (its
//! log, a `BecamePublisher` Warning Event, `/status`, and `opstatus get`
//! through the status). When pod-c's sidecar starts, it takes the lock
//! and the follower hands back at once: exactly one writer again.

use crate::support;

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{AuditEvent, ControlPlane, release_bin, shared};
use support::events::{opstatus_events, summaries};
use support::http::{endpoint_from_log, get};
use support::replicas::{another_replica, replica_env};
use support::{RunningAgent, run_to_end, wait_for};

const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
const LEASE: &str = "demo-operator-leader";
const ARGS: [&str; 9] =
    ["run", "--interval", "2s", "--check-interval", "1s", "--listen", "127.0.0.1:0", "--follow-leader-lease", LEASE];

fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

/// The Role manifests/examples/sidecar ships for reading the operator's
/// Lease, bound to each ServiceAccount.
fn let_read_the_lease(cp: &ControlPlane, ns: &str, accounts: &[&str]) {
    let role = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: opstatus-leader-lease, namespace: {ns}}}\n\
         rules:\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  resourceNames: [{LEASE}]\n  verbs: [get]\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&role));
    for sa in accounts {
        let binding = format!("--serviceaccount={ns}:{sa}");
        let name = format!("{sa}-leader-lease");
        cp.kubectl_ok(&["-n", ns, "create", "rolebinding", &name, "--role=opstatus-leader-lease", &binding]);
    }
}

/// The operator's leader, pod-c, renewing its Lease every 2 s until stopped.
fn renew_as_pod_c(cp: &'static ControlPlane, ns: &str) -> Arc<AtomicBool> {
    let micro = |t: SystemTime| opstatus::testing::format_rfc3339(t).replace('Z', ".000000Z");
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": ns},
        "spec": {"holderIdentity": "pod-c_1", "leaseDurationSeconds": 15, "renewTime": micro(SystemTime::now())}});
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&lease.to_string()));
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, path) = (stop.clone(), format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE}"));
    std::thread::spawn(move || {
        let mut client = cp.admin_client();
        for _ in 0..600 {
            if flag.load(Ordering::Relaxed) {
                return;
            }
            let renewal = json!({"spec": {"renewTime": micro(SystemTime::now())}}).to_string();
            let _ = client.merge_patch(&path, renewal.as_bytes(), "renew the Lease");
            std::thread::sleep(Duration::from_secs(2));
        }
    });
    stop
}

/// The status writes `user` made that went through.
fn writes(cp: &ControlPlane, user: &str) -> Vec<SystemTime> {
    let written = |e: &AuditEvent| e.verb == "patch" && e.code < 300 && e.uri.contains("/configmaps/");
    cp.audit_events(user).into_iter().filter(written).map(|e| e.received).collect()
}

#[test]
fn e2e_a_leader_whose_pod_does_not_publish_is_stood_in_for_and_handed_back_to() {
    let cp = shared();
    let pod = cp.deploy("silent-leader");
    let ns = pod.namespace.as_str();
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    let (sa_c, user_c) = another_replica(cp, &pod, "opstatus-c");
    let_read_the_lease(cp, ns, &["opstatus", "opstatus-b", "opstatus-c"]);
    let renewing = renew_as_pod_c(cp, ns);

    let started = Instant::now();
    let a = RunningAgent::start(&release_bin(), &ARGS, &replica_env(cp, &pod.sa, "pod-a"));
    let b = RunningAgent::start(&release_bin(), &ARGS, &replica_env(cp, &sa_b, "pod-b"));
    let log = || format!("pod-a:\n{}\npod-b:\n{}", a.stderr(), b.stderr());
    for follower in [&a, &b] {
        let standing = "Standing by: pod-c publishes (the operator's leader)";
        assert!(follower.logged_within(standing, Duration::from_secs(10)), "{}", follower.stderr());
    }
    // Nobody writes the lock: within its lease (14 s) and a check, a
    // follower publishes what it sees, naming the leader.
    let doc = wait_for(Duration::from_secs(40), Duration::from_millis(50), || cp.status_document(ns, CM))
        .unwrap_or_else(|| panic!("no status while pod-c leads:\n{}", log()));
    let fresh_after = started.elapsed();
    assert!(
        fresh_after >= Duration::from_secs(13),
        "published {fresh_after:?} after start: before the lease\n{}",
        log()
    );
    assert!(fresh_after <= Duration::from_secs(14 + 8), "published {fresh_after:?} after start\n{}", log());
    let error = doc["error"].as_str().unwrap_or_default().to_string();
    assert_eq!(doc["health"], "degraded", "{doc}");
    assert!(error.starts_with("The operator's leader pod-c publishes no status"), "{error}");
    assert!(error.contains(&format!("Lease {ns}/{LEASE} names pod-c_1")), "{error}");
    let stand_in = holder(cp, ns).expect("a holder");
    let (publisher, standby) = if stand_in == "pod-a" { (&a, &b) } else { (&b, &a) };
    assert_eq!(publisher.stderr().matches("The operator's leader pod-c publishes no status").count(), 1, "{}", log());
    assert!(!standby.stderr().contains("Publishing as"), "two publishers:\n{}", log());
    // /status says it, and so does `opstatus get` through the status.
    let (code, body, _) = get(endpoint_from_log(&publisher.stderr()).unwrap(), "/status");
    assert_eq!(code, 200);
    assert!(body.contains("The operator's leader pod-c publishes no status"), "{body}");
    let out = run_to_end(
        &release_bin(),
        &["get", "--kubeconfig", cp.kubeconfig(), "--namespace", ns],
        &[],
        Duration::from_secs(30),
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("degraded") && shown.contains("pod-c publishes no status"), "{shown}");
    let event = wait_for(Duration::from_secs(10), Duration::from_millis(200), || {
        summaries(&opstatus_events(cp, ns)).into_iter().find(|(_, reason, _)| reason == "BecamePublisher")
    })
    .expect("a BecamePublisher event");
    assert_eq!(event.0, "Warning", "{event:?}");
    assert!(event.2.contains(&format!("{stand_in} publishes the status")) && event.2.contains("pod-c"), "{event:?}");

    // pod-c's sidecar starts: it takes the lock, the follower hands back.
    let c = RunningAgent::start(&release_bin(), &ARGS, &replica_env(cp, &sa_c, "pod-c"));
    let c_started = Instant::now();
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || (holder(cp, ns)? == "pod-c").then_some(()))
        .unwrap_or_else(|| panic!("pod-c's sidecar never took the lock:\n{}\npod-c:\n{}", log(), c.stderr()));
    let handed_back = c_started.elapsed();
    let standing = "Standing by: pod-c publishes (the operator's leader)";
    assert!(publisher.logged_within(standing, Duration::from_secs(5)), "{}", log());
    std::thread::sleep(Duration::from_secs(4));
    renewing.store(true, Ordering::Relaxed);
    let healthy = cp.status_document(ns, CM).unwrap();
    assert_eq!((healthy["health"].as_str(), healthy["error"].as_str()), (Some("healthy"), None), "{healthy}");
    // One writer at a time: none of the followers' writes went through
    // once pod-c's first did.
    let c_first = writes(cp, &user_c).into_iter().min().expect("pod-c wrote");
    let after: Vec<SystemTime> =
        [&pod.user, &user_b].iter().flat_map(|u| writes(cp, u)).filter(|at| *at > c_first).collect();
    assert!(after.is_empty(), "a follower wrote after pod-c's sidecar took over: {after:?}\n{}", log());
    println!(
        "e2e silent leader: a fresh status {fresh_after:.1?} after the followers started (lock lease 14 s, before: \
         none); {stand_in} stood in, handed back {handed_back:.1?} after pod-c's sidecar started"
    );
}
