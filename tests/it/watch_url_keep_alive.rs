//! `--watch-url` against an endpoint that closes idle connections within
//! seconds (gunicorn's keep-alive is 2 s): no check fails, and with
//! `--watch-critical` `/readyz` never answers 503. A connection the
//! endpoint closed while it idled is seen when it is taken and not used; a
//! close that crosses the check (the request read, no answer) costs one
//! more attempt on a new connection, not a failed check.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::http::{endpoint_from_log, get};
use support::operator_endpoint::{Habits, OperatorEndpoint};
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-watch-url-keep-alive";

/// Runs opstatus checking `endpoint` every `checks` (critical) for about
/// 12 s, sampling `/readyz` every 200 ms: its log and the 503s seen.
fn watch(endpoint: &OperatorEndpoint, checks: &str) -> (String, usize, usize) {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let run = Run::every("10s").checks(checks).listen().flag("--watch-url", endpoint.url());
    let agent =
        run.switch("--watch-critical").switch("--events=false").start(&opstatus_bin(), &pod_env(api.port(), &sa));
    let addr = wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint:\n{}", agent.stderr()));
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (get(addr, "/readyz").0 == 200).then_some(()))
        .unwrap_or_else(|| panic!("never ready:\n{}", agent.stderr()));
    let (started, mut samples, mut unready) = (Instant::now(), 0, 0);
    while started.elapsed() < Duration::from_secs(12) {
        samples += 1;
        unready += usize::from(get(addr, "/readyz").0 == 503);
        std::thread::sleep(Duration::from_millis(200));
    }
    (agent.stderr(), samples, unready)
}

fn assert_no_failed_check(endpoint: &OperatorEndpoint, checks: &str) {
    let (log, samples, unready) = watch(endpoint, checks);
    let seen = endpoint.seen();
    let connections = seen.iter().map(|s| s.connection).max().map_or(0, |n| n + 1);
    println!("checks every {checks}: {} requests on {connections} connections, {unready}/{samples} 503s", seen.len());
    let failed: Vec<&str> = support::problems_logged(&log).into_iter().filter(|l| l.contains("health check")).collect();
    assert!(failed.is_empty(), "checks every {checks}: failed checks {failed:?}\n{log}");
    assert_eq!(unready, 0, "checks every {checks}: /readyz 503 in {unready} of {samples} samples\n{log}");
    assert!(seen.len() >= 4, "checks every {checks}: only {} checks", seen.len());
}

#[test]
fn an_endpoint_that_closes_connections_idle_for_2s_fails_no_check() {
    for checks in ["1s", "3s"] {
        let endpoint = OperatorEndpoint::start(Habits { keep_alive: Duration::from_secs(2), ..Habits::default() });
        assert_no_failed_check(&endpoint, checks);
    }
}

#[test]
fn a_close_that_crosses_the_check_is_tried_once_more_on_a_new_connection() {
    // Every request on a kept connection is read and left unanswered,
    // the connection closed.
    let endpoint = OperatorEndpoint::start(Habits { close_under_reuse: true, ..Habits::default() });
    assert_no_failed_check(&endpoint, "1s");
    let seen = endpoint.seen();
    assert!(seen.iter().any(|s| s.nth_on_connection > 0), "a kept connection was used: {seen:?}");
}
