//! End to end, real kube-apiserver: two replicas probe the same Foos and
//! publish `Upgradeable` on the same OperatorCondition, each with a
//! ServiceAccount of its own so the audit log tells them apart. While
//! pod-a holds the publisher lock, pod-b stands by and makes no list and
//! no watch of the Foos (only reads of the status ConfigMap), while pod-a
//! lists once and watches (a flip reaches the OperatorCondition). When
//! pod-a stops (SIGTERM, a rolling update), pod-b takes over and starts
//! listing and watching: a flip after the takeover reaches the
//! OperatorCondition within a check or two, written by pod-b.
//!
//! v1.20 audits a watch of a custom resource only once it ended, so the
//! counts are read after the instances stopped; a watch pod-b started
//! while standing by would show with a `requestReceived` before its claim.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{AuditEvent, ControlPlane, release_bin, shared};
use support::replicas::{another_replica, bind_role, replica_env};
use support::resources::find;
use support::{RunningAgent, ServiceAccountDir, wait_for};

const NAME: &str = "demo-operator.v4.0.0";
const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
const PROBE: &str = "example.com/v1/foos:Upgradeable=!Migrating";
const FOO_COUNT: usize = 5;
/// How long both run side by side, pod-a publishing.
const SIDE_BY_SIDE: Duration = Duration::from_secs(10);

fn start(cp: &ControlPlane, sa: &ServiceAccountDir, ns: &str, identity: &str) -> RunningAgent {
    let args = [
        "run",
        "--interval",
        "2s",
        "--check-interval",
        "1s",
        "--identity",
        identity,
        "--probe",
        PROBE,
        "--probe-namespace",
        ns,
        "--operator-condition",
        NAME,
    ];
    RunningAgent::start(&release_bin(), &args, &replica_env(cp, sa, identity))
}

/// The lock's holder as the ConfigMap says now.
fn holder(cp: &ControlPlane, ns: &str) -> Option<String> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

/// The OperatorCondition's `Upgradeable`, when its status is `status`.
fn upgradeable(cp: &ControlPlane, ns: &str, status: &str) -> Option<Value> {
    let oc = cp.operator_condition(ns, NAME);
    find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == status).cloned()
}

fn on_foos(e: &&AuditEvent) -> bool {
    e.uri.contains("/foos")
}

fn count(events: &[&AuditEvent], verb: &str) -> usize {
    events.iter().filter(|e| e.verb == verb).count()
}

#[test]
fn e2e_a_standby_neither_lists_nor_watches_until_it_takes_over() {
    let test_started = Instant::now();
    let cp = shared();
    cp.install_crd("foos.example.com");
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy("probe-standby");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.grant_operator_condition_as_olm(ns, NAME);
    cp.create_operator_condition(ns, NAME, &[]);
    // pod-b: the same permissions through a ServiceAccount of its own.
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    bind_role(cp, ns, "opstatus-b", &format!("opstatus-probe-reader-{ns}"));
    bind_role(cp, ns, "opstatus-b", NAME);
    for i in 0..FOO_COUNT {
        cp.create_foo(ns, &format!("foo-{i}"), &[("Migrating", "False")]);
    }
    let user_a = pod.user.clone();
    let set_up = test_started.elapsed();

    // pod-a publishes, Upgradeable=True from its list.
    let mut a = start(cp, &pod.sa, ns, "pod-a");
    let up = wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
        (holder(cp, ns).as_deref() == Some("pod-a")).then(|| upgradeable(cp, ns, "True")).flatten()
    });
    let up = up.unwrap_or_else(|| panic!("pod-a never published Upgradeable=True\n{}", a.stderr()));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({FOO_COUNT} checked)"));

    // pod-b starts and stands by.
    let mut b = start(cp, &sa_b, ns, "pod-b");
    let standing = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        b.stderr().contains("Standing by: pod-a publishes").then_some(())
    });
    assert!(standing.is_some(), "pod-b never stood by\n{}", b.stderr());

    // Side by side for a while, looked at every second; halfway, one Foo
    // flips and pod-a (watching; its list was long done) publishes it.
    let side_by_side = Instant::now();
    let mut flipped_seen = None;
    for second in 0..SIDE_BY_SIDE.as_secs() {
        assert_eq!(a.exited(), None, "pod-a exited\n{}", a.stderr());
        assert_eq!(b.exited(), None, "pod-b exited\n{}", b.stderr());
        assert_eq!(holder(cp, ns).as_deref(), Some("pod-a"), "second {second}");
        assert!(!b.stderr().contains("Publishing as"), "pod-b published\n{}", b.stderr());
        if second == SIDE_BY_SIDE.as_secs() / 2 {
            let flip = Instant::now();
            cp.set_foo_conditions(ns, "foo-2", &[("Migrating", "True")]);
            let blocked = wait_for(Duration::from_secs(5), Duration::from_millis(50), || upgradeable(cp, ns, "False"));
            let blocked = blocked.unwrap_or_else(|| panic!("pod-a never published the flip\n{}", a.stderr()));
            assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Foo {ns}/foo-2: Migrating"));
            flipped_seen = Some(flip.elapsed());
        }
        let next = side_by_side + Duration::from_secs(second + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let flipped_seen = flipped_seen.expect("the flip happened");
    // pod-a wrote the flip: it, not pod-b, updated the OperatorCondition.
    let a_updates = cp
        .audit_events(&user_a)
        .iter()
        .filter(|e| e.verb == "update" && e.uri.contains("/operatorconditions/"))
        .count();
    assert!(a_updates >= 2, "pod-a updated the OperatorCondition {a_updates} times");

    // The rolling update: pod-a stops, pod-b takes over.
    let term = SystemTime::now();
    a.signal("TERM");
    let took = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        (holder(cp, ns).as_deref() == Some("pod-b")).then_some(())
    });
    assert!(took.is_some(), "pod-b never took over\n{}\n{}", a.stderr(), b.stderr());
    assert!(a.wait_exit(Duration::from_secs(10)).is_some(), "pod-a did not stop\n{}", a.stderr());
    // pod-b's claim: its first successful write of the status ConfigMap.
    let claim = wait_for(Duration::from_secs(3), Duration::from_millis(50), || {
        let events = cp.audit_events(&user_b);
        events.iter().find(|e| e.verb == "patch" && e.uri.contains(CM) && e.code < 300).map(|e| e.received)
    })
    .expect("pod-b's claim is audited");
    assert!(claim >= term, "pod-b wrote before pod-a stopped");

    // Once pod-b listed the Foos, a flip reaches the OperatorCondition only
    // through its watch.
    let listed = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        cp.audit_events(&user_b).iter().any(|e| on_foos(&e) && e.verb == "list" && e.received >= claim).then_some(())
    });
    assert!(listed.is_some(), "pod-b never listed the Foos after taking over\n{}", b.stderr());
    // pod-b publishes what its list found (foo-2 still migrating).
    let blocked = wait_for(Duration::from_secs(5), Duration::from_millis(50), || upgradeable(cp, ns, "False"));
    assert!(blocked.is_some(), "{}", b.stderr());
    let started = Instant::now();
    cp.set_foo_conditions(ns, "foo-2", &[("Migrating", "False")]);
    let flipped = cp.admin_request_time("patch", "/foos/foo-2/status");
    let up = wait_for(Duration::from_secs(5), Duration::from_millis(50), || upgradeable(cp, ns, "True"));
    let up = up.unwrap_or_else(|| panic!("pod-b never published the flip after taking over\n{}", b.stderr()));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({FOO_COUNT} checked)"));
    let latency = cp.update_latency(&user_b, "/operatorconditions/", flipped);
    assert!(
        latency <= Duration::from_secs(2),
        "pod-b published {latency:?} after the flip ({:?} polled)",
        started.elapsed()
    );
    assert_eq!(b.exited(), None, "pod-b exited\n{}", b.stderr());

    // Stop pod-b too (no standby left: it waits out the handover), so that
    // every watch has ended and is audited.
    b.signal("TERM");
    assert!(b.wait_exit(Duration::from_secs(10)).is_some(), "pod-b did not stop\n{}", b.stderr());
    let audited = |user: &str| {
        wait_for(Duration::from_secs(5), Duration::from_millis(100), || {
            let events = cp.audit_events(user);
            events.iter().any(|e| on_foos(&e) && e.verb == "watch").then_some(events)
        })
    };
    let events_a =
        audited(&user_a).unwrap_or_else(|| panic!("no watch of pod-a's audited: {:?}", cp.audit_events(&user_a)));
    let events_b =
        audited(&user_b).unwrap_or_else(|| panic!("no watch of pod-b's audited: {:?}", cp.audit_events(&user_b)));

    // pod-a: one list, then its watch, until it stopped.
    let foos_a: Vec<&AuditEvent> = events_a.iter().filter(on_foos).collect();
    let (lists_a, watches_a) = (count(&foos_a, "list"), count(&foos_a, "watch"));
    assert!(lists_a >= 1 && watches_a >= 1, "pod-a: {foos_a:?}");
    assert!(foos_a.iter().all(|e| e.code == 200), "pod-a: {foos_a:?}");

    // pod-b, until its claim: reads of the status ConfigMap only; above all
    // no list and no watch of the Foos (a watch opened then would stay open
    // until the next event or its timeoutSeconds, minutes later).
    let standing_by: Vec<&AuditEvent> = events_b.iter().filter(|e| e.received < claim).collect();
    let foos_standing: Vec<_> = standing_by.iter().copied().filter(on_foos).collect();
    let (lists_standing, watches_standing) = (count(&foos_standing, "list"), count(&foos_standing, "watch"));
    let not_the_lock: Vec<_> =
        standing_by.iter().filter(|e| !(e.verb == "get" && e.uri.contains(&format!("/configmaps/{CM}")))).collect();
    assert!(
        lists_standing == 0 && watches_standing == 0 && not_the_lock.is_empty(),
        "pod-b made {lists_standing} list(s) and {watches_standing} watch(es) of the Foos while standing by; \
         its requests other than reads of the status ConfigMap: {not_the_lock:?}"
    );
    assert!(!standing_by.is_empty(), "pod-b read the lock while standing by");

    // pod-b, once it took over: a list, then a watch.
    let foos_b: Vec<&AuditEvent> = events_b.iter().filter(|e| e.received >= claim).filter(on_foos).collect();
    let (lists_b, watches_b) = (count(&foos_b, "list"), count(&foos_b, "watch"));
    assert!(lists_b >= 1 && watches_b >= 1, "pod-b after taking over: {foos_b:?}");

    println!(
        "e2e probe standby: set-up {set_up:.1?}; pod-b stood by for {:.1?} making {} requests, none on the Foos; \
         pod-a made {lists_a} list(s) and {watches_a} watch(es), its flip seen {flipped_seen:.2?} after it; \
         pod-b took over and made {lists_b} list(s) and {watches_b} watch(es), its flip written {latency:.2?} \
         after it; {:.1?} in all",
        claim.duration_since(events_b[0].received).unwrap_or_default(),
        standing_by.len(),
        test_started.elapsed()
    );
}
