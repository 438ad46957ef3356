//! What a probe's watch keeps and reads is bounded, and going past a bound
//! is said, never silent (fake API server: the real one cannot send an
//! event over 4 MiB, and 100,000 new resources in seconds take a flood).
//! A watch that brings more new resources than a collection may hold
//! (100,000) keeps that many and reports the rest; an event line over
//! 4 MiB is reported (the collection is listed again after a backoff),
//! not taken for the end of the stream; the list then says that one
//! object is over the limit (tests/it/probe_list_stream.rs: in the middle
//! of a list).

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, WatchFault};
use support::resources::condition;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-watch-bounds";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";

fn foo(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "False")]}})
}

fn start(api: &FakeApiServer) -> RunningAgent {
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    api.put_custom(&format!("{FOOS}/a"), foo("a"));
    let crd = ["--probe-from-crd-annotations", "foos.example.com", "--probe-namespace", "ops", "--events=false"];
    let args = [&["run", "--interval", "60s", "--check-interval", "1s"][..], &crd].concat();
    let agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(api.port(), &sa));
    // Generous bounds: on a busy machine the agent's start and its reading
    // of a 5 MiB event take seconds; each wait ends as soon as it is met.
    let watching = wait_for(Duration::from_secs(60), Duration::from_millis(20), || {
        api.requests().iter().any(|r| r.query.contains("watch=1")).then_some(())
    });
    assert!(watching.is_some(), "never watching\n{}", agent.stderr());
    agent
}

/// The status's health and error, once `error` contains `part`.
fn error_with(api: &FakeApiServer, part: &str, within: Duration) -> Option<String> {
    wait_for(within, Duration::from_millis(50), || {
        let status = api.status_document("ops", "kube9-operator-status")?;
        let error = status["error"].as_str()?;
        (status["health"] == "degraded" && error.contains(part)).then(|| error.to_string())
    })
}

#[test]
fn a_watch_that_brings_too_many_resources_keeps_the_bound_and_says_so() {
    let api = FakeApiServer::start(TOKEN);
    let mut agent = start(&api);
    api.fail_watches(Some(WatchFault::Flood(120_000)));
    api.cut_watches();
    let said = error_with(&api, "100000", Duration::from_secs(120));
    let peak = agent.peak_rss_kib();
    let said =
        said.unwrap_or_else(|| panic!("the overflow was never reported (peak RSS {peak} KiB)\n{}", agent.stderr()));
    assert!(said.starts_with("Probing foos.example.com in namespace \"ops\": more than 100000 resources"), "{said}");
    println!("120,000 new resources by watch: {said:?}; peak RSS {peak} KiB");
    assert!(peak < 48 * 1024, "peak RSS {peak} KiB");
    assert_eq!(agent.exited(), None);
}

#[test]
fn a_watch_event_over_the_line_limit_is_reported() {
    let api = FakeApiServer::start(TOKEN);
    let mut agent = start(&api);
    let mut big = foo("big");
    big["spec"] = json!({"blob": "x".repeat(5 << 20)});
    api.put_custom(&format!("{FOOS}/big"), big);
    let said = error_with(&api, "larger than", Duration::from_secs(60));
    let said = said.unwrap_or_else(|| {
        panic!(
            "the over-long event was never reported: {:?}\n{}",
            api.status_document("ops", "kube9-operator-status"),
            agent.stderr()
        )
    });
    assert!(said.contains("Cannot watch foos.example.com: "), "{said}");
    println!("a 5 MiB event: {said:?}");
    // Listed again: that one object is over the limit on its own: said
    // so, not taken for a failing server.
    let listed = error_with(&api, "a single Foo", Duration::from_secs(60));
    let listed = listed
        .unwrap_or_else(|| panic!("{:?}\n{}", api.status_document("ops", "kube9-operator-status"), agent.stderr()));
    assert_eq!(
        listed,
        "Cannot list foos.example.com: a single Foo (after the first 1 listed) is larger than 4194304 bytes, the most \
         one resource may be: the resources past it cannot be listed"
    );
    assert_eq!(agent.exited(), None);
}
