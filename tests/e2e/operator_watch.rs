//! End to end, real kube-apiserver: stop the operator's watched health URL
//! → `degraded` in the ConfigMap at the check that sees it; restore it →
//! `healthy`. And the final status at SIGTERM. Late answers: a failure
//! then a hang stays `degraded`, an operator late on every other check is
//! shown (the rule: `Lateness` in `src/signals/watch.rs`).

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::control_plane::{release_bin, shared};
use support::http::FakeOperator;
use support::operator_endpoint::{Habits, OperatorEndpoint};
use support::{opstatus_bin, wait_for};

#[test]
fn e2e_watched_url_failure_and_recovery_reach_the_configmap() {
    let cp = shared();
    let pod = cp.deploy("watch");
    let operator = FakeOperator::start();
    let mut agent =
        Run::every("60s").checks("2s").flag("--watch-url", operator.url()).start(&release_bin(), &cp.pod_env(&pod));
    let health = || {
        cp.status_document(&pod.namespace, "kube9-operator-status").map(|d| (d["health"].clone(), d["error"].clone()))
    };
    let wait_health = |want: &str| {
        wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
            health().filter(|(h, _)| h == want).map(|(_, e)| e)
        })
        .unwrap_or_else(|| panic!("never {want}: {:?}", health()))
    };
    wait_health("healthy");

    // Each change is written at the check that saw it, not at the next
    // heartbeat (60 s): when the ConfigMap changed, the operator had given
    // the new answer once or twice (a check may pass while the write is on
    // its way on a busy machine), never many times.
    let checks = operator.answers();
    operator.set_code(503);
    let error = wait_health("degraded");
    let failed = operator.answers() - checks;
    assert!((1..=3).contains(&failed), "degraded published after {failed} failing checks");
    assert_eq!(error, format!("Operator health check {} failed: HTTP 503", operator.url()));

    let checks = operator.answers();
    operator.set_code(200);
    let error = wait_health("healthy");
    let passed = operator.answers() - checks;
    assert!((1..=3).contains(&passed), "healthy published after {passed} passing checks");
    assert!(error.is_null());

    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()), Some(0));
    let (h, e) = health().unwrap();
    assert_eq!((h.as_str(), e.as_str()), (Some("unhealthy"), Some("Shutting down")));
    println!("e2e watch: degraded after {failed} failing checks, healthy after {passed} passing ones");
}

/// opstatus checking `endpoint` every second until it has read `requests`
/// of them (so the checks before the last have ended): the health of each
/// status it published, in order, and the ConfigMap's health then.
fn published_while(endpoint: &OperatorEndpoint, requests: usize) -> (Vec<String>, String) {
    let cp = shared();
    let pod = cp.deploy("watch-late");
    let agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-url", endpoint.url())
        .switch("--events=false")
        .start(&opstatus_bin(), &cp.pod_env(&pod));
    wait_for(Duration::from_secs(60), Duration::from_millis(50), || (endpoint.seen().len() >= requests).then_some(()))
        .unwrap_or_else(|| panic!("{requests} checks not seen in 60 s:\n{}", agent.stderr()));
    let log = agent.stderr();
    let published = support::published_health(&log).into_iter().map(String::from).collect();
    let doc =
        cp.status_document(&pod.namespace, "kube9-operator-status").unwrap_or_else(|| panic!("no status:\n{log}"));
    (published, doc["health"].as_str().unwrap_or_default().to_string())
}

#[test]
fn e2e_a_failure_then_a_hang_stays_degraded() {
    // Answered, HTTP 500, then silent.
    let endpoint =
        OperatorEndpoint::start(Habits { failing: &[1], unanswered: &[2, 3, 4, 5, 6, 7], ..Habits::default() });
    let (published, now) = published_while(&endpoint, 6);
    assert_eq!(published.first().map(String::as_str), Some("healthy"), "{published:?}");
    let degraded = published.iter().position(|h| h == "degraded").unwrap_or_else(|| panic!("{published:?}"));
    assert!(published[degraded..].iter().all(|h| h == "degraded"), "healthy during the hang: {published:?}");
    assert_eq!(now, "degraded");
}

#[test]
fn e2e_an_operator_late_on_every_other_check_is_degraded() {
    let endpoint = OperatorEndpoint::start(Habits { unanswered: &[1, 3, 5, 7, 9, 11], ..Habits::default() });
    // Three late in six checks by the sixth; the ninth has begun.
    let (published, now) = published_while(&endpoint, 9);
    assert_eq!(published, ["healthy", "degraded"], "shown from the third late answer on, one status");
    assert_eq!(now, "degraded");
}
