//! End to end, real kube-apiserver, OLM's OperatorCondition: `Upgradeable`
//! follows a Foo's `Migrating` condition within a check interval plus one
//! second, with metav1 transition times, without disturbing the operator's
//! own conditions, within the RBAC OLM grants (get, update, patch on the one
//! name) plus `list` on the Foos; no write when nothing changed.

use crate::support;
use crate::support::run_args::Run;

use serde_json::{Value, json};
use std::time::Duration;
use support::control_plane::{ControlPlane, Deployed, release_bin, shared};
use support::resources::{condition, find};
use support::wait_for;

const NAME: &str = "demo-operator.v1.0.0";

fn setup(label: &str) -> (&'static ControlPlane, Deployed) {
    let cp = shared();
    cp.install_crd("foos.example.com");
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy(label);
    cp.apply_manifests("manifests/olm", &pod.namespace, &[]);
    cp.grant_operator_condition_as_olm(&pod.namespace, NAME);
    (cp, pod)
}

fn pod_env(cp: &ControlPlane, pod: &Deployed) -> Vec<(String, String)> {
    let mut env = cp.pod_env(pod);
    // What OLM injects into every container of the operator's Deployment.
    env.push(("OPERATOR_CONDITION_NAME".into(), NAME.into()));
    env
}

/// Waits until the OperatorCondition's `kind` condition has `status`.
fn wait_condition(cp: &ControlPlane, ns: &str, kind: &str, status: &str) -> Value {
    wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        let oc = cp.operator_condition(ns, NAME);
        find(&oc["spec"]["conditions"], kind).filter(|c| c["status"] == status).cloned()
    })
    .unwrap_or_else(|| panic!("{kind} never {status}: {}", cp.operator_condition(ns, NAME)["spec"]))
}

#[test]
fn e2e_upgradeable_follows_a_foo_and_keeps_the_operators_conditions() {
    let (cp, pod) = setup("olm");
    let ns = pod.namespace.as_str();
    let operators_own = condition("OperatorReady", "True");
    cp.create_operator_condition(ns, NAME, std::slice::from_ref(&operators_own));
    cp.create_foo(ns, "alpha", &[("Migrating", "False")]);
    cp.create_foo(ns, "beta", &[]); // no conditions: unknown, never blocks
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let mut agent = Run::every("60s")
        .checks("1s")
        .flag("--probe", probe)
        .flag("--probe-namespace", ns)
        .start(&release_bin(), &pod_env(cp, &pod));

    let up = wait_condition(cp, ns, "Upgradeable", "True");
    assert_eq!(up["reason"], "AsExpected");
    assert_eq!(up["message"], "No resource blocks an upgrade (2 checked)");
    let first_transition = up["lastTransitionTime"].as_str().unwrap().to_string();

    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "True")]);
    let flipped = cp.admin_request_time("patch", &format!("/namespaces/{ns}/foos/alpha/status"));
    let blocked = wait_condition(cp, ns, "Upgradeable", "False");
    let bound = Duration::from_secs(2); // the check interval (1 s) + 1 s
    let to_false = cp.update_latency(&pod.user, "/operatorconditions/", flipped);
    assert!(to_false <= bound, "Upgradeable=False written {to_false:?} after the flip");
    assert_eq!(blocked["reason"], "NotUpgradeable");
    assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Foo {ns}/alpha: Migrating"));
    let blocked_transition = blocked["lastTransitionTime"].as_str().unwrap().to_string();
    assert!(blocked_transition >= first_transition);

    // The operator changes its own condition meanwhile (get + replace, as
    // controller-runtime does); opstatus's next write must keep it.
    let mut oc = cp.operator_condition(ns, NAME);
    let own = oc["spec"]["conditions"].as_array_mut().unwrap().iter_mut().find(|c| c["type"] == "OperatorReady");
    own.unwrap()["message"] = json!("Changed by the operator.");
    cp.kubectl_stdin_ok(&["replace", "-f", "-"], Some(&oc.to_string()));

    std::thread::sleep(Duration::from_millis(1100)); // distinct lastTransitionTime seconds
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "False")]);
    let flipped = cp.admin_request_time("patch", &format!("/namespaces/{ns}/foos/alpha/status"));
    let up = wait_condition(cp, ns, "Upgradeable", "True");
    let to_true = cp.update_latency(&pod.user, "/operatorconditions/", flipped);
    assert!(to_true <= bound, "Upgradeable=True written {to_true:?} after the flip");
    let up_transition = up["lastTransitionTime"].as_str().unwrap();
    assert!(up_transition > blocked_transition.as_str(), "{up_transition} vs {blocked_transition}");

    // Quiet for a while: no more writes, the transition time stays.
    std::thread::sleep(Duration::from_secs(3));
    let oc = cp.operator_condition(ns, NAME);
    assert_eq!(find(&oc["spec"]["conditions"], "Upgradeable").unwrap()["lastTransitionTime"], up_transition);
    let own = find(&oc["spec"]["conditions"], "OperatorReady").unwrap();
    assert_eq!(own["message"], "Changed by the operator.");
    assert_eq!(
        (own["status"].clone(), own["reason"].clone()),
        (operators_own["status"].clone(), operators_own["reason"].clone())
    );
    assert_eq!(oc["spec"]["deployments"], json!(["demo-operator"]));

    // Requests: only the verbs OLM grants (get, update) plus the list and
    // watch of the Foos, and
    // exactly one update per change of Upgradeable (True, False, True).
    let events = cp.audit_events(&pod.user);
    let on_oc: Vec<_> = events.iter().filter(|e| e.uri.contains("/operatorconditions/")).collect();
    assert!(on_oc.iter().all(|e| e.verb == "get" || e.verb == "update"), "{on_oc:?}");
    let updates = on_oc.iter().filter(|e| e.verb == "update" && e.code == 200).count();
    assert_eq!(updates, 3, "{on_oc:?}");
    assert!(
        events
            .iter()
            .filter(|e| e.uri.contains("/foos"))
            .all(|e| (e.verb == "list" || e.verb == "watch") && e.code == 200),
        "{events:?}"
    );

    // Upgradeable=False is not a health problem: the ConfigMap says healthy.
    let status = cp.status_document(ns, "kube9-operator-status").unwrap();
    assert_eq!(status["health"], "healthy", "{status}");
    assert_eq!(agent.exited(), None);
    println!(
        "e2e OperatorCondition: Upgradeable=False written {to_false:.2?} and True {to_true:.2?} after each flip \
         (bound {bound:?}); 3 updates for 3 changes"
    );
}

#[test]
fn e2e_missing_operator_condition_degrades_then_annotations_drive_important() {
    let (cp, pod) = setup("olm-missing");
    let ns = pod.namespace.as_str();
    cp.create_foo(ns, "gamma", &[("BadConnectivity", "True"), ("Migrating", "False")]);
    let mut agent = Run::every("60s")
        .checks("1s")
        .flag("--probe-from-crd-annotations", "foos.example.com")
        .flag("--probe-namespace", ns)
        .start(&release_bin(), &pod_env(cp, &pod));
    let status = || cp.status_document(ns, "kube9-operator-status");
    let missing = format!(
        "OperatorCondition {ns}/{NAME} does not exist: OLM creates it with the operator's CSV \
         (is OPERATOR_CONDITION_NAME right?)"
    );
    let seen = wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        status().filter(|s| s["health"] == "degraded" && s["error"] == missing.as_str())
    });
    assert!(seen.is_some(), "never degraded for the missing object: {:?}\n{}", status(), agent.stderr());
    assert_eq!(agent.exited(), None, "a missing object is not a crash");

    cp.create_operator_condition(ns, NAME, &[]);
    let important = wait_condition(cp, ns, "Important", "True");
    assert_eq!(important["reason"], "ResourcesNeedAttention");
    assert_eq!(important["message"], format!("Attention needed for 1 resource: Foo {ns}/gamma: BadConnectivity"));
    let up = wait_condition(cp, ns, "Upgradeable", "True");
    assert_eq!(up["message"], "No resource blocks an upgrade (1 checked)");
    // The Important message is the ConfigMap's degraded reason.
    let degraded = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        status().filter(|s| s["health"] == "degraded" && s["error"] == important["message"])
    });
    assert!(degraded.is_some(), "{:?}", status());

    cp.set_foo_conditions(ns, "gamma", &[("BadConnectivity", "False"), ("Migrating", "False")]);
    wait_condition(cp, ns, "Important", "False");
    let healthy =
        wait_for(Duration::from_secs(10), Duration::from_millis(100), || status().filter(|s| s["health"] == "healthy"));
    assert!(healthy.is_some(), "{:?}", status());
    let log = agent.stderr();
    assert!(
        log.contains(&missing) && log.contains(&format!("OperatorCondition {ns}/{NAME} is writable again")),
        "{log}"
    );
}

/// A typo in an expression (`!Migratng` for `!Migrating`) cannot say
/// `Upgradeable=False` (absence means false, OLM's rule), but it no longer
/// passes in silence: the log warns once with the name meant, and the
/// `Upgradeable=True` message says which name no Foo carries.
#[test]
fn e2e_a_condition_name_no_resource_carries_is_called_out() {
    let (cp, pod) = setup("typo");
    let ns = pod.namespace.as_str();
    cp.create_operator_condition(ns, NAME, &[]);
    cp.create_foo(ns, "alpha", &[("Migrating", "True"), ("Ready", "True")]);
    let probe = "example.com/v1/foos:Upgradeable=!Migratng";
    let out = support::run_to_end(
        &release_bin(),
        &["once", "--probe", probe, "--probe-namespace", ns],
        &pod_env(cp, &pod),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let said = "No Foo carries the condition Migratng that the Upgradeable expression names: did you mean Migrating?";
    assert_eq!(stderr.matches(said).count(), 1, "warned once:\n{stderr}");
    assert!(stderr.lines().any(|l| l.contains(said) && l.contains("WARN")), "{stderr}");
    let up = find(&cp.operator_condition(ns, NAME)["spec"]["conditions"], "Upgradeable").cloned().unwrap();
    assert_eq!(up["status"], "True", "{up}");
    assert_eq!(up["message"], format!("No resource blocks an upgrade (1 checked). {said}"));
}

/// Where OLM v1 runs (its `olm.operatorframework.io` API is served) there
/// is no OperatorCondition API: the status says so in one line and names
/// readiness as the lever, instead of asking whether OLM is installed. A
/// control plane of its own: the shared one has OLM's CRD.
#[test]
fn under_olm_v1_the_missing_operator_condition_api_is_said_plainly() {
    let own = ControlPlane::start();
    let cp = &own;
    cp.install_crd("foos.example.com");
    cp.install_crd("clusterextensions.olm.operatorframework.io");
    let pod = cp.deploy("olm-v1");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.create_foo(ns, "alpha", &[("Migrating", "False")]);
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let out = support::run_to_end(
        &release_bin(),
        &["once", "--probe", probe, "--probe-namespace", ns],
        &pod_env(cp, &pod),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let status = cp.status_document(ns, "kube9-operator-status").unwrap();
    assert_eq!(status["health"], "degraded");
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains("is not served, but OLM v1's (olm.operatorframework.io) is: OLM v1 has no OperatorCondition"),
        "{error}"
    );
}
