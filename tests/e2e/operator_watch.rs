//! End to end, real kube-apiserver: stop the operator's watched health URL
//! → `degraded` in the ConfigMap within a second of the next check; restore
//! it → `healthy`. And the final status at SIGTERM.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, Instant};
use support::control_plane::{release_bin, shared};
use support::http::FakeOperator;
use support::wait_for;

#[test]
fn e2e_watched_url_failure_and_recovery_reach_the_configmap() {
    let cp = shared();
    let pod = cp.deploy("watch");
    let operator = FakeOperator::start();
    let check = Duration::from_secs(2);
    let mut agent =
        Run::every("60s").checks("2s").flag("--watch-url", operator.url()).start(&release_bin(), &cp.pod_env(&pod));
    let health = || {
        cp.status_document(&pod.namespace, "kube9-operator-status").map(|d| (d["health"].clone(), d["error"].clone()))
    };
    let wait_health = |want: &str| {
        wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
            health().filter(|(h, _)| h == want).map(|(_, e)| (Instant::now(), e))
        })
        .unwrap_or_else(|| panic!("never {want}: {:?}", health()))
    };
    wait_health("healthy");

    operator.set_code(503);
    let broke = Instant::now();
    let (at, error) = wait_health("degraded");
    let bound = check + Duration::from_secs(1) + Duration::from_millis(300); // + polling
    assert!(at - broke <= bound, "degraded published {:?} after the failure", at - broke);
    assert_eq!(error, format!("Operator health check {} failed: HTTP 503", operator.url()));

    operator.set_code(200);
    let fixed = Instant::now();
    let (at, error) = wait_health("healthy");
    assert!(at - fixed <= bound, "healthy published {:?} after recovery", at - fixed);
    assert!(error.is_null());

    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()), Some(0));
    let (h, e) = health().unwrap();
    assert_eq!((h.as_str(), e.as_str()), (Some("unhealthy"), Some("Shutting down")));
    println!("e2e watch: degraded and healthy each published within {bound:?} of the change");
}
