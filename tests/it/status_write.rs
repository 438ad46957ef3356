//! The write path: one server-side apply per heartbeat, spec-exact JSON.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::time::{Duration, SystemTime};
use support::fake_apiserver::FakeApiServer;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, run_to_end, wait_for};

const TOKEN: &str = "sa-token-for-status-write-tests";
const CM: &str = "kube9-operator-status";

#[test]
fn once_reads_creates_and_writes_the_status_with_one_apply() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let out = run_to_end(
        &opstatus_bin(),
        &["once", "--operator-version", "1.2.3"],
        &pod_env(server.port(), &sa),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The first look of a new instance (the publisher lock, see
    // tests/e2e_publisher.rs): a read, the apply that creates and labels
    // the ConfigMap holding no lock; then the status in one apply.
    let requests = server.requests();
    let calls: Vec<(&str, &str)> = requests.iter().map(|r| (r.method.as_str(), r.query.as_str())).collect();
    assert_eq!(
        calls,
        [("GET", ""), ("PATCH", "fieldManager=opstatus-init"), ("PATCH", "fieldManager=opstatus&force=true")],
        "{requests:?}"
    );
    let r = &requests[2];
    assert_eq!(r.method, "PATCH");
    assert_eq!(r.path, "/api/v1/namespaces/ops/configmaps/kube9-operator-status");
    assert_eq!(r.query, "fieldManager=opstatus&force=true");
    assert_eq!(r.content_type.as_deref(), Some("application/apply-patch+yaml"));
    assert_eq!(r.authorization.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));

    let cm = server.object("ops", CM).expect("the ConfigMap was created");
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "opstatus");
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/name"], "opstatus");
    let raw = cm["data"]["status"].as_str().unwrap();
    let doc: Value = serde_json::from_str(raw).unwrap();
    let last_update = doc["lastUpdate"].as_str().unwrap();
    assert_eq!(
        raw,
        format!(
            r#"{{"mode":"operated","tier":"free","version":"1.2.3","health":"healthy","lastUpdate":"{last_update}","registered":false,"error":null,"namespace":"ops"}}"#
        )
    );
    let written = opstatus::testing::parse_rfc3339(last_update).expect("RFC 3339 lastUpdate");
    let age = SystemTime::now().duration_since(written).unwrap_or_default();
    assert!(age < Duration::from_secs(5), "lastUpdate {last_update} is not now");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("INFO  Status updated: mode=operated, tier=free, health=healthy, registered=false"),
        "{stderr}"
    );
}

/// The first write is made at start, not one heartbeat later: with the
/// longest interval (240 s) it arrives within 30 s.
#[test]
fn run_writes_at_start_not_one_interval_later() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let _agent = Run::every("240s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let first = wait_for(Duration::from_secs(30), Duration::from_millis(50), || {
        server.requests().into_iter().find(|r| r.query.ends_with("&force=true"))
    });
    assert!(first.is_some(), "no status write within 30 s of start at a 240 s heartbeat: {:?}", server.requests());
}

/// Then one write per interval: none early (a doubled heartbeat), none
/// skipped (`support::assert_cadence`).
#[test]
fn run_writes_once_every_interval() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let started = std::time::Instant::now();
    let _agent = Run::every("1s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let writes = || -> Vec<_> { server.requests().into_iter().filter(|r| r.query.ends_with("&force=true")).collect() };
    let requests = wait_for(Duration::from_secs(30), Duration::from_millis(50), || {
        let w = writes();
        (w.len() >= 6).then_some(w)
    })
    .expect("six heartbeats within 30 s");
    assert!(requests.iter().all(|r| r.method == "PATCH"), "{requests:?}");
    let offsets: Vec<Duration> = requests.iter().map(|r| r.at - started).collect();
    support::assert_cadence(&offsets, Duration::from_secs(1));
}

#[test]
fn namespace_comes_from_the_flag_then_pod_namespace_then_the_service_account() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "from-sa-file");
    let mut env = pod_env(server.port(), &sa);
    let once = |args: &[&str], env: &[(String, String)]| {
        let out = run_to_end(&opstatus_bin(), args, env, Duration::from_secs(20));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    once(&["once"], &env);
    env.push(("POD_NAMESPACE".into(), "from-env".into()));
    once(&["once"], &env);
    once(&["once", "--namespace", "from-flag", "--configmap", "custom-name"], &env);
    let mut paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    paths.dedup();
    assert_eq!(
        paths,
        [
            "/api/v1/namespaces/from-sa-file/configmaps/kube9-operator-status",
            "/api/v1/namespaces/from-env/configmaps/kube9-operator-status",
            "/api/v1/namespaces/from-flag/configmaps/custom-name",
        ]
    );
    assert_eq!(server.status_document("from-flag", "custom-name").unwrap()["namespace"], "from-flag");
}

/// A hanging Events API never delays a heartbeat: the operator's health
/// flips (an event to send), the Events API hangs every request for 30 s,
/// and the status is still written every 2 s.
#[test]
fn a_hanging_events_api_never_delays_a_heartbeat() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = support::http::FakeOperator::start();
    server.hang_path("/events", Duration::from_secs(30));
    let args = ["run", "--interval", "2s", "--check-interval", "1s", "--watch-url", &operator.url()];
    let agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(server.port(), &sa));
    let writes = || server.requests().iter().filter(|r| r.method == "PATCH" && r.path.contains("/configmaps/")).count();
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (writes() >= 1).then_some(()))
        .expect("a first write");
    // Health flips back and forth: each published change queues an event.
    for code in [500, 200, 500, 200] {
        operator.set_code(code);
        std::thread::sleep(Duration::from_millis(1500));
    }
    let before = writes();
    std::thread::sleep(Duration::from_secs(10));
    let during = writes() - before;
    let events_sent = server.requests().iter().filter(|r| r.path.contains("/events")).count();
    let paths: Vec<String> = server.requests().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    assert!(events_sent >= 1, "an event was sent (and hangs): {paths:?}\n{}", agent.stderr());
    assert!(during >= 4, "{during} status writes in 10 s at a 2 s interval while Events hang:\n{}", agent.stderr());
}

/// At opstatus's default log level the log says each change of the
/// published status, not each heartbeat (at 60 s that would be 1,440
/// identical lines a day): one line for the first write, one when the
/// operator's health changes, none for the heartbeats between.
#[test]
fn the_default_log_says_each_change_of_the_status_not_each_heartbeat() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = support::http::FakeOperator::start();
    let mut env = pod_env(server.port(), &sa);
    env.push(("RUST_LOG".into(), "info".into()));
    let agent = Run::every("1s").checks("1s").flag("--watch-url", operator.url()).start(&opstatus_bin(), &env);
    let writes = || server.requests().iter().filter(|r| r.query.ends_with("&force=true")).count();
    let lines = |health: &str| agent.stderr().matches(&format!("Status updated: {health}")).count();
    let healthy = "mode=operated, tier=free, health=healthy, registered=false";
    let wait_writes = |n: usize| {
        wait_for(Duration::from_secs(20), Duration::from_millis(50), || (writes() >= n).then_some(()))
            .unwrap_or_else(|| panic!("{n} writes:\n{}", agent.stderr()))
    };
    wait_writes(4);
    assert_eq!(lines(healthy), 1, "one line for four healthy heartbeats:\n{}", agent.stderr());
    operator.set_code(500);
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        (lines("mode=operated, tier=free, health=degraded") == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("the change is said:\n{}", agent.stderr()));
    wait_writes(writes() + 3);
    operator.set_code(200);
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (lines(healthy) == 2).then_some(()))
        .unwrap_or_else(|| panic!("the way back is said:\n{}", agent.stderr()));
    wait_writes(writes() + 3);
    let stderr = agent.stderr();
    assert_eq!(stderr.matches("Status updated:").count(), 3, "three changes, three lines:\n{stderr}");
    assert!(!stderr.contains("Status kept current"), "the summary is hourly:\n{stderr}");
}
