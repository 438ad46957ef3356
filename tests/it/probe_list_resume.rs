//! A probe's paged list (a server without a watch cache pages even the
//! first list, `resourceVersion=0`) that fails partway goes on from that
//! page at the next try instead of starting over: the page that failed is
//! asked again with its `continue` token (and no version: the server
//! refuses one beside a token), and no other page is read twice; whether
//! the page was refused (a 503) or cut in the middle of a resource (the
//! resources of it read before the cut are read again, not twice counted).
//! Fake API server: the real one cannot be made to fail one page on demand.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::resources::{condition, find};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-list-resume";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";
const COUNT: usize = 2000;

#[test]
fn a_list_that_fails_partway_goes_on_from_its_page() {
    goes_on_from_its_page(Fault::Status { code: 503, retry_after: None });
}

#[test]
fn a_list_cut_in_the_middle_of_a_resource_goes_on_from_its_page() {
    goes_on_from_its_page(Fault::CutBody);
}

fn goes_on_from_its_page(fault: Fault) {
    let api = FakeApiServer::start(TOKEN);
    api.without_watch_cache();
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    for i in 0..COUNT {
        let name = format!("f{i:04}");
        let object = json!({"metadata": {"name": name, "namespace": "ops"},
                         "status": {"conditions": [condition("Migrating", "False")]}});
        api.put_custom(&format!("{FOOS}/{name}"), object);
    }
    api.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": []}}),
    );
    // The third page (the fake's continue token is the index) fails once.
    api.fail_query_once("continue=1000", fault);
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
        .map(|r| r.query)
        .collect();
    assert_eq!(
        pages,
        [
            "limit=500&resourceVersion=0",
            "limit=500&continue=500",
            "limit=500&continue=1000",
            "limit=500&continue=1000",
            "limit=500&continue=1500"
        ],
        "the failed page asked again, no other page twice\n{}",
        agent.stderr()
    );
}
