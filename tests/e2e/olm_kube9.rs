//! End to end, real kube-apiserver: the OLM-and-kube9 example
//! (`manifests/examples/olm-kube9`) as a user copies it, rendered with
//! kubectl's kustomize, applied server-side for real, and its sidecar run
//! "as in a pod" with the container's own args and environment, as the
//! operator's ServiceAccount: the status lands in kube9-system, where the
//! kube9 extension looks, naming the operator's namespace; the
//! OperatorCondition OLM made in the operator's namespace gets
//! `Upgradeable`, which follows a Widget's `Migrating`; nothing is written
//! in the operator's namespace but that. On v1.20, which predates native
//! sidecars, the example is rendered with `opstatus-plain` and
//! `containers:`, as its comments say for such clusters.

use crate::support;

use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;
use support::control_plane::{ControlPlane, ROOT, shared, shared_status_namespaces, unique_namespace};
use support::operator_endpoint::{Habits, OperatorEndpoint};
use support::resources::find;
use support::{RunningAgent, ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end, wait_for};

const EXAMPLE: &str = "manifests/examples/olm-kube9";
const CSV: &str = "my-operator.v1.4.2";
const ACCOUNT: &str = "my-operator";

/// A copy of `manifests/` whose example names the operator's namespace
/// `ns`; on a server without native sidecars, the plain variant.
fn workspace(cp: &ControlPlane, ns: &str) -> TempDir {
    let dir = TempDir::new("olm-kube9");
    let ok = Command::new("cp").arg("-r").arg(format!("{ROOT}/manifests")).arg(dir.path()).status().unwrap();
    assert!(ok.success());
    let operator = dir.path().join(EXAMPLE).join("operator/kustomization.yaml");
    let mut text = std::fs::read_to_string(&operator).unwrap();
    assert!(text.contains("namespace: my-operator-system"), "{text}");
    text = text.replace("namespace: my-operator-system", &format!("namespace: {ns}"));
    if !cp.kubectl(&["explain", "pods.spec.initContainers.restartPolicy"], None).status.success() {
        assert!(text.contains("/components/opstatus ") && text.contains("initContainers:"), "{text}");
        text = text
            .replace("/components/opstatus ", "/components/opstatus-plain ")
            .replace("initContainers:", "containers:");
    }
    std::fs::write(operator, text).unwrap();
    dir
}

/// What OLM creates for the CSV: its OperatorCondition, and the Role on it
/// for the operator's ServiceAccount.
fn olm_objects(ns: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v2\nkind: OperatorCondition\nmetadata: {{name: {CSV}, namespace: {ns}}}\n\
         spec: {{deployments: [my-operator], serviceAccounts: [{ACCOUNT}]}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {CSV}, namespace: {ns}}}\n\
         rules:\n- apiGroups: [operators.coreos.com]\n  resources: [operatorconditions]\n  resourceNames: [{CSV}]\n  \
         verbs: [get, update, patch]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {CSV}, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {CSV}}}\n\
         subjects:\n- {{kind: ServiceAccount, name: {ACCOUNT}, namespace: {ns}}}\n"
    )
}

/// A Widget whose `Migrating` condition is `migrating`.
fn set_widget(cp: &ControlPlane, ns: &str, name: &str, migrating: &str) {
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": ns}});
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&widget.to_string()));
    let status = json!({"status": {"conditions": [{"type": "Migrating", "status": migrating, "reason": "SetByTest",
        "message": "Set by the test.", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    cp.kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "widget",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

/// The value of the container's `env` entry in the pod `pod` of `ns`,
/// where OLM installed the operator for its own namespace
/// (`olm.targetNamespaces` is then that namespace).
fn env_value(entry: &Value, ns: &str, pod: &str, labels: &Value) -> String {
    if let Some(v) = entry["value"].as_str() {
        return v.to_string();
    }
    match entry["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
        Some("metadata.namespace") => ns.to_string(),
        Some("metadata.name") => pod.to_string(),
        Some("metadata.uid") => "00000000-0000-4000-8000-000000000002".to_string(),
        Some("metadata.annotations['olm.targetNamespaces']") => ns.to_string(),
        Some("metadata.labels['app.kubernetes.io/version']") => {
            labels["app.kubernetes.io/version"].as_str().unwrap().to_string()
        }
        other => panic!("a field the test does not resolve: {other:?} in {entry}"),
    }
}

/// The sidecar of the applied Deployment, started as kubelet would, its
/// health check pointed at `operator` (the operator's own endpoint, which
/// the example has on 127.0.0.1:8081).
fn run_the_sidecar(
    cp: &ControlPlane,
    ns: &str,
    operator: &OperatorEndpoint,
) -> (RunningAgent, TempDir, ServiceAccountDir) {
    let deployment: Value =
        serde_json::from_str(&cp.kubectl_ok(&["-n", ns, "get", "deployment", "my-operator", "-o", "json"])).unwrap();
    let template = &deployment["spec"]["template"];
    let spec = &template["spec"];
    let container = ["initContainers", "containers"]
        .iter()
        .filter_map(|list| spec[list].as_array())
        .flatten()
        .find(|c| c["name"] == "opstatus")
        .unwrap_or_else(|| panic!("no opstatus container: {deployment}"));
    assert_eq!(spec["serviceAccountName"], ACCOUNT, "the sidecar runs as the operator's account");
    let run = TempDir::new("olm-kube9-run"); // The emptyDir at /run/opstatus.
    let run_dir = run.path().display().to_string();
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| match a.as_str().unwrap() {
            "--listen=:8090" => "--listen=127.0.0.1:0".to_string(), // Tests listen on loopback only.
            "--watch-url=http://127.0.0.1:8081/healthz" => format!("--watch-url={}", operator.url()),
            a => a.replace("/run/opstatus", &run_dir),
        })
        .collect();
    assert!(args.contains(&format!("--watch-url={}", operator.url())), "the example's health check moved: {args:?}");
    let sa = ServiceAccountDir::new(&cp.token(ns, ACCOUNT), &cp.ca_pem(), ns);
    let mut env = pod_env(cp.port(), &sa);
    for entry in container["env"].as_array().unwrap() {
        let value = env_value(entry, ns, "my-operator-7c9d8f6b5-x2kq4", &template["metadata"]["labels"]);
        env.push((entry["name"].as_str().unwrap().to_string(), value));
    }
    env.push(("OPSTATUS_INTERVAL".into(), "2s".into()));
    env.push(("OPSTATUS_CHECK_INTERVAL".into(), "1s".into()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (RunningAgent::start(&opstatus_bin(), &args, &env), run, sa)
}

#[test]
fn e2e_the_olm_kube9_example_writes_the_status_in_kube9_system_and_upgradeable_beside_the_operator() {
    let _kube9_system = shared_status_namespaces();
    let cp = shared();
    cp.install_crd("operatorconditions.operators.coreos.com");
    cp.kubectl_ok(&["apply", "-f", &format!("{ROOT}/tests/fixtures/my-operator/widgets.example.com.yaml")]);
    cp.wait_established("widgets.example.com");
    // A status another test left in kube9-system is another writer's: start from none.
    cp.kubectl_ok(&["-n", "kube9-system", "delete", "configmap", "kube9-operator-status", "--ignore-not-found"]);
    let ns = unique_namespace("olm-kube9");
    cp.create_namespace(&ns);

    let dir = workspace(cp, &ns);
    let rendered = cp.kubectl_ok(&["kustomize", dir.path().join(EXAMPLE).to_str().unwrap()]);
    cp.kubectl_stdin_ok(
        &["apply", "--server-side", "--force-conflicts", "--field-manager=olm-kube9", "-f", "-"],
        Some(&rendered),
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&olm_objects(&ns)));
    set_widget(cp, &ns, "w1", "False");

    // The operator answers: opstatus publishes nothing before its first answer.
    let operator = OperatorEndpoint::start(Habits::default());
    let (agent, _run, _sa) = run_the_sidecar(cp, &ns, &operator);
    let status = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        cp.status_document("kube9-system", "kube9-operator-status")
    })
    .unwrap_or_else(|| panic!("no status in kube9-system: {}", agent.stderr()));
    assert_eq!(status["namespace"].as_str(), Some(ns.as_str()), "the status names where the operator runs: {status}");
    assert_eq!(status["version"].as_str(), Some("1.4.2"), "{status}");
    assert_eq!(status["health"].as_str(), Some("healthy"), "the operator answers: {status}");
    let upgradeable = |want: &str| {
        wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
            let oc = cp.operator_condition(&ns, CSV);
            find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == want).cloned()
        })
        .unwrap_or_else(|| panic!("Upgradeable never {want}: {}\n{}", cp.operator_condition(&ns, CSV), agent.stderr()))
    };
    let up = upgradeable("True");
    assert_eq!(up["message"], "No resource blocks an upgrade (1 checked)", "{up}");
    set_widget(cp, &ns, "w1", "True");
    let held = upgradeable("False");
    assert_eq!(held["message"], format!("Upgrade blocked by 1 resource: Widget {ns}/w1: Migrating"), "{held}");

    // Nothing in the operator's namespace but the OperatorCondition: no
    // status there, and no warning that the extension would not find it.
    assert!(cp.configmap(&ns, "kube9-operator-status").is_none(), "a status in {ns} too");
    let stderr = agent.stderr();
    assert!(!stderr.contains("is outside kube9-system and default"), "{stderr}");

    // `opstatus get` finds it where the extension looks, and the hold.
    let get = ["get", "--kubeconfig", cp.kubeconfig(), "-o", "json"];
    let out = run_to_end(&opstatus_bin(), &get, &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["namespace"].as_str(), Some("kube9-system"), "{shown}");
    assert_eq!(shown["status"]["namespace"].as_str(), Some(ns.as_str()), "{shown}");
    let held = shown["upgradeable"].as_array().and_then(|u| u.iter().find(|c| c["status"] == "False"));
    assert!(held.is_some_and(|c| c["namespace"] == ns.as_str() && c["name"] == CSV), "{shown}");
    println!(
        "e2e olm-kube9 on kube-apiserver {}: status in kube9-system naming {ns}; Upgradeable True, then False",
        cp.git_version()
    );
}
