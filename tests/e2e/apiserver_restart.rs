//! End to end, real kube-apiserver: the API server is stopped for several
//! intervals and started again. opstatus does not exit, retries at a
//! bounded rate, and writes again within one backoff step.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, SystemTime};
use support::control_plane::{ControlPlane, release_bin};
use support::wait_for;

#[test]
fn e2e_apiserver_stopped_and_restarted() {
    let mut cp = ControlPlane::start();
    let pod = cp.deploy("restart");
    let interval = 2;
    let mut agent = Run::every(&format!("{interval}s")).start(&release_bin(), &cp.pod_env(&pod));
    wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
        cp.configmap(&pod.namespace, "kube9-operator-status")
    })
    .expect("first write");

    cp.stop_apiserver();
    let outage = Duration::from_secs(10);
    let warnings_before = agent.stderr().matches("WARN").count();
    std::thread::sleep(outage);
    let failures = agent.stderr().matches("WARN").count() - warnings_before;
    assert!(agent.exited().is_none(), "opstatus must not exit while the API server is down");
    // Base 1 s, cap 2 s: between 4 and 10 attempts in 10 s.
    assert!((3..=11).contains(&failures), "{failures} failed attempts in {outage:?}");
    assert!(agent.logged("connection refused by https://127.0.0.1:"), "{}", agent.stderr());

    cp.start_apiserver();
    let ready = SystemTime::now();
    let recovered = wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
        cp.audit_events(&pod.user).into_iter().find(|e| e.received > ready && e.code == 200)
    })
    .expect("writes again after the restart");
    let delay = recovered.received.duration_since(ready).unwrap_or_default();
    assert!(delay <= Duration::from_millis(interval * 1000 + 1000), "wrote {delay:?} after the API server was ready");
    assert!(agent.exited().is_none());
    println!(
        "e2e restart: {failures} failed attempts during a {outage:?} outage, wrote {delay:?} after the API server was back"
    );
}
