//! End to end, real kube-apiserver: a first list that takes longer than
//! the list bound. 5,000 Foos (`OPSTATUS_FIRST_LIST_FOOS` for another
//! count) listed by a probe at `--interval 1s`, so the bound is one
//! second, through a proxy that hands the answer on in about six seconds
//! (a slow link; the machine's speed or load changes nothing): the list
//! goes on while it brings new resources, the status never says `degraded`
//! meanwhile, `/status` says how far the list got as the answer arrives
//! (several counts between none and all: the watch thread publishes every
//! 500 resources and each check shows the last), `Upgradeable` is written
//! once the list completed and not before, and the list is one request,
//! answered whole from the watch cache (the audit log: `resourceVersion=0`,
//! whatever the `limit`). Its own control plane: 5,000 Foos would slow
//! the shared one's other tests. The count is what the proxy's six
//! seconds spread into about ten progress counts of 500; more Foos would
//! cost their creation and prove nothing more (the list's time is the
//! proxy's).
//!
//! Without the proxy the count can go from 0 to all between two checks:
//! the API server sends nothing until it encoded the whole answer, and
//! opstatus reads 5,000 Foos in well under the one second between
//! checks.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{ControlPlane, release_bin};
use support::http::{endpoint_from_log, get};
use support::probes::{SlowProxy, deploy_probed, probed_args, probed_env, probed_upgradeable};
use support::resources::FOOS;
use support::{RunningAgent, wait_for};

/// How long the proxy takes to hand the whole answer on.
const ARRIVAL: Duration = Duration::from_secs(6);

const NAME: &str = "demo-operator.v3.0.0";
const FOO_COUNT: usize = 5_000;

#[test]
fn e2e_a_long_first_list_goes_on_without_degrading_in_one_answer() {
    let cp = ControlPlane::start();
    let pod = deploy_probed(&cp, "first-list", "foos.example.com", NAME);
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    let count: usize = std::env::var("OPSTATUS_FIRST_LIST_FOOS").ok().and_then(|n| n.parse().ok()).unwrap_or(FOO_COUNT);
    let created = Instant::now();
    cp.create_foos_in_bulk(ns, count, 8);
    println!("created {count} Foos in {:.1?}", created.elapsed());
    let answer = cp.kubectl_ok(&["get", "--raw", &format!("{FOOS}/namespaces/{ns}/foos?resourceVersion=0")]).len();
    let proxy = SlowProxy::start(cp.port(), answer / ARRIVAL.as_secs() as usize);

    let env = probed_env(proxy.port(), &pod, NAME);
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let args = probed_args("1s", probe, ns, &["--listen", "127.0.0.1:0"]);
    let started_at = SystemTime::now();
    let started = Instant::now();
    let mut agent = RunningAgent::start(&release_bin(), &args, &env);
    let addr = wait_for(Duration::from_secs(20), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint address logged\n{}", agent.stderr()));

    // `/status` every 100 ms until the list is done: its health, error and
    // how far the list got.
    let mut transitions: Vec<(f64, String)> = Vec::new();
    let mut so_far: Vec<u64> = Vec::new();
    let mut not_healthy = Vec::new();
    let listed = wait_for(Duration::from_secs(240), Duration::from_millis(100), || {
        let (code, body, _) = get(addr, "/status");
        let status: Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
        let health = status["health"].as_str().unwrap_or_default().to_string();
        let said = format!("{health} {}", status["error"].as_str().unwrap_or_default());
        if transitions.last().is_none_or(|(_, last)| *last != said) {
            transitions.push((started.elapsed().as_secs_f64(), said.clone()));
        }
        if health != "healthy" {
            not_healthy.push(said);
        }
        match status["listing"].as_array() {
            Some(listing) => {
                let text = listing.first()?.as_str()?;
                assert!(text.starts_with(&format!("listing foos.example.com in namespace {ns:?}: ")), "{text}");
                so_far.push(text.rsplit(": ").next()?.strip_suffix(" so far")?.parse().ok()?);
                None
            }
            // Done once a listing was seen and is gone: before the first
            // check has begun the list, `/status` has none either.
            None => (!so_far.is_empty()).then_some(()),
        }
    });
    assert!(listed.is_some(), "no list seen under way, then completed: {so_far:?} {transitions:?}\n{}", agent.stderr());
    let up = probed_upgradeable(&cp, ns, NAME, "True", Duration::from_secs(20));
    let up = up.unwrap_or_else(|| panic!("never Upgradeable=True: {transitions:?}\n{}", agent.stderr()));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({count} checked)"));
    assert!(not_healthy.is_empty(), "not healthy while listing: {transitions:?}\n{}", agent.stderr());
    // Counts between none and all, growing: the list's progress as its
    // answer arrived, over several checks.
    let mut between: Vec<u64> = so_far.iter().copied().filter(|n| (1..count as u64).contains(n)).collect();
    between.dedup();
    assert!(
        between.len() >= 2 && so_far.windows(2).all(|w| w[0] <= w[1]) && so_far.last() <= Some(&(count as u64)),
        "/status said how far the list got, growing: {so_far:?}"
    );
    assert_eq!(agent.exited(), None);
    agent.signal("TERM");
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());

    // The audit log: one list, from the watch cache, in one answer; the
    // OperatorCondition written only after it.
    let events = cp.audit_events(&pod.user);
    let lists: Vec<_> = events.iter().filter(|e| e.verb == "list" && e.uri.contains("/foos")).collect();
    assert_eq!(lists.len(), 1, "{lists:?}");
    assert!(lists[0].uri.ends_with("/foos?limit=500&resourceVersion=0") && lists[0].code == 200, "{lists:?}");
    let updates: Vec<_> =
        events.iter().filter(|e| e.verb == "update" && e.uri.contains("/operatorconditions/")).collect();
    let listed = lists[0].received;
    assert!(!updates.is_empty() && updates.iter().all(|e| e.received >= listed), "{updates:?}");
    let first_answer = updates[0].received.duration_since(started_at).unwrap_or_default();
    println!(
        "e2e first list: {count} Foos at a 1 s list bound: one answer; first Upgradeable written \
         {first_answer:.1?} after start; /status said {} samples of progress ({:?} … {:?}); transitions \
         {transitions:?}",
        so_far.len(),
        so_far.first(),
        so_far.last()
    );
}
