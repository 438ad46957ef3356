//! A server whose list pages never end (a `continue` token on every page,
//! as a buggy aggregated API can send) must not hold the probe's watch
//! thread in its initial list, nor the agent's loop: pages that bring no
//! resource not listed before stop the list after one heartbeat interval
//! (and 400 pages per
//! collection: unit-tested, the debug build's TLS is too slow to get there
//! in an interval), and so do pages whose token comes back; the probe
//! is reported failed (`degraded`, the reason published), and the heartbeat
//! and /healthz go on.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::http::{endpoint_from_log, get};
use support::resources::condition;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-endless-pagination";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";

fn heartbeats(api: &FakeApiServer) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/configmaps/kube9-operator-status"))
        .count()
}

/// (list requests, of which first pages) so far.
fn lists(api: &FakeApiServer) -> (usize, usize) {
    let lists: Vec<_> = api.requests().into_iter().filter(|r| r.method == "GET" && r.path == FOOS).collect();
    (lists.len(), lists.iter().filter(|r| !r.query.contains("continue=")).count())
}

/// Runs the agent against a Foo collection that pages without end, until
/// the probe is reported failed with `reason`; then checks for 6 s that the
/// heartbeat (every 2 s) and /healthz go on. Returns pages per list.
fn bounded(fresh_tokens: bool, reason: &str) -> f64 {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    api.put_custom(
        &format!("{FOOS}/a"),
        json!({"metadata": {"name": "a", "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "False")]}}),
    );
    api.endless_paging(FOOS, fresh_tokens);
    let args = [
        "run",
        "--interval",
        "2s",
        "--check-interval",
        "1s",
        "--probe-namespace",
        "ops",
        "--probe-from-crd-annotations",
        "foos.example.com",
        "--listen",
        "127.0.0.1:0",
    ];
    let mut agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(api.port(), &sa));
    let expected = format!("Cannot list foos.example.com: {reason}");
    let degraded = wait_for(Duration::from_secs(30), Duration::from_millis(50), || {
        api.status_document("ops", "kube9-operator-status")
            .filter(|s| s["health"] == "degraded" && s["error"].as_str().is_some_and(|e| e.starts_with(&expected)))
    });
    let published = |api: &FakeApiServer| api.status_document("ops", "kube9-operator-status").unwrap_or(Value::Null);
    assert!(
        degraded.is_some(),
        "never degraded with {expected:?} in 30 s: {}; (lists, first pages) {:?}, heartbeats {}\n{}",
        published(&api),
        lists(&api),
        heartbeats(&api),
        agent.stderr()
    );
    let addr = endpoint_from_log(&agent.stderr()).expect("the endpoint's address is logged");

    let (before, lists_before) = (heartbeats(&api), lists(&api));
    for _ in 0..6 {
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(get(addr, "/healthz").0, 200, "liveness holds\n{}", agent.stderr());
    }
    let after = heartbeats(&api);
    assert!(after >= before + 2, "heartbeats {before} → {after} in 6 s at a 2 s interval\n{}", agent.stderr());
    // The failed list is tried again, after the watch thread's backoff.
    let again = wait_for(Duration::from_secs(35), Duration::from_millis(100), || {
        (lists(&api).1 > lists_before.1).then_some(())
    });
    assert!(again.is_some(), "the probe goes on trying: {:?} → {:?}", lists_before, lists(&api));
    assert_eq!(agent.exited(), None);
    let (pages, checks) = lists(&api);
    pages as f64 / checks as f64
}

#[test]
fn fresh_tokens_without_end_stop_at_the_interval() {
    let per_check = bounded(true, "listing made no progress for 2s (");
    assert!((2.0..=400.0).contains(&per_check), "{per_check} lists per check");
    eprintln!("lists per check with fresh tokens: {per_check:.0}");
}

#[test]
fn a_token_that_comes_back_ends_the_list_once_it_lists_nothing_new() {
    let per_check = bounded(false, "listing made no progress for 2s (");
    assert!((2.0..=400.0).contains(&per_check), "{per_check} lists per check");
    eprintln!("lists per check with a repeated token: {per_check:.0}");
}
