//! End to end, real kube-apiserver: an operator whose port refuses right
//! after passing, in a Pod being deleted (its `deletionTimestamp` set, as
//! the API server sets it before kubelet stops anything), is exiting with
//! its pod: its publisher reads its own Pod once, hands the status over to
//! the replica that stays and publishes nothing but `healthy`, whether or
//! not kubelet's preStop hook ever comes. The same refusal in a Pod that
//! stays is the operator gone: `degraded`, with the refusal as the reason.
//! Without the RBAC to read its Pod, opstatus says so once and judges the
//! refusal as before. There is no kubelet: the Pods are bound to a node
//! that does not exist, so a deletion waits for a kubelet that never comes
//! and the Pod stays, being deleted.

use crate::support;

use serde_json::Value;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::control_plane::{ControlPlane, release_bin, shared};
use support::operator_endpoint::{free_addr, operator_up};
use support::replicas::{another_replica, replica_env};
use support::{RunningAgent, ServiceAccountDir, published_health, wait_for};

const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";

/// Pod `name` bound to a node that does not exist: deleting it sets its
/// `deletionTimestamp` and leaves it there.
fn create_bound_pod(cp: &ControlPlane, ns: &str, name: &str) {
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  nodeName: no-such-node\n  serviceAccountName: opstatus\n  automountServiceAccountToken: false\n  \
         containers: [{{name: opstatus, image: opstatus:0.1.0}}]\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&pod));
}

/// The operator's health endpoint, up until [`Operator::exit`].
struct Operator {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Operator {
    fn up() -> Operator {
        let (addr, stop) = (free_addr(), Arc::new(AtomicBool::new(false)));
        operator_up(addr, stop.clone());
        Operator { addr, stop }
    }

    fn url(&self) -> String {
        format!("http://{}/healthz", self.addr)
    }

    /// Its process exits: the port refuses from now on.
    fn exit(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // The listener's thread ends at its next connection: this one.
        let _ = TcpStream::connect(self.addr);
    }
}

fn start(cp: &ControlPlane, sa: &ServiceAccountDir, pod: &str, operator: &Operator) -> RunningAgent {
    let args = ["run", "--interval", "2s", "--check-interval", "1s", "--events=false", "--watch-url", &operator.url()];
    RunningAgent::start(&release_bin(), &args, &replica_env(cp, sa, pod))
}

/// The lock's holder and the status's health now.
fn published(cp: &ControlPlane, ns: &str) -> Option<(String, String)> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    let doc: Value = serde_json::from_str(cm["data"]["status"].as_str()?).ok()?;
    Some((record["holderIdentity"].as_str()?.to_string(), doc["health"].as_str()?.to_string()))
}

/// Reads the status every 100 ms until `until` says stop (at most 60 s):
/// every health a reader saw.
fn read_until(cp: &ControlPlane, ns: &str, mut until: impl FnMut(&str, &str) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    let done = wait_for(Duration::from_secs(60), Duration::from_millis(100), || {
        let (holder, health) = published(cp, ns)?;
        if seen.last() != Some(&health) {
            seen.push(health.clone());
        }
        until(&holder, &health).then_some(())
    });
    assert!(done.is_some(), "the status never got there; read {seen:?}");
    seen
}

#[test]
fn e2e_an_operator_exiting_with_its_deleted_pod_hands_over_and_one_that_went_down_is_degraded() {
    let cp = shared();
    let pod = cp.deploy("pod-deleted");
    let ns = pod.namespace.as_str();
    create_bound_pod(cp, ns, "pod-a");
    create_bound_pod(cp, ns, "pod-b");
    let (operator_a, operator_b) = (Operator::up(), Operator::up());
    let a = start(cp, &pod.sa, "pod-a", &operator_a);
    read_until(cp, ns, |holder, health| holder == "pod-a" && health == "healthy");
    // The replica that stays: its own ServiceAccount, bound to both Roles.
    let (sa_b, _) = another_replica(cp, &pod, "replica-b");
    support::replicas::bind_role(cp, ns, "replica-b", "opstatus-own-pod");
    let b = start(cp, &sa_b, "pod-b", &operator_b);
    assert!(b.logged("Standing by"), "{}", b.stderr());

    // pod-a is deleted; its operator exits before any preStop hook (none
    // comes here).
    cp.kubectl_ok(&["-n", ns, "delete", "pod", "pod-a", "--wait=false"]);
    let going = cp.kubectl_ok(&["-n", ns, "get", "pod", "pod-a", "-o", "jsonpath={.metadata.deletionTimestamp}"]);
    assert!(!going.is_empty(), "the Pod is being deleted, not gone");
    operator_a.exit();
    let seen = read_until(cp, ns, |holder, _| holder == "pod-b");
    assert!(a.logged("This Pod (") && a.logged("/pod-a) is being deleted"), "{}", a.stderr());
    assert!(a.logged("Handed over to pod-b"), "{}", a.stderr());
    // A heartbeat of pod-b's, and any write pod-a might still make.
    std::thread::sleep(Duration::from_secs(4));
    let seen_after = read_until(cp, ns, |_, _| true);
    assert_eq!(published(cp, ns).map(|(h, _)| h).as_deref(), Some("pod-b"), "{}", a.stderr());
    assert!(
        seen.iter().chain(&seen_after).all(|h| h == "healthy"),
        "a reader saw {seen:?} then {seen_after:?}\n{}",
        a.stderr()
    );
    let written = a.stderr();
    let written = published_health(&written);
    assert!(!written.is_empty() && written.iter().all(|h| *h == "healthy"), "pod-a wrote:\n{}", a.stderr());
    let a_requests = cp.audit_events(&pod.user);
    let pod_reads: Vec<_> = a_requests.iter().filter(|e| e.uri.contains("/pods/")).collect();
    assert_eq!(pod_reads.len(), 1, "pod-a read its Pod once: {pod_reads:?}");
    drop(a);

    // pod-b's operator goes down, its Pod stays: degraded, with the refusal.
    operator_b.exit();
    let seen = read_until(cp, ns, |_, health| health == "degraded");
    assert_eq!(seen, ["healthy", "degraded"], "{}", b.stderr());
    let degraded = cp.status_document(ns, CM).unwrap();
    let error = degraded["error"].as_str().unwrap_or_default();
    assert!(error.ends_with("failed: connection refused"), "{degraded}");
    assert!(!b.stderr().contains("is being deleted"), "{}", b.stderr());
    println!(
        "e2e pod deleted: pod-a handed over to pod-b, readers saw only {seen_after:?}; pod-b's own operator down: {error}"
    );
}

#[test]
fn e2e_without_the_rbac_to_read_its_pod_a_refusal_is_judged_as_before_and_said_once() {
    let cp = shared();
    let pod = cp.deploy("pod-unreadable");
    let ns = pod.namespace.as_str();
    create_bound_pod(cp, ns, "pod-a");
    cp.kubectl_ok(&["-n", ns, "delete", "rolebinding", "opstatus-own-pod"]);
    let operator = Operator::up();
    let a = start(cp, &pod.sa, "pod-a", &operator);
    read_until(cp, ns, |holder, health| holder == "pod-a" && health == "healthy");
    operator.exit();
    let seen = read_until(cp, ns, |_, health| health == "degraded");
    assert_eq!(seen, ["healthy", "degraded"], "{}", a.stderr());
    let said = "Cannot read this instance's own Pod, to tell a pod being deleted from an operator that went down: 403";
    assert!(a.logged(said), "{}", a.stderr());
    let line = a.stderr().lines().find(|l| l.contains(said)).unwrap_or_default().to_string();
    assert!(
        line.contains("WARN") && line.contains("see the Role opstatus-own-pod in manifests/base/role.yaml"),
        "{line}"
    );
    assert!(line.ends_with("relying on kubelet's preStop hook alone"), "{line}");
    assert_eq!(a.stderr().matches(said).count(), 1, "said once:\n{}", a.stderr());
}
