//! End to end, real kube-apiserver: an instance that loses the publisher
//! lock while it watches a quiet collection (no event would wake its watch
//! for minutes) lets go of the watch's API-server connection at once. The
//! lock is taken by writing another holder into the status ConfigMap's
//! annotation; the instance's next write conflicts, it reads the lock,
//! stands by, and at its next check (1 s here) its probes stop: only the
//! heartbeat's kept connection is left, within seconds, not minutes.

use crate::support;
use crate::support::run_args::Run;

use serde_json::json;
use std::time::{Duration, Instant};
use support::control_plane::{release_bin, shared};
use support::sockets::connections_to;
use support::wait_for;

/// The check interval: the probes stand by at the check after the write
/// that found the lock taken.
const CHECK: Duration = Duration::from_secs(1);

#[test]
fn e2e_a_stood_down_watch_closes_its_connection() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    let pod = cp.deploy("probe-watch-stop");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.create_foo(ns, "quiet", &[("Migrating", "False")]);
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let run = Run::every("2s").checks("1s").flag("--probe", probe).flag("--probe-namespace", ns);
    let mut agent = run.flag("--identity", "pod-a").switch("--events=false").start(&release_bin(), &cp.pod_env(&pod));
    // Watching: the watch's connection beside the heartbeat's.
    let open = wait_for(Duration::from_secs(20), Duration::from_millis(50), || {
        let status = cp.status_document(ns, "kube9-operator-status")?;
        let open = connections_to(agent.pid(), cp.port());
        (status["health"] == "healthy" && open == 2).then_some(open)
    });
    assert!(open.is_some(), "never two connections: {}\n{}", connections_to(agent.pid(), cp.port()), agent.stderr());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(connections_to(agent.pid(), cp.port()), 2, "steady while watching\n{}", agent.stderr());

    let record = json!({"holderIdentity": "pod-b", "leaseDurationSeconds": 60, "acquireTime": "2026-01-01T00:00:00Z",
                        "renewTime": "2026-01-01T00:00:00Z", "leaderTransitions": 1});
    let annotation = format!("opstatus.kube9.dev/publisher={record}");
    cp.kubectl_ok(&["-n", ns, "annotate", "configmap", "kube9-operator-status", "--overwrite", &annotation]);
    let stood_by = wait_for(Duration::from_secs(10), Duration::from_millis(10), || {
        agent.stderr().contains("Standing by").then(Instant::now)
    });
    let stood_by = stood_by.unwrap_or_else(|| panic!("never stood by\n{}", agent.stderr()));
    // A quiet watch left open would stay so for minutes (until its
    // timeout): closed within 10 s is closed at a check, on a busy machine
    // too (at the next check, 1 s here, on a quiet one).
    let closed = wait_for(Duration::from_secs(10), Duration::from_millis(10), || {
        (connections_to(agent.pid(), cp.port()) <= 1).then(|| stood_by.elapsed())
    });
    let open = connections_to(agent.pid(), cp.port());
    let closed = closed.unwrap_or_else(|| panic!("{open} connections 10 s after standing by\n{}", agent.stderr()));
    println!(
        "e2e: the stood-down watch's connection closed {closed:.0?} after the lock was seen taken (checks every \
         {CHECK:?})"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(connections_to(agent.pid(), cp.port()), 1, "only the heartbeat's\n{}", agent.stderr());
    assert_eq!(agent.exited(), None);
}
