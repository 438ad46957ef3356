//! End to end on a real node: `--watch-container` against real failures of
//! the operator's container, as kubelet reports them. The component with
//! `manifests/components/opstatus-watch-container` (its RBAC) and
//! OPSTATUS_WATCH_CONTAINER=manager, as docs/probes-and-metrics.md has the
//! overlay; the stand-in operator fails its first starts (counted in an
//! emptyDir): it exits 1 (a real `CrashLoopBackOff`), or allocates past its
//! memory limit (a real `OOMKilled`, exit 137). The status must say so in
//! kubelet's words, keep saying the container restarted once it runs again,
//! and go back to healthy once it has run cleanly for the clean-run window
//! (`--watch-container-clean-run`, shortened to 60 s here, long enough for a
//! restart a busy kubelet reports late; ten minutes by
//! default).

use crate::node_sidecar::{CM, SELECTOR, deploy_operator, sidecar_list};
use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::node::{Node, container_status, shared};
use support::wait_for;

/// The operator's container failing `times` times with `fail`, and its limits.
fn failing(node: &Node, fail: &str, times: u32, memory_limit: &str) -> String {
    let sidecar = "- name: opstatus
        env:
        - {name: OPSTATUS_WATCH_CONTAINER, value: manager}
        - {name: OPSTATUS_WATCH_CONTAINER_CLEAN_RUN, value: 60s}
";
    let manager = format!(
        "- name: manager
        env:
        - {{name: FAIL, value: {fail}}}
        - {{name: FAIL_TIMES, value: \"{times}\"}}
        resources:
          limits: {{memory: {memory_limit}}}
        volumeMounts:
        - {{name: state, mountPath: /state}}
"
    );
    // A plain sidecar is in the same list as the operator's container.
    let containers = match sidecar_list(node) {
        "containers" => format!("      containers:\n      {sidecar}      {manager}"),
        list => format!("      {list}:\n      {sidecar}      containers:\n      {manager}"),
    };
    format!("spec:\n  template:\n    spec:\n{containers}      volumes:\n      - {{name: state, emptyDir: {{}}}}\n")
}

/// Waits (bounded) for the published status to satisfy `check`; returns it
/// and every distinct `error` seen on the way.
fn wait_status(ns: &str, what: &str, within: Duration, check: impl Fn(&Value) -> bool) -> (Value, Vec<String>) {
    let node = shared();
    let mut seen: Vec<String> = Vec::new();
    let found = wait_for(within, Duration::from_millis(500), || {
        let doc = node.cp().status_document(ns, CM)?;
        let error = doc["error"].as_str().unwrap_or_default().to_string();
        if seen.last() != Some(&error) {
            seen.push(error);
        }
        check(&doc).then_some(doc)
    });
    let doc = found.unwrap_or_else(|| {
        panic!("{what} within {within:?}; errors seen: {seen:#?}\nevents:\n{}", node.events_text(ns))
    });
    (doc, seen)
}

#[test]
fn e2e_node_a_real_crash_loop_of_the_operator_is_said_in_kubelets_words() {
    let node = shared();
    let started = Instant::now();
    let ns = deploy_operator(node, "node-crashloop", &["opstatus-watch-container"], &failing(node, "exit", 3, "64Mi"));
    // While the operator is down its health endpoint refuses too: kubelet's
    // words about the container come first, then the failing check.
    let (doc, seen) = wait_status(&ns, "kubelet's back-off is published", Duration::from_secs(150), |d| {
        d["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("Container manager is CrashLoopBackOff") && e.contains("Error, exit code 1"))
    });
    let in_loop = started.elapsed();
    assert_eq!(doc["health"], "degraded");
    let error = doc["error"].as_str().unwrap().to_string();
    // kubelet said the same: its status of the container, and its events.
    let pod = &node.pods(&ns, SELECTOR)[0];
    let manager = container_status(pod, "manager");
    assert_eq!(manager["lastState"]["terminated"]["exitCode"], 1, "{manager}");
    assert_eq!(container_status(pod, "opstatus")["restartCount"], 0, "opstatus itself never restarted");
    let events = node.events_text(&ns);
    assert!(events.contains("BackOff"), "kubelet's back-off event:\n{events}");

    // The fourth start runs: restarted, not yet clean for the window.
    let (doc, later) =
        wait_status(&ns, "the running container is said to have restarted", Duration::from_secs(150), |d| {
            d["error"].as_str().is_some_and(|e| {
                e.starts_with("Container manager restarted (3 restarts; last terminated Error, exit code 1)")
            })
        });
    assert_eq!(doc["health"], "degraded");
    assert!(doc["error"].as_str().unwrap().contains("has not run cleanly for 60 s since"), "{doc}");
    let restarted = Instant::now();
    // Once it has run cleanly for 60 s: healthy, with kubelet still counting 3 restarts.
    let (healthy, _) =
        wait_status(&ns, "healthy after a clean run", Duration::from_secs(150), |d| d["health"] == "healthy");
    let clean_after = restarted.elapsed();
    assert!(healthy["error"].as_str().unwrap_or_default().is_empty(), "{healthy}");
    let pods = node.pods(&ns, SELECTOR);
    let manager = container_status(&pods[0], "manager");
    assert_eq!(manager["restartCount"], 3, "{manager}");
    println!(
        "e2e node crash loop (kubelet {}): published {:.1} s after apply: {error}\nthen: {}\nhealthy {:.1} s \
         later\nerrors seen: {seen:#?} {later:#?}\nevents:\n{events}",
        node.version(),
        in_loop.as_secs_f64(),
        doc["error"],
        clean_after.as_secs_f64()
    );
}

#[test]
fn e2e_node_a_real_oom_kill_of_the_operator_is_said_in_kubelets_words() {
    let node = shared();
    let started = Instant::now();
    let ns = deploy_operator(node, "node-oom", &["opstatus-watch-container"], &failing(node, "oom", 1, "24Mi"));
    let (doc, seen) = wait_status(&ns, "the OOM kill is published", Duration::from_secs(120), |d| {
        d["error"].as_str().is_some_and(|e| e.contains(", exit code 137)"))
    });
    let took = started.elapsed();
    assert_eq!(doc["health"], "degraded");
    let pod = &node.pods(&ns, SELECTOR)[0];
    let manager = container_status(pod, "manager");
    assert_eq!(manager["lastState"]["terminated"]["exitCode"], 137, "{manager}");
    // kubelet's words, whatever they are: `OOMKilled` when containerd saw
    // the cgroup's OOM event, `Error` when a busy node lost it (the kill,
    // SIGKILL's 137, is the same).
    let reason = manager["lastState"]["terminated"]["reason"].as_str().unwrap_or_default();
    assert!(["OOMKilled", "Error"].contains(&reason), "{manager}");
    let said = format!("last terminated {reason}, exit code 137");
    assert!(doc["error"].as_str().unwrap_or_default().contains(&said), "{doc} against kubelet's {manager}");
    assert_eq!(container_status(pod, "opstatus")["restartCount"], 0, "opstatus itself never restarted");
    // It runs cleanly from its second start: healthy once the 60 s window is up.
    let (healthy, _) =
        wait_status(&ns, "healthy after a clean run", Duration::from_secs(150), |d| d["health"] == "healthy");
    assert!(healthy["error"].as_str().unwrap_or_default().is_empty(), "{healthy}");
    println!(
        "e2e node OOM kill (kubelet {}): published {:.1} s after apply: {}\nerrors seen: {seen:#?}",
        node.version(),
        took.as_secs_f64(),
        doc["error"]
    );
}
