//! End to end on a real node: the shipped native-sidecar component
//! (manifests/components/opstatus: an init container with `restartPolicy:
//! Always`) beside the sample operator, with the order kubelet keeps read
//! from kubelet's and containerd's own record.
//!
//! On a kubelet that runs native sidecars (v1.36 here): opstatus starts
//! first (its startup probe holds the operator back, and passes at its
//! first try: opstatus listens before anything else), the status is
//! published before the operator is Ready; on `kubectl delete pod` the
//! operator stops first and opstatus after it, so its final status is
//! written once the operator is gone, within the grace period.
//!
//! On Kubernetes v1.20 the manifest never reaches kubelet: kubectl refuses
//! it (`unknown field "restartPolicy"`), and without validation the API
//! server drops the field and refuses the probes of what is then a plain
//! init container. That is why manifests/components/opstatus-plain exists;
//! the test shows it.

use crate::node_sidecar::{CM, DEPLOYMENT, SELECTOR, deploy_operator, operator_overlay};
use crate::support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};
use support::control_plane::unique_namespace;
use support::node::{Node, container_status, shared};

fn time(v: &Value) -> SystemTime {
    opstatus::testing::parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("a time: {v}"))).unwrap()
}

#[test]
fn e2e_node_the_native_sidecar_starts_before_the_operator_and_stops_after_it() {
    let node = shared();
    if !node.native_sidecars() {
        return old_kubelet_holds_the_operator_back(node);
    }
    let cp = node.cp();
    let ns = deploy_operator(node, "node-native", &[], "");
    let pod = node.wait_ready(&ns, SELECTOR, 1, Duration::from_secs(180)).remove(0);
    let (opstatus, manager) = (container_status(&pod, "opstatus"), container_status(&pod, "manager"));
    let sidecar_started = time(&opstatus["state"]["running"]["startedAt"]);
    let operator_started = time(&manager["state"]["running"]["startedAt"]);
    assert!(sidecar_started <= operator_started, "opstatus {opstatus}\nmanager {manager}");
    assert!(!node.probe_successes("Startup", &pod, "opstatus").is_empty(), "kubelet ran opstatus's startup probe");
    // No readiness or liveness probe of its container failed on the way to
    // Ready (kubelet records a failure as an `Unhealthy` Event on the
    // container; a moment for it to land; one that only ran out of time is
    // the CPU's, and the successes above are opstatus's) but readiness answering
    // `Starting` (503) while the operator had not answered yet, as the
    // readiness contract has it. The startup probe (every second, 30
    // tries) is there to wait: on a busy node kubelet may ask before
    // opstatus listens, and the operator started only once it passed.
    std::thread::sleep(Duration::from_secs(2));
    let starting = "Readiness probe failed: HTTP probe failed with statuscode: 503";
    let unhealthy: Vec<String> = node
        .failed_probes(&ns, "opstatus")
        .into_iter()
        .filter(|(_, message)| message != starting && !message.starts_with("Startup probe failed"))
        .map(|(count, message)| format!("{count}x {message}"))
        .collect();
    assert!(unhealthy.is_empty(), "kubelet's probes of opstatus failed at start: {unhealthy:?}");
    let cm = cp.configmap(&ns, CM).expect("the status");
    let published = time(&cm["metadata"]["creationTimestamp"]);
    let conditions = pod["status"]["conditions"].as_array().unwrap();
    let ready = conditions.iter().find(|c| c["type"] == "ContainersReady").expect("ContainersReady");
    assert!(published <= time(&ready["lastTransitionTime"]), "published before the operator was Ready: {cm}");

    // Delete: the operator's task exits before opstatus's (containerd's
    // record, timed as it comes), and the final status follows the operator.
    cp.kubectl_ok(&["-n", &ns, "delete", "deployment", DEPLOYMENT, "--cascade=orphan"]);
    cp.kubectl_ok(&["-n", &ns, "delete", "replicaset", "-l", SELECTOR, "--cascade=orphan"]);
    let id = |c: &Value| c["containerID"].as_str().unwrap().trim_start_matches("containerd://").to_string();
    let (sidecar_id, operator_id) = (id(opstatus), id(manager));
    let mut events = node.containerd_events();
    let stream = events.stdout.take().unwrap();
    let (send, exits) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if line.contains("/tasks/exit") && send.send((line, SystemTime::now())).is_err() {
                return;
            }
        }
    });
    std::thread::sleep(Duration::from_secs(1));
    let deleted = SystemTime::now();
    let name = pod["metadata"]["name"].as_str().unwrap();
    cp.kubectl_ok(&["-n", &ns, "delete", "pod", name, "--wait=true", "--timeout=120s"]);
    let _ = events.kill();
    let _ = events.wait();
    let exits: Vec<(String, SystemTime)> = exits.try_iter().collect();
    // The container's own process, not a process exec'd in it (the
    // preStop hook's `opstatus prestop` exits there too, with an id of its
    // own).
    let exit_of = |id: &str| {
        exits
            .iter()
            .filter_map(|(l, at)| Some((serde_json::from_str::<Value>(&l[l.find('{')?..]).ok()?, *at)))
            .find(|(event, _)| event["container_id"] == id && (event["id"].is_null() || event["id"] == id))
            .map(|(event, at)| (event["exit_status"].as_u64().unwrap_or(0), at))
            .unwrap_or_else(|| panic!("no exit of {id} in {exits:?}"))
    };
    let ((operator_status, operator_exit), (sidecar_status, sidecar_exit)) =
        (exit_of(&operator_id), exit_of(&sidecar_id));
    assert!(operator_exit <= sidecar_exit, "the operator stops first");
    assert_eq!((operator_status, sidecar_status), (0, 0), "both exit 0 on SIGTERM");
    let grace = pod["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap();
    let took = sidecar_exit.duration_since(deleted).unwrap_or_default();
    assert!(took < Duration::from_secs(grace), "opstatus exited {took:?} after the delete; grace {grace} s");
    let doc = cp.status_document(&ns, CM).unwrap();
    assert_eq!((doc["health"].as_str(), doc["error"].as_str()), (Some("unhealthy"), Some("Shutting down")), "{doc}");
    // lastUpdate has whole seconds.
    let last = time(&doc["lastUpdate"]);
    assert!(last + Duration::from_secs(1) >= operator_exit, "the final status follows the operator's exit: {doc}");
    println!(
        "e2e node native sidecar (kubelet {}): opstatus started {}, the operator {}; status published {} before \
         Ready {}; on delete the operator exited {:.2?} after it, opstatus {:.2?} after it ({:.2?} later), final \
         status at {}",
        node.version(),
        opstatus["state"]["running"]["startedAt"],
        manager["state"]["running"]["startedAt"],
        cm["metadata"]["creationTimestamp"],
        ready["lastTransitionTime"],
        operator_exit.duration_since(deleted).unwrap_or_default(),
        took,
        sidecar_exit.duration_since(operator_exit).unwrap_or_default(),
        doc["lastUpdate"]
    );
}

/// Kubernetes v1.20: kubectl refuses the native sidecar's field, and the
/// API server, which drops it, refuses the probes of what is then a plain
/// init container. Nothing reaches kubelet.
fn old_kubelet_holds_the_operator_back(node: &Node) {
    let ns = unique_namespace("node-native-old");
    let cp = node.cp();
    cp.create_namespace(&ns);
    let overlay = operator_overlay(node, &ns, &[], "");
    let text = std::fs::read_to_string(overlay.path().join("kustomization.yaml"))
        .unwrap()
        .replace("/manifests/components/opstatus-plain\n", "/manifests/components/opstatus\n")
        .replace(
            "          containers:\n          - name: opstatus",
            "          initContainers:\n          - name: opstatus",
        );
    assert!(text.contains("components/opstatus\n"), "{text}");
    std::fs::write(overlay.path().join("kustomization.yaml"), text).unwrap();
    let rendered = cp.kubectl_ok(&["kustomize", overlay.path().to_str().unwrap()]);
    let said = |args: &[&str]| {
        let out = cp.kubectl(args, Some(&rendered));
        assert!(!out.status.success(), "kubectl {args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let kubectl = said(&["apply", "-f", "-"]);
    assert!(kubectl.contains("unknown field \"restartPolicy\""), "{kubectl}");
    let server = said(&["apply", "--validate=false", "-f", "-"]);
    assert!(
        server.contains("initContainers[0].readinessProbe") && server.contains("must not be set for init containers")
    );
    assert!(node.pods(&ns, SELECTOR).is_empty());
    println!(
        "e2e node native sidecar (kubelet {}): kubectl refused it ({}); without validation the API server refused \
         it ({} lines, probes must not be set for init containers): use opstatus-plain before 1.29",
        node.version(),
        kubectl.lines().next().unwrap_or_default(),
        server.lines().count()
    );
}
