//! End to end on a real node: opstatus beside an operator, as the shipped
//! component adds it (manifests/components/opstatus, a native sidecar, on
//! a kubelet that runs them; opstatus-plain on v1.20) to a sample kubebuilder-style operator
//! (tests/fixtures/sample-operator, its image the stand-in of
//! tests/fixtures/node/operator.c), from an overlay as a user writes one
//! (naming the Deployment in its own `opstatus-target`, as docs/install.md
//! has it).
//! kubelet's own probes are answered by opstatus, and the readiness
//! contract holds under kubelet: a failing status write (opstatus's RBAC
//! revoked) keeps the Pod Ready.
//!
//! The other real-node tests of an operator's Pod build on [`operator_overlay`].

use crate::support;

use std::time::{Duration, Instant};
use support::TempDir;
use support::control_plane::{service_account_user, unique_namespace};
use support::node::{Node, is_ready, shared};
use support::wait_for;

pub(crate) const CM: &str = "kube9-operator-status";
pub(crate) const DEPLOYMENT: &str = "sample-controller-manager";
pub(crate) const SELECTOR: &str = "control-plane=controller-manager";

/// Where the component puts the opstatus container: `initContainers` for
/// a native sidecar, else `containers`.
pub(crate) fn sidecar_list(node: &Node) -> &'static str {
    if node.native_sidecars() { "initContainers" } else { "containers" }
}

/// The overlay a user writes: the sample operator in `ns` with the
/// sidecar component (native where kubelet runs it) and `components`, the images from the node's registry, the operator's
/// version label, a 2 s heartbeat and 1 s checks (the tests' pace), the
/// unrelated webhook Deployment scaled to 0 (its image is nobody's), and
/// `patch` (a strategic merge patch of the operator's Deployment from
/// `spec:` on, see [`operator_patch`]) on top.
pub(crate) fn operator_overlay(node: &Node, ns: &str, components: &[&str], patch: &str) -> TempDir {
    let sidecar = if node.native_sidecars() { "opstatus" } else { "opstatus-plain" };
    // The user's own `opstatus-target` (docs/install.md) names the
    // Deployment; the shipped components follow it.
    let components: String = std::iter::once("- opstatus-target\n".to_string())
        .chain(std::iter::once(&sidecar).chain(components).map(|c| format!("- {{ROOT}}/manifests/components/{c}\n")))
        .collect();
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ns}
resources:
- {{ROOT}}/tests/fixtures/sample-operator
components:
{components}images:
- {{name: opstatus, newName: {opstatus}}}
- {{name: registry.example.com/sample-operator, newName: {registry}/sample-operator}}
patches:
- target: {{kind: Deployment, name: sample-webhook}}
  patch: |-
    - {{op: add, path: /spec/replicas, value: 0}}
- target: {{kind: Deployment, name: {DEPLOYMENT}}}
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: {DEPLOYMENT}}}
    spec:
      template:
        metadata:
          labels: {{app.kubernetes.io/version: 2.0.1}}
        spec:
          {list}:
          - name: opstatus
            env:
            - {{name: OPSTATUS_INTERVAL, value: 2s}}
            - {{name: OPSTATUS_CHECK_INTERVAL, value: 1s}}
{extra}",
        opstatus = node.opstatus_image(),
        registry = node.registry(),
        list = sidecar_list(node),
        extra = if patch.is_empty() { String::new() } else { operator_patch(patch) },
    );
    let overlay = node.overlay("node-operator", &text);
    let target = overlay.path().join("opstatus-target");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("kustomization.yaml"), support::markdown::opstatus_target(DEPLOYMENT)).unwrap();
    overlay
}

/// A `patches:` entry: `spec` (YAML from `spec:` on) merged into the
/// operator's Deployment.
fn operator_patch(spec: &str) -> String {
    let body: String = spec.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "- target: {{kind: Deployment, name: {DEPLOYMENT}}}\n  patch: |-\n    apiVersion: apps/v1\n    kind: \
         Deployment\n    metadata: {{name: {DEPLOYMENT}}}\n{body}"
    )
}

/// How many of kubelet's readiness and liveness probes of opstatus failed
/// in `ns` so far, but those that only ran out of time (`Node::failed_probes`).
fn failed_probes(node: &Node, ns: &str) -> (u64, u64) {
    let failed = node.failed_probes(ns, "opstatus");
    let count = |kind: &str| {
        failed.iter().filter(|(_, m)| m.starts_with(&format!("{kind} probe failed"))).map(|(n, _)| n).sum()
    };
    (count("Readiness"), count("Liveness"))
}

/// A fresh namespace with the operator and its sidecar applied.
pub(crate) fn deploy_operator(node: &Node, label: &str, components: &[&str], patch: &str) -> String {
    let ns = unique_namespace(label);
    node.cp().create_namespace(&ns);
    node.apply_overlay(&operator_overlay(node, &ns, components, patch));
    ns
}

#[test]
fn e2e_node_kubelet_probes_the_sidecar_and_a_failing_status_write_keeps_the_pod_ready() {
    let node = shared();
    let cp = node.cp();
    let started = Instant::now();
    let ns = deploy_operator(node, "node-sidecar", &[], "");
    let pod = node.wait_ready(&ns, SELECTOR, 1, Duration::from_secs(180)).remove(0);
    let ready_after = started.elapsed();
    // Until its operator first answers, opstatus's readiness is `Starting`
    // (503): the Pod joins its Services once the operator answers. From
    // Ready on, no probe of opstatus may fail.
    let failed_when_ready = failed_probes(node, &ns);
    assert_eq!(failed_when_ready.1, 0, "a failed liveness probe of opstatus:\n{}", node.events_text(&ns));
    let doc = cp.status_document(&ns, CM).expect("published before the Pod was Ready");
    assert_eq!((doc["health"].as_str(), doc["version"].as_str()), (Some("healthy"), Some("2.0.1")), "{doc}");
    // A fresh install says nothing false while its operator starts: no
    // status other than healthy, so no health change to record.
    let changes: Vec<serde_json::Value> =
        support::events::opstatus_events(cp, &ns).into_iter().filter(|e| e["reason"] == "HealthChanged").collect();
    assert!(changes.is_empty(), "a fresh install published another health first: {changes:?}");

    // kubelet probed opstatus (readiness every 10 s, liveness every 30 s)
    // and the operator; opstatus watched the operator's health endpoint.
    let probed = wait_for(Duration::from_secs(90), Duration::from_secs(1), || {
        let (r, l) = (
            node.probe_successes("Readiness", &pod, "opstatus").len(),
            node.probe_successes("Liveness", &pod, "opstatus").len(),
        );
        (r >= 1 && l >= 1).then_some((r, l))
    });
    let (readiness, liveness) = probed.unwrap_or_else(|| {
        panic!("kubelet logged no successful readiness and liveness probe of opstatus:\n{}", node.events_text(&ns))
    });
    let name = pod["metadata"]["name"].as_str().unwrap();
    let operator_log = cp.kubectl_ok(&["-n", &ns, "logs", name, "-c", "manager"]);
    let agent = format!("ua={}", node.probe_agent());
    assert!(operator_log.contains(&agent), "kubelet probes the operator:\n{operator_log}");
    assert!(
        operator_log.contains("request: GET /healthz HTTP/1.1 ua=opstatus/"),
        "opstatus watches it:\n{operator_log}"
    );
    let probe_line = node.probe_successes("Readiness", &pod, "opstatus").remove(0);

    // opstatus's RBAC revoked: the status write fails, the Pod stays Ready.
    cp.kubectl_ok(&["-n", &ns, "delete", "rolebinding", "opstatus-status-writer"]);
    let user = service_account_user(&ns, DEPLOYMENT);
    let denied = wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        cp.audit_events(&user).into_iter().find(|e| e.code == 403 && e.uri.contains("/configmaps/"))
    })
    .expect("the status write is refused once the RoleBinding is gone");
    // At least 25 s, and until kubelet logged two more successful
    // readiness probes (every 10 s; a busy node runs them late), at most
    // 90 s: the Pod stays Ready all along.
    let before = node.probe_successes("Readiness", &pod, "opstatus").len();
    let watched = Instant::now();
    let mut after = before;
    while watched.elapsed() < Duration::from_secs(25)
        || (after < before + 2 && watched.elapsed() < Duration::from_secs(90))
    {
        let now = &node.pods(&ns, SELECTOR)[0];
        assert!(is_ready(now), "the Pod left Ready when its status write failed:\n{}", node.events_text(&ns));
        std::thread::sleep(Duration::from_secs(1));
        after = node.probe_successes("Readiness", &pod, "opstatus").len();
    }
    assert!(
        after >= before + 2,
        "kubelet's readiness probes kept succeeding: {before} -> {after} in {:?}",
        watched.elapsed()
    );
    // kubelet's first probes may come before a container listens (the
    // startup probe of a native sidecar, the operator's readiness) or
    // before the operator answers: only a failed readiness or liveness
    // probe of opstatus once the Pod was Ready would break the contract.
    let events = node.events_text(&ns);
    assert_eq!(failed_probes(node, &ns), failed_when_ready, "a failed probe of opstatus once Ready:\n{events}");
    println!(
        "e2e node sidecar (kubelet {}): Ready {:.1} s after apply; kubelet probe successes of opstatus: readiness \
         {readiness}, liveness {liveness}, e.g.\n  {probe_line}\nstatus write refused ({} {}), and {} more readiness \
         successes in 25 s, the Pod Ready throughout\nevents:\n{events}",
        node.version(),
        ready_after.as_secs_f64(),
        denied.verb,
        denied.code,
        after - before
    );
}
