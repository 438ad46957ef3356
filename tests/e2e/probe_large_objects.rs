//! End to end, real kube-apiserver: a dozen Foos of ~400 KB each (an
//! object may be up to ~1.5 MiB in etcd), so a page of 250 would be ~4.8
//! MiB in one answer, over the 4 MiB any other answer may be. The probe
//! lists them in that one answer (read as it arrives, each resource
//! bounded on its own), so the one Foo that blocks an upgrade is published
//! and nothing is reported as failing.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::control_plane::{release_bin, shared};
use support::resources::{FOOS, condition, find};
use support::{RunningAgent, wait_for};

const NAME: &str = "demo-operator.v6.0.0";
const COUNT: usize = 12;
const SIZE: usize = 400 * 1024;

#[test]
fn e2e_a_dozen_400_kb_resources_are_listed() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy("probe-large");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.grant_operator_condition_as_olm(ns, NAME);
    cp.create_operator_condition(ns, NAME, &[]);
    let mut admin = cp.admin_client();
    let collection = format!("{FOOS}/namespaces/{ns}/foos");
    for i in 0..COUNT {
        let name = format!("big-{i:02}");
        let blob: String = (0..SIZE).map(|j| char::from(b'a' + ((i * 7 + j) % 26) as u8)).collect();
        let object = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name, "namespace": ns},
                            "spec": {"blob": blob}});
        let created = admin.create(&collection, object.to_string().as_bytes(), "create foos").unwrap();
        let mut with_status: serde_json::Value = serde_json::from_slice(&created).unwrap();
        let migrating = if i == 7 { "True" } else { "False" };
        with_status["status"] = json!({"conditions": [condition("Migrating", migrating)]});
        let path = format!("{collection}/{name}/status");
        admin.put(&path, with_status.to_string().as_bytes(), "update foos/status").unwrap();
    }
    let mut env = cp.pod_env(&pod);
    env.push(("OPERATOR_CONDITION_NAME".into(), NAME.into()));
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let args = ["run", "--interval", "60s", "--check-interval", "1s", "--probe", probe, "--probe-namespace", ns];
    let mut agent = RunningAgent::start(&release_bin(), &args, &env);
    let blocked = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        let oc = cp.operator_condition(ns, NAME);
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == "False").cloned()
    });
    let status = || cp.status_document(ns, "kube9-operator-status");
    let blocked = blocked.unwrap_or_else(|| panic!("never blocked: {:?}\n{}", status(), agent.stderr()));
    assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Foo {ns}/big-07: Migrating"));
    let healthy =
        wait_for(Duration::from_secs(5), Duration::from_millis(100), || status().filter(|s| s["health"] == "healthy"));
    assert!(healthy.is_some(), "{:?}\n{}", status(), agent.stderr());
    assert_eq!(agent.exited(), None);
    agent.signal("TERM");
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());
    let lists: Vec<String> = cp
        .audit_events(&pod.user)
        .into_iter()
        .filter(|e| e.verb == "list" && e.uri.contains("/foos"))
        .map(|e| e.uri.split_once('?').map(|(_, query)| query.to_string()).unwrap_or_default())
        .collect();
    println!("e2e large objects: {COUNT} Foos of {} KiB listed with {lists:?}", SIZE / 1024);
    assert_eq!(lists, ["limit=500&resourceVersion=0"], "one answer from the watch cache");
}
