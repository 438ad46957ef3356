//! opstatus writes only the condition types its probes declare, and never
//! says `Upgradeable=True` without having evaluated every resource: an
//! operator that sets `Upgradeable` itself keeps it, and a probe whose list
//! fails leaves the published value alone and degrades the status instead.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::resources::{condition, find};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-ownership-tests";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";

fn start(server: &FakeApiServer, sa: &ServiceAccountDir, probe_args: &[&str]) -> RunningAgent {
    let mut env = pod_env(server.port(), sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    let args = [&["run", "--interval", "60s", "--check-interval", "1s", "--probe-namespace", "ops"][..], probe_args];
    RunningAgent::start(&opstatus_bin(), &args.concat(), &env)
}

fn operator_condition_with(own: &Value) -> Value {
    json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
           "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": [own]}})
}

#[test]
fn an_important_only_probe_leaves_the_operators_upgradeable_alone() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.put_foo_crd(json!({"olm.operatorframework.io/condition.Important": "Broken"}));
    server.put_custom(
        "/apis/example.com/v1/namespaces/ops/foos/a",
        json!({"metadata": {"name": "a", "namespace": "ops"}, "status": {"conditions": [condition("Broken", "True")]}}),
    );
    let operators_own = condition("Upgradeable", "False");
    server.put_custom(OC, operator_condition_with(&operators_own));
    let agent = start(&server, &sa, &["--probe-from-crd-annotations", "foos.example.com"]);

    let oc = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        server.custom(OC).filter(|oc| find(&oc["spec"]["conditions"], "Important").is_some())
    });
    let oc = oc.unwrap_or_else(|| panic!("Important never written\n{}", agent.stderr()));
    assert_eq!(find(&oc["spec"]["conditions"], "Important").unwrap()["status"], "True");
    assert_eq!(find(&oc["spec"]["conditions"], "Upgradeable"), Some(&operators_own), "the operator's own");
    agent.assert_memory_bounded();
}

#[test]
fn a_failing_list_never_turns_into_upgradeable() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    // The Foo API is not served (no CRD behind it): every list is a 404.
    let published = condition("Upgradeable", "False");
    server.put_custom(OC, operator_condition_with(&published));
    let agent = start(&server, &sa, &["--probe", "example.com/v1/foos:Upgradeable=!Migrating"]);

    let reason =
        "Cannot probe foos.example.com: the API server does not serve /apis/example.com/v1 (is the CRD installed?)";
    let degraded = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        server
            .status_document("ops", "kube9-operator-status")
            .filter(|s| s["health"] == "degraded" && s["error"] == reason)
    });
    assert!(degraded.is_some(), "{:?}\n{}", server.status_document("ops", "kube9-operator-status"), agent.stderr());
    std::thread::sleep(Duration::from_secs(2)); // two more checks
    assert_eq!(find(&server.custom(OC).unwrap()["spec"]["conditions"], "Upgradeable"), Some(&published));
    let writes = server.requests().into_iter().filter(|r| r.path.starts_with(OC) && r.method == "PUT").count();
    assert_eq!(writes, 0, "nothing to say, nothing written");
}
