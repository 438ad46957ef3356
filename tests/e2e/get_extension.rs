//! End to end, real kube-apiserver: `opstatus get` shows what the kube9 VS
//! Code extension (1.34.1, 1.38.0) shows, case by case:
//! the same namespace search (its setting, else kube9-system, then
//! default), the same mode rules, and the explanation line.
//!
//! The rows share kube9-system and default, so they run in order in one
//! test (this binary's control plane is its own).

use crate::support;

use serde_json::Value;
use std::time::{Duration, SystemTime};
use support::control_plane::{release_bin, shared, unique_namespace};
use support::run_to_end;

/// `opstatus get` with `args`: (exit code, text output, JSON output).
fn get(args: &[&str]) -> (String, Value) {
    let cp = shared();
    let mut all = vec!["get", "--kubeconfig", cp.kubeconfig()];
    all.extend_from_slice(args);
    let text = run_to_end(&release_bin(), &all, &[], Duration::from_secs(30));
    assert_eq!(text.status.code(), Some(0), "{}", String::from_utf8_lossy(&text.stderr));
    all.extend(["-o", "json"]);
    let json = run_to_end(&release_bin(), &all, &[], Duration::from_secs(30));
    assert_eq!(json.status.code(), Some(0), "{}", String::from_utf8_lossy(&json.stderr));
    (String::from_utf8(text.stdout).unwrap(), serde_json::from_slice(&json.stdout).unwrap())
}

/// Creates or replaces `ns/kube9-operator-status`.
fn put(ns: &str, status: &str) {
    let cp = shared();
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube9-operator-status", "namespace": ns}, "data": {"status": status}});
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&cm.to_string()));
}

fn delete(ns: &str) {
    shared().kubectl_ok(&["-n", ns, "delete", "configmap", "kube9-operator-status", "--ignore-not-found"]);
}

fn status(health: &str, error: Option<&str>, age: Duration, extra: &str) -> String {
    let at = opstatus::testing::format_rfc3339(SystemTime::now() - age);
    let error = error.map_or("null".to_string(), |e| format!("{e:?}"));
    format!(
        r#"{{"mode":"operated","tier":"free","version":"1.0.0","health":"{health}","lastUpdate":"{at}","registered":false,"error":{error},"namespace":"my-operator-system"{extra}}}"#
    )
}

fn healthy() -> String {
    status("healthy", None, Duration::ZERO, "")
}

/// The mode, where it was found, and the text's explanation lines.
fn assert_reading(args: &[&str], mode: &str, found: Option<&str>, why: &str) {
    let (text, json) = get(args);
    assert!(text.starts_with(&format!("Mode:        {mode}\n")), "{args:?}: {text}");
    assert!(text.contains(&format!("\nWhy:         {why}\n")), "{args:?}: {text}");
    match found {
        Some(ns) => assert!(text.contains(&format!("\nFound in:    {ns} (")), "{args:?}: {text}"),
        None => assert!(text.contains("\nFound in:    nowhere (searched "), "{args:?}: {text}"),
    }
    assert_eq!(json["mode"], mode, "{args:?}: {json}");
    assert_eq!(json["namespace"].as_str(), found, "{args:?}: {json}");
    assert_eq!(json["reason"], why, "{args:?}: {json}");
}

#[test]
fn e2e_get_shows_what_the_extension_shows() {
    let _kube9_system = support::control_plane::shared_status_namespaces();
    let cp = shared();
    // kube9-system may not exist yet on a fresh API server.
    let _ = cp.kubectl(&["create", "namespace", "kube9-system"], None);
    delete("kube9-system");
    delete("default");
    let other = unique_namespace("my-operator-system");
    cp.create_namespace(&other);
    let basic = "basic: no status ConfigMap where the extension looks: no kube9 operator reports here";

    // Only in another namespace: basic, unless the setting names it.
    put(&other, &healthy());
    assert_reading(&[], "basic", None, basic);
    let (text, json) = get(&[]);
    assert!(text.contains("searched kube9-system, default"), "{text}");
    assert_eq!(json["searched"], serde_json::json!(["kube9-system", "default"]));
    let operated = "operated: the status is fresh and health is healthy";
    assert_reading(&["--extension-namespace", &other], "operated", Some(&other), operated);
    // --namespace reads there and nowhere else.
    assert_reading(&["--namespace", &other], "operated", Some(&other), operated);
    assert_reading(&["--namespace", "kube9-system"], "basic", None, basic);

    // Only in default: found there.
    put("default", &healthy());
    assert_reading(&[], "operated", Some("default"), operated);
    // In kube9-system too: kube9-system first.
    put("kube9-system", &healthy());
    assert_reading(&[], "operated", Some("kube9-system"), operated);

    // Bad health, fresh: degraded, with the error.
    put("kube9-system", &status("degraded", Some("watch http://127.0.0.1:8081/healthz: 503"), Duration::ZERO, ""));
    let why = "degraded: health is degraded: watch http://127.0.0.1:8081/healthz: 503";
    assert_reading(&[], "degraded", Some("kube9-system"), why);
    put("kube9-system", &status("unhealthy", Some("cannot write"), Duration::ZERO, ""));
    assert_reading(&[], "degraded", Some("kube9-system"), "degraded: health is unhealthy: cannot write");

    // Healthy but 400 s old: stale on the reader's clock.
    put("kube9-system", &status("healthy", None, Duration::from_secs(400), ""));
    let (text, json) = get(&[]);
    assert!(text.starts_with("Mode:        degraded\n"), "{text}");
    assert!(text.contains("\nWhy:         degraded: the status is stale: last updated 6 min ago (more than 5 min)\n"));
    assert_eq!((json["mode"].as_str(), json["stale"].as_bool()), (Some("degraded"), Some(true)));

    // The legacy pro status: 1.34.1 shows enabled, 1.38.0 operated.
    let pro = status("healthy", None, Duration::ZERO, "")
        .replace(r#""mode":"operated","tier":"free""#, r#""mode":"enabled","tier":"pro""#)
        .replace(r#""registered":false"#, r#""registered":true"#);
    put("kube9-system", &pro);
    let (text, json) = get(&[]);
    assert!(text.contains("\nExtension:   1.38.0 shows operated; 1.34.1 shows enabled\n"), "{text}");
    assert_eq!(json["extension"], serde_json::json!({"1.38.0": "operated", "1.34.1": "enabled"}));
    assert_eq!(json["mode"], "enabled");
}
