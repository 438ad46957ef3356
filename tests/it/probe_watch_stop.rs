//! A watch that stops closes its connection at once (fake API server, so
//! the test can hand the publisher lock to another instance on demand):
//! when another instance takes the lock, this one stands by, and the
//! probe's watch — a quiet collection, so no event would wake it for
//! minutes — lets go of its API-server connection at once (within a
//! second on an idle machine, within 30 s on the busiest); only
//! the heartbeat's kept connection stays.

use crate::support;
use crate::support::run_args::Run;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::resources::condition;
use support::sockets::connections_to;
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-watch-stop";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";

fn foo(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "False")]}})
}

#[test]
fn a_stood_down_watch_closes_its_connection_at_once() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    api.put_custom(&format!("{FOOS}/a"), foo("a"));
    let run = Run::every("2s").checks("1s").flag("--probe-from-crd-annotations", "foos.example.com");
    let run = run.flag("--probe-namespace", "ops").switch("--events=false").flag("--identity", "pod-a");
    // The debug line says when the probes stand by (the check after the
    // write that found the lock taken), which is when the watch stops.
    let mut env = pod_env(api.port(), &sa);
    env.push(("RUST_LOG".into(), "opstatus=debug".into()));
    let mut agent = run.start(&opstatus_bin(), &env);
    let watching = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        let watches = api.requests().iter().filter(|r| r.query.contains("watch=1")).count();
        let open = connections_to(agent.pid(), api.port());
        (watches >= 1 && open >= 2).then_some(open)
    });
    let open = watching.unwrap_or_else(|| panic!("never watching on a connection of its own\n{}", agent.stderr()));
    assert_eq!(open, 2, "the heartbeat's connection and the watch's");

    // Another instance takes the lock (a write of its own, so this one's
    // next write conflicts and it reads the lock again).
    let mut cm = api.object("ops", "kube9-operator-status").unwrap();
    let record = json!({"holderIdentity": "pod-b", "leaseDurationSeconds": 60, "acquireTime": "2026-01-01T00:00:00Z",
                        "renewTime": "2026-01-01T00:00:00Z", "leaderTransitions": 1});
    cm["metadata"]["annotations"]["opstatus.kube9.dev/publisher"] = json!(record.to_string());
    cm["metadata"]["resourceVersion"] = json!("999999");
    api.put_object("ops", "kube9-operator-status", cm);
    let stood_by = wait_for(Duration::from_secs(10), Duration::from_millis(10), || {
        agent.stderr().contains("Standing by: the probes' watches stop").then(Instant::now)
    });
    let stood_by = stood_by.unwrap_or_else(|| panic!("never stood by\n{}", agent.stderr()));
    // At once, not at the watch's next event or its end (minutes away on a
    // quiet collection): within a few checks, however busy the machine.
    let closed = wait_for(Duration::from_secs(30), Duration::from_millis(10), || {
        (connections_to(agent.pid(), api.port()) <= 1).then(|| stood_by.elapsed())
    });
    let open = connections_to(agent.pid(), api.port());
    let closed = closed.unwrap_or_else(|| panic!("{open} connections 30 s after standing by\n{}", agent.stderr()));
    println!("the stood-down watch's connection closed {closed:.0?} after the probes stood by");
    assert_eq!(agent.exited(), None);
}
