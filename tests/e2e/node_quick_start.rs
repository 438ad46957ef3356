//! End to end on a real node (kubelet, containerd, a registry on
//! 127.0.0.1: `tests/support/node.rs`): the README's quick start, every
//! `sh` block run as written by bash from a user's checkout, including
//! `kubectl rollout status`: the image is built with buildah from the
//! Containerfile and pushed to the node's registry, `IMAGE` names it, and
//! kubelet pulls it, starts it and probes it until the rollout completes.
//! The last block, `opstatus get`, must show what the README says.
//!
//! The quick start writes the status in kube9-system, as the OLM-and-kube9
//! example does (`node_olm_kube9`): each holds the shared-status lock and
//! leaves kube9-system without a writer ([`leave_the_status_to_nobody`]).

use crate::quick_start::{Laptop, script, section_blocks};
use crate::support;

use std::time::Instant;
use support::control_plane::{ControlPlane, shared_status_namespaces};
use support::node::{container_status, shared};

/// Stops the writer a test started in kube9-system (its Deployment `name`
/// in `ns`, every Pod gone) and deletes the status it wrote there, so
/// that the next test on the node finds no other writer.
pub(crate) fn leave_the_status_to_nobody(cp: &ControlPlane, ns: &str, name: &str) {
    let deployment = format!("deployment/{name}");
    cp.kubectl_ok(&["-n", ns, "delete", &deployment, "--cascade=foreground", "--wait", "--timeout=180s"]);
    cp.kubectl_ok(&["-n", "kube9-system", "delete", "configmap", "kube9-operator-status", "--ignore-not-found"]);
}

#[test]
fn e2e_node_the_readme_quick_start_runs_as_written_on_a_real_kubelet() {
    let blocks = section_blocks("README.md", "## Quick start");
    let commands = script(&blocks);
    assert!(commands.contains("kubectl -n kube9-system rollout status"), "the quick start waits for the rollout");
    assert_eq!(commands.trim().lines().last(), Some("opstatus get"), "the last step is `opstatus get`");
    let expected = blocks.last().filter(|(info, _)| info.is_empty()).expect("the quick start ends with what get shows");

    let node = shared();
    let _kube9_system = shared_status_namespaces();
    let laptop = Laptop::with_image(node.cp(), &node.opstatus_image());
    let started = Instant::now();
    let shown = laptop.run(&commands);
    let took = started.elapsed();
    for line in expected.1.lines().filter(|l| !l.trim().is_empty()) {
        assert!(shown.lines().any(|l| l == line), "the README promises {line:?}; the commands printed:\n{shown}");
    }

    // It was kubelet that ran it: the image from the registry, started and Ready.
    let pods = node.pods("kube9-system", "app.kubernetes.io/name=opstatus");
    assert_eq!(pods.len(), 1, "{pods:?}");
    let opstatus = container_status(&pods[0], "opstatus");
    assert_eq!(opstatus["image"], format!("{}:{}", node.opstatus_image(), env!("CARGO_PKG_VERSION")));
    assert_eq!(opstatus["ready"], true, "{opstatus}");
    assert!(opstatus["state"]["running"].is_object(), "{opstatus}");
    let events = node.events_text("kube9-system");
    for reason in ["Pulled", "Created", "Started"] {
        assert!(events.lines().any(|l| l.contains(&format!(" {reason} kubelet/"))), "no {reason} event:\n{events}");
    }
    let doc = node.cp().status_document("kube9-system", "kube9-operator-status").expect("the status");
    assert_eq!((doc["health"].as_str(), doc["version"].as_str()), (Some("healthy"), Some("1.0.0")), "{doc}");
    leave_the_status_to_nobody(node.cp(), "kube9-system", "opstatus");
    println!(
        "e2e node quick start (kubelet {}): the README's commands, rollout included, ran in {:.1} s; `opstatus get` \
         showed\n{shown}\nevents:\n{events}",
        node.version(),
        took.as_secs_f64()
    );
}
