//! End to end, real kube-apiserver: another manager's `managedFields`
//! `time` far in the future (`2099-01-01T00:00:00Z`, set by a client that
//! rewrote the entries, or a clock gone wrong) on a status with no
//! `lastUpdate` (which readers call stale at once) says nothing about
//! when it wrote: opstatus takes the status over. Before, it logged "not
//! before 2099-01-01T00:00:10Z" and left it for decades.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::control_plane::shared;
use support::{opstatus_bin, pod_env, run_to_end};

const CM: &str = "kube9-operator-status";

#[test]
fn e2e_a_managed_fields_time_in_2099_does_not_keep_the_status_away() {
    let cp = shared();
    let pod = cp.deploy("foreign-time");
    let ns = pod.namespace.as_str();
    // Another manager writes a status without lastUpdate...
    let theirs = r#"{"mode":"operated","tier":"free","version":"9.9.9","health":"healthy","error":null}"#;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CM, "namespace": ns},
                    "data": {"status": theirs}});
    cp.kubectl_stdin_ok(&["create", "--field-manager=kube9-operator", "-f", "-"], Some(&cm.to_string()));
    // ...then its managedFields entry is rewritten to say 2099 (a client
    // may set managedFields; the API server keeps them as given).
    let mut client = cp.admin_client();
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let read = |client: &mut opstatus::testing::Client| -> Value {
        serde_json::from_slice(&client.get_path(&path, "get").unwrap().unwrap()).unwrap()
    };
    let mut cm = read(&mut client);
    for entry in cm["metadata"]["managedFields"].as_array_mut().unwrap() {
        entry["time"] = json!("2099-01-01T00:00:00Z");
    }
    // A write that changes nothing else is no write at all.
    cm["metadata"]["annotations"] = json!({"example.com/edited": "yes"});
    client.put(&format!("{path}?fieldManager=editor"), cm.to_string().as_bytes(), "put").unwrap();
    let entries = read(&mut client)["metadata"]["managedFields"].clone();
    let owner = entries.as_array().unwrap().iter().find(|e| e["manager"] == "kube9-operator").expect("{entries}");
    assert_eq!(owner["time"], "2099-01-01T00:00:00Z", "the API server kept the time: {entries}");

    let out = run_to_end(&opstatus_bin(), &["once"], &pod_env(cp.port(), &pod.sa), Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("2099"), "{stderr}");
    let doc = cp.status_document(ns, CM).unwrap();
    assert!(doc["lastUpdate"].is_string() && doc["version"] != "9.9.9", "opstatus wrote the status: {doc}");
}
