//! Failed writes: exponential backoff with jitter, Retry-After, timeouts,
//! never an exit, a write again within one backoff step of recovery, and
//! memory bounded through each fault.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, Instant};
use support::fake_apiserver::{FakeApiServer, Fault};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-write-failure-tests";

fn agent(server: &FakeApiServer, sa: &ServiceAccountDir, interval: &str) -> RunningAgent {
    Run::every(interval).start(&opstatus_bin(), &pod_env(server.port(), sa))
}

#[test]
fn server_errors_back_off_exponentially_and_recover_within_one_step() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.set_sticky_fault(Fault::Status { code: 500, retry_after: None });
    let mut agent = agent(&server, &sa, "8s");
    let outage = Duration::from_secs(12);
    std::thread::sleep(outage);
    let during = server.requests();
    server.clear_sticky_fault();

    // Backoff with base 1 s and cap 8 s: each retry waits in [1 s, 2ⁿ s].
    // Over 12 s that is at most 1 + 12 attempts, and in practice ~5.
    assert!(during.len() >= 3, "it keeps retrying: {} attempts", during.len());
    assert!(during.len() <= 13, "no more than one attempt per second: {} attempts", during.len());
    // The delays the agent chose, as it logged them (no clock involved):
    // each in [1 s, 2ⁿ s], capped at 8 s. And none of the retries came
    // before its delay (a busy machine only makes them later).
    let chosen = retry_delays(&agent.stderr());
    assert!(chosen.len() + 1 >= during.len(), "a delay logged per failed attempt: {chosen:?}");
    for (n, (pair, delay)) in during.windows(2).zip(&chosen).enumerate() {
        let ceiling = Duration::from_secs(1 << n.min(3));
        assert!(
            *delay >= Duration::from_secs(1) && *delay <= ceiling,
            "retry {n} in {delay:?}: outside [1 s, {ceiling:?}]"
        );
        let gap = pair[1].at - pair[0].at;
        // The log rounds to a tenth of a second.
        assert!(gap + Duration::from_millis(50) >= *delay, "retry {n} after {gap:?}: before its delay {delay:?}");
    }
    // Within one step of the cap (8 s) once the server works, with room
    // for a busy machine; an uncapped backoff would be at 16 s by now.
    let recovered = wait_for(Duration::from_secs(12), Duration::from_millis(50), || {
        server.status_document("ops", "kube9-operator-status").map(|_| Instant::now())
    });
    assert!(recovered.is_some(), "no write within 12 s after the fault cleared");
    assert!(agent.exited().is_none(), "opstatus must not exit on API errors");
    let log = agent.stderr();
    assert!(
        log.contains("WARN  Failed to write status ConfigMap ops/kube9-operator-status: 500 InternalError: injected fault; health=unhealthy; retrying in"),
        "{log}"
    );
    // Logged once the answer is in, just after the object is stored.
    let again = wait_for(Duration::from_secs(5), Duration::from_millis(50), || {
        agent.stderr().contains("is writable again after").then_some(())
    });
    assert!(again.is_some(), "{}", agent.stderr());
    agent.assert_memory_bounded();
}

#[test]
fn retry_after_in_seconds_is_honoured() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::Status { code: 429, retry_after: Some("3".into()) }]);
    let agent = agent(&server, &sa, "30s");
    let requests = server.wait_requests(2, Duration::from_secs(10)).expect("a retry after the 429");
    let gap = requests[1].at - requests[0].at;
    // Never before the 3 s asked for (the first backoff step is 1 s); a
    // busy machine only makes it later.
    assert!(gap >= Duration::from_millis(2950), "retried after {gap:?}, asked for 3 s");
    agent.assert_memory_bounded();
}

#[test]
fn a_hung_server_times_out_and_the_next_attempt_succeeds() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::Hang(Duration::from_secs(30))]);
    let agent = agent(&server, &sa, "30s");
    let written = server.wait_status_configmap(Duration::from_secs(15));
    assert!(written.is_some(), "the retry after the timeout wrote the status");
    let requests = server.requests();
    let gap = requests[1].at - requests[0].at;
    // The response timeout is 5 s, then a backoff of 1 s (the first step):
    // not before; and long before the server's 30 s hang ends.
    assert!(gap >= Duration::from_secs(5) && gap < Duration::from_secs(15), "retried after {gap:?}");
    assert!(agent.logged("timed out"), "{}", agent.stderr());
    agent.assert_memory_bounded();
}

#[test]
fn a_closed_connection_is_a_failure_not_a_crash() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::Close, Fault::Raw { code: 503, body: b"<html>upstream down</html>".to_vec() }]);
    let mut agent = agent(&server, &sa, "30s");
    let written = server.wait_status_configmap(Duration::from_secs(15));
    assert!(written.is_some(), "third attempt wrote the status");
    assert!(agent.exited().is_none());
    let log = agent.stderr();
    assert!(
        log.contains("503 ServiceUnavailable: unexpected non-Status body: \"<html>upstream down</html>\""),
        "{log}"
    );
    agent.assert_memory_bounded();
}

#[test]
fn a_conflict_is_retried_like_any_failed_write() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::Status { code: 409, retry_after: None }]);
    let agent = agent(&server, &sa, "30s");
    let written = server.wait_status_configmap(Duration::from_secs(10));
    assert!(written.is_some(), "the retry after the 409 wrote the status");
    assert!(agent.logged("409 Conflict: injected fault"), "{}", agent.stderr());
    agent.assert_memory_bounded();
}

#[test]
fn a_server_answering_one_byte_a_second_times_out_and_is_retried() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::Trickle(Duration::from_secs(1))]);
    let agent = agent(&server, &sa, "30s");
    // The object is stored before the trickled answer: wait for the second request.
    let requests = server.wait_requests(2, Duration::from_secs(20)).expect("a retry after the slow answer");
    let gap = requests[1].at - requests[0].at;
    // Headers never complete within the 5 s response timeout; then the 1 s
    // backoff: not before, and bounded by the timeout, not by the trickle
    // (a read timeout that each byte renewed would never fire).
    assert!(gap >= Duration::from_secs(5) && gap < Duration::from_secs(15), "retried after {gap:?}");
    assert!(agent.logged("timed out"), "{}", agent.stderr());
    agent.assert_memory_bounded();
}

#[test]
fn a_connection_reset_mid_body_is_a_failure_then_recovers() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::CutBody]);
    let mut agent = agent(&server, &sa, "30s");
    let requests = server.wait_requests(2, Duration::from_secs(10)).expect("a retry after the reset");
    assert!(requests[1].at - requests[0].at >= Duration::from_millis(950), "backed off before retrying");
    assert!(agent.exited().is_none());
    assert!(agent.logged("WARN  Failed to write status ConfigMap"), "{}", agent.stderr());
    agent.assert_memory_bounded();
}

/// The retry delays a log announced ("retrying in 1.7s"), in order.
fn retry_delays(log: &str) -> Vec<Duration> {
    log.lines()
        .filter_map(|l| l.split("retrying in ").nth(1)?.split('s').next()?.parse::<f64>().ok())
        .map(Duration::from_secs_f64)
        .collect()
}
