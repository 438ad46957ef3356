//! A probe's list that fails partway (a 503 on its third page) goes on
//! from that page at the next try instead of starting over: the page that
//! failed is asked again with its `continue` token, and no other page is
//! read twice (fake API server: the real one cannot be made to fail one
//! page on demand).

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::resources::{condition, find};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-list-resume";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";
const COUNT: usize = 1000;

#[test]
fn a_list_that_fails_partway_goes_on_from_its_page() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    for i in 0..COUNT {
        let name = format!("f{i:04}");
        let foo = json!({"metadata": {"name": name, "namespace": "ops"},
                         "status": {"conditions": [condition("Migrating", "False")]}});
        api.put_custom(&format!("{FOOS}/{name}"), foo);
    }
    api.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": []}}),
    );
    // The third page (the fake's continue token is the index) fails once.
    api.fail_query_once("continue=500", Fault::Status { code: 503, retry_after: None });
    let mut env = pod_env(api.port(), &sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    let args = [
        "run",
        "--interval",
        "60s",
        "--check-interval",
        "1s",
        "--probe-from-crd-annotations",
        "foos.example.com",
        "--probe-namespace",
        "ops",
        "--events=false",
    ];
    let agent = RunningAgent::start(&opstatus_bin(), &args, &env);
    let up = wait_for(Duration::from_secs(30), Duration::from_millis(20), || {
        let oc = api.custom(OC)?;
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == "True").cloned()
    });
    let up = up.unwrap_or_else(|| panic!("never Upgradeable=True\n{}", agent.stderr()));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({COUNT} checked)"));

    let pages: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == FOOS && !r.query.contains("watch=1"))
        .map(|r| r.query.split('&').find(|q| q.starts_with("continue=")).unwrap_or("first").to_string())
        .collect();
    assert_eq!(
        pages,
        ["first", "continue=250", "continue=500", "continue=500", "continue=750"],
        "the failed page asked again, no other page twice\n{}",
        agent.stderr()
    );
}
