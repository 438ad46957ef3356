//! End to end, real kube-apiserver: an operator laid out as kubebuilder
//! scaffolds it (`config/default` with `namePrefix: gadget-`, its own RBAC
//! and manager, two replicas electing a leader through a Lease) with
//! opstatus added as docs/install.md says for a status in kube9-system,
//! leader election included; rendered and applied for real, nothing
//! patched by hand. Two sidecars run as the operator's account
//! (`gadget-manager`, whose RoleBindings the components made) with the
//! environment the render gives them; the Lease, in the operator's
//! namespace where kubebuilder's own Role lets that account read it, moves
//! from one pod to the other, and the publisher of the status in
//! kube9-system follows it. Events land beside the pods. With the
//! kube9-system binding gone, the 403 names the Role that grants the write.
//! On the v1.20 server, which predates native sidecars, the plain variant.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::control_plane::{ControlPlane, shared, shared_status_namespaces};
use support::kubebuilder::{self, ACCOUNT, Layout, NAMESPACE, holder, lead};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, run_to_end, wait_for};

const CM: &str = "kube9-operator-status";

/// The sidecar's environment in `pod` as the rendered Deployment gives it
/// (the downward API's values filled in), with the account's token.
fn sidecar_env(
    cp: &ControlPlane,
    sa: &ServiceAccountDir,
    deployment: &Value,
    list: &str,
    pod: &str,
) -> Vec<(String, String)> {
    let containers = deployment["spec"]["template"]["spec"][list].as_array().unwrap();
    let sidecar = containers.iter().find(|c| c["name"] == "opstatus").expect("the sidecar");
    let mut env = support::pod_env(cp.port(), sa);
    for e in sidecar["env"].as_array().unwrap() {
        let value = match (e["value"].as_str(), e["valueFrom"]["fieldRef"]["fieldPath"].as_str()) {
            (Some(v), _) => v.to_string(),
            (None, Some("metadata.namespace")) => NAMESPACE.into(),
            (None, Some("metadata.name")) => pod.into(),
            (None, Some("metadata.uid")) => format!("0b9f1c2e-5d4a-4c3b-9a8f-00000000000{}", &pod[pod.len() - 1..]),
            (None, Some(_)) => "0.3.0".into(),
            (None, None) => panic!("{e}"),
        };
        env.push((e["name"].as_str().unwrap().into(), value));
    }
    env
}

#[test]
fn e2e_a_kubebuilder_operator_with_its_status_in_kube9_system_follows_its_leader_with_no_hand_patch() {
    let _kube9_system = shared_status_namespaces();
    let cp = shared();
    let _leave = kubebuilder::Leave(cp, None);
    let native = cp.kubectl(&["explain", "pods.spec.initContainers.restartPolicy"], None).status.success();
    let (sidecar, list) = if native { ("opstatus", "initContainers") } else { ("opstatus-plain", "containers") };
    let dir = kubebuilder::workspace(&Layout { sidecar, ..Layout::default() });
    let yaml = kubebuilder::render(&dir).unwrap_or_else(|e| panic!("{e}"));
    let _ = cp.kubectl(&["-n", "kube9-system", "delete", "configmap", CM, "--ignore-not-found"], None);
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&yaml));
    let objects = kubebuilder::objects(&yaml);
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();

    let token = cp.token(NAMESPACE, ACCOUNT);
    let sa = ServiceAccountDir::new(&token, &cp.ca_pem(), NAMESPACE);
    let args = ["run", "--interval", "2s", "--check-interval", "1s"];
    let (pod_a, pod_b) = ("gadget-controller-manager-7d9f-a", "gadget-controller-manager-7d9f-b");
    lead(cp, pod_a);
    let a = RunningAgent::start(&opstatus_bin(), &args, &sidecar_env(cp, &sa, deployment, list, pod_a));
    let b = RunningAgent::start(&opstatus_bin(), &args, &sidecar_env(cp, &sa, deployment, list, pod_b));
    let logs = || format!("{}\n---\n{}", a.stderr(), b.stderr());
    wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        (holder(cp).as_deref() == Some(pod_a)).then_some(())
    })
    .unwrap_or_else(|| panic!("the leader's sidecar never published in kube9-system:\n{}", logs()));
    let status = cp.status_document("kube9-system", CM).unwrap();
    assert_eq!(
        (status["namespace"].as_str(), status["health"].as_str()),
        (Some(NAMESPACE), Some("healthy")),
        "{status}"
    );
    assert!(cp.configmap(NAMESPACE, CM).is_none(), "a status in {NAMESPACE} too");

    lead(cp, pod_b);
    let moved = Instant::now();
    wait_for(Duration::from_secs(20), Duration::from_millis(200), || {
        (holder(cp).as_deref() == Some(pod_b)).then_some(())
    })
    .unwrap_or_else(|| panic!("the publisher did not follow the Lease:\n{}", logs()));
    let followed = moved.elapsed();
    assert!(
        a.logged_within(&format!("Standing by: {pod_b} publishes (the operator's leader)"), Duration::from_secs(10))
    );
    let out = run_to_end(
        &opstatus_bin(),
        &["get", "--kubeconfig", cp.kubeconfig(), "-o", "json"],
        &[],
        Duration::from_secs(30),
    );
    let reading: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        (reading["mode"].as_str(), reading["namespace"].as_str()),
        (Some("operated"), Some("kube9-system")),
        "{reading}"
    );
    assert_eq!(reading["publisher"]["identity"], pod_b, "{reading}");
    // Nothing refused by RBAC (a read that timed out on a busy machine is no refusal).
    let log = logs();
    assert!(!log.contains("403 Forbidden"), "{log}");
    let events = cp.get_json(&format!("/api/v1/namespaces/{NAMESPACE}/events")).unwrap();
    assert!(events["items"].as_array().is_some_and(|e| !e.is_empty()), "Events beside the pods: {events}");
    drop((a, b));

    // Without the component's binding in kube9-system, the 403 says which object grants the write.
    cp.kubectl_ok(&["-n", "kube9-system", "delete", "rolebinding", "kube9-operator-status-writer"]);
    let user = format!("--as=system:serviceaccount:{NAMESPACE}:{ACCOUNT}");
    let revoked = wait_for(Duration::from_secs(20), Duration::from_millis(200), || {
        let can = cp.kubectl(
            &["-n", "kube9-system", "auth", "can-i", "patch", "configmaps/kube9-operator-status", &user],
            None,
        );
        (String::from_utf8_lossy(&can.stdout).trim() == "no").then_some(())
    });
    assert!(revoked.is_some(), "the binding's removal never took effect");
    // The leader's sidecar, which would write.
    let out =
        run_to_end(&opstatus_bin(), &["once"], &sidecar_env(cp, &sa, deployment, list, pod_b), Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("\"system:serviceaccount:{NAMESPACE}:{ACCOUNT}\"")), "{stderr}");
    assert!(
        stderr.contains(
            "see the Role kube9-operator-status-writer and its RoleBinding in the status's namespace, \
                         manifests/components/status-in-kube9-system/rbac.yaml"
        ),
        "{stderr}"
    );
    println!("e2e kubebuilder layout ({sidecar}): the status in kube9-system followed the Lease in {followed:.2?}");
}
