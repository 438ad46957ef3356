//! End to end, real kube-apiserver: stop the operator's watched health URL
//! → `degraded` in the ConfigMap at the check that sees it; restore it →
//! `healthy`. And the final status at SIGTERM.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::control_plane::{release_bin, shared};
use support::http::FakeOperator;
use support::wait_for;

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
