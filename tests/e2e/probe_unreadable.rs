//! End to end, real kube-apiserver: a CRD without a status schema
//! (`bars.example.com`) lets resources carry fields of any type. One Bar
//! with a boolean condition `status`, one whose `conditions` is not a list:
//! each is reported by name (the status turns `degraded`, saying why), and
//! every other Bar still counts, so the one that blocks an upgrade is
//! published on the OperatorCondition. The same through the watch: a Bar
//! changed to an unreadable status is reported, and when it is fixed the
//! report goes. And without a blocker: 21 calm Bars and one whose `status`
//! is not an object (`true`): the odd one is named, the 21 are counted and
//! `Upgradeable=True` says so (an unreadable resource is unknown, and
//! unknown never blocks).

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::control_plane::{ControlPlane, Deployed, release_bin, shared};
use support::probes::{deploy_probed, probed_args, probed_env, probed_upgradeable};
use support::resources::condition;
use support::{RunningAgent, wait_for};

const NAME: &str = "demo-operator.v5.0.0";
const PROBE: &str = "example.com/v1/bars:Upgradeable=!Migrating";

fn create_bar(cp: &ControlPlane, ns: &str, name: &str, status: Value) {
    let object =
        json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": name, "namespace": ns}, "spec": {}});
    cp.kubectl_stdin_ok(&["create", "-f", "-"], Some(&object.to_string()));
    set_status(cp, ns, name, status);
}

fn set_status(cp: &ControlPlane, ns: &str, name: &str, status: Value) {
    let patch = json!({"status": status}).to_string();
    cp.kubectl_ok(&["-n", ns, "patch", "bars.example.com", name, "--subresource=status", "--type=merge", "-p", &patch]);
}

/// opstatus deployed in a namespace of its own with the Bar CRD, list and
/// watch on Bars for its ServiceAccount, and an OperatorCondition it may
/// update as OLM grants.
fn deploy_with_bars(cp: &ControlPlane, label: &str) -> Deployed {
    let pod = deploy_probed(cp, label, "bars.example.com", NAME);
    let ns = pod.namespace.as_str();
    let sa = pod.user.rsplit(':').next().unwrap();
    cp.kubectl_ok(&["-n", ns, "create", "role", "bar-reader", "--verb=list,watch", "--resource=bars.example.com"]);
    let subject = format!("--serviceaccount={ns}:{sa}");
    cp.kubectl_ok(&["-n", ns, "create", "rolebinding", "bar-reader", "--role=bar-reader", &subject]);
    pod
}

#[test]
fn e2e_an_unreadable_resource_is_named_and_the_others_still_count() {
    let cp = shared();
    let pod = deploy_with_bars(cp, "probe-unreadable");
    let ns = pod.namespace.as_str();
    let calm = json!({"conditions": [condition("Migrating", "False")]});
    for i in 0..3 {
        create_bar(cp, ns, &format!("calm-{i}"), calm.clone());
    }
    create_bar(cp, ns, "blocker", json!({"conditions": [condition("Migrating", "True")]}));
    create_bar(cp, ns, "boolean", json!({"conditions": [{"type": "Migrating", "status": true}]}));
    create_bar(cp, ns, "not-a-list", json!({"conditions": {"Migrating": "False"}}));

    let args = probed_args("60s", PROBE, ns, &[]);
    let mut agent = RunningAgent::start(&release_bin(), &args, &probed_env(cp.port(), &pod, NAME));
    let upgradeable = |status: &str| probed_upgradeable(cp, ns, NAME, status, Duration::ZERO);
    let blocked = probed_upgradeable(cp, ns, NAME, "False", Duration::from_secs(20));
    let blocked = blocked.unwrap_or_else(|| {
        panic!(
            "the blocker was never published: {:?}\n{}",
            cp.status_document(ns, "kube9-operator-status"),
            agent.stderr()
        )
    });
    assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Bar {ns}/blocker: Migrating"));
    let error = |cp: &ControlPlane| {
        let status = cp.status_document(ns, "kube9-operator-status")?;
        (status["health"] == "degraded").then(|| status["error"].as_str().unwrap_or_default().to_string())
    };
    let said = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        error(cp).filter(|e| e.contains("not-a-list"))
    });
    let said = said.unwrap_or_else(|| panic!("{:?}\n{}", error(cp), agent.stderr()));
    assert!(
        said.starts_with(&format!("Probing bars.example.com in namespace {ns:?}: 2 resources are not readable")),
        "{said}"
    );
    assert!(said.contains(&format!("Bar {ns}/boolean (invalid type: boolean `true`, expected a string")), "{said}");
    assert!(said.contains(&format!("Bar {ns}/not-a-list (invalid type: map, expected a sequence")), "{said}");

    // Through the watch: one more made unreadable, then both fixed.
    set_status(cp, ns, "calm-1", json!({"conditions": [{"type": "Migrating", "status": 1}]}));
    let said =
        wait_for(Duration::from_secs(10), Duration::from_millis(100), || error(cp).filter(|e| e.contains("calm-1")));
    assert!(said.is_some_and(|e| e.contains("3 resources are not readable")), "{:?}\n{}", error(cp), agent.stderr());
    for name in ["calm-1", "boolean", "not-a-list"] {
        set_status(cp, ns, name, calm.clone());
    }
    let healthy = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        let status = cp.status_document(ns, "kube9-operator-status")?;
        (status["health"] == "healthy").then_some(status)
    });
    assert!(healthy.is_some(), "{:?}\n{}", error(cp), agent.stderr());
    assert!(upgradeable("False").is_some(), "the blocker still blocks");
    assert_eq!(agent.exited(), None);
}

#[test]
fn e2e_a_status_that_is_not_an_object_is_named_and_the_others_are_counted() {
    let cp = shared();
    let pod = deploy_with_bars(cp, "probe-odd-status");
    let ns = pod.namespace.as_str();
    let calm = json!({"conditions": [condition("Migrating", "False")]});
    for i in 0..21 {
        create_bar(cp, ns, &format!("calm-{i:02}"), calm.clone());
    }
    create_bar(cp, ns, "odd", json!(true));
    let stored = cp.kubectl_ok(&["-n", ns, "get", "bars.example.com", "odd", "-o", "jsonpath={.status}"]);
    assert_eq!(stored, "true", "the API server keeps a status that is not an object");

    let args = probed_args("60s", PROBE, ns, &["--listen", "127.0.0.1:0"]);
    let agent = RunningAgent::start(&release_bin(), &args, &probed_env(cp.port(), &pod, NAME));
    let up = probed_upgradeable(cp, ns, NAME, "True", Duration::from_secs(20));
    let up = up.unwrap_or_else(|| {
        panic!("never Upgradeable=True: {:?}\n{}", cp.status_document(ns, "kube9-operator-status"), agent.stderr())
    });
    assert_eq!(up["message"], "No resource blocks an upgrade (21 checked)");
    // The OperatorCondition is synced in the check, the status written
    // just after it in the same tick: read the status once it is.
    let degraded = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        cp.status_document(ns, "kube9-operator-status").filter(|s| s["health"] == "degraded")
    });
    let status = degraded.unwrap_or_else(|| {
        panic!("never degraded: {:?}\n{}", cp.status_document(ns, "kube9-operator-status"), agent.stderr())
    });
    let said = status["error"].as_str().unwrap_or_default();
    assert_eq!(
        said,
        format!(
            "Probing bars.example.com in namespace {ns:?}: 1 resource is not readable and not evaluated: Bar {ns}/odd \
             (invalid type: boolean `true`, expected a status object at line 1 column 4)"
        )
    );
    let addr = support::http::endpoint_from_log(&agent.stderr()).expect("the endpoint's address is logged");
    let (_, metrics, _) = support::http::get(addr, "/metrics");
    assert!(metrics.lines().any(|l| l == "opstatus_probe_resources 21"), "{metrics}");
}
