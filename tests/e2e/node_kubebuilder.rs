//! End to end on a real node: an operator laid out as kubebuilder scaffolds
//! it (tests/fixtures/kubebuilder-operator: `namePrefix: gadget-`, its own
//! RBAC and manager, two replicas; the manager's image the stand-in of
//! tests/fixtures/node/operator.c) with opstatus added as docs/install.md
//! says for a status in kube9-system, leader election included, applied
//! as rendered (only the images and the tests' pace set) and run by
//! kubelet. Both Pods become Ready; the sidecar beside the operator's
//! leader, as its Lease in `gadget-system` names it, writes the status in
//! kube9-system, where `opstatus get` finds it `operated`; the Lease moves
//! to the other Pod and the publisher follows. No sidecar is refused
//! anything (no 403) and the Lease is read with the operator's own
//! leader-election Role. On v1.20 the plain variant, as the docs say.

use crate::support;

use std::time::{Duration, Instant};
use support::control_plane::{release_bin, shared_status_namespaces};
use support::kubebuilder::{self, DEPLOYMENT, Layout, NAMESPACE, holder, lead};
use support::node::shared;
use support::{run_to_end, wait_for};

const CM: &str = "kube9-operator-status";

#[test]
fn e2e_node_a_kubebuilder_operator_publishes_in_kube9_system_from_its_leaders_pod() {
    let node = shared();
    let _kube9_system = shared_status_namespaces();
    let cp = node.cp();
    let started = Instant::now();
    let image = format!("newName: {}, newTag: {}}}", node.opstatus_image(), env!("CARGO_PKG_VERSION"));
    let operator = format!("newName: {}/sample-operator, newTag: \"2.0.1\"", node.registry());
    let pace = "            - {name: OPSTATUS_INTERVAL, value: 2s}\n            - {name: OPSTATUS_CHECK_INTERVAL, value: 1s}\n";
    let sidecar = if node.native_sidecars() { "opstatus" } else { "opstatus-plain" };
    let layout = Layout { sidecar, image: &image, operator_image: &operator, env: pace, ..Layout::default() };
    let dir = kubebuilder::workspace(&layout);
    let yaml = kubebuilder::render(&dir).unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl_ok(&["-n", "kube9-system", "delete", "configmap", CM, "--ignore-not-found"]);
    let _leave = kubebuilder::Leave(cp, Some(DEPLOYMENT));
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&yaml));
    let pods = node.wait_ready(NAMESPACE, "control-plane=controller-manager", 2, Duration::from_secs(240));
    let ready_after = started.elapsed();
    let names: Vec<String> = pods.iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();
    let logs = || {
        names
            .iter()
            .map(|pod| {
                let out = cp.kubectl(&["-n", NAMESPACE, "logs", pod, "-c", "opstatus"], None);
                format!("--- {pod}\n{}", String::from_utf8_lossy(&out.stdout))
            })
            .collect::<String>()
    };

    lead(cp, &names[0]);
    wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        (holder(cp) == Some(names[0].clone())).then_some(())
    })
    .unwrap_or_else(|| panic!("the leader's sidecar never published in kube9-system:\n{}", logs()));
    let status = cp.status_document("kube9-system", CM).unwrap();
    assert_eq!(
        (status["namespace"].as_str(), status["version"].as_str()),
        (Some(NAMESPACE), Some("0.3.0")),
        "{status}"
    );
    let healthy = wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        cp.status_document("kube9-system", CM).filter(|s| s["health"] == "healthy")
    });
    assert!(healthy.is_some(), "{:?}\n{}", cp.status_document("kube9-system", CM), logs());
    let get = ["get", "--kubeconfig", cp.kubeconfig()];
    let out = run_to_end(&release_bin(), &get, &[], Duration::from_secs(30));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(shown.starts_with("Mode:        operated\n") && shown.contains("Found in:    kube9-system"), "{shown}");

    lead(cp, &names[1]);
    let moved = Instant::now();
    wait_for(Duration::from_secs(30), Duration::from_millis(500), || {
        (holder(cp) == Some(names[1].clone())).then_some(())
    })
    .unwrap_or_else(|| panic!("the publisher did not follow the Lease:\n{}", logs()));
    let followed = moved.elapsed();
    // Nothing refused by RBAC (a read that timed out on a busy machine is no refusal).
    let log = logs();
    assert!(!log.contains("403 Forbidden"), "{log}");
    assert!(cp.configmap(NAMESPACE, CM).is_none(), "a status in {NAMESPACE} too");
    println!(
        "e2e node kubebuilder layout (kubelet {}): 2 Pods Ready in {:.1} s, the status in kube9-system from the \
         leader's pod, `get` operated, the publisher followed the Lease in {followed:.1?}",
        node.version(),
        ready_after.as_secs_f64()
    );
}
