//! A kept connection that breaks while idle costs no heartbeat: the write
//! that finds it closed is sent again at once on a new connection.
//!
//! ureq itself notices a connection the server closed cleanly while idle
//! (its pool probes for the FIN first); what it cannot see is a close that
//! crosses the request, or a load balancer / conntrack that forgot the idle
//! flow and resets it when the request arrives. The fake API server does
//! that here: it reads the next request on the kept connection and closes
//! the connection without an answer.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
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
    // At once, not after a backoff step (at least 1 s).
    let gap = again.at - closed.at;
    assert!(gap < Duration::from_millis(900), "sent again {gap:?} later");
    // One request per heartbeat besides: nothing else was retried.
    let after: Vec<_> = requests[before + 2..].iter().map(|r| r.method.as_str()).collect();
    assert!(after.iter().all(|m| *m == "PATCH"), "{after:?}");
}
