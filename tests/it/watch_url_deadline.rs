//! The operator health check's 1 s bound and its lateness rule, through the
//! binary: a silent endpoint is given up on every check and fails the
//! watch; a late answer after a failure keeps the failure; an operator late
//! on every other check is shown; a URL after a failing one is judged on
//! every check. Which check fails is the pure rule's (`Lateness`, unit
//! tests in `src/signals/watch.rs`, as is the bound itself: never early);
//! here, on a busy machine, only order and counts are asserted: a check has
//! ended once the endpoint has read the request of the check after it.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::operator_endpoint::{Habits, OperatorEndpoint};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-watch-url-deadline";

/// opstatus checking `endpoints` every second, until `done`: its log.
fn watch(endpoints: &[&OperatorEndpoint], done: impl Fn() -> bool) -> String {
    watch_with(Run::every("10s"), endpoints, done)
}

/// The same with no start-up allowance: what the checks conclude is
/// published from the first one, the operator answered or not (the
/// allowance has tests of its own).
fn watch_from_the_first_check(endpoints: &[&OperatorEndpoint], done: impl Fn() -> bool) -> String {
    watch_with(Run::every("10s").flag("--startup-allowance", "0s"), endpoints, done)
}

fn watch_with(run: Run, endpoints: &[&OperatorEndpoint], done: impl Fn() -> bool) -> String {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let mut run = run.checks("1s").switch("--events=false");
    for endpoint in endpoints {
        run = run.flag("--watch-url", endpoint.url());
    }
    let agent = run.start(&opstatus_bin(), &pod_env(api.port(), &sa));
    wait_until(&agent, done);
    agent.stderr()
}

/// Bounded well beyond the checks the tests wait for (about 2 s each at
/// worst when late, on an idle machine).
fn wait_until(agent: &RunningAgent, done: impl Fn() -> bool) {
    wait_for(Duration::from_secs(60), Duration::from_millis(50), || done().then_some(()))
        .unwrap_or_else(|| panic!("not done in 60 s:\n{}", agent.stderr()));
}

/// Each failed health check logged (once per change): at INFO until the
/// operator first answered, at WARN after.
fn checks_failed(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("Operator health check") && l.contains(" failed: ")).collect()
}

/// The health of each status published, in order.
fn published(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("Status updated:"))
        .filter_map(|l| l.split("health=").nth(1)?.split(',').next())
        .collect()
}

#[test]
fn a_check_that_gets_no_answer_is_given_up_and_fails_the_watch() {
    let endpoint = OperatorEndpoint::start(Habits { answer_after: None, ..Habits::default() });
    let given_up = || endpoint.seen().iter().filter(|s| s.given_up_after.is_some()).count();
    let log = watch_from_the_first_check(&[&endpoint], || given_up() >= 3);
    // Each request is closed by the check, not by the endpoint's own 10 s
    // wait: the check gave up on it.
    let seen = endpoint.seen();
    assert!(seen.iter().all(|s| s.given_up_after.is_some()), "{seen:?}\n{log}");
    let problems = checks_failed(&log);
    assert_eq!(problems.len(), 1, "{problems:?}\n{log}");
    assert!(problems[0].ends_with(&format!("Operator health check {} failed: no answer within 1s", endpoint.url())));
}

#[test]
fn a_failure_then_late_answers_is_not_published_as_healthy() {
    // Answered, then HTTP 500, then silent: the hang after a failure.
    let endpoint =
        OperatorEndpoint::start(Habits { failing: &[1], unanswered: &[2, 3, 4, 5, 6, 7, 8], ..Habits::default() });
    let log = watch(&[&endpoint], || endpoint.seen().len() >= 6);
    let health = published(&log);
    assert_eq!(health.first(), Some(&"healthy"), "{log}");
    let degraded = health.iter().position(|h| *h == "degraded").unwrap_or_else(|| panic!("never degraded:\n{log}"));
    assert!(
        health[degraded..].iter().all(|h| *h == "degraded"),
        "healthy published during the hang: {health:?}\n{log}"
    );
    assert!(!log.contains("The operator's health checks pass again"), "{log}");
    let problems = support::problems_logged(&log);
    assert!(problems.iter().any(|p| p.ends_with("failed: HTTP 500")), "{problems:?}");
    assert!(problems.last().unwrap().ends_with("failed: no answer within 1s"), "{problems:?}");
}

#[test]
fn an_operator_late_on_every_other_check_is_shown() {
    let endpoint = OperatorEndpoint::start(Habits { unanswered: &[1, 3, 5, 7, 9, 11, 13], ..Habits::default() });
    // The sixth check fails it (three late in six); the ninth has begun.
    let log = watch(&[&endpoint], || endpoint.seen().len() >= 9);
    let health = published(&log);
    assert_eq!(health.first(), Some(&"healthy"), "{log}");
    let degraded = health.iter().position(|h| *h == "degraded").unwrap_or_else(|| panic!("never degraded:\n{log}"));
    assert!(health[degraded..].iter().all(|h| *h == "degraded"), "{health:?}\n{log}");
    let problems = support::problems_logged(&log);
    let often = "failed: no answer within 1s on 3 or more of the last 6 checks";
    assert_eq!(problems.len(), 1, "one episode, one reason: {problems:?}\n{log}");
    assert!(problems[0].ends_with(often), "{problems:?}");
}

#[test]
fn a_url_after_a_failing_one_is_judged_on_every_check() {
    // The first URL fails on checks 1 to 5. The second is late on checks
    // 0 and 1 and again on check 6: not twice in a row there, and two late
    // in its last six checks, so no failure of its own once the first
    // answers again.
    let first = OperatorEndpoint::start(Habits { failing: &[1, 2, 3, 4, 5], ..Habits::default() });
    let second = OperatorEndpoint::start(Habits { unanswered: &[0, 1, 6], ..Habits::default() });
    // Healthy again once three checks in a row passed (6, 7 and 8): the
    // tenth check begun, the eighth was judged and published.
    let log = watch_from_the_first_check(&[&first, &second], || first.seen().len() >= 10);
    let problems = checks_failed(&log);
    assert!(
        !problems.iter().any(|p| p.contains(&second.url())),
        "judged against checks long past: {problems:?}\n{log}"
    );
    assert_eq!(problems.len(), 1, "{problems:?}\n{log}");
    assert!(problems[0].ends_with(&format!("Operator health check {} failed: HTTP 500", first.url())));
    let health = published(&log);
    assert!(health.contains(&"degraded") && health.last() == Some(&"healthy"), "{health:?}\n{log}");
}

#[test]
fn a_starting_operator_that_answers_late_has_not_answered_yet() {
    // An instance takes the free lock once its operator answered; a late
    // first check is no answer. Checks 0 and 1 go unanswered (the second a
    // failure), check 2 is answered.
    let endpoint = OperatorEndpoint::start(Habits { unanswered: &[0, 1], ..Habits::default() });
    let api = FakeApiServer::start(TOKEN);
    // The lock a stopped holder released (a status nobody wrote is taken
    // at once: there is nobody to leave it to).
    let released = serde_json::json!({"holderIdentity": "", "leaseDurationSeconds": 30,
        "acquireTime": "2026-01-01T00:00:00Z", "renewTime": "2026-01-01T00:00:00Z", "leaderTransitions": 1});
    let annotations = serde_json::json!({"opstatus.kube9.dev/publisher": released.to_string()});
    let cm =
        serde_json::json!({"kind": "ConfigMap", "metadata": {"annotations": annotations}, "data": {"status": "{}"}});
    api.put_object("ops", "kube9-operator-status", cm);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let run = Run::every("10s").checks("1s").flag("--watch-url", endpoint.url()).switch("--events=false");
    let agent = run.start(&opstatus_bin(), &pod_env(api.port(), &sa));
    wait_until(&agent, || agent.stderr().contains("Status updated:"));
    let log = agent.stderr();
    let published: Vec<&str> = log.lines().filter(|l| l.contains("Status updated:")).collect();
    assert!(published.iter().all(|l| l.contains("health=healthy")), "published before its operator answered:\n{log}");
    assert!(endpoint.seen().len() >= 3, "published before the third check:\n{log}");
    assert!(log.contains("failed: no answer within 1s"), "{log}");
}
