//! End to end, real kube-apiserver: 3,000 Foos with a spec of 2 KiB each,
//! about 7 MB in one list answer, well over the 4 MiB any other answer may
//! be. The probe's first list is one request from the API server's watch
//! cache (`resourceVersion=0`, which v1.20 answers whole whatever the
//! `limit`), read as it arrives: the one Foo that blocks is published, all
//! 3,000 are counted, nothing is reported as failing, and the memory stays
//! bounded (no answer is held whole).

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{release_bin, shared};
use support::probes::{deploy_probed, probed_args, probed_env, probed_upgradeable};
use support::resources::FOOS;
use support::{RunningAgent, wait_for};

const NAME: &str = "demo-operator.v7.0.0";
const COUNT: usize = 3000;

#[test]
fn e2e_the_first_list_is_one_answer_from_the_watch_cache_of_any_size() {
    let cp = shared();
    let pod = deploy_probed(cp, "probe-cache-list", "foos.example.com", NAME);
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    let created = Instant::now();
    cp.create_foos_with_spec(ns, COUNT, 8, &json!({"description": "d".repeat(2048)}));
    let blocker = "foo-01234";
    cp.set_foo_conditions(ns, blocker, &[("Migrating", "True")]);
    println!("created {COUNT} Foos of 2 KiB in {:.1?}", created.elapsed());
    let whole = cp.kubectl_ok(&["get", "--raw", &format!("{FOOS}/namespaces/{ns}/foos?resourceVersion=0")]);
    assert!(whole.len() > 6 << 20, "the answer is {} bytes", whole.len());
    // v1.20's watch cache answers in no particular order (a map's).
    let answer: serde_json::Value = serde_json::from_str(&whole).unwrap();
    let names: Vec<&str> =
        answer["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    let in_order = names.windows(2).filter(|w| w[0] < w[1]).count();

    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let args = probed_args("60s", probe, ns, &["--listen", "127.0.0.1:0"]);
    let started_at = SystemTime::now();
    let mut agent = RunningAgent::start(&release_bin(), &args, &probed_env(cp.port(), &pod, NAME));
    let blocked = probed_upgradeable(cp, ns, NAME, "False", Duration::from_secs(60));
    let status = || cp.status_document(ns, "kube9-operator-status");
    let blocked = blocked.unwrap_or_else(|| panic!("never blocked: {:?}\n{}", status(), agent.stderr()));
    assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Foo {ns}/{blocker}: Migrating"));
    let addr = support::http::endpoint_from_log(&agent.stderr()).expect("the endpoint's address is logged");
    let (_, metrics, _) = support::http::get(addr, "/metrics");
    assert!(metrics.lines().any(|l| l == format!("opstatus_probe_resources {COUNT}")), "{metrics}");
    let healthy =
        wait_for(Duration::from_secs(5), Duration::from_millis(100), || status().filter(|s| s["health"] == "healthy"));
    assert!(healthy.is_some(), "{:?}\n{}", status(), agent.stderr());
    let peak = agent.peak_rss_kib();
    agent.assert_memory_bounded();
    assert_eq!(agent.exited(), None);
    agent.signal("TERM");
    assert!(agent.wait_exit(Duration::from_secs(10)).is_some());

    let events = cp.audit_events(&pod.user);
    let lists: Vec<_> = events.iter().filter(|e| e.verb == "list" && e.uri.contains("/foos")).collect();
    let queries: Vec<&str> = lists.iter().map(|e| e.uri.split_once('?').map_or("", |(_, q)| q)).collect();
    assert_eq!(queries, ["limit=500&resourceVersion=0"], "one request, from the watch cache: {lists:?}");
    assert_eq!(lists[0].code, 200);
    let written = events
        .iter()
        .find(|e| e.verb == "update" && e.uri.contains("/operatorconditions/"))
        .map(|e| e.received.duration_since(started_at).unwrap_or_default());
    println!(
        "e2e watch-cache list: {COUNT} Foos of 2 KiB, {} bytes in one answer; Upgradeable=False written {written:.1?} \
         after start; peak RSS {peak} KiB; {in_order} of {} neighbours in name order",
        whole.len(),
        names.len().saturating_sub(1)
    );
}
