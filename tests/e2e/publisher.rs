//! End to end, real kube-apiserver: replicas that share a status ConfigMap
//! elect one publisher. Rolling updates hand over without a "Shutting down"
//! status, a killed holder is replaced within its lease, standbys only
//! read, the operator's own leader can decide, and instances started
//! together never both hold the lock.
//!
//! Every instance runs with `--interval 2s --check-interval 1s`: the lease
//! is 2 × 2 s + 10 s = 14 s, the handover wait 1 s + 2 s and what a check
//! takes.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{ControlPlane, Deployed, release_bin, shared};
use support::http::{endpoint_from_log, get};
use support::replicas::{another_replica, replica_env};
use support::{RunningAgent, ServiceAccountDir, wait_for};

const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
const FAST: [&str; 5] = ["run", "--interval", "2s", "--check-interval", "1s"];
const CHECK_INTERVAL: Duration = Duration::from_secs(1);
const LEASE: Duration = Duration::from_secs(14);

fn start(cp: &ControlPlane, sa: &ServiceAccountDir, pod: &str, extra: &[&str]) -> RunningAgent {
    let args: Vec<&str> = FAST.iter().copied().chain(extra.iter().copied()).collect();
    RunningAgent::start(&release_bin(), &args, &replica_env(cp, sa, pod))
}

/// The lock's holder as the ConfigMap says now.
fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

/// How many write syscalls process `pid` has made (its readiness file,
/// its requests, its log).
fn write_syscalls(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io");
    let line = io.lines().find_map(|l| l.strip_prefix("syscw: ")).expect("syscw in /proc/PID/io");
    line.trim().parse().unwrap()
}

fn wait_holder(cp: &ControlPlane, ns: &str, who: &str, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    wait_for(within, Duration::from_millis(50), || (holder(cp, ns).as_deref() == Some(who)).then(|| started.elapsed()))
}

/// Two replicas of one operator: pod-a with the Deployment's
/// ServiceAccount, pod-b with a second one bound to the same Role.
fn two_replicas(label: &str) -> (&'static ControlPlane, Deployed, ServiceAccountDir, String) {
    let cp = shared();
    let pod = cp.deploy(label);
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    (cp, pod, sa_b, user_b)
}

#[test]
fn e2e_rolling_update_hands_over_and_readers_never_see_shutting_down() {
    let (cp, pod, sa_b, _) = two_replicas("handover");
    let ns = pod.namespace.as_str();
    let mut a = start(cp, &pod.sa, "pod-a", &[]);
    wait_holder(cp, ns, "pod-a", Duration::from_secs(10)).expect("pod-a publishes first");
    let mut b = start(cp, &sa_b, "pod-b", &[]);
    assert!(b.logged_within("Standing by: pod-a publishes", Duration::from_secs(10)), "{}", b.stderr());

    // The rolling update stops the old pod; readers look all along.
    a.signal("TERM");
    let stopped = Instant::now();
    let mut seen_b = None;
    let mut exited = None;
    while stopped.elapsed() < Duration::from_secs(8) {
        if let Some(doc) = cp.status_document(ns, CM) {
            assert_ne!(doc["error"], "Shutting down", "a reader saw the old pod's final status: {doc}");
            assert_eq!(doc["health"], "healthy", "{doc}");
        }
        if seen_b.is_none() && holder(cp, ns).as_deref() == Some("pod-b") {
            seen_b = Some(stopped.elapsed());
        }
        if exited.is_none() && a.exited().is_some() {
            exited = Some(stopped.elapsed());
        }
        if seen_b.is_some() && exited.is_some() && stopped.elapsed() > exited.unwrap() + Duration::from_secs(3) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (seen_b, exited) = (seen_b.expect("pod-b took over"), exited.expect("pod-a exited"));
    assert_eq!(a.exited().and_then(|s| s.code()), Some(0));
    assert!(a.logged("Handed over to pod-b"), "{}", a.stderr());
    // pod-b's status is there by the time pod-a is gone: the old pod waits
    // for its standby (which looks once per check interval) and says it saw
    // it take over before it exits (above). The readers' view here is
    // polled with kubectl, so it may lag by a poll on a loaded machine.
    assert!(
        seen_b <= exited + CHECK_INTERVAL + Duration::from_secs(2),
        "pod-b took over {seen_b:?} after SIGTERM, pod-a exited after {exited:?}"
    );
    assert!(b.logged("Publishing as pod-b"), "{}", b.stderr());

    // The last instance stopping still says so.
    b.signal("TERM");
    assert_eq!(b.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()), Some(0));
    let last = cp.status_document(ns, CM).unwrap();
    assert_eq!((last["health"].as_str(), last["error"].as_str()), (Some("unhealthy"), Some("Shutting down")));
    println!("e2e handover: pod-b took over {seen_b:.2?} after pod-a's SIGTERM; pod-a exited after {exited:.2?}");
}

#[test]
fn e2e_two_replicas_one_writer_and_a_standby_that_only_reads() {
    let (cp, pod, sa_b, user_b) = two_replicas("replicas");
    let ns = pod.namespace.as_str();
    let name = format!("replicas-{ns}");
    cp.install_crd("clusteroperators.config.openshift.io");
    cp.apply_manifests("manifests/openshift", ns, &[("demo-operator", &name)]);
    let sinks = ["--cluster-operator", name.as_str()];
    let a = start(cp, &pod.sa, "pod-a", &sinks);
    wait_holder(cp, ns, "pod-a", Duration::from_secs(10)).expect("pod-a publishes");
    // Every read of pod-b's is counted, from its start.
    let started_b = Instant::now();
    let ready = support::TempDir::new("ready");
    let ready_file = ready.path().join("ready").display().to_string();
    let b = start(cp, &sa_b, "pod-b", &[sinks[0], sinks[1], "--ready-file", &ready_file]);
    assert!(b.logged_within("Standing by: pod-a publishes", Duration::from_secs(10)), "{}", b.stderr());
    // Its heartbeat's time comes and goes (2 s) while it stands by: a
    // write it will not make must not wake its loop again and again (each
    // wake rewrites the readiness file: a write syscall). Counted, not
    // timed: a loop spinning on a busy machine still makes thousands.
    let writes_then = write_syscalls(b.pid());
    std::thread::sleep(Duration::from_secs(8));
    let syscalls = write_syscalls(b.pid()) - writes_then;
    assert!(syscalls <= 100, "the standby made {syscalls} write syscalls in 8 s of 1 s checks\n{}", b.stderr());

    let writes_a = cp.audit_events(&pod.user).iter().filter(|e| e.verb == "patch").count();
    let by_b = cp.audit_events(&user_b);
    // Taken once the reads are counted: every read counted was made within
    // it, however late a loaded machine ran this thread after the sleep.
    let elapsed = started_b.elapsed();
    let b_writes: Vec<_> = by_b.iter().filter(|e| e.verb != "get").collect();
    assert!(b_writes.is_empty(), "the standby wrote: {b_writes:?}");
    assert!(by_b.iter().all(|e| e.uri.contains("/configmaps/")), "the standby touched a sink: {by_b:?}");
    // One read per check interval begun at most (plus the one that started
    // it, and a check delayed across an interval's end): a count, not a rate.
    let reads = by_b.len() as f64;
    let intervals = (elapsed.as_secs_f64() / CHECK_INTERVAL.as_secs_f64()).ceil();
    assert!(reads <= intervals + 3.0, "{reads} reads in {elapsed:?}");
    let heartbeats = a.stderr().matches("Status updated:").count();
    assert!(heartbeats >= 4, "{heartbeats} heartbeats");
    assert!(writes_a <= heartbeats + 1, "one write per heartbeat (and the first read): {writes_a} for {heartbeats}");
    // The ClusterOperator was created and is written by the holder only.
    assert!(cp.cluster_operator(&name).is_some());
    assert!(a.logged(&format!("ClusterOperator {name} updated")), "{}", a.stderr());
    let _ = cp.kubectl(&["delete", "clusteroperators.config.openshift.io", &name], None);
    println!(
        "e2e replicas: in {elapsed:.1?} the standby made {reads} reads ({:.2}/s) and {syscalls} write syscalls in \
         8 s, the holder {writes_a} writes",
        reads / elapsed.as_secs_f64()
    );
}

#[test]
fn e2e_a_killed_holder_is_replaced_within_the_lease_and_a_check() {
    let (cp, pod, sa_b, _) = two_replicas("takeover");
    let ns = pod.namespace.as_str();
    let a = start(cp, &pod.sa, "pod-a", &[]);
    wait_holder(cp, ns, "pod-a", Duration::from_secs(10)).expect("pod-a publishes");
    let b = start(cp, &sa_b, "pod-b", &[]);
    assert!(b.logged_within("Standing by: pod-a publishes", Duration::from_secs(10)), "{}", b.stderr());
    a.signal("KILL");
    let killed = Instant::now();
    let took = wait_holder(cp, ns, "pod-b", LEASE + Duration::from_secs(10)).expect("pod-b took over");
    // The standby counts the lease from when it last saw the record
    // change, so from the kill it is at most the lease plus one check (and
    // the check that notices).
    assert!(took <= LEASE + CHECK_INTERVAL * 2 + Duration::from_secs(1), "took over {took:?} after the kill");
    let doc = cp.status_document(ns, CM).unwrap();
    assert_eq!(doc["health"], "healthy");
    println!("e2e takeover: pod-b published {:.2?} after pod-a was killed (lease {LEASE:?})", killed.elapsed());
}

/// The Role manifests/examples/sidecar ships for reading the operator's
/// Lease, bound to both replicas' ServiceAccounts.
fn let_both_read_the_lease(cp: &ControlPlane, ns: &str, lease: &str) {
    for sa in ["opstatus", "opstatus-b"] {
        cp.kubectl_ok(&[
            "-n",
            ns,
            "create",
            "rolebinding",
            &format!("{sa}-leader-lease"),
            "--role=opstatus-leader-lease",
            &format!("--serviceaccount={ns}:{sa}"),
        ]);
    }
    let role = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: opstatus-leader-lease, namespace: {ns}}}\n\
         rules:\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  resourceNames: [{lease}]\n  verbs: [get]\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&role));
}

/// Makes `holder` the operator's leader in its Lease.
fn set_leader(cp: &ControlPlane, ns: &str, lease: &str, holder: &str) {
    let lease_yaml = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {lease}, namespace: {ns}}}\n\
         spec: {{holderIdentity: {holder}, leaseDurationSeconds: 15}}\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&lease_yaml));
}

#[test]
fn e2e_the_sidecar_beside_the_operators_leader_publishes() {
    let (cp, pod, sa_b, user_b) = two_replicas("leader");
    let ns = pod.namespace.as_str();
    let lease = "demo-operator-leader";
    let_both_read_the_lease(cp, ns, lease);
    let follow = ["--follow-leader-lease", lease];
    let a = start(cp, &pod.sa, "pod-a", &follow);
    let b = start(cp, &sa_b, "pod-b", &follow);

    // No Lease yet: nobody publishes, and each says why.
    let why = format!("Lease {ns}/{lease} does not exist");
    assert!(a.logged_within(&why, Duration::from_secs(10)) && b.logged_within(&why, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_secs(2));
    assert!(cp.configmap(ns, CM).is_none(), "nothing is published without a leader");

    set_leader(cp, ns, lease, "pod-b_1234");
    wait_holder(cp, ns, "pod-b", Duration::from_secs(10)).expect("the leader's sidecar publishes");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(holder(cp, ns).as_deref(), Some("pod-b"));
    assert!(cp.audit_events(&pod.user).iter().all(|e| e.verb == "get"), "pod-a wrote while pod-b led");

    set_leader(cp, ns, lease, "pod-a_5678");
    let moved = wait_holder(cp, ns, "pod-a", Duration::from_secs(10)).expect("pod-a publishes once it leads");
    assert!(moved <= CHECK_INTERVAL * 2 + Duration::from_millis(500), "pod-a took {moved:?}");
    std::thread::sleep(Duration::from_secs(3));
    let written = |e: &&support::control_plane::AuditEvent| e.verb == "patch" && e.code < 300;
    let b_last_write = cp.audit_events(&user_b).iter().filter(written).map(|e| e.received).max();
    let a_first_write = cp.audit_events(&pod.user).iter().filter(written).map(|e| e.received).min();
    assert!(b_last_write < a_first_write, "pod-b stopped writing before pod-a started");
    assert_eq!(holder(cp, ns).as_deref(), Some("pod-a"));
    assert!(b.logged("Standing by: pod-a publishes (the operator's leader)"), "{}", b.stderr());
    println!("e2e follow leader: pod-a published {moved:.2?} after the Lease moved to it");
}

/// A Lease that cannot be read (here: its RBAC revoked from the leader's
/// sidecar) demotes nobody at once: the last known leader publishes on
/// through one lease (14 s), then the publisher lock decides and the
/// status says why; the standby, which still reads the Lease, never takes
/// over. Once the Lease can be read again, the problem clears.
#[test]
fn e2e_a_failing_lease_read_keeps_the_leader_then_is_a_reported_problem() {
    let (cp, pod, sa_b, user_b) = two_replicas("lease-read");
    let ns = pod.namespace.as_str();
    let lease = "demo-operator-leader";
    let_both_read_the_lease(cp, ns, lease);
    set_leader(cp, ns, lease, "pod-a_1");
    let follow = ["--follow-leader-lease", lease];
    let a = start(cp, &pod.sa, "pod-a", &follow);
    let b = start(cp, &sa_b, "pod-b", &follow);
    wait_holder(cp, ns, "pod-a", Duration::from_secs(10)).expect("the leader's sidecar publishes");
    let last_update = || cp.status_document(ns, CM).map(|d| d["lastUpdate"].as_str().unwrap().to_string());

    cp.kubectl_ok(&["-n", ns, "delete", "rolebinding", "opstatus-leader-lease"]);
    let revoked = Instant::now();
    assert!(a.logged_within("Cannot read Lease", Duration::from_secs(5)), "{}", a.stderr());
    // Within the grace: pod-a goes on publishing (heartbeats every 2 s).
    let before = last_update();
    std::thread::sleep(Duration::from_secs(5));
    assert_ne!(last_update(), before, "pod-a stopped writing after a failed Lease read:\n{}", a.stderr());
    assert_eq!(holder(cp, ns).as_deref(), Some("pod-a"));
    assert!(!a.stderr().contains("Standing by"), "{}", a.stderr());

    // Past the grace: a problem of the status, pod-a still the publisher.
    let degraded = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        cp.status_document(ns, CM).filter(|d| d["health"] == "degraded")
    })
    .expect("a lasting Lease failure is reported in the status");
    let error = degraded["error"].as_str().unwrap();
    assert!(error.contains("Cannot read Lease") && error.contains("the publisher lock decides"), "{error}");
    let reported = revoked.elapsed();
    assert!(reported >= LEASE - Duration::from_secs(1), "reported after {reported:?}, before the grace");
    assert_eq!(holder(cp, ns).as_deref(), Some("pod-a"));

    let restore = format!("--serviceaccount={ns}:opstatus");
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "opstatus-leader-lease",
        "--role=opstatus-leader-lease",
        &restore,
    ]);
    // The API server's authoriser sees the new RoleBinding through its own
    // informer, late on a loaded machine; the wait ends when it clears.
    wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        cp.status_document(ns, CM).filter(|d| d["health"] == "healthy")
    })
    .expect("the problem clears once the Lease can be read");
    let written = |e: &&support::control_plane::AuditEvent| e.verb == "patch" && e.code < 300;
    assert_eq!(cp.audit_events(&user_b).iter().filter(written).count(), 0, "pod-b wrote:\n{}", b.stderr());
    println!("e2e lease read failure: reported in the status {reported:.2?} after the RBAC was revoked");
}

#[test]
fn e2e_instances_started_together_never_both_hold_the_lock() {
    let (cp, pod, sa_b, _) = two_replicas("race");
    let ns = pod.namespace.as_str();
    for round in 0..20 {
        let a = start(cp, &pod.sa, "pod-a", &[]);
        let b = start(cp, &sa_b, "pod-b", &[]);
        let decided = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
            let (la, lb) = (a.stderr(), b.stderr());
            let publishing = [&la, &lb].iter().filter(|l| l.contains("Publishing as")).count();
            let standing = [&la, &lb].iter().filter(|l| l.contains("Standing by")).count();
            (publishing + standing == 2).then_some((publishing, la, lb))
        });
        let (publishing, la, lb) =
            decided.unwrap_or_else(|| panic!("round {round}: no decision\n{}\n{}", a.stderr(), b.stderr()));
        assert_eq!(publishing, 1, "round {round}: both hold the lock\n{la}\n{lb}");
        a.signal("KILL");
        b.signal("KILL");
        drop((a, b));
        cp.kubectl_ok(&["-n", ns, "delete", "configmap", CM]);
    }
}

#[test]
fn e2e_an_unreadable_lock_is_taken_as_expired_with_a_warning() {
    let cp = shared();
    let pod = cp.deploy("foreign-lock");
    let ns = pod.namespace.as_str();
    cp.kubectl_ok(&["-n", ns, "create", "configmap", CM]);
    cp.kubectl_ok(&["-n", ns, "annotate", "configmap", CM, &format!("{ANNOTATION}=not a lock record")]);
    let a = start(cp, &pod.sa, "pod-a", &[]);
    wait_holder(cp, ns, "pod-a", Duration::from_secs(10)).expect("publishes over an unreadable lock");
    assert!(a.logged("is not a lock record"), "{}", a.stderr());
}

/// The heartbeat interval has one owner: when kube9-server asks for a
/// longer one (here 20 s against `--interval 2s`), the lease the publisher
/// announces, its retry cap and its liveness window follow it, so a
/// healthy standby never steals the lock between two heartbeats.
#[test]
fn a_server_set_interval_steals_no_lock() {
    use support::fake_kube9::{Answer, FakeKube9};
    let (cp, pod, sa_b, _) = two_replicas("asked-interval");
    let ns = pod.namespace.clone();
    let kube9 = FakeKube9::start(Answer::Registered { cluster_id: "cls_lease".into(), status_interval_seconds: 20 });
    let dir = support::TempDir::new("asked-interval");
    let (key, ca) = (dir.path().join("api-key"), dir.path().join("kube9-ca.crt"));
    std::fs::write(&key, "kdy_e2e_lease0123456789").unwrap();
    std::fs::write(&ca, &kube9.pki.ca_pem).unwrap();
    let url = kube9.url();
    let pro = ["--api-key-file", key.to_str().unwrap(), "--server-url", &url, "--server-ca-file", ca.to_str().unwrap()];
    let a = start(cp, &pod.sa, "pod-a", &pro);
    wait_holder(cp, &ns, "pod-a", Duration::from_secs(20)).expect("pod-a publishes");
    let b = start(cp, &sa_b, "pod-b", &pro);
    // Three heartbeats at the asked interval: long past the 14 s lease
    // that --interval 2s alone would give.
    let transitions = || {
        let cm = cp.configmap(&ns, CM).unwrap();
        let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str().unwrap()).unwrap();
        record["leaderTransitions"].as_u64().unwrap()
    };
    let before = transitions();
    std::thread::sleep(Duration::from_secs(62));
    assert_eq!(holder(cp, &ns).as_deref(), Some("pod-a"), "pod-b took over:\n{}", b.stderr());
    assert_eq!(transitions(), before, "lock transitions:\n{}\n{}", a.stderr(), b.stderr());
    assert!(!b.stderr().contains("Publishing as pod-b"), "{}", b.stderr());
}

/// Makes `holder` the operator's leader in its Lease, last renewed at
/// `renewed`, for `seconds` (a MicroTime: microseconds are required).
fn set_lease(cp: &ControlPlane, ns: &str, lease: &str, holder: &str, renewed: SystemTime, seconds: u64) -> String {
    let renew_time = opstatus::testing::format_rfc3339(renewed).replace('Z', ".000000Z");
    let lease_yaml = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {lease}, namespace: {ns}}}\n\
         spec: {{holderIdentity: {holder}, leaseDurationSeconds: {seconds}, renewTime: \"{renew_time}\"}}\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&lease_yaml));
    renew_time
}

/// The operator's leader died 3 minutes ago and nobody took its Lease
/// (5 s) since: no sidecar beside it publishes. Once the instances have
/// seen it unrenewed for its duration plus 10 s, the publisher lock
/// decides, the status says `degraded` naming the holder and its last
/// renewal, and both replicas stay ready. A new leader's renewal ends it.
#[test]
fn e2e_a_lease_nobody_renews_leaves_it_to_the_lock_and_the_status_names_its_holder() {
    let (cp, pod, sa_b, _) = two_replicas("lease-stale");
    let ns = pod.namespace.as_str();
    let lease = "demo-operator-leader";
    let_both_read_the_lease(cp, ns, lease);
    let renewed = set_lease(cp, ns, lease, "pod-c_1", SystemTime::now() - Duration::from_secs(180), 5);
    let follow = ["--follow-leader-lease", lease, "--listen", "127.0.0.1:0"];
    let a = start(cp, &pod.sa, "pod-a", &follow);
    let b = start(cp, &sa_b, "pod-b", &follow);
    let started = Instant::now();
    for agent in [&a, &b] {
        let standing = "Standing by: pod-c publishes (the operator's leader)";
        assert!(agent.logged_within(standing, Duration::from_secs(10)), "{}", agent.stderr());
    }
    let degraded = wait_for(Duration::from_secs(45), Duration::from_millis(200), || {
        cp.status_document(ns, CM).filter(|d| d["health"] == "degraded")
    })
    .unwrap_or_else(|| panic!("nobody publishes while the Lease is unrenewed:\n{}\n{}", a.stderr(), b.stderr()));
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(14), "the lock decided {took:?} after start, before 5 s + 10 s");
    let error = degraded["error"].as_str().unwrap();
    let named = format!("Lease {ns}/{lease} names pod-c_1");
    assert!(error.contains(&named) && error.contains(&format!("last renewed {renewed} (3 min ago)")), "{error}");
    let publisher = holder(cp, ns).expect("the lock has a holder");
    assert!(["pod-a", "pod-b"].contains(&publisher.as_str()), "{publisher}");
    for agent in [&a, &b] {
        let (code, body, _) = get(endpoint_from_log(&agent.stderr()).unwrap(), "/readyz");
        assert_eq!(code, 200, "{body}");
    }

    // A new leader takes the Lease: its sidecar publishes, healthy.
    set_lease(cp, ns, lease, "pod-b_2", SystemTime::now(), 15);
    wait_holder(cp, ns, "pod-b", Duration::from_secs(10)).expect("the new leader's sidecar publishes");
    wait_for(Duration::from_secs(10), Duration::from_millis(200), || {
        cp.status_document(ns, CM).filter(|d| d["health"] == "healthy")
    })
    .expect("healthy once the Lease is renewed");

    // The leader releases the Lease and nobody takes it: past one lease of
    // the publisher lock (14 s) the lock decides, and the status says so.
    set_lease(cp, ns, lease, "\"\"", SystemTime::now(), 1);
    let released = Instant::now();
    let nobody = wait_for(Duration::from_secs(40), Duration::from_millis(200), || {
        cp.status_document(ns, CM).filter(|d| d["health"] == "degraded")
    })
    .unwrap_or_else(|| panic!("no problem while the Lease names nobody:\n{}\n{}", a.stderr(), b.stderr()));
    let after = released.elapsed();
    assert!(after >= LEASE - Duration::from_secs(1), "degraded {after:?} after the release, before 14 s");
    let said = nobody["error"].as_str().unwrap();
    assert!(said.contains("has no holder") && said.contains("for more than 14s"), "{said}");
    assert!(holder(cp, ns).is_some(), "someone still publishes");
    println!("e2e unrenewed Lease: {publisher} published {took:.1?} after start: {error}; nobody named: {after:.1?}");
}
