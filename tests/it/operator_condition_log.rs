//! Each write of the OperatorCondition says in the log what changed: a
//! line that only repeated "updated: Upgradeable=False" when only the
//! message changed (one more Foo migrating) told the reader nothing.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::resources::condition;
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-operator-condition-log-tests";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";

fn migrating_foo(server: &FakeApiServer, name: &str) {
    server.put_custom(
        &format!("/apis/example.com/v1/namespaces/ops/foos/{name}"),
        json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "True")]}}),
    );
}

#[test]
fn an_update_of_the_message_alone_says_so() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    server.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": []}}),
    );
    let mut env = pod_env(server.port(), &sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    let args = ["once", "--probe-namespace", "ops", "--probe-from-crd-annotations", "foos.example.com"];
    let once = || {
        let out = run_to_end(&opstatus_bin(), &args, &env, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let line = stderr.lines().find(|l| l.contains("OperatorCondition ops/op.v1 updated: ")).map(String::from);
        line.unwrap_or_else(|| panic!("no update line:\n{stderr}"))
    };

    migrating_foo(&server, "a");
    let first = once();
    assert!(first.ends_with("updated: Upgradeable=False (new)"), "{first}");
    migrating_foo(&server, "b");
    let second = once();
    assert!(second.contains("updated: Upgradeable=False, new message: \""), "{second}");
}
