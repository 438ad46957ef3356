//! End to end, real kube-apiserver: the token file is replaced by a token
//! of a second ServiceAccount and the first ServiceAccount is deleted (its
//! token now answers 401). opstatus switches without losing more than one
//! heartbeat.

use crate::support;
use crate::support::run_args::Run;

use std::time::{Duration, SystemTime};
use support::control_plane::{ControlPlane, release_bin, service_account_user};
use support::wait_for;

#[test]
fn e2e_token_rotation_to_a_second_service_account() {
    let cp = ControlPlane::start();
    let pod = cp.deploy("rotation");
    let ns = pod.namespace.as_str();
    cp.kubectl_ok(&["-n", ns, "create", "serviceaccount", "opstatus-next"]);
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "opstatus-next",
        "--role=opstatus-status-writer",
        &format!("--serviceaccount={ns}:opstatus-next"),
    ]);
    let next_user = service_account_user(ns, "opstatus-next");
    let next_token = cp.token(ns, "opstatus-next");

    let agent = Run::every("2s").start(&release_bin(), &cp.pod_env(&pod));
    wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
        (cp.audit_events(&pod.user).len() >= 2).then_some(())
    })
    .expect("two heartbeats with the first token");

    pod.sa.write_token(&next_token);
    cp.kubectl_ok(&["-n", ns, "delete", "serviceaccount", "opstatus"]);
    let rotated = SystemTime::now();
    // The API server keeps accepting the deleted ServiceAccount's token for
    // the ~10 s it caches an authentication (counted from its first use,
    // just before the rotation); a heartbeat that lands just inside that
    // window delays the first 401 by one interval. Then three heartbeats
    // with the new token: at most 10 + 2 + 2 × 2 = 16 s.
    wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        (cp.audit_events(&next_user).len() >= 3).then_some(())
    })
    .expect("heartbeats with the second token");

    let mut writes: Vec<SystemTime> = cp
        .audit_events(&pod.user)
        .into_iter()
        .chain(cp.audit_events(&next_user))
        .filter(|e| e.code == 200 || e.code == 201)
        .map(|e| e.received)
        .collect();
    writes.sort();
    let longest = writes.windows(2).map(|w| w[1].duration_since(w[0]).unwrap_or_default()).max().unwrap();
    assert!(
        longest <= Duration::from_millis(4500),
        "a gap of {longest:?} between writes: more than one heartbeat (2 s) lost"
    );
    // kube-apiserver caches successful token authentications for ~10 s, so
    // the deleted ServiceAccount's token may work a little longer; once
    // opstatus has switched it must never go back to the old token.
    let last_old = cp.audit_events(&pod.user).into_iter().filter(|e| e.received > rotated).map(|e| e.received).max();
    let first_new = cp.audit_events(&next_user).into_iter().map(|e| e.received).min().unwrap();
    assert!(last_old.is_none_or(|t| t <= first_new), "the old token was used after the switch");
    assert!(agent.logged("Reloaded the changed token from"), "{}", agent.stderr());
    println!("e2e token rotation: longest gap between writes {longest:?} (interval 2 s)");
}
