//! End to end, real kube-apiserver, OpenShift's ClusterOperator, in the
//! order an admin would live it:
//!
//! 1. before the CRD exists: a clear `degraded` reason, not a crash;
//! 2. first start creates the object: `versions[operator]`, `Available`;
//!    `kubectl get clusteroperators` shows the row;
//! 3. nothing changes → no request at all (audit log);
//! 4. the watched URL fails → `Available=False` at once, `Degraded=True`
//!    only after the inertia; recovery at once;
//! 5. a version bump → `Progressing=True` "Working towards", old versions
//!    kept until the version file says the new ones run;
//!
//! and a condition, a version and a related object someone else set
//! survive throughout. RBAC: the
//! `manifests/openshift` ClusterRole, as shipped.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, SystemTime};
use support::control_plane::{ControlPlane, release_bin, shared};
use support::http::FakeOperator;
use support::resources::find;
use support::{RunningAgent, TempDir, run_to_end, wait_for};

fn wait_co(cp: &ControlPlane, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    wait_for(Duration::from_secs(20), Duration::from_millis(100), || cp.cluster_operator(name).filter(|co| ok(co)))
        .unwrap_or_else(|| panic!("ClusterOperator never {what}: {:?}", cp.cluster_operator(name)))
}

fn status_of<'a>(co: &'a Value, kind: &str) -> &'a Value {
    &find(&co["status"]["conditions"], kind).unwrap_or(&Value::Null)["status"]
}

fn version_of<'a>(co: &'a Value, name: &str) -> &'a Value {
    co["status"]["versions"]
        .as_array()
        .and_then(|v| v.iter().find(|e| e["name"] == name))
        .map_or(&Value::Null, |e| &e["version"])
}

fn transition_of(co: &Value, kind: &str) -> String {
    find(&co["status"]["conditions"], kind).unwrap()["lastTransitionTime"].as_str().unwrap().to_string()
}

#[test]
fn e2e_cluster_operator_lifecycle() {
    // Step 1 needs an API server without the ClusterOperator CRD, which
    // other tests install: a control plane of its own.
    let own = ControlPlane::start();
    let cp = &own;
    let pod = cp.deploy("openshift");
    let ns = pod.namespace.as_str();
    let name = format!("demo-{ns}");
    cp.apply_manifests("manifests/openshift", ns, &[("demo-operator", &name)]);
    let env = cp.pod_env(&pod);
    let operator = FakeOperator::start();
    let versions = TempDir::new("versions");
    let version_file = versions.path().join("running");
    std::fs::write(&version_file, "1.0.0\nengine=3.1.0\n").unwrap();
    let common = [
        "--cluster-operator",
        name.as_str(),
        "--version-file",
        version_file.to_str().unwrap(),
        "--watch-url",
        &operator.url(),
        "--related-object",
        &format!("/configmaps/{ns}/settings"),
    ];

    // 1. No ClusterOperator API: said plainly, exit 0 (the ConfigMap works).
    let once: Vec<&str> = [&["once", "--operator-version", "1.0.0"][..], &common].concat();
    let out = run_to_end(&release_bin(), &once, &env, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let status = cp.status_document(ns, "kube9-operator-status").unwrap();
    assert_eq!(
        (status["health"].as_str(), status["error"].as_str()),
        (
            Some("degraded"),
            Some("The ClusterOperator API (config.openshift.io/v1) is not served: is this an OpenShift cluster?")
        )
    );

    // 2. First start: created, with the operator's version and Available.
    cp.install_crd("clusteroperators.config.openshift.io");
    // The schema as openshift/api ships it, except on the Debian v1.20 build
    // (see install_crd): the core group's "" below is checked against it.
    let group = cp.kubectl_ok(&[
        "get",
        "crd",
        "clusteroperators.config.openshift.io",
        "-o",
        "jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.status.properties.relatedObjects.items.properties.group}",
    ]);
    assert_eq!(
        group.contains("nullable"),
        cp.is_debian_1_20(),
        "relatedObjects[].group on {}: {group}",
        cp.git_version()
    );
    let run_args = |version: &str, engine: &str| -> Vec<String> {
        let mut args: Vec<String> = ["run", "--interval", "60s", "--check-interval", "1s", "--degraded-inertia", "4s"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend([
            "--operator-version".into(),
            version.into(),
            "--operand-version".into(),
            format!("engine={engine}"),
        ]);
        args.extend(common.iter().map(|s| s.to_string()));
        args
    };
    let start = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        RunningAgent::start(&release_bin(), &args, &env)
    };
    let mut agent = start(&run_args("1.0.0", "3.1.0"));
    let co = wait_co(cp, &name, "Available", |co| status_of(co, "Available") == "True");
    assert_eq!(
        co["status"]["versions"],
        json!([{"name": "operator", "version": "1.0.0"}, {"name": "engine", "version": "3.1.0"}])
    );
    for (kind, want) in [("Degraded", "False"), ("Progressing", "False"), ("Upgradeable", "True")] {
        assert_eq!(status_of(&co, kind), want, "{kind}: {}", co["status"]);
    }
    assert_eq!(
        co["status"]["relatedObjects"],
        json!([{"group": "", "resource": "namespaces", "name": ns},
               {"group": "", "resource": "configmaps", "namespace": ns, "name": "kube9-operator-status"},
               {"group": "", "resource": "configmaps", "namespace": ns, "name": "settings"}])
    );
    let row = cp.kubectl_ok(&["get", "clusteroperators", &name, "--no-headers"]);
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&columns[..5], [name.as_str(), "1.0.0", "True", "False", "False"], "{row}");
    println!("kubectl get clusteroperators: {}", row.trim());

    // Someone else's condition (the CVO sets some of its own), version and
    // related object.
    let foreign = json!({"type": "EvaluationConditionsDetected", "status": "False", "reason": "AsExpected",
                         "message": "Set by the cluster-version operator.", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let foreign_version = json!({"name": "kube-apiserver", "version": "1.20.2"});
    let foreign_related = json!({"group": "operator.openshift.io", "resource": "kubeapiservers", "name": "cluster"});
    let add = json!([{"op": "add", "path": "/status/conditions/-", "value": foreign},
                     {"op": "add", "path": "/status/versions/-", "value": foreign_version},
                     {"op": "add", "path": "/status/relatedObjects/-", "value": foreign_related}])
    .to_string();
    cp.kubectl_ok(&["patch", "clusteroperators", &name, "--subresource=status", "--type=json", "-p", &add]);

    // 3. Nothing changes: not one request to the ClusterOperator.
    let on_co = |since: SystemTime| {
        cp.audit_events(&pod.user)
            .into_iter()
            .filter(|e| e.uri.contains("/clusteroperators") && e.received >= since)
            .count()
    };
    let quiet_from = SystemTime::now();
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(on_co(quiet_from), 0, "requests while nothing changed");

    // 4. The operator's health URL fails: Available=False within the check
    // interval + 1 s, Degraded=True only once the 4 s inertia has passed.
    let broke = SystemTime::now();
    operator.set_code(503);
    let co = wait_co(cp, &name, "unavailable", |co| status_of(co, "Available") == "False");
    assert_eq!(status_of(&co, "Degraded"), "False", "Degraded before the inertia: {}", co["status"]);
    // A bound a busy machine meets; the latency itself is the benchmark's.
    assert!(cp.update_latency(&pod.user, "/clusteroperators/", broke) <= Duration::from_secs(10));
    let co = wait_co(cp, &name, "Degraded", |co| status_of(co, "Degraded") == "True");
    let degraded = find(&co["status"]["conditions"], "Degraded").unwrap();
    assert_eq!(degraded["message"], format!("Operator health check {} failed: HTTP 503", operator.url()));
    let updates_since_broke = || cp.update_times(&pod.user, "/clusteroperators/", broke);
    // The audit record of the write just seen may land a moment after its
    // answer: wait for two (never more), read as the object already shows.
    let _ = wait_for(Duration::from_secs(10), Duration::from_millis(200), || {
        (updates_since_broke().len() >= 2).then_some(())
    });
    let updates = updates_since_broke();
    assert_eq!(updates.len(), 2, "one write for Available, one for Degraded");
    let held = updates[1].duration_since(broke).unwrap();
    // Never before the inertia; a busy machine may be late.
    assert!(held >= Duration::from_secs(4) && held <= Duration::from_secs(30), "Degraded after {held:?}");
    let fixed = SystemTime::now();
    operator.set_code(200);
    let co = wait_co(cp, &name, "recovered", |co| {
        status_of(co, "Available") == "True" && status_of(co, "Degraded") == "False"
    });
    assert!(cp.update_latency(&pod.user, "/clusteroperators/", fixed) <= Duration::from_secs(10));
    assert_eq!(find(&co["status"]["conditions"], "EvaluationConditionsDetected"), Some(&foreign));

    // 5. The new release's pod: the sidecar knows 1.1.0, the operator does
    // not run it yet.
    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()), Some(0));
    let settled = transition_of(&co, "Progressing");
    std::thread::sleep(Duration::from_millis(1100)); // a new second for lastTransitionTime
    let mut agent = start(&run_args("1.1.0", "3.2.0"));
    let co = wait_co(cp, &name, "Progressing", |co| status_of(co, "Progressing") == "True");
    let progressing = find(&co["status"]["conditions"], "Progressing").unwrap();
    assert_eq!(progressing["message"], "Working towards 1.1.0");
    assert_eq!((version_of(&co, "operator"), version_of(&co, "engine")), (&json!("1.0.0"), &json!("3.1.0")));
    let started_rollout = transition_of(&co, "Progressing");
    assert!(started_rollout > settled);

    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(&version_file, "1.1.0\nengine=3.2.0\n").unwrap();
    let co = wait_co(cp, &name, "done rolling out", |co| status_of(co, "Progressing") == "False");
    assert_eq!((version_of(&co, "operator"), version_of(&co, "engine")), (&json!("1.1.0"), &json!("3.2.0")));
    assert!(transition_of(&co, "Progressing") > started_rollout);
    assert_eq!(find(&co["status"]["conditions"], "EvaluationConditionsDetected"), Some(&foreign));
    // The foreign version and related object survived every write.
    assert_eq!(version_of(&co, "kube-apiserver"), &json!("1.20.2"), "{}", co["status"]);
    assert_eq!(co["status"]["relatedObjects"].as_array().unwrap().last(), Some(&foreign_related));

    // Only the verbs the ClusterRole grants were used.
    let verbs: std::collections::BTreeSet<String> = cp
        .audit_events(&pod.user)
        .into_iter()
        .filter(|e| e.uri.contains("/clusteroperators"))
        .map(|e| format!("{} {}", e.verb, if e.uri.ends_with("/status") { "status" } else { "object" }))
        .collect();
    assert_eq!(verbs.into_iter().collect::<Vec<_>>(), ["create object", "get object", "update status"]);
    assert_eq!(agent.exited(), None);
    println!("e2e ClusterOperator: created, quiet, unavailable → degraded after the inertia, rolled out 1.0.0 → 1.1.0");
}

/// must-gather collects what drives `Upgradeable`: each probed resource
/// type (every object of it: an empty name) in the probed namespace, and
/// its CRD, are related objects of the ClusterOperator; and the log says
/// once, at start, that its `Upgradeable=False` holds back the whole
/// cluster's upgrade.
#[test]
fn the_probed_types_and_their_crds_are_related_objects() {
    let cp = shared();
    cp.install_crd("clusteroperators.config.openshift.io");
    cp.install_crd("foos.example.com");
    let pod = cp.deploy("co-related");
    let ns = pod.namespace.as_str();
    let name = format!("demo-{ns}");
    cp.apply_manifests("manifests/openshift", ns, &[("demo-operator", &name)]);
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.create_foo(ns, "alpha", &[("Migrating", "False")]);
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let args =
        ["once", "--cluster-operator", &name, "--operator-version", "1.0.0", "--probe", probe, "--probe-namespace", ns];
    let out = run_to_end(&release_bin(), &args, &cp.pod_env(&pod), Duration::from_secs(30));
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
    // Where it may say Upgradeable=False, the consequence is said at start.
    let said =
        format!("ClusterOperator {name}: while a probed resource blocks, it says Upgradeable=False, which holds back");
    assert_eq!(log.matches(&said).count(), 1, "{log}");
    assert!(log.contains("the upgrade of the whole cluster"), "{log}");
    let co = cp.cluster_operator(&name).expect("created");
    let related = co["status"]["relatedObjects"]
        .as_array()
        .unwrap_or_else(|| panic!("{co}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        related.contains(&json!({"group": "example.com", "resource": "foos", "namespace": ns, "name": ""})),
        "{related:?}"
    );
    let crd =
        json!({"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions", "name": "foos.example.com"});
    assert!(related.contains(&crd), "{related:?}");
    let _ = cp.kubectl(&["delete", "clusteroperators.config.openshift.io", &name], None);
}
