//! End to end, real kube-apiserver: the install guide's way to be seen by
//! the kube9 extension from another namespace: the Role in kube9-system,
//! bound to the sidecar's ServiceAccount, lets the sidecar write
//! kube9-system/kube9-operator-status while the status names the
//! operator's namespace; `opstatus get` then finds it where the extension
//! looks.

use crate::support;

use std::time::Duration;
use support::control_plane::{ROOT, shared};
use support::{opstatus_bin, run_to_end};

/// The kube9-system Role and RoleBinding of the `status-in-kube9-system`
/// component (docs/install.md), for `sa` in `ns` (the component fills the
/// subject in from `opstatus-target`; `tests/e2e/first_hour.rs` renders it).
fn readme_rbac(ns: &str, sa: &str) -> String {
    let path = format!("{ROOT}/manifests/components/status-in-kube9-system/rbac.yaml");
    let rbac = std::fs::read_to_string(path).unwrap();
    let subject = "{kind: ServiceAccount, name: operator, namespace: operator}";
    let docs: Vec<String> = rbac
        .split("\n---\n")
        .filter(|d| d.contains("name: kube9-operator-status-writer\n  namespace: kube9-system"))
        .map(|d| d.replace(subject, &format!("{{kind: ServiceAccount, name: {sa}, namespace: {ns}}}")))
        .collect();
    assert_eq!(docs.len(), 2, "the writer Role and its binding: {rbac}");
    assert!(docs[1].contains(&format!("name: {sa}, namespace: {ns}")), "{}", docs[1]);
    docs.join("\n---\n")
}

#[test]
fn e2e_the_readme_role_lets_the_sidecar_write_into_kube9_system() {
    let _kube9_system = support::control_plane::shared_status_namespaces();
    let cp = shared();
    let _ = cp.kubectl(&["create", "namespace", "kube9-system"], None);
    // A status another test of this control plane left there is another
    // writer's, which opstatus leaves alone for a while: start from none.
    cp.kubectl_ok(&["-n", "kube9-system", "delete", "configmap", "kube9-operator-status", "--ignore-not-found"]);
    let pod = cp.deploy("my-operator-system");
    let env = cp.pod_env(&pod);
    let args = ["once", "--namespace", "kube9-system", "--operator-namespace", &pod.namespace];

    // Without the Role there, the write is refused.
    let out = run_to_end(&opstatus_bin(), &args, &env, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("403"), "{stderr}");

    cp.kubectl_stdin_ok(&["-n", "kube9-system", "apply", "-f", "-"], Some(&readme_rbac(&pod.namespace, "opstatus")));
    let out = run_to_end(&opstatus_bin(), &args, &env, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("is outside kube9-system and default"), "{stderr}");

    // Where the extension looks, naming where the operator runs.
    let get = ["get", "--kubeconfig", cp.kubeconfig(), "-o", "json"];
    let out = run_to_end(&opstatus_bin(), &get, &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["mode"].as_str(), v["namespace"].as_str()), (Some("operated"), Some("kube9-system")), "{v}");
    assert_eq!(v["status"]["namespace"].as_str(), Some(pod.namespace.as_str()), "{v}");
}
