//! End to end, real kube-apiserver: an instance whose operator has not
//! answered its health check since it started publishes nothing for the
//! start-up allowance (here 10 s), so a free lock (released by the last
//! holder's stop) and the status it left stay untouched. It publishes once
//! its operator answers (so readers never see "connection refused" for an
//! operator that is only starting), and once the allowance is spent all
//! the same when it never does, saying so (a broken operator beside the
//! only instance is reported, not silenced).

use crate::support;
use support::operator_endpoint::{free_addr, operator_up};

use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::control_plane::{ControlPlane, Deployed, release_bin, shared};
use support::replicas::replica_env;
use support::{RunningAgent, wait_for};

const CM: &str = "kube9-operator-status";
const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
/// `--startup-allowance 10s`.
const WAIT: Duration = Duration::from_secs(10);

/// The lock's holder and the status, as the ConfigMap says now.
fn published(cp: &ControlPlane, ns: &str) -> Option<(String, Value)> {
    let cm = cp.configmap(ns, CM)?;
    let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
    let doc: Value = serde_json::from_str(cm["data"]["status"].as_str()?).ok()?;
    Some((record["holderIdentity"].as_str()?.to_string(), doc))
}

/// A namespace whose status was published by pod-a, which then stopped:
/// the lock is released and "Shutting down" is the last status.
fn released_by_a_stopped_holder(label: &str) -> (&'static ControlPlane, Deployed) {
    let cp = shared();
    let pod = cp.deploy(label);
    let ns = pod.namespace.clone();
    let mut a = RunningAgent::start(
        &release_bin(),
        &["run", "--interval", "2s", "--check-interval", "1s"],
        &replica_env(cp, &pod.sa, "pod-a"),
    );
    let holder = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        published(cp, &ns).filter(|(h, _)| h == "pod-a")
    });
    assert!(holder.is_some(), "pod-a publishes: {}", a.stderr());
    a.signal("TERM");
    assert_eq!(a.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()), Some(0), "{}", a.stderr());
    let (holder, doc) = published(cp, &ns).unwrap();
    assert_eq!((holder.as_str(), doc["error"].as_str()), ("", Some("Shutting down")), "released: {doc}");
    (cp, pod)
}

fn start_b(cp: &ControlPlane, pod: &Deployed, operator: SocketAddr) -> RunningAgent {
    let url = format!("http://{operator}/healthz");
    RunningAgent::start(
        &release_bin(),
        &["run", "--interval", "2s", "--check-interval", "1s", "--startup-allowance", "10s", "--watch-url", &url],
        &replica_env(cp, &pod.sa, "pod-b"),
    )
}

#[test]
fn e2e_a_new_instance_takes_the_released_lock_once_its_operator_answers_not_before() {
    let (cp, pod) = released_by_a_stopped_holder("operator-starting");
    let ns = pod.namespace.as_str();
    let operator = free_addr();
    let b = start_b(cp, &pod, operator);
    let started = Instant::now();
    // The operator starts answering 4 s later; meanwhile pod-b publishes
    // nothing (the stopped holder's status stays).
    let answers_after = Duration::from_secs(4);
    let stop = Arc::new(AtomicBool::new(false));
    let mut operator_started = None;
    let mut first = None;
    while started.elapsed() < answers_after + Duration::from_secs(10) {
        if operator_started.is_none() && started.elapsed() >= answers_after {
            operator_up(operator, stop.clone());
            operator_started = Some(started.elapsed());
        }
        if let Some((_, doc)) = published(cp, ns).filter(|(h, _)| h == "pod-b") {
            first = Some((started.elapsed(), doc));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::SeqCst);
    let (took, doc) = first.unwrap_or_else(|| panic!("pod-b never published:\n{}", b.stderr()));
    assert_eq!(doc["health"], "healthy", "pod-b's first status, {took:?} after its start: {doc}\n{}", b.stderr());
    assert!(took >= answers_after, "published {took:?} after start, before its operator answered: {doc}");
    // At the check that sees it answer (1 s checks), and a loaded machine.
    assert!(took <= answers_after + Duration::from_secs(5), "published {took:?} after start, operator up at 4 s");
    assert!(
        b.stderr().contains("Waiting for the operator's first answer before publishing anything"),
        "{}",
        b.stderr()
    );
    println!(
        "e2e operator starting: pod-b's operator answered {:.1?} after its start; pod-b published its first \
         status, healthy, {took:.1?} after its start (nothing before)",
        operator_started.unwrap_or_default()
    );
}

#[test]
fn e2e_a_lone_instance_whose_operator_never_answers_publishes_that_after_the_wait() {
    let (cp, pod) = released_by_a_stopped_holder("operator-never");
    let ns = pod.namespace.as_str();
    let b = start_b(cp, &pod, free_addr());
    let started = Instant::now();
    let first = wait_for(WAIT + Duration::from_secs(15), Duration::from_millis(50), || {
        published(cp, ns).filter(|(h, _)| h == "pod-b").map(|(_, doc)| (started.elapsed(), doc))
    });
    let (took, doc) = first.unwrap_or_else(|| panic!("pod-b never published:\n{}", b.stderr()));
    let error = doc["error"].as_str().unwrap_or_default();
    assert_eq!(doc["health"], "degraded", "{doc}");
    let said = "The operator has not answered since opstatus started (a start-up allowance of 10s): Operator health \
                check http://127.0.0.1:";
    assert!(error.starts_with(said) && error.ends_with("connection refused"), "{error}");
    // Not before the wait (less a check: pod-b's clock starts a moment
    // before the test's), and not much after it: a check, the write, and
    // a loaded machine.
    assert!(took + Duration::from_secs(1) >= WAIT, "published {took:?} after start: {doc}");
    assert!(took <= WAIT + Duration::from_secs(6), "published {took:?} after start, the wait is {WAIT:?}");
    println!(
        "e2e operator never answers: the lone instance published degraded ({error}) {took:.1?} after its start \
         (the wait: {WAIT:?})"
    );
}

#[test]
fn e2e_a_fresh_install_writes_nothing_until_its_operator_answers() {
    let cp = shared();
    let pod = cp.deploy("operator-starting-fresh");
    let ns = pod.namespace.as_str();
    let operator = free_addr();
    let b = start_b(cp, &pod, operator);
    let started = Instant::now();
    let answers_after = Duration::from_secs(4);
    while started.elapsed() < answers_after {
        assert!(cp.configmap(ns, CM).is_none(), "a status before the operator answered:\n{}", b.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let stop = Arc::new(AtomicBool::new(false));
    operator_up(operator, stop.clone());
    let first = wait_for(Duration::from_secs(15), Duration::from_millis(50), || {
        published(cp, ns).filter(|(h, _)| h == "pod-b").map(|(_, doc)| (started.elapsed(), doc))
    });
    let (took, doc) = first.unwrap_or_else(|| panic!("pod-b never published:\n{}", b.stderr()));
    // A heartbeat more, and time for an Event to go out on its own thread.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(doc["health"], "healthy", "the first status: {doc}\n{}", b.stderr());
    let events = support::events::opstatus_events(cp, ns);
    let health: Vec<&Value> = events.iter().filter(|e| e["reason"] == "HealthChanged").collect();
    assert!(health.is_empty(), "a fresh install recorded health changes: {health:?}");
    assert!(!b.stderr().contains("pass again"), "{}", b.stderr());
    // Only now the operator goes: before, its going would be a true change.
    drop(b);
    stop.store(true, Ordering::SeqCst);
    println!(
        "e2e fresh install: nothing written for {answers_after:?}; the first status, healthy, {took:.1?} after start"
    );
}
