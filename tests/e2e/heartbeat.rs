//! End to end, real kube-apiserver: the first heartbeat creates the
//! spec-exact status under least-privilege RBAC from manifests/, each
//! heartbeat is one request at its interval (the first at start), and other
//! managers' fields survive.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::time::{Duration, SystemTime};
use support::control_plane::{release_bin, shared};
use support::{run_to_end, wait_for};

const CM: &str = "kube9-operator-status";

#[test]
fn e2e_first_heartbeat_creates_the_spec_exact_status_with_name_restricted_rbac() {
    let cp = shared();
    let pod = cp.deploy("first");
    assert!(cp.configmap(&pod.namespace, CM).is_none(), "fresh namespace has no status yet");
    let out = run_to_end(
        &release_bin(),
        &["once", "--operator-version", "2.3.4"],
        &cp.pod_env(&pod),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let cm = cp.configmap(&pod.namespace, CM).expect("created by the first heartbeat");
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "opstatus");
    let raw = cm["data"]["status"].as_str().unwrap();
    let doc: Value = serde_json::from_str(raw).unwrap();
    let ns = &pod.namespace;
    assert_eq!(
        raw,
        format!(
            r#"{{"mode":"operated","tier":"free","version":"2.3.4","health":"healthy","lastUpdate":"{}","registered":false,"error":null,"namespace":"{ns}"}}"#,
            doc["lastUpdate"].as_str().unwrap()
        )
    );
    // The first look of a new instance: a read (missing), the apply that
    // creates and labels it holding no lock, then the write of the status
    // with the publisher lock (tests/e2e_publisher.rs).
    let events = cp.audit_events(&pod.user);
    let calls: Vec<(&str, u16)> = events.iter().map(|e| (e.verb.as_str(), e.code)).collect();
    assert_eq!(calls, [("get", 404), ("patch", 201), ("patch", 200)], "{events:?}");

    // The manifests grant get, patch and (apply's) create on the one name,
    // and nothing else: no unnamed create (POST), no other name, no list.
    let can = |verb: &str, what: &str| {
        let out = cp.kubectl(&["auth", "can-i", verb, what, "-n", ns, "--as", &pod.user], None);
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    for verb in ["get", "patch", "create"] {
        assert!(can(verb, "configmaps/kube9-operator-status"), "the Role must grant {verb} on the status ConfigMap");
    }
    for (verb, what) in [
        ("create", "configmaps"),
        ("create", "configmaps/another"),
        ("update", "configmaps/kube9-operator-status"),
        ("delete", "configmaps/kube9-operator-status"),
        ("list", "configmaps"),
        ("patch", "configmaps/another"),
        ("get", "secrets/anything"),
    ] {
        assert!(!can(verb, what), "the Role must not grant {verb} {what}");
    }
}

#[test]
fn e2e_heartbeats_move_last_update_and_cost_one_request_each() {
    let cp = shared();
    let pod = cp.deploy("heartbeat");
    let started = SystemTime::now();
    let mut agent = Run::every("1s").start(&release_bin(), &cp.pod_env(&pod));
    let mut seen = Vec::new();
    let enough = wait_for(Duration::from_secs(20), Duration::from_millis(300), || {
        if let Some(doc) = cp.status_document(&pod.namespace, CM) {
            let t = doc["lastUpdate"].as_str().unwrap().to_string();
            if seen.last() != Some(&t) {
                seen.push(t);
            }
        }
        (seen.len() >= 5).then_some(())
    });
    assert!(enough.is_some(), "lastUpdate moved only through {seen:?}");
    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()), Some(0));

    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "lastUpdate only moves forward");
    let events = cp.audit_events(&pod.user);
    let heartbeats = agent.stderr().matches("Status updated:").count();
    assert!(heartbeats >= 5, "{heartbeats} heartbeats");
    support::requests::assert_first_look_then_one_write_per_heartbeat(&events, heartbeats, CM);
    // The heartbeats' writes (the last two are the final status at the stop
    // and the release of the lock): one per interval, none early, none
    // skipped.
    let writes: Vec<Duration> = events[2..]
        .iter()
        .filter(|e| e.verb == "patch")
        .map(|e| e.received.duration_since(started).unwrap_or_default())
        .collect();
    support::assert_cadence(&writes[..writes.len() - 2], Duration::from_secs(1));
    println!(
        "e2e heartbeat: {heartbeats} heartbeats, {} requests, first write {:?} after start",
        events.len(),
        writes[0]
    );
}

/// The first write is made at start, not one heartbeat later: with the
/// longest interval (240 s) the status exists within 30 s.
#[test]
fn e2e_the_first_heartbeat_is_written_at_start() {
    let cp = shared();
    let pod = cp.deploy("first-at-start");
    let _agent = Run::every("240s").start(&release_bin(), &cp.pod_env(&pod));
    let written = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        cp.status_document(&pod.namespace, CM).map(|_| ())
    });
    assert!(written.is_some(), "no status within 30 s of start at a 240 s heartbeat");
}

#[test]
fn e2e_labels_annotations_and_data_of_other_managers_survive() {
    let cp = shared();
    let pod = cp.deploy("foreign");
    let ns = pod.namespace.as_str();
    let once = || {
        let out = run_to_end(&release_bin(), &["once"], &cp.pod_env(&pod), Duration::from_secs(30));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    once();
    cp.kubectl_ok(&["-n", ns, "label", "configmap", CM, "team=payments"]);
    cp.kubectl_ok(&["-n", ns, "annotate", "configmap", CM, "example.com/note=keep me"]);
    let other_manager = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {CM}\n  namespace: {ns}\n  labels:\n    owner: someone-else\ndata:\n  extra: from-another-manager\n"
    );
    cp.kubectl_stdin_ok(&["apply", "--server-side", "--field-manager=someone-else", "-f", "-"], Some(&other_manager));
    cp.kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "configmap",
        CM,
        "--type=merge",
        "-p",
        r#"{"data":{"merged":"by-kubectl-patch"}}"#,
    ]);
    let before = cp.status_document(ns, CM).unwrap()["lastUpdate"].clone();
    std::thread::sleep(Duration::from_millis(1100)); // lastUpdate has second precision.
    once();

    let cm = cp.configmap(ns, CM).unwrap();
    assert_eq!(cm["metadata"]["labels"]["team"], "payments");
    assert_eq!(cm["metadata"]["labels"]["owner"], "someone-else");
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "opstatus");
    assert_eq!(cm["metadata"]["annotations"]["example.com/note"], "keep me");
    assert_eq!(cm["data"]["extra"], "from-another-manager");
    assert_eq!(cm["data"]["merged"], "by-kubectl-patch");
    let after = cp.status_document(ns, CM).unwrap()["lastUpdate"].clone();
    assert_ne!(before, after, "the status itself was rewritten");
}

#[test]
fn e2e_a_label_another_tool_set_stays_theirs() {
    // Helm labels what it creates `app.kubernetes.io/managed-by: Helm`, and
    // every `helm upgrade` would fight a sidecar that forced it back.
    let cp = shared();
    let pod = cp.deploy("helm");
    let ns = pod.namespace.as_str();
    cp.kubectl_ok(&["-n", ns, "create", "configmap", CM]);
    cp.kubectl_ok(&["-n", ns, "label", "configmap", CM, "app.kubernetes.io/managed-by=Helm"]);
    for _ in 0..2 {
        let out = run_to_end(&release_bin(), &["once"], &cp.pod_env(&pod), Duration::from_secs(30));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let cm = cp.configmap(ns, CM).unwrap();
    assert_eq!(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm");
    assert_eq!(cp.status_document(ns, CM).unwrap()["health"], "healthy", "the status is written all the same");
}
