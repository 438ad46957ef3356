//! The operator health check's 1 s bound is kept exactly: an answer at
//! 0.9 s passes, and an endpoint that never answers fails the check no
//! earlier than 1 s after the request, and not much later; the check fails
//! when that happens on two checks in a row, not once. (Socket
//! timeouts are set rounded down to a step so they rarely change; a read
//! that times out early is waited again for the time left.)

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::operator_endpoint::{Habits, OperatorEndpoint};
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-watch-url-deadline";

/// opstatus checking `endpoint` every 2 s until it saw `requests`: its log.
fn watch(endpoint: &OperatorEndpoint, requests: usize, done: impl Fn() -> bool) -> String {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let run = Run::every("10s").checks("2s").flag("--watch-url", endpoint.url()).switch("--events=false");
    let agent = run.start(&opstatus_bin(), &pod_env(api.port(), &sa));
    wait_for(Duration::from_secs(40), Duration::from_millis(50), || done().then_some(()))
        .unwrap_or_else(|| panic!("{requests} checks:\n{}", agent.stderr()));
    agent.stderr()
}

#[test]
fn a_one_second_check_answered_at_0_9_s_passes() {
    let endpoint =
        OperatorEndpoint::start(Habits { answer_after: Some(Duration::from_millis(900)), ..Habits::default() });
    let log = watch(&endpoint, 4, || endpoint.seen().len() >= 4);
    let failed: Vec<&str> = support::problems_logged(&log).into_iter().filter(|l| l.contains("health check")).collect();
    assert!(failed.is_empty(), "answers at 0.9 s failed the 1 s check: {failed:?}\n{log}");
}

#[test]
fn a_check_that_gets_no_answer_fails_at_one_second() {
    let endpoint = OperatorEndpoint::start(Habits { answer_after: None, ..Habits::default() });
    let given_up = || endpoint.seen().iter().filter_map(|s| s.given_up_after).collect::<Vec<_>>();
    let log = watch(&endpoint, 3, || given_up().len() >= 3);
    let given_up = given_up();
    println!("the check gave up {given_up:?} after its request");
    // The endpoint's clock starts when its thread has read the request,
    // after the client's (by half a second on a machine at load 20 and
    // more): each check may look short, not all of them.
    for after in &given_up {
        assert!(*after >= Duration::from_millis(400), "gave up early: {given_up:?}\n{log}");
        assert!(*after <= Duration::from_millis(1500), "gave up late: {given_up:?}\n{log}");
    }
    let longest = given_up.iter().max().unwrap();
    assert!(*longest >= Duration::from_millis(980), "gave up early: {given_up:?}\n{log}");
    assert!(log.contains("no answer within 1s"), "{log}");
}

#[test]
fn one_late_answer_fails_no_check_and_two_in_a_row_do() {
    // Checks 0, 2, 5 and 6 answered; check 1 alone, then 3 and 4, not.
    let endpoint = OperatorEndpoint::start(Habits { unanswered: &[1, 3, 4], ..Habits::default() });
    let log = watch(&endpoint, 7, || endpoint.seen().len() >= 7);
    let problems = support::problems_logged(&log);
    assert_eq!(problems.len(), 1, "one failure, at the second late answer in a row: {problems:?}\n{log}");
    assert!(problems[0].contains("failed: no answer within 1s"), "{log}");
    assert!(log.contains("The operator's health checks pass again"), "{log}");
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
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || {
        agent.stderr().contains("Status updated:").then_some(())
    })
    .unwrap_or_else(|| panic!("nothing published:\n{}", agent.stderr()));
    let log = agent.stderr();
    let published: Vec<&str> = log.lines().filter(|l| l.contains("Status updated:")).collect();
    assert!(published.iter().all(|l| l.contains("health=healthy")), "published before its operator answered:\n{log}");
    assert!(endpoint.seen().len() >= 3, "published before the third check:\n{log}");
    assert!(log.contains("failed: no answer within 1s"), "{log}");
}
