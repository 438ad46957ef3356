//! A write slower than the response timeout is sent once: the heartbeat
//! fails after 5 s and is retried with backoff, never resent at once while
//! the first may still be under way on an overloaded API server (fake API
//! server: a real one cannot be made to stall one request on demand).

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-slow-writes";

#[test]
fn a_patch_answered_after_6_s_is_sent_once() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let agent = Run::every("2s").switch("--events=false").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let patches = || server.requests().into_iter().filter(|r| r.method == "PATCH").collect::<Vec<_>>();
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || (patches().len() >= 2).then_some(()))
        .unwrap_or_else(|| panic!("two heartbeats:\n{}", agent.stderr()));
    // The next heartbeat, on the kept connection, gets no answer for 6 s.
    server.push_faults([Fault::Hang(Duration::from_secs(6))]);
    let before = patches().len();
    let slow = wait_for(Duration::from_secs(10), Duration::from_millis(20), || patches().get(before).cloned())
        .unwrap_or_else(|| panic!("the slow heartbeat:\n{}", agent.stderr()));
    // The heartbeat times out at 5 s; the next attempt waits a backoff
    // step (at least 1 s).
    std::thread::sleep(Duration::from_millis(5_500).saturating_sub(slow.at.elapsed()));
    let during: Vec<_> =
        patches().into_iter().skip(before + 1).filter(|r| r.at - slow.at < Duration::from_millis(5_500)).collect();
    let log = agent.stderr();
    assert!(
        during.is_empty(),
        "sent again {:?} after the first:\n{log}",
        during.iter().map(|r| r.at - slow.at).collect::<Vec<_>>()
    );
    assert!(log.contains("timed out"), "{log}");
}
