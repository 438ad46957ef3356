//! The operator health check's 1 s bound is kept exactly: an answer at
//! 0.9 s passes, and an endpoint that never answers fails the check no
//! earlier than 1 s after the request, and not much later. (Socket
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
    // a little after the client's (more on a loaded machine): each check
    // may look a little short, not all of them.
    for after in &given_up {
        assert!(*after >= Duration::from_millis(900), "gave up early: {given_up:?}\n{log}");
        assert!(*after <= Duration::from_millis(1500), "gave up late: {given_up:?}\n{log}");
    }
    let longest = given_up.iter().max().unwrap();
    assert!(*longest >= Duration::from_millis(980), "gave up early: {given_up:?}\n{log}");
    assert!(log.contains("no answer within 1s"), "{log}");
}
