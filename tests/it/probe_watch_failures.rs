//! Lists work but every watch fails at once (fake API server: the real one
//! cannot be made to): an `ERROR` event, `410 Gone` on every watch, a
//! refused watch. The probe backs off (1 s doubling to 30 s) instead of
//! listing and watching again every second, and its problem stays
//! reported: a watch that ends before delivering anything neither clears
//! it nor resets the backoff, so the health does not flap (one status
//! write to `degraded`, not one a second). When watches work again, the
//! problem clears.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, WatchFault};
use support::resources::condition;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-watch-failures";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
const STATUS: &str = "/api/v1/namespaces/ops/configmaps/kube9-operator-status";
/// How long every watch fails.
const FAILING: Duration = Duration::from_secs(10);

fn foo(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "False")]}})
}

/// (lists, watches, status writes) since request `from`.
fn counts(api: &FakeApiServer, from: usize) -> (usize, usize, usize) {
    let requests = api.requests();
    let later = &requests[from.min(requests.len())..];
    let on_foos = |watch: bool| {
        later.iter().filter(|r| r.method == "GET" && r.path == FOOS && r.query.contains("watch=1") == watch).count()
    };
    let writes = later.iter().filter(|r| r.method == "PATCH" && r.path == STATUS).count();
    (on_foos(false), on_foos(true), writes)
}

fn health(api: &FakeApiServer) -> Option<(String, String)> {
    let status = api.status_document("ops", "kube9-operator-status")?;
    Some((status["health"].as_str()?.to_string(), status["error"].as_str().unwrap_or_default().to_string()))
}

#[test]
fn watches_that_fail_at_once_back_off_and_keep_their_problem() {
    for (fault, said) in [
        (
            WatchFault::ErrorEvent(500),
            "Cannot watch foos.example.com: the watch failed: injected watch fault (code 500)",
        ),
        (WatchFault::ErrorEvent(410), "410 Gone"),
        (WatchFault::Refuse(503), "Cannot watch foos.example.com: "),
    ] {
        let api = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
        for name in ["a", "b"] {
            api.put_custom(&format!("{FOOS}/{name}"), foo(name));
        }
        api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
        let crd = ["--probe-from-crd-annotations", "foos.example.com", "--probe-namespace", "ops", "--events=false"];
        let args = [&["run", "--interval", "60s", "--check-interval", "1s"][..], &crd].concat();
        let mut agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(api.port(), &sa));
        let healthy = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
            health(&api).filter(|(h, _)| h == "healthy").and(counts(&api, 0).1.checked_sub(1))
        });
        assert!(healthy.is_some(), "{fault:?}: never healthy and watching\n{}", agent.stderr());

        api.fail_watches(Some(fault));
        api.cut_watches();
        let from = api.requests().len();
        std::thread::sleep(FAILING);
        let (lists, watches, writes) = counts(&api, from);
        let (health_now, error) = health(&api).unwrap();
        println!("{fault:?} for {FAILING:?}: {lists} lists, {watches} watches, {writes} status writes");
        assert_eq!(health_now, "degraded", "{fault:?}: {error}\n{}", agent.stderr());
        assert!(error.contains(said), "{fault:?}: {error}");
        // 1 s doubling, jittered with a floor of 1 s: 1-2, 1-4, 1-8, 1-16 s.
        assert!(lists <= 6 && watches <= 7, "{fault:?}: {lists} lists, {watches} watches in {FAILING:?}");
        // The one write to `degraded`; a flapping health writes each second.
        assert!(writes <= 2, "{fault:?}: {writes} status writes in {FAILING:?}\n{}", agent.stderr());

        // A change the next watch delivers: the collection is current again.
        api.fail_watches(None);
        api.put_custom(&format!("{FOOS}/b"), foo("b"));
        let back = wait_for(Duration::from_secs(40), Duration::from_millis(50), || {
            health(&api).filter(|(h, _)| h == "healthy")
        });
        assert!(back.is_some(), "{fault:?}: never healthy again: {:?}\n{}", health(&api), agent.stderr());
        assert_eq!(agent.exited(), None);
    }
}
