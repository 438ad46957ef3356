//! Bytes the server sends on a kept connection after its answer (a second
//! response, as a broken server or L7 proxy sends) are never read as the
//! next request's answer: the connection they wait on is closed, not used
//! (fake API server: a real one cannot be made to send them).

use crate::support;
use crate::support::run_args::Run;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::https::{Response, write_response};
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-stray-responses";
const STATUS: (&str, &str) = ("ops", "kube9-operator-status");
const LOCK: &str = "opstatus.kube9.dev/publisher";

/// A whole HTTP response with a JSON body, as bytes.
fn response(code: u16, body: &serde_json::Value) -> Vec<u8> {
    let mut bytes = Vec::new();
    write_response(&mut bytes, &Response { code, body: body.to_string().into_bytes(), retry_after: None }).unwrap();
    bytes
}

fn wait(what: &str, agent: &support::RunningAgent, done: &dyn Fn() -> bool) {
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || done().then_some(()))
        .unwrap_or_else(|| panic!("{what}:\n{}", agent.stderr()));
}

#[test]
fn a_stray_response_after_an_answer_does_not_fail_the_next_write() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let agent = Run::every("2s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let writes = || server.requests().iter().filter(|r| r.method == "PATCH").count();
    wait("two heartbeats", &agent, &|| writes() >= 2);
    let stray = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 403,
                       "reason": "Forbidden", "message": "stray answer: nobody asked"});
    server.push_faults([Fault::Stray(Duration::from_millis(100), response(403, &stray))]);
    let before = writes();
    wait("three more heartbeats", &agent, &|| writes() >= before + 3);

    let log = agent.stderr();
    assert!(!log.contains("nobody asked"), "the stray answer was read as a write's:\n{log}");
    assert!(support::problems_logged(&log).is_empty(), "no failed write:\n{log}");
}

#[test]
fn a_standby_does_not_believe_a_holder_named_by_a_stray_response() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let run = Run::every("2s").checks("1s").switch("--events=false").flag("--identity", "pod-a");
    let agent = run.start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait("the first write", &agent, &|| server.object(STATUS.0, STATUS.1).is_some());
    // Another instance holds the lock (renewed now, for a minute): this
    // one stands by and reads the ConfigMap on every check.
    let holder = |name: &str| {
        let mut cm = server.object(STATUS.0, STATUS.1).unwrap();
        let now = opstatus::testing::format_rfc3339(std::time::SystemTime::now());
        let record = json!({"holderIdentity": name, "leaseDurationSeconds": 60, "acquireTime": now,
                            "renewTime": now, "leaderTransitions": 1});
        cm["metadata"]["annotations"][LOCK] = json!(record.to_string());
        cm
    };
    let mut held = holder("pod-b");
    held["metadata"]["resourceVersion"] = json!("999999");
    server.put_object(STATUS.0, STATUS.1, held);
    wait("standing by for pod-b", &agent, &|| agent.stderr().contains("Standing by: pod-b publishes"));
    let reads = || server.requests().iter().filter(|r| r.method == "GET").count();
    wait("a read while standing by", &agent, &|| reads() >= 1);

    // After the next read's answer: another answer, naming a holder that
    // does not exist.
    server.push_faults([Fault::Stray(Duration::from_millis(100), response(200, &holder("fake-holder")))]);
    let before = reads();
    wait("four more reads", &agent, &|| reads() >= before + 4);

    let log = agent.stderr();
    assert!(!log.contains("fake-holder"), "a stray answer's holder was believed:\n{log}");
    assert!(log.contains("Standing by: pod-b publishes"), "{log}");
}
