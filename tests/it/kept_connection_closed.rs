//! A kept connection that breaks costs no heartbeat.
//!
//! A close the server made while the connection idled is seen when the
//! connection is taken again (ureq's probe), and a new one is opened; a
//! close that crosses the request fails it before a byte of the answer,
//! and the request is sent again at once on a new connection when it may
//! be sent twice (ureq does not retry: without that, the first test fails). The fake API server closes the connection under the
//! next request here, and closes idle connections below; a request that
//! may not be sent twice (an Event's POST) never takes a connection that
//! idled 5 s or more.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::http::FakeOperator;
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-kept-connection-tests";

#[test]
fn a_kept_connection_closed_under_the_next_heartbeat_is_replaced_without_a_failed_write() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let agent = Run::every("3s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let heartbeats = || agent.stderr().matches("Status updated:").count();
    assert!(
        wait_for(Duration::from_secs(20), Duration::from_millis(50), || (heartbeats() >= 2).then_some(())).is_some()
    );
    let before = server.requests().len();
    // The next request, a heartbeat over the kept connection, is read and
    // its connection closed without an answer.
    server.push_faults([Fault::Close]);
    let target = heartbeats() + 2;
    let done = wait_for(Duration::from_secs(20), Duration::from_millis(50), || (heartbeats() >= target).then_some(()));
    assert!(done.is_some(), "{}", agent.stderr());

    let log = agent.stderr();
    assert!(support::problems_logged(&log).is_empty(), "no failed write: {log}");
    let requests = server.requests();
    let (closed, again) = (&requests[before], &requests[before + 1]);
    assert_eq!((closed.method.as_str(), again.method.as_str()), ("PATCH", "PATCH"), "{requests:?}");
    assert_eq!((&closed.path, &closed.body), (&again.path, &again.body), "the same write, sent again");
    // At once: not after a failed write and its backoff (a failed write
    // logs a warning: none above), and before the next heartbeat (3 s).
    let gap = again.at - closed.at;
    assert!(gap < Duration::from_secs(3), "sent again {gap:?} later");
    // One request per heartbeat besides: nothing else was retried.
    let after: Vec<_> = requests[before + 2..].iter().map(|r| r.method.as_str()).collect();
    assert!(after.iter().all(|m| *m == "PATCH"), "{after:?}");
}

/// A server that closes connections idle for 2 s, under heartbeats 3 s
/// apart: every heartbeat finds its kept connection closed and is sent
/// again on a new one, and no write fails. An Event after its connection
/// idled 5 s or more (a POST, never sent twice) goes out on a new
/// connection and reaches the server.
#[test]
fn a_server_that_closes_idle_connections_costs_no_heartbeat_and_no_event() {
    let server = FakeApiServer::start(TOKEN);
    server.close_idle_after(Duration::from_secs(2));
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = FakeOperator::start();
    let agent = Run::every("3s")
        .checks("1s")
        .flag("--watch-url", operator.url())
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let writes = || server.requests().iter().filter(|r| r.query.ends_with("&force=true")).count();
    let events = || server.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/events")).count();
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        wait_for(Duration::from_secs(20), Duration::from_millis(50), || done().then_some(()))
            .unwrap_or_else(|| panic!("{what}:\n{}", agent.stderr()))
    };
    wait("a first write", &|| writes() >= 1);
    operator.set_code(500);
    wait("the first Event", &|| events() >= 1);
    // The Events connection idles past 5 s (the server closed it at 2 s).
    std::thread::sleep(Duration::from_secs(6));
    operator.set_code(200);
    wait("the second Event, over a new connection", &|| events() >= 2);
    let before = writes();
    wait("three more heartbeats", &|| writes() >= before + 3);
    let log = agent.stderr();
    let failed: Vec<&str> = support::problems_logged(&log)
        .into_iter()
        // The operator's flips, and the fake's 404 for Events (it keeps
        // none): expected; anything else is a failure.
        .filter(|l| !(l.contains("Operator health check") || l.contains("Kubernetes Events") && l.contains("404")))
        .collect();
    assert!(failed.is_empty(), "no write or Event failed on a closed connection: {failed:?}\n{log}");
    assert!(server.connections() >= 4, "the closed connections were replaced: {}", server.connections());
}
