//! Answers that are not what the API promises: huge, truncated, or not
//! JSON. opstatus reads at most 4 MiB, never crashes, and says what is wrong.

use crate::support;
use crate::support::run_args::Run;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end, wait_for};

const TOKEN: &str = "sa-token-for-response-limit-tests";

#[test]
fn a_50_mib_configmap_is_refused_by_the_reader_not_buffered() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let huge = "x".repeat(50 * 1024 * 1024);
    server.put_object(
        "ops",
        "kube9-operator-status",
        json!({"kind": "ConfigMap", "data": {"status": "{}", "other": huge}}),
    );
    let out = run_to_end(
        &opstatus_bin(),
        &["get", "--namespace", "ops"],
        &pod_env(server.port(), &sa),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is larger than 4194304 bytes"), "{stderr}");
}

#[test]
fn truncated_and_non_json_answers_are_failures_with_a_reason() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.put_object("ops", "kube9-operator-status", json!({"kind": "ConfigMap", "data": {"status": "{}"}}));
    server.push_faults([Fault::Raw { code: 200, body: br#"{"kind":"ConfigMap","data":{"sta"#.to_vec() }]);
    let out = run_to_end(
        &opstatus_bin(),
        &["get", "--namespace", "ops"],
        &pod_env(server.port(), &sa),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("the API server's answer is not a ConfigMap"), "{stderr}");

    // A write answered with a Status body that is not JSON is still a
    // failure with the code, retried, and the agent recovers.
    server.push_faults([Fault::Raw { code: 500, body: b"\x00\x01 not json at all".to_vec() }]);
    let agent = Run::every("60s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        server.status_document("ops", "kube9-operator-status").filter(|d| d.get("mode").is_some())
    })
    .expect("written after the bad answer");
    assert!(agent.logged("500 InternalError: unexpected non-Status body"), "{}", agent.stderr());
    agent.assert_memory_bounded();
}

#[test]
fn a_50_mib_answer_to_a_write_is_drained_within_the_limit_not_buffered() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let huge = vec![b' '; 50 * 1024 * 1024];
    server.push_faults([Fault::Raw { code: 200, body: huge.clone() }, Fault::Raw { code: 500, body: huge }]);
    let mut agent = Run::every("1s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    // Both huge answers, then a real write.
    server.wait_requests(3, Duration::from_secs(15)).expect("writes go on after the huge answers");
    server.wait_status_configmap(Duration::from_secs(10)).expect("written after the huge answers");
    assert!(agent.exited().is_none(), "{}", agent.stderr());
    agent.assert_memory_bounded();
    println!("peak RSS through two 50 MiB answers: {} KiB", agent.peak_rss_kib());
}
