//! End to end, real kube-apiserver: `opstatus get` for each reader case.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, SystemTime};
use support::control_plane::{release_bin, shared};
use support::run_to_end;

fn get(ns: &str, output_json: bool) -> (Option<i32>, String, String) {
    let cp = shared();
    let mut args = vec!["get", "--kubeconfig", cp.kubeconfig(), "--namespace", ns];
    if output_json {
        args.extend(["-o", "json"]);
    }
    let out = run_to_end(&release_bin(), &args, &[], Duration::from_secs(30));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn create_status(ns: &str, status: &str) {
    let cp = shared();
    cp.create_namespace(ns);
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "configmap",
        "kube9-operator-status",
        &format!("--from-literal=status={status}"),
    ]);
}

#[test]
fn e2e_get_missing_configmap_is_basic() {
    let cp = shared();
    let ns = support::control_plane::unique_namespace("get-basic");
    cp.create_namespace(&ns);
    let (code, out, err) = get(&ns, true);
    assert_eq!(code, Some(0), "{err}");
    // The explanation fields came later; the first four are unchanged.
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"mode": "basic", "stale": false, "ageSeconds": null, "status": null,
               "reason": "basic: no status ConfigMap where the extension looks: no kube9 operator reports here",
               "extension": {"1.38.0": "basic", "1.34.1": "basic"}, "namespace": null, "searched": [ns]})
    );
}

#[test]
fn e2e_get_fresh_status_written_by_opstatus_is_operated() {
    let cp = shared();
    let pod = cp.deploy("get-fresh");
    let out = run_to_end(&release_bin(), &["once"], &cp.pod_env(&pod), Duration::from_secs(30));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, out, err) = get(&pod.namespace, false);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("Mode:        operated\nHealth:      healthy\n"), "{out}");
    assert!(!out.contains("stale"), "{out}");
}

#[test]
fn e2e_get_old_last_update_is_degraded() {
    let ns = support::control_plane::unique_namespace("get-stale");
    let ten_minutes_ago = opstatus::testing::format_rfc3339(SystemTime::now() - Duration::from_secs(600));
    create_status(
        &ns,
        &format!(
            r#"{{"mode":"operated","tier":"free","version":"1.0.0","health":"healthy","lastUpdate":"{ten_minutes_ago}","registered":false,"error":null,"namespace":"{ns}"}}"#
        ),
    );
    let (code, out, err) = get(&ns, true);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["mode"].as_str(), v["stale"].as_bool()), (Some("degraded"), Some(true)));
    assert!(v["ageSeconds"].as_u64().unwrap() >= 600);
}

#[test]
fn e2e_get_garbage_is_a_clear_error_with_exit_1() {
    let ns = support::control_plane::unique_namespace("get-garbage");
    create_status(&ns, "<<<definitely not json>>>");
    let (code, out, err) = get(&ns, false);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert!(
        err.contains(&format!(
            "ConfigMap {ns}/kube9-operator-status: invalid status: the `status` key is not a JSON object"
        )),
        "{err}"
    );
}
