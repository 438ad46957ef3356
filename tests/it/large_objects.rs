//! Objects opstatus reads on every check or drift check, made large by
//! others: a Lease with 90,000 labels (1.26 MB), and a Lease, an
//! OperatorCondition and a ClusterOperator with 50,000 finalizers each.
//! Each is read for the few fields opstatus uses (the rest skipped as it
//! is parsed, the parts a write carries back kept as read), so memory stays
//! within the components' 16 MiB limit (the debug build's bound here),
//! where parsing each into a tree of values took it past.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::resources::condition;
use support::run_args::Run;
use support::{PEAK_RSS_BOUND_KIB, RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-large-objects";
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/op-lease";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";
const CO: &str = "/apis/config.openshift.io/v1/clusteroperators/demo";

fn lease(metadata: Value) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
           "spec": {"holderIdentity": "op-0_1a2b", "leaseDurationSeconds": 15,
                    "renewTime": "2026-11-28T07:00:00.000000Z"}})
}

fn finalizers() -> Vec<String> {
    (0..50_000).map(|i| format!("example.com/f{i:05}")).collect()
}

/// Runs opstatus as the pod `op-0`, which the Lease names, following the
/// Lease on 1 s checks (and `extra`), until the status is published and
/// `reads` more reads of `path` went by; its peak RSS then.
fn peak_rss(api: &FakeApiServer, run: Run, path: &str, reads: usize) -> (u64, RunningAgent) {
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let mut env = pod_env(api.port(), &sa);
    env.push(("POD_NAME".into(), "op-0".into()));
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    let run = run.checks("1s").flag("--follow-leader-lease", "op-lease");
    let agent = run.start(&opstatus_bin(), &env);
    let read = || api.requests().iter().filter(|r| r.method == "GET" && r.path == path).count();
    let published = wait_for(Duration::from_secs(20), Duration::from_millis(50), || {
        api.status_document("ops", "kube9-operator-status").filter(|d| d["health"] == "healthy")
    });
    assert!(published.is_some(), "{}", agent.stderr());
    let from = read();
    let done = wait_for(Duration::from_secs(60), Duration::from_millis(100), || (read() >= from + reads).then_some(()));
    assert!(done.is_some(), "{path} read {} times: {}", read() - from, agent.stderr());
    (agent.peak_rss_kib(), agent)
}

#[test]
fn a_lease_with_90000_labels_read_every_check_keeps_memory_bounded() {
    let api = FakeApiServer::start(TOKEN);
    let labels: serde_json::Map<String, Value> = (0..90_000).map(|i| (format!("l{i:05}"), json!("vv"))).collect();
    let object = lease(json!({"name": "op-lease", "namespace": "ops", "labels": labels}));
    let size = serde_json::to_vec(&object).unwrap().len();
    assert!(size > 1_250_000, "{size} bytes");
    api.put_custom(LEASE, object);
    let (peak, agent) = peak_rss(&api, Run::every("60s"), LEASE, 8);
    println!("a {size}-byte Lease read every check: peak RSS {peak} KiB");
    assert!(agent.stderr().contains("Publishing as"), "the pod the Lease names publishes: {}", agent.stderr());
    assert!(peak <= PEAK_RSS_BOUND_KIB, "peak RSS {peak} KiB, bound {PEAK_RSS_BOUND_KIB} KiB");
}

#[test]
fn a_lease_an_operator_condition_and_a_cluster_operator_with_50000_finalizers_keep_memory_bounded() {
    let api = FakeApiServer::start(TOKEN);
    api.put_custom(LEASE, lease(json!({"name": "op-lease", "namespace": "ops", "finalizers": finalizers()})));
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    api.put_custom(
        "/apis/example.com/v1/namespaces/ops/foos/a",
        json!({"metadata": {"name": "a", "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "False")]}}),
    );
    api.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops", "finalizers": finalizers()},
               "spec": {"conditions": []}}),
    );
    api.put_custom(
        CO,
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
               "metadata": {"name": "demo", "finalizers": finalizers()}, "spec": {}, "status": {}}),
    );
    // A drift check (a read of each) every 2 s heartbeat.
    let run = Run::every("2s")
        .flag("--probe-namespace", "ops")
        .flag("--probe-from-crd-annotations", "foos.example.com")
        .flag("--cluster-operator", "demo");
    let (peak, agent) = peak_rss(&api, run, OC, 4);
    println!("50,000 finalizers on the Lease, the OperatorCondition and the ClusterOperator: peak RSS {peak} KiB");
    let oc = api.custom(OC).unwrap();
    assert_eq!(oc["spec"]["conditions"][0]["type"], "Upgradeable", "{}", agent.stderr());
    assert_eq!(oc["metadata"]["finalizers"].as_array().map(Vec::len), Some(50_000), "carried back as read");
    let co = api.custom(CO).unwrap();
    assert_eq!(co["metadata"]["finalizers"].as_array().map(Vec::len), Some(50_000));
    assert!(co["status"]["conditions"].as_array().is_some_and(|c| c.len() == 4), "{}", agent.stderr());
    assert!(peak <= PEAK_RSS_BOUND_KIB, "peak RSS {peak} KiB, bound {PEAK_RSS_BOUND_KIB} KiB");
}
