//! The ClusterOperator is shared: the cluster-version operator and others
//! add their own `status.versions` and `status.relatedObjects` entries, and
//! an operator may keep a large `status.extension`. opstatus owns only the
//! entries it sets (versions by name, related objects by
//! group/resource/namespace/name) and leaves every other one, and the
//! extension, as they were; and it reads the object without turning a
//! 1.5 MiB extension into tens of MiB of memory.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::control_plane::release_bin;
use support::fake_apiserver::FakeApiServer;
use support::resources::find;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-cluster-operator-ownership";
const CO: &str = "/apis/config.openshift.io/v1/clusteroperators/demo";

/// ~1.5 MiB of small JSON values, the shape that costs a parsed tree most.
fn big_extension() -> Value {
    let items: Vec<Value> = (0..200_000).map(|i| json!({"n": i % 10})).collect();
    json!({"kind": "DemoExtension", "items": items})
}

#[test]
fn foreign_entries_and_a_large_extension_survive_in_bounded_memory() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let extension = big_extension();
    let extension_size = extension.to_string().len();
    assert!(extension_size >= 1536 * 1024, "{extension_size} bytes");
    let foreign_version = json!({"name": "kube-apiserver", "version": "1.20.2"});
    let foreign_related = json!({"group": "operator.openshift.io", "resource": "kubeapiservers", "name": "cluster"});
    server.put_custom(
        CO,
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": "demo"},
               "spec": {}, "status": {
                   "versions": [foreign_version.clone(), {"name": "operator", "version": "0.9.0"}],
                   "relatedObjects": [{"group": "", "resource": "configmaps", "namespace": "ops", "name": "settings"},
                                      foreign_related.clone()],
                   "extension": extension}}),
    );
    let args = [
        "run",
        "--interval",
        "60s",
        "--cluster-operator",
        "demo",
        "--operator-version",
        "1.0.0",
        "--related-object",
        "/configmaps/ops/settings",
    ];
    // The release binary, as users run it: a debug build's peak (its
    // unoptimised code and copies) came within a few hundred KiB of its
    // bound, either side of it as the machine's load moved.
    let agent = RunningAgent::start(&release_bin(), &args, &pod_env(server.port(), &sa));
    // A deadline, not a measurement: the fake API server parses a 1.5 MiB
    // object in a debug build, slowly on a busy machine.
    let co = wait_for(Duration::from_secs(90), Duration::from_millis(50), || {
        server.custom(CO).filter(|co| find(&co["status"]["conditions"], "Available").is_some())
    })
    .expect("the ClusterOperator was written");
    let peak = agent.peak_rss_kib();
    println!("peak RSS with a {extension_size}-byte status.extension: {peak} KiB");

    let status = &co["status"];
    assert_eq!(status["versions"], json!([{"name": "operator", "version": "1.0.0"}, foreign_version]));
    let ours = |name: &str| json!({"group": "", "resource": "configmaps", "namespace": "ops", "name": name});
    let namespace = json!({"group": "", "resource": "namespaces", "name": "ops"});
    assert_eq!(
        status["relatedObjects"],
        json!([namespace, ours("kube9-operator-status"), ours("settings"), foreign_related]),
    );
    assert_eq!(status["extension"], big_extension(), "the extension was changed");
    // The components' memory limit: a ClusterOperator this large must not
    // get the sidecar OOM-killed (about 10 MiB measured).
    assert!(peak <= 16 * 1024, "peak RSS {peak} KiB over the components' 16 MiB limit");
}

/// Upgradeable=False on a ClusterOperator holds back the whole cluster's
/// upgrade: with probes that may set it, the log says so once at start.
#[test]
fn the_cluster_wide_consequence_of_upgradeable_is_said_at_start() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let with = ["once", "--cluster-operator", "demo", "--operator-version", "1.0.0", "--probe", probe];
    let out = support::run_to_end(&opstatus_bin(), &with, &pod_env(server.port(), &sa), Duration::from_secs(30));
    let log = String::from_utf8_lossy(&out.stderr);
    let said = "ClusterOperator demo: while a probed resource blocks, it says Upgradeable=False, which holds back the \
                upgrade of the whole cluster";
    assert_eq!(log.matches(said).count(), 1, "{log}");
    let without = ["once", "--cluster-operator", "demo", "--operator-version", "1.0.0"];
    let out = support::run_to_end(&opstatus_bin(), &without, &pod_env(server.port(), &sa), Duration::from_secs(30));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("holds back the upgrade"), "no probe, nothing said");
}
