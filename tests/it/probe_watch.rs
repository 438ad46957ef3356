//! The probes list once and then watch (fake API server: it can compact
//! and cut streams on demand). A flip reaches the OperatorCondition well
//! before the next check (30 s away here): the watch nudges the loop. A
//! watch cut mid-stream resumes from its version without a list; one whose
//! version was compacted away (410 Gone, as an `ERROR` event) lists again;
//! a flip after either is still seen.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::resources::{condition, find};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-watch";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";

fn foo(name: &str, migrating: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", migrating)]}})
}

/// (lists, watches) of the Foos so far.
fn requests(api: &FakeApiServer) -> (usize, usize) {
    let on_foos: Vec<_> = api.requests().into_iter().filter(|r| r.method == "GET" && r.path == FOOS).collect();
    let watches = on_foos.iter().filter(|r| r.query.contains("watch=1")).count();
    (on_foos.len() - watches, watches)
}

/// Flips `a` and returns how long the OperatorCondition took to follow.
fn flip(api: &FakeApiServer, agent: &RunningAgent, migrating: &str) -> Duration {
    let want = if migrating == "True" { "False" } else { "True" };
    let flipped = Instant::now();
    api.put_custom(&format!("{FOOS}/a"), foo("a", migrating));
    let seen = wait_for(Duration::from_secs(10), Duration::from_millis(5), || {
        let oc = api.custom(OC)?;
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == want).map(|_| ())
    });
    assert!(seen.is_some(), "Upgradeable never {want} after the flip\n{}", agent.stderr());
    flipped.elapsed()
}

#[test]
fn flips_are_seen_at_once_through_cuts_and_compaction() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    for name in ["a", "b", "c"] {
        api.put_custom(&format!("{FOOS}/{name}"), foo(name, "False"));
    }
    api.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": []}}),
    );
    let mut env = pod_env(api.port(), &sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    let args = [
        "run",
        "--interval",
        "60s",
        "--check-interval",
        "30s",
        "--probe-from-crd-annotations",
        "foos.example.com",
        "--probe-namespace",
        "ops",
        // The fake API server keeps no Events (tests/e2e_events.rs covers
        // them on the real one); this test asserts nothing failed.
        "--events=false",
    ];
    let mut agent = RunningAgent::start(&opstatus_bin(), &args, &env);
    let up = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        let oc = api.custom(OC)?;
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == "True").cloned()
    });
    let up = up.unwrap_or_else(|| panic!("never Upgradeable=True\n{}", agent.stderr()));
    assert_eq!(up["message"], "No resource blocks an upgrade (3 checked)");
    let watching = wait_for(Duration::from_secs(5), Duration::from_millis(20), || {
        let (lists, watches) = requests(&api);
        (watches >= 1).then_some((lists, watches))
    });
    assert_eq!(watching, Some((1, 1)), "one list, then one watch\n{}", agent.stderr());
    let watch = api.requests().into_iter().find(|r| r.query.contains("watch=1")).unwrap();
    assert!(watch.query.contains("allowWatchBookmarks=true"), "{}", watch.query);
    let timeout: u64 = watch.query.split("timeoutSeconds=").nth(1).unwrap().parse().unwrap();
    assert!((300..=360).contains(&timeout), "{}", watch.query);

    // The check interval is 30 s: only the watch's nudge can be this quick.
    let mut latencies = vec![flip(&api, &agent, "True")];
    latencies.push(flip(&api, &agent, "False"));
    assert_eq!(requests(&api), (1, 1), "no request for a change but the watch's event");

    // A stream cut mid-way: the watch resumes from its version, no list.
    api.cut_watches();
    let resumed =
        wait_for(Duration::from_secs(10), Duration::from_millis(20), || (requests(&api).1 == 2).then_some(()));
    assert!(resumed.is_some(), "{:?}\n{}", requests(&api), agent.stderr());
    latencies.push(flip(&api, &agent, "True"));
    assert_eq!(requests(&api), (1, 2));

    // Compacted past the watch's version (another collection moved on):
    // the resumed watch gets 410 Gone and the probe lists again.
    api.put_custom("/apis/example.com/v1/namespaces/ops/bars/x", json!({"metadata": {"name": "x"}}));
    api.compact();
    api.cut_watches();
    let relisted = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        let (lists, watches) = requests(&api);
        (lists == 2 && watches == 4).then_some(())
    });
    assert!(relisted.is_some(), "410 → list → watch: {:?}\n{}", requests(&api), agent.stderr());
    latencies.push(flip(&api, &agent, "False"));

    // None of it was a problem worth reporting: healthy throughout.
    let status = api.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!(status["health"], "healthy", "{status}");
    assert!(!agent.stderr().contains("Cannot "), "{}", agent.stderr());
    assert_eq!(agent.exited(), None);
    let slowest = latencies.iter().max().unwrap();
    assert!(*slowest <= Duration::from_secs(1), "{latencies:?}");
    println!("flip → OperatorCondition (fake API server, checks every 30 s): {latencies:.0?}");
}
