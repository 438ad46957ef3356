//! Replicas beside one status ConfigMap, against the in-process fake API
//! server where the timing must be forced:
//!
//! - a rolling update at the default settings (a 60 s heartbeat, 5 s
//!   checks) whose operator answers each of its two health URLs in 0.9 s:
//!   the standby sees the released lock a whole check interval after the
//!   holder's SIGTERM (the worst moment), checks its operator (1.8 s), then
//!   writes. The holder waits for what that costs, so readers never see
//!   "Shutting down";
//! - the status ConfigMap deleted under three replicas: the lock it held
//!   is not released by that, so the holder stays the one publisher (its
//!   next heartbeat creates the ConfigMap again) and no standby claims;
//!   with the holder gone too, one standby takes over after the lease,
//!   one only.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::operator_endpoint::{Habits, OperatorEndpoint};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-replica-tests";
const CM_PATH: &str = "/api/v1/namespaces/ops/configmaps/kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";

fn env(server: &FakeApiServer, sa: &ServiceAccountDir, pod: &str) -> Vec<(String, String)> {
    let mut env = pod_env(server.port(), sa);
    env.push(("POD_NAME".into(), pod.into()));
    env
}

/// The lock's holder in a ConfigMap (or an apply body).
fn holder_in(cm: &Value) -> Option<String> {
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

fn holder(server: &FakeApiServer) -> Option<String> {
    holder_in(&server.object("ops", "kube9-operator-status")?)
}

/// Every write of the status ConfigMap since `since`: when, by whom (the
/// holder its lock record names) and the status it carried.
fn writes_since(server: &FakeApiServer, since: Instant) -> Vec<(Instant, String, Value)> {
    let writes = server.requests().into_iter().filter(|r| r.path == CM_PATH && r.method == "PATCH" && r.at >= since);
    writes
        .filter_map(|r| {
            let body: Value = serde_json::from_slice(&r.body).ok()?;
            let status = serde_json::from_str(body["data"]["status"].as_str()?).ok()?;
            Some((r.at, holder_in(&body)?, status))
        })
        .collect()
}

fn reads(server: &FakeApiServer) -> usize {
    server.requests().iter().filter(|r| r.path == CM_PATH && r.method == "GET").count()
}

#[test]
fn a_standby_with_slow_health_checks_takes_over_before_the_holder_gives_up_at_the_default_settings() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let slow = Habits { answer_after: Some(Duration::from_millis(900)), ..Habits::default() };
    let (healthz, readyz) = (OperatorEndpoint::start(slow), OperatorEndpoint::start(slow));
    let run = Run::default_interval().flag("--watch-url", healthz.url()).flag("--watch-url", readyz.url());
    let mut a = run.start(&opstatus_bin(), &env(&server, &sa, "pod-a"));
    wait_for(Duration::from_secs(20), Duration::from_millis(20), || (holder(&server)? == "pod-a").then_some(()))
        .unwrap_or_else(|| panic!("pod-a never published:\n{}", a.stderr()));
    let b = run.start(&opstatus_bin(), &env(&server, &sa, "pod-b"));
    assert!(b.logged_within("Standing by: pod-a publishes", Duration::from_secs(20)), "{}", b.stderr());
    // The worst moment: just after one of pod-b's looks at the lock (the
    // holder reads nothing), so that its next look comes a whole check
    // interval later.
    let seen = reads(&server);
    wait_for(Duration::from_secs(10), Duration::from_millis(5), || (reads(&server) > seen).then_some(()))
        .expect("pod-b looks at the lock on its checks");
    let stopped = Instant::now();
    a.signal("TERM");
    let exited = a.wait_exit(Duration::from_secs(30)).expect("pod-a exits");
    assert_eq!(exited.code(), Some(0));
    let took = stopped.elapsed();
    let written = writes_since(&server, stopped);
    let log = format!("pod-a:\n{}\npod-b:\n{}", a.stderr(), b.stderr());
    let shutting_down: Vec<_> = written.iter().filter(|(_, _, doc)| doc["error"] == "Shutting down").collect();
    assert!(shutting_down.is_empty(), "readers saw the old pod's final status: {shutting_down:?}\n{log}");
    assert!(written.iter().all(|(_, _, doc)| doc["health"] == "healthy"), "{written:?}\n{log}");
    assert!(a.logged("Handed over to pod-b"), "{log}");
    assert_eq!(holder(&server).as_deref(), Some("pod-b"));
    let (by_b, _, _) = written.iter().find(|(_, by, _)| by == "pod-b").expect("pod-b wrote");
    println!(
        "handover at the default settings, two 0.9 s health URLs: pod-b published {:.2?} after pod-a's SIGTERM; pod-a \
         exited after {took:.2?}",
        by_b.duration_since(stopped)
    );
}

/// Three replicas at `--interval 2s --check-interval 1s` (a 14 s lease).
fn three_replicas(server: &FakeApiServer, sa: &ServiceAccountDir) -> [RunningAgent; 3] {
    let run = Run::every("2s").checks("1s");
    let a = run.start(&opstatus_bin(), &env(server, sa, "pod-a"));
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || (holder(server)? == "pod-a").then_some(()))
        .unwrap_or_else(|| panic!("pod-a never published:\n{}", a.stderr()));
    let (b, c) =
        (run.start(&opstatus_bin(), &env(server, sa, "pod-b")), run.start(&opstatus_bin(), &env(server, sa, "pod-c")));
    for standby in [&b, &c] {
        assert!(standby.logged_within("Standing by: pod-a publishes", Duration::from_secs(10)), "{}", standby.stderr());
    }
    [a, b, c]
}

#[test]
fn a_deleted_status_configmap_leaves_one_publisher_and_is_written_again_by_it() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let [a, b, c] = three_replicas(&server, &sa);
    let deleted = Instant::now();
    server.remove_object("ops", "kube9-operator-status");
    // Half the lease: the standbys look every second, pod-a writes every 2 s.
    std::thread::sleep(Duration::from_secs(7));
    let log = || format!("pod-a:\n{}\npod-b:\n{}\npod-c:\n{}", a.stderr(), b.stderr(), c.stderr());
    let writers: Vec<String> = writes_since(&server, deleted).into_iter().map(|(_, by, _)| by).collect();
    assert!(writers.iter().all(|by| by == "pod-a"), "a standby claimed the deleted ConfigMap: {writers:?}\n{}", log());
    assert!(writers.len() >= 2, "pod-a went on writing: {writers:?}\n{}", log());
    assert_eq!(holder(&server).as_deref(), Some("pod-a"), "written again by its holder");
    for standby in [&b, &c] {
        assert!(!standby.stderr().contains("Publishing as"), "{}", log());
    }

    // The holder gone and the ConfigMap deleted again: one standby takes
    // over once pod-a's lease (14 s) has run out, and only one.
    a.signal("KILL");
    std::thread::sleep(Duration::from_millis(200));
    server.remove_object("ops", "kube9-operator-status");
    let gone = Instant::now();
    let took = wait_for(Duration::from_secs(30), Duration::from_millis(20), || {
        let h = holder(&server)?;
        (h == "pod-b" || h == "pod-c").then(|| gone.elapsed())
    })
    .unwrap_or_else(|| panic!("nobody took over:\n{}", log()));
    // pod-a last renewed at most a heartbeat (2 s) before it was killed.
    assert!(took >= Duration::from_secs(11), "taken {took:?} after the deletion: before the lease ran out\n{}", log());
    let settled = Instant::now() + Duration::from_secs(1);
    std::thread::sleep(Duration::from_secs(4));
    let publishing = [&b, &c].iter().filter(|s| s.stderr().contains("Publishing as")).count();
    assert_eq!(publishing, 1, "two publishers after the deletion:\n{}", log());
    // Each claim carries the version it read; the one that lost a race
    // (a 409) never writes again.
    let writers: std::collections::BTreeSet<String> =
        writes_since(&server, settled).into_iter().map(|(_, by, _)| by).collect();
    assert_eq!(writers.len(), 1, "writers after the takeover: {writers:?}\n{}", log());
    println!("deleted status ConfigMap: one publisher throughout; with its holder gone, taken over after {took:.1?}");
}
