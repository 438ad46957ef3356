//! End to end, real kube-apiserver: RBAC removed while running. opstatus
//! keeps running, logs the 403 with the missing permission, backs off, and
//! writes again within one backoff step of the RoleBinding's return.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, SystemTime};
use support::control_plane::{ControlPlane, release_bin};
use support::wait_for;

#[test]
fn e2e_rbac_revoked_then_restored() {
    let cp = ControlPlane::start();
    let pod = cp.deploy("rbac");
    let ns = pod.namespace.as_str();
    let interval = 4;
    let mut agent = Run::every(&format!("{interval}s")).start(&release_bin(), &cp.pod_env(&pod));
    wait_for(Duration::from_secs(15), Duration::from_millis(100), || cp.configmap(ns, "kube9-operator-status"))
        .expect("first write");

    cp.kubectl_ok(&["-n", ns, "delete", "rolebinding", "opstatus-status-writer"]);
    let revoked = SystemTime::now();
    let window = Duration::from_secs(14);
    std::thread::sleep(window);
    let during: Vec<_> = cp.audit_events(&pod.user).into_iter().filter(|e| e.received > revoked).collect();
    assert!(during.iter().all(|e| e.code == 403), "{during:?}");
    // Base 1 s, cap 4 s: between 3 and ~8 attempts in 14 s, never more than one a second.
    assert!(during.len() >= 3 && during.len() <= 15, "{} attempts in {window:?}: {during:?}", during.len());
    for pair in during.windows(2) {
        let gap = pair[1].received.duration_since(pair[0].received).unwrap_or_default();
        assert!(gap >= Duration::from_millis(900), "retried after only {gap:?}");
    }
    let log = agent.stderr();
    assert!(log.contains("403 Forbidden"), "{log}");
    assert!(log.contains(&format!("grant the permission to patch configmaps \"kube9-operator-status\" in namespace \"{ns}\": see the Role opstatus-status-writer and its RoleBinding, manifests/base/role.yaml")), "{log}");
    assert!(log.contains("health=unhealthy; retrying in"), "{log}");
    assert!(agent.exited().is_none(), "opstatus must keep running");

    cp.apply_base_manifests(ns);
    let restored = SystemTime::now();
    let recovered = wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
        cp.audit_events(&pod.user).into_iter().find(|e| e.received > restored && e.code == 200)
    })
    .expect("writes again after the RoleBinding returns");
    let delay = recovered.received.duration_since(restored).unwrap_or_default();
    assert!(
        delay <= Duration::from_millis(interval * 1000 + 1500),
        "recovered {delay:?} after restore; the backoff step is at most {interval}s"
    );
    println!("e2e rbac: {} attempts while revoked for {window:?}, recovered {delay:?} after restore", during.len());
}
