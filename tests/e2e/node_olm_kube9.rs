//! End to end on a real node: the OLM-and-kube9 example
//! (`manifests/examples/olm-kube9`, docs/olm.md "OLM and the kube9
//! extension together") as a user copies it, in its own namespace
//! `my-operator-system`, run by kubelet as a real Pod: the images from the
//! node's registry (opstatus's as `$IMAGE`, the stand-in operator's for
//! `my-operator.yaml`'s), plus what OLM adds (the OperatorCondition, its
//! Role for the operator's ServiceAccount, `olm.targetNamespaces` on the
//! pod). kubelet starts and probes the sidecar until the Pod is Ready; the
//! sidecar, with the pod's own token, writes the status in kube9-system
//! naming the operator's namespace, nothing of it in the operator's
//! namespace, and `Upgradeable` on the OperatorCondition follows a
//! Widget's `Migrating`. On v1.20, which predates native sidecars, the
//! example is rendered with `opstatus-plain` and `containers:`, as its
//! comments say for such clusters.
//!
//! Like the node's quick start, it writes `kube9-operator-status` in
//! kube9-system: it holds the shared-status lock and leaves no writer there.

use crate::support;

use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use support::TempDir;
use support::control_plane::{ControlPlane, ROOT, shared_status_namespaces};
use support::node::{Node, container_status, shared};
use support::resources::find;
use support::wait_for;

const EXAMPLE: &str = "manifests/examples/olm-kube9";
/// The example's namespace for the operator, kept as it is written.
const NS: &str = "my-operator-system";
const CSV: &str = "my-operator.v1.4.2";
const SELECTOR: &str = "app.kubernetes.io/name=my-operator";

/// `text` with `from` replaced by `to`, which must be there.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "no {from:?} in:\n{text}");
    text.replace(from, to)
}

/// A copy of `manifests/` whose example runs on this node: the images
/// from its registry (the stand-in operator serving its health endpoint on
/// the `:8081` the sidecar watches), `olm.targetNamespaces` on the pod as
/// OLM sets it, and the plain variant where kubelet predates native
/// sidecars.
fn checkout(node: &Node) -> TempDir {
    let dir = TempDir::new("node-olm-kube9");
    let copied = Command::new("cp").arg("-r").arg(format!("{ROOT}/manifests")).arg(dir.path()).status();
    assert!(copied.unwrap().success());
    let example = dir.path().join(EXAMPLE);
    let overlay = example.join("operator/kustomization.yaml");
    let mut text = std::fs::read_to_string(&overlay).unwrap();
    let image = format!("newName: {}, newTag: {}}}", node.opstatus_image(), env!("CARGO_PKG_VERSION"));
    text = edit(&text, "newName: registry.example/team/opstatus}", &image);
    if !node.native_sidecars() {
        text = edit(&text, "/components/opstatus ", "/components/opstatus-plain ");
        text = edit(&text, "initContainers:", "containers:");
    }
    std::fs::write(&overlay, text).unwrap();
    let stand_in = example.join("operator/my-operator.yaml");
    let mut text = std::fs::read_to_string(&stand_in).unwrap();
    text = edit(
        &text,
        "  template:\n    metadata:\n",
        "  template:\n    metadata:\n      annotations: {olm.targetNamespaces: my-operator-system}\n",
    );
    let operator = format!(
        "image: {}\n        args: [--health-probe-bind-address=:8081]\n        ports: [{{containerPort: 8081}}]\n        \
         readinessProbe: {{httpGet: {{path: /readyz, port: 8081}}, periodSeconds: 2}}\n",
        node.operator_image()
    );
    text = edit(&text, "image: registry.example.com/my-operator:1.4.2\n", &operator);
    std::fs::write(&stand_in, text).unwrap();
    dir
}

/// What OLM makes for the CSV before its Deployment: the OperatorCondition
/// and the Role that lets the operator's ServiceAccount update it.
fn install_as_olm(cp: &ControlPlane) {
    cp.install_crd("operatorconditions.operators.coreos.com");
    let condition = json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": CSV, "namespace": NS},
        "spec": {"deployments": ["my-operator"], "serviceAccounts": ["my-operator"]}});
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&condition.to_string()));
    let resource = "--resource=operatorconditions.operators.coreos.com";
    let name = format!("--resource-name={CSV}");
    cp.kubectl_ok(&["-n", NS, "create", "role", CSV, "--verb=get,update,patch", resource, &name]);
    let account = format!("--serviceaccount={NS}:my-operator");
    cp.kubectl_ok(&["-n", NS, "create", "rolebinding", CSV, &format!("--role={CSV}"), &account]);
}

/// The Widget `w1` of the operator's namespace, `Migrating` `migrating`.
fn widget_migrating(cp: &ControlPlane, migrating: &str) {
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": NS}});
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&widget.to_string()));
    let condition = json!({"type": "Migrating", "status": migrating, "reason": "SetByTest", "message": "Set by the test.",
        "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let patch = json!([{"op": "add", "path": "/status", "value": {"conditions": [condition]}}]);
    let patch = patch.to_string();
    cp.kubectl_ok(&["-n", NS, "patch", "widget", "w1", "--subresource=status", "--type=json", "-p", &patch]);
}

#[test]
fn e2e_node_the_olm_kube9_example_runs_as_a_pod_with_its_status_in_kube9_system() {
    let node = shared();
    let _kube9_system = shared_status_namespaces();
    let cp = node.cp();
    let started = Instant::now();
    cp.kubectl_ok(&["apply", "-f", &format!("{ROOT}/tests/fixtures/my-operator/widgets.example.com.yaml")]);
    cp.wait_established("widgets.example.com");
    cp.create_namespace(NS);
    install_as_olm(cp);
    widget_migrating(cp, "False");

    let dir = checkout(node);
    let rendered = cp.kubectl_ok(&["kustomize", dir.path().join(EXAMPLE).to_str().unwrap()]);
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&rendered));
    let pod = node.wait_ready(NS, SELECTOR, 1, Duration::from_secs(240)).remove(0);
    let ready_after = started.elapsed();
    let opstatus = container_status(&pod, "opstatus");
    let image = format!("{}:{}", node.opstatus_image(), env!("CARGO_PKG_VERSION"));
    assert_eq!(opstatus["image"], image, "{opstatus}");
    assert!(opstatus["state"]["running"].is_object(), "{opstatus}");
    assert!(!node.probe_successes("Readiness", &pod, "opstatus").is_empty(), "kubelet probed opstatus");
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    let logs = || {
        let out = cp.kubectl(&["-n", NS, "logs", &name, "-c", "opstatus"], None);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // The status where the kube9 extension looks, naming the operator's namespace.
    let status = wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        cp.status_document("kube9-system", "kube9-operator-status")
    })
    .unwrap_or_else(|| panic!("no status in kube9-system:\n{}", logs()));
    assert_eq!(status["namespace"].as_str(), Some(NS), "the status names where the operator runs: {status}");
    assert_eq!(status["version"].as_str(), Some("1.4.2"), "{status}");

    // Upgradeable follows the Widget: True, then False naming it.
    let upgradeable = |want: &str| {
        wait_for(Duration::from_secs(120), Duration::from_millis(500), || {
            let oc = cp.operator_condition(NS, CSV);
            find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == want).cloned()
        })
        .unwrap_or_else(|| panic!("Upgradeable never {want}: {}\n{}", cp.operator_condition(NS, CSV), logs()))
    };
    let up = upgradeable("True");
    assert_eq!(up["message"], "No resource blocks an upgrade (1 checked)", "{up}");
    widget_migrating(cp, "True");
    let held = upgradeable("False");
    assert_eq!(held["message"], format!("Upgrade blocked by 1 resource: Widget {NS}/w1: Migrating"), "{held}");

    // Nothing in the operator's namespace but the OperatorCondition: no
    // status there, and no warning that the extension would not find it.
    assert!(cp.configmap(NS, "kube9-operator-status").is_none(), "a status in {NS} too");
    let log = logs();
    assert!(!log.contains("is outside kube9-system and default"), "{log}");
    crate::node_quick_start::leave_the_status_to_nobody(cp, NS, "my-operator");
    println!(
        "e2e node olm-kube9 (kubelet {}): Ready in {:.1} s, status in kube9-system naming {NS}; Upgradeable True, \
         then False, {:.1} s in all",
        node.version(),
        ready_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
