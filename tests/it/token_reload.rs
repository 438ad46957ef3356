//! Token rotation: a 401 makes opstatus re-read the token file at once and
//! retry, so a rotated token costs no heartbeat.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const OLD: &str = "old-token-0123456789abcdef";
const NEW: &str = "new-token-fedcba9876543210";

#[test]
fn a_rotated_token_is_used_right_after_the_first_401() {
    let server = FakeApiServer::start(OLD);
    let sa = ServiceAccountDir::new(OLD, &server.pki.ca_pem, "ops");
    let agent = Run::every("2s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    server.wait_status_configmap(Duration::from_secs(10)).expect("first write");

    // Rotate: the server now accepts only the new token, kubelet wrote it.
    sa.write_token(NEW);
    server.set_token(NEW);
    let bearer_new = format!("Bearer {NEW}");
    let requests = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        let r = server.requests();
        (r.iter().filter(|q| q.authorization.as_deref() == Some(bearer_new.as_str())).count() >= 2).then_some(r)
    })
    .expect("two requests with the new token");

    let first_new = requests.iter().position(|q| q.authorization.as_deref() == Some(bearer_new.as_str())).unwrap();
    let rejected = &requests[first_new - 1];
    assert_eq!(rejected.authorization.as_deref(), Some(format!("Bearer {OLD}").as_str()));
    let retry_gap = requests[first_new].at - rejected.at;
    // At once: a retry through the backoff waits 1 s at least (its floor).
    assert!(retry_gap < Duration::from_secs(1), "retried {retry_gap:?} after the 401: must be at once");
    // No heartbeat lost: the attempts keep the 2 s cadence (the median gap
    // under 3 s; a lost heartbeat makes a gap of 4 s, a busy machine
    // delays some wake-ups, not most).
    let kept: Vec<_> = requests
        .iter()
        .enumerate()
        .filter(|(i, q)| *i != first_new - 1 && q.query.ends_with("&force=true"))
        .map(|(_, q)| q.at)
        .collect();
    let mut gaps: Vec<Duration> = kept.windows(2).map(|p| p[1] - p[0]).collect();
    assert!(!gaps.is_empty(), "{requests:?}");
    gaps.sort();
    assert!(gaps[gaps.len() / 2] < Duration::from_secs(3), "a heartbeat was lost: gaps {gaps:?}");
    let log = agent.stderr();
    assert!(log.contains("Reloaded the changed token from"), "{log}");
    assert!(!log.contains(OLD) && !log.contains(NEW), "a token leaked into the log:\n{log}");
}
