//! `opstatus get`: the reader's interpretation, as text and JSON.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, SystemTime};
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-get-tests";

fn get(server: &FakeApiServer, sa: &ServiceAccountDir, args: &[&str]) -> (Option<i32>, String, String) {
    // The status lives in `ops`, where the extension does not look
    // (kube9-system, then default): these tests name it.
    let mut all = vec!["get", "--namespace", "ops"];
    all.extend_from_slice(args);
    let out = run_to_end(&opstatus_bin(), &all, &pod_env(server.port(), sa), Duration::from_secs(20));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn put_status(server: &FakeApiServer, status: &str) {
    server.put_object(
        "ops",
        "kube9-operator-status",
        json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "kube9-operator-status", "namespace": "ops"}, "data": {"status": status}}),
    );
}

fn status_at(t: SystemTime) -> String {
    json!({"mode": "enabled", "tier": "pro", "version": "1.0.0", "health": "healthy",
           "lastUpdate": opstatus::testing::format_rfc3339(t), "registered": true, "error": null,
           "namespace": "ops", "clusterId": "cls_123"})
    .to_string()
}

#[test]
fn missing_configmap_is_basic() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let (code, out, _) = get(&server, &sa, &["-o", "json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"mode": "basic", "stale": false, "ageSeconds": null, "status": null,
               "reason": "basic: no status ConfigMap where the extension looks: no kube9 operator reports here",
               "extension": {"1.38.0": "basic", "1.34.1": "basic"}, "namespace": null, "searched": ["ops"]})
    );
    let (code, out, _) = get(&server, &sa, &[]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("Mode:        basic\n"), "{out}");
}

#[test]
fn fresh_status_is_enabled_and_stale_status_is_degraded() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    put_status(&server, &status_at(SystemTime::now()));
    let (code, out, _) = get(&server, &sa, &["-o", "json"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["mode"].as_str(), v["stale"].as_bool()), (Some("enabled"), Some(false)));
    assert_eq!(v["status"]["clusterId"], "cls_123");

    put_status(&server, &status_at(SystemTime::now() - Duration::from_secs(600)));
    let (code, out, _) = get(&server, &sa, &[]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("Mode:        degraded\n"), "{out}");
    assert!(out.contains("the operator has not reported for 10 min: the status is stale"), "{out}");
}

#[test]
fn garbage_and_missing_fields_exit_1_with_a_clear_error() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    put_status(&server, "}}not json{{");
    let (code, out, err) = get(&server, &sa, &[]);
    assert_eq!(code, Some(1));
    assert!(out.is_empty());
    assert!(
        err.contains("ConfigMap ops/kube9-operator-status: invalid status: the `status` key is not a JSON object"),
        "{err}"
    );

    put_status(&server, r#"{"tier":"free","version":"1.0.0"}"#);
    let (code, _, err) = get(&server, &sa, &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("the required field `mode` is missing"), "{err}");
}

#[test]
fn forbidden_read_is_a_runtime_error_naming_the_permission() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new("not-the-token", &server.pki.ca_pem, "ops");
    let (code, _, err) = get(&server, &sa, &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot read ConfigMap ops/kube9-operator-status: 401 Unauthorized"), "{err}");
}

/// Anyone who may patch the ConfigMap writes the publisher annotation: what
/// `get` shows of it reaches an admin's terminal and scripts only through
/// the one sanitiser, bounded, in text and JSON alike.
#[test]
fn hostile_lock_annotation_is_defanged_in_text_and_json() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let forged = format!("pod-a\u{1b}[2J\r\nHealth:      healthy\n\u{202e}evil{}", "x".repeat(200_000));
    let record = json!({"holderIdentity": forged, "leaseDurationSeconds": 130,
        "acquireTime": "2026-01-01T00:00:00Z\u{1b}]0;title\u{7}", "renewTime": format!("\r{}", "9".repeat(5000)),
        "leaderTransitions": 0});
    server.put_object(
        "ops",
        "kube9-operator-status",
        json!({"kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "kube9-operator-status", "namespace": "ops",
                     "annotations": {"opstatus.kube9.dev/publisher": record.to_string()}},
        "data": {"status": status_at(SystemTime::now())}}),
    );
    let (code, text, _) = get(&server, &sa, &[]);
    assert_eq!(code, Some(0), "{text}");
    let hostile = |s: &str| s.chars().any(|c| (c.is_control() && c != '\n') || c == '\u{202e}');
    assert!(!hostile(&text), "{text:?}");
    assert_eq!(text.lines().filter(|l| l.starts_with("Health:")).count(), 1, "{text}");
    let publisher = text.lines().find(|l| l.starts_with("Publisher:")).expect("a Publisher line");
    assert!(publisher.starts_with("Publisher:   pod-a [2J  Health:"), "{publisher}");
    assert!(text.len() < 4096, "{} bytes", text.len());

    let (code, out, _) = get(&server, &sa, &["-o", "json"]);
    assert_eq!(code, Some(0), "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    for field in ["identity", "since", "renewed"] {
        let shown = v["publisher"][field].as_str().unwrap();
        assert!(!hostile(shown) && !shown.contains('\n') && shown.len() <= 256, "{field}: {shown:?}");
    }
    assert!(out.len() < 4096, "{} bytes", out.len());
}

/// `opstatus get | head` when head has gone: the broken pipe ends the
/// output quietly with the command's own exit code, not a panic (134).
#[test]
fn a_reader_gone_before_the_output_is_no_failure() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    put_status(&server, &status_at(SystemTime::now()));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(opstatus_bin())
        .args(["get", "--namespace", "ops"])
        .env_clear()
        .envs(pod_env(server.port(), &sa))
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?} {stderr}", out.status);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{stderr}");
}
