//! The probes list once and then watch (fake API server: it can compact
//! and cut streams on demand). A flip reaches the OperatorCondition well
//! before the next check (30 s away here): the watch nudges the loop. A
//! watch cut mid-stream resumes from its version without a list; one whose
//! version was compacted away (410 Gone, as an `ERROR` event) lists again;
//! a flip after either is still seen.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::probes::{FOOS, OC, fake_args, fake_env, fake_upgradeable, fake_with_foos, foo};
use support::resources::find;
use support::{RunningAgent, opstatus_bin, wait_for};

const TOKEN: &str = "sa-token-for-probe-watch";

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
    let (api, sa) = fake_with_foos(TOKEN, ["a", "b", "c"].map(|name| foo(name, "False")), json!([]));
    // The fake API server keeps no Events (tests/e2e_events.rs covers them
    // on the real one); this test asserts nothing failed.
    let args = fake_args("60s", "30s", &["--events=false"]);
    let mut agent = RunningAgent::start(&opstatus_bin(), &args, &fake_env(api.port(), &sa));
    let up = fake_upgradeable(&api, &agent, "True", Duration::from_secs(10));
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
