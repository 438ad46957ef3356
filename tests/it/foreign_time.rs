//! Another writer's `managedFields` time is bounded as its `lastUpdate`
//! is: a time far ahead of this clock (`2099-01-01T00:00:00Z`, made up or
//! from a clock gone wrong) says nothing about when it wrote. Before, a
//! status with such a time and no `lastUpdate` (stale to readers at once)
//! was left to its writer until 2099.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-foreign-time-tests";
const CM: &str = "kube9-operator-status";

#[test]
fn a_managed_fields_time_in_2099_without_a_last_update_does_not_keep_the_status_away() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let theirs = r#"{"mode":"operated","tier":"free","version":"1.0.0","health":"healthy","error":null}"#;
    server.put_object(
        "ops",
        CM,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": CM, "namespace": "ops", "resourceVersion": "7",
                "managedFields": [{
                    "manager": "kube9-operator", "operation": "Update", "apiVersion": "v1",
                    "time": "2099-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}, "f:status": {}}},
                }],
            },
            "data": {"status": theirs},
        }),
    );
    let out = run_to_end(&opstatus_bin(), &["once"], &pod_env(server.port(), &sa), Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("2099"), "{stderr}");
    let doc = server.status_document("ops", CM).unwrap();
    assert!(doc["lastUpdate"].is_string(), "opstatus wrote the status: {doc}");
}
