//! A probed collection past the most a probe keeps (100,000 resources: here
//! 150,000 Foos in one namespace) is said once, published `degraded` with
//! the reason, and not listed again: counted instead, with one request for
//! one item (`limit=1`, the server's `remainingItemCount`), a minute after
//! the list that found it, then after a wait doubling to an hour (the
//! schedule itself is unit-tested over a day: `pager.rs`). Listing it again
//! every few seconds read up to 100,000 objects from the API server each
//! time: the heaviest request a client makes.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::run_args::Run;
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-past-cap";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
const REASON: &str = "Cannot list foos.example.com: more than 100000 resources";

/// (whole lists begun, one-item counts) of the Foos so far.
fn lists_and_counts(api: &FakeApiServer) -> (usize, usize) {
    let requests = api.requests();
    let of_foos = requests.iter().filter(|r| r.method == "GET" && r.path == FOOS && !r.query.contains("watch="));
    let (counts, lists): (Vec<_>, Vec<_>) =
        of_foos.filter(|r| !r.query.contains("continue=")).partition(|r| r.query == "limit=1");
    (lists.len(), counts.len())
}

#[test]
fn a_collection_past_the_cap_is_said_once_published_degraded_and_counted_not_listed_again() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    api.many(FOOS, 150_000);
    let run = Run::every("60s")
        .checks("1s")
        .flag("--probe-namespace", "ops")
        .flag("--probe-from-crd-annotations", "foos.example.com");
    let agent = run.start(&opstatus_bin(), &pod_env(api.port(), &sa));
    let degraded = wait_for(Duration::from_secs(120), Duration::from_millis(100), || {
        let doc = api.status_document("ops", "kube9-operator-status")?;
        (doc["health"] == "degraded" && doc["error"].as_str()?.starts_with(REASON)).then_some(doc)
    });
    let doc = degraded.unwrap_or_else(|| {
        let log = agent.stderr();
        let said = log.lines().filter(|l| l.contains("100000")).count();
        panic!("never degraded past the cap: (lists, counts) {:?}, said in {said} lines\n{log}", lists_and_counts(&api))
    });
    let found = Instant::now();
    assert_eq!(lists_and_counts(&api), (1, 0), "{}", agent.stderr());

    // A minute after: one count, and no second list.
    let counted = wait_for(Duration::from_secs(90), Duration::from_millis(200), || {
        (lists_and_counts(&api).1 == 1).then(|| found.elapsed())
    });
    let counted = counted.unwrap_or_else(|| panic!("no count: {:?}\n{}", lists_and_counts(&api), agent.stderr()));
    std::thread::sleep(Duration::from_secs(5));
    let (lists, counts) = lists_and_counts(&api);
    println!("past the cap: {lists} list, {counts} count ({:?} after the list) in {:?}", counted, found.elapsed());
    assert_eq!((lists, counts), (1, 1), "{}", agent.stderr());
    assert!(counted >= Duration::from_secs(50), "counted {counted:?} after the list");
    let now = api.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!(now["error"], doc["error"], "the same reason, whatever the count");
    let log = agent.stderr();
    assert_eq!(log.matches(REASON).count(), 1, "said once: {log}");
}
