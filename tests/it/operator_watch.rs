//! The operator's own health as a signal: a failing watched URL or a stale
//! heartbeat file reaches the status ConfigMap at the check that saw it,
//! and recovery clears it.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::http::FakeOperator;
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-operator-watch-tests";

fn health_of(server: &FakeApiServer) -> Option<(String, Value)> {
    let doc = server.status_document("ops", "kube9-operator-status")?;
    Some((doc["health"].as_str()?.to_string(), doc["error"].clone()))
}

fn wait_health(server: &FakeApiServer, want: &str) -> (Instant, Value) {
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        health_of(server).filter(|(h, _)| h == want).map(|(_, e)| (Instant::now(), e))
    })
    .unwrap_or_else(|| panic!("health never became {want}: {:?}", health_of(server)))
}

#[test]
fn a_failing_health_url_degrades_at_once_and_recovery_clears_it() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = FakeOperator::start();
    let _agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-url", operator.url())
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");

    // Each change is written at the check that saw it, not at the next
    // heartbeat (60 s): when the status changed, the operator had given
    // the new answer once or twice (one check of 1 s may pass while the
    // write is on its way on a busy machine), never many times.
    let checks = operator.answers();
    operator.set_code(500);
    let (_, error) = wait_health(&server, "degraded");
    let failed = operator.answers() - checks;
    assert!((1..=3).contains(&failed), "degraded published after {failed} failing checks");
    assert_eq!(error, format!("Operator health check {} failed: HTTP 500", operator.url()));

    let checks = operator.answers();
    operator.set_code(200);
    let (_, error) = wait_health(&server, "healthy");
    let passed = operator.answers() - checks;
    assert!((1..=3).contains(&passed), "recovery published after {passed} passing checks");
    assert_eq!(error, Value::Null);
    // At the check interval asked for (1 s), not the default (5 s): four
    // more checks within 10 s.
    let checks = operator.answers();
    let more = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        (operator.answers() >= checks + 4).then_some(())
    });
    assert!(more.is_some(), "{} checks in 10 s at a 1 s check interval", operator.answers() - checks);
}

#[test]
fn a_critical_watch_makes_the_status_unhealthy() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    // The operator answers first (until then a starting instance publishes
    // nothing), then fails: an error status, not a stopped listener, whose
    // thread may still take a connection and reset it.
    let operator = FakeOperator::start();
    let url = operator.url();
    let _agent = Run::default_interval()
        .checks("1s")
        .flag("--watch-url", &url)
        .switch("--watch-critical")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    operator.set_code(503);
    let (_, error) = wait_health(&server, "unhealthy");
    assert_eq!(error, format!("Operator health check {url} failed: HTTP 503"));
}

#[test]
fn a_stale_heartbeat_file_degrades_and_a_touch_recovers() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("heartbeat");
    let file = dir.path().join("alive");
    std::fs::write(&file, "").unwrap();
    let _agent = Run::default_interval()
        .checks("1s")
        .flag("--watch-file", file.to_str().unwrap())
        .flag("--watch-max-age", "2s")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    let (_, error) = wait_health(&server, "degraded");
    let error = error.as_str().unwrap().to_string();
    assert!(error.starts_with(&format!("Operator heartbeat file {} was last touched", file.display())), "{error}");
    std::fs::write(&file, "").unwrap();
    wait_health(&server, "healthy");
}

/// A heartbeat file that stays stale is one change of status, not one per
/// check: the reason names when the file was last touched, not its growing
/// age, so the checks after the first publish nothing new and log nothing.
/// 20 s of 1 s checks at the 60 s heartbeat: at most one write (and one
/// warning) after the one that said "degraded".
#[test]
fn a_heartbeat_file_that_stays_stale_is_written_once_not_on_every_check() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("stale-heartbeat");
    let file = dir.path().join("alive");
    std::fs::write(&file, "").unwrap();
    let agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-file", file.to_str().unwrap())
        .flag("--watch-max-age", "2s")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    let (stale_at, error) = wait_health(&server, "degraded");
    let writes = || server.requests().iter().filter(|r| r.method == "PATCH" && r.at > stale_at).count();
    let warnings = || agent.stderr().lines().filter(|l| l.contains("WARN") && l.contains("heartbeat file")).count();
    std::thread::sleep(Duration::from_secs(20));
    let (after, warned) = (writes(), warnings());
    println!("over 20 s of a stale heartbeat file: {after} status writes, {warned} warnings");
    assert!(after <= 1, "{after} writes while only the file's age changed:\n{}", agent.stderr());
    assert!(warned <= 2, "{warned} warnings while only the file's age changed:\n{}", agent.stderr());
    assert_eq!(health_of(&server), Some(("degraded".to_string(), error)), "still the same");
}
