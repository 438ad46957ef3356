//! The start-up warning for a status ConfigMap the kube9 extension will not
//! find: `kube9-operator-status` written outside kube9-system and default.
//! Once, and only there. And the one for a status without the operator's
//! version, which would otherwise pass opstatus's own off as the operator's.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-placement-tests";
const WARNING: &str = "is outside kube9-system and default, where the kube9 VS Code extension looks";

/// `opstatus once` in a pod whose namespace is `my-operator-system`: its
/// exit code and stderr.
fn once_on(server: &FakeApiServer, args: &[&str]) -> (Option<i32>, String) {
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "my-operator-system");
    let mut all = vec!["once"];
    all.extend_from_slice(args);
    let out = run_to_end(&opstatus_bin(), &all, &pod_env(server.port(), &sa), Duration::from_secs(20));
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn once(args: &[&str]) -> String {
    let (code, stderr) = once_on(&FakeApiServer::start(TOKEN), args);
    assert_eq!(code, Some(0), "{args:?}: {stderr}");
    stderr
}

#[test]
fn warns_once_outside_where_the_extension_looks() {
    let stderr = once(&[]);
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
    let line = stderr.lines().find(|l| l.contains(WARNING)).unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("my-operator-system/kube9-operator-status"), "{line}");
    assert!(line.contains("unless each user sets kube9.operatorNamespace to my-operator-system"), "{line}");
    assert!(line.contains("docs/install.md"), "{line}");
}

#[test]
fn no_warning_where_the_extension_looks_or_for_another_name() {
    for args in [&["--namespace", "kube9-system"][..], &["--namespace", "default"], &["--configmap", "my-status"]] {
        let stderr = once(args);
        assert!(!stderr.contains(WARNING), "{args:?}: {stderr}");
        assert!(stderr.contains("Status updated"), "{args:?}: {stderr}");
    }
}

/// Written into kube9-system from another namespace, the status still
/// names where the operator runs.
#[test]
fn operator_namespace_names_where_the_operator_runs() {
    let server = FakeApiServer::start(TOKEN);
    let args = ["--namespace", "kube9-system", "--operator-namespace", "my-operator-system"];
    let (code, stderr) = once_on(&server, &args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(WARNING), "{stderr}");
    let doc = server.status_document("kube9-system", "kube9-operator-status").expect("written into kube9-system");
    assert_eq!(doc["namespace"], "my-operator-system");
    assert!(server.object("my-operator-system", "kube9-operator-status").is_none());

    // The OperatorCondition is the operator's: written where it runs.
    server.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    let oc_path = "/apis/operators.coreos.com/v2/namespaces/my-operator-system/operatorconditions/op.v1";
    server.put_custom(
        oc_path,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "my-operator-system"}, "spec": {}}),
    );
    server.put_custom(
        "/apis/example.com/v1/namespaces/apps/foos/a",
        json!({"metadata": {"name": "a", "namespace": "apps"}, "status": {"conditions": []}}),
    );
    let before = server.requests().len();
    let (code, stderr) = once_on(
        &server,
        &[
            &args[..],
            &[
                "--operator-condition",
                "op.v1",
                "--probe-from-crd-annotations",
                "foos.example.com",
                "--probe-namespace",
                "apps",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let requests = server.requests();
    let oc: Vec<&str> =
        requests[before..].iter().map(|r| r.path.as_str()).filter(|p| p.contains("/operatorconditions/")).collect();
    assert!(!oc.is_empty(), "{requests:?}");
    assert!(oc.iter().all(|p| p.contains("/namespaces/my-operator-system/")), "{oc:?}");
    let conditions = &server.custom(oc_path).unwrap()["spec"]["conditions"];
    assert_eq!(conditions[0]["type"], "Upgradeable", "{conditions}");

    // The leader Lease is the operator's: read where it runs, not beside the status.
    let before = server.requests().len();
    let (code, stderr) = once_on(&server, &[&args[..], &["--follow-leader-lease", "my-lock"]].concat());
    assert_eq!(code, Some(1), "nobody leads yet: {stderr}");
    assert!(stderr.contains("Lease my-operator-system/my-lock does not exist"), "{stderr}");
    let requests = server.requests();
    let leases: Vec<&str> =
        requests[before..].iter().map(|r| r.path.as_str()).filter(|p| p.contains("/leases/")).collect();
    assert_eq!(leases, ["/apis/coordination.k8s.io/v1/namespaces/my-operator-system/leases/my-lock"], "{requests:?}");
}

/// Without the operator's version the status says `0.0.0-unknown` (never
/// opstatus's own) and the log says so once; an empty variable, as the
/// downward API gives for a missing label, is no version; `get` marks it.
#[test]
fn a_missing_operator_version_is_said_and_never_passed_off() {
    let server = FakeApiServer::start(TOKEN);
    let said = "No operator version given";
    let (code, stderr) = once_on(&server, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    let status = server.status_document("my-operator-system", "kube9-operator-status").expect("written");
    assert_eq!(status["version"], "0.0.0-unknown");

    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "my-operator-system");
    let mut env = pod_env(server.port(), &sa);
    env.push(("OPSTATUS_OPERATOR_VERSION".into(), String::new()));
    let out = run_to_end(&opstatus_bin(), &["once"], &env, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "an empty variable is no version: {}", String::from_utf8_lossy(&out.stderr));
    let get = run_to_end(&opstatus_bin(), &["get", "--namespace", "my-operator-system"], &env, Duration::from_secs(20));
    let text = String::from_utf8_lossy(&get.stdout);
    assert!(text.contains("Version:     unknown (0.0.0-unknown: the operator's version was not given"), "{text}");

    let (_, stderr) = once_on(&server, &["--operator-version", "2.1.0"]);
    assert!(!stderr.contains(said), "{stderr}");
    let status = server.status_document("my-operator-system", "kube9-operator-status").unwrap();
    assert_eq!(status["version"], "2.1.0");
}
