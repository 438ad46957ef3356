//! A probe's list is read as it arrives, one resource at a time, from
//! where client-go's reflector reads it (fake API server, answering lists
//! as v1.20 does: the real one cannot be made to compact, cut an answer or
//! hold a 5 MiB resource on demand):
//! - the first list asks for any version (`resourceVersion=0`): the watch
//!   cache answers it whole, whatever the `limit`, in one request;
//! - a list again after the watch's version was compacted away asks for a
//!   version not older than the one last seen (from the cache too), and
//!   when the server has no such version any more (a server that pages,
//!   410 Gone), the latest (a quorum read), at once and without a problem;
//! - an answer cut in the middle of a resource is asked again, whole;
//! - one resource over the 4 MiB bound in the middle of an answer ends
//!   the list with a problem that says which and after how many, in one
//!   request (no smaller pages), and the list works once it is smaller.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::resources::{condition, find};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-probe-list-stream";
const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";

fn foo(name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", "False")]}})
}

/// A fake API server with `count` calm Foos (`f0000`, …) and the
/// OperatorCondition.
fn server(count: usize) -> FakeApiServer {
    let api = FakeApiServer::start(TOKEN);
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    for i in 0..count {
        let name = format!("f{i:04}");
        api.put_custom(&format!("{FOOS}/{name}"), foo(&name));
    }
    api.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": []}}),
    );
    api
}

/// The agent, and its ServiceAccount's files (kept while it runs).
fn start(api: &FakeApiServer) -> (RunningAgent, ServiceAccountDir) {
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let mut env = pod_env(api.port(), &sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    let crd = ["--probe-from-crd-annotations", "foos.example.com", "--probe-namespace", "ops", "--events=false"];
    let args = [&["run", "--interval", "60s", "--check-interval", "1s"][..], &crd].concat();
    (RunningAgent::start(&opstatus_bin(), &args, &env), sa)
}

/// The queries of the lists of the Foos so far.
fn lists(api: &FakeApiServer) -> Vec<String> {
    api.requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == FOOS && !r.query.contains("watch=1"))
        .map(|r| r.query)
        .collect()
}

/// The `resourceVersion` the last watch of the Foos started from.
fn watched_from(api: &FakeApiServer) -> Option<String> {
    let watch = api.requests().into_iter().rev().find(|r| r.path == FOOS && r.query.contains("watch=1"))?;
    let version = watch.query.split('&').find_map(|kv| kv.strip_prefix("resourceVersion="))?;
    Some(version.to_string())
}

fn watches(api: &FakeApiServer) -> usize {
    api.requests().iter().filter(|r| r.path == FOOS && r.query.contains("watch=1")).count()
}

/// Waits for `Upgradeable=status` with `message` on the OperatorCondition.
fn wait_upgradeable(api: &FakeApiServer, agent: &RunningAgent, status: &str, message: &str) {
    let up = wait_for(Duration::from_secs(30), Duration::from_millis(20), || {
        let oc = api.custom(OC)?;
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == status).cloned()
    });
    let up = up.unwrap_or_else(|| panic!("never Upgradeable={status}: {:?}\n{}", lists(api), agent.stderr()));
    assert_eq!(up["message"], message, "{}", agent.stderr());
}

/// Compacts the history past the version the watch is at (another
/// collection moved on) and cuts the watch: the resumed watch gets 410
/// Gone, and the probe lists again. Returns the version it was at.
fn lose_the_watch(api: &FakeApiServer, agent: &RunningAgent) -> String {
    let watching = wait_for(Duration::from_secs(10), Duration::from_millis(20), || watched_from(api));
    let seen = watching.unwrap_or_else(|| panic!("never watching: {:?}\n{}", lists(api), agent.stderr()));
    api.put_custom("/apis/example.com/v1/namespaces/ops/bars/x", json!({"metadata": {"name": "x"}}));
    api.compact();
    let before = watches(api);
    api.cut_watches();
    let resumed =
        wait_for(Duration::from_secs(10), Duration::from_millis(20), || (watches(api) >= before + 2).then_some(()));
    assert!(resumed.is_some(), "410 → list → watch: {:?}\n{}", lists(api), agent.stderr());
    seen
}

#[test]
fn the_first_list_is_one_answer_and_a_list_again_asks_from_the_version_seen() {
    let api = server(1200);
    let (mut agent, _sa) = start(&api);
    wait_upgradeable(&api, &agent, "True", "No resource blocks an upgrade (1200 checked)");
    assert_eq!(lists(&api), ["limit=500&resourceVersion=0"], "one answer from the watch cache");

    let seen = lose_the_watch(&api, &agent);
    assert_eq!(
        lists(&api),
        ["limit=500&resourceVersion=0".to_string(), format!("resourceVersion={seen}")],
        "not older than what was seen, from the cache: no limit\n{}",
        agent.stderr()
    );
    api.put_custom(
        &format!("{FOOS}/f0007"),
        json!({"metadata": {"name": "f0007", "namespace": "ops"},
        "status": {"conditions": [condition("Migrating", "True")]}}),
    );
    wait_upgradeable(&api, &agent, "False", "Upgrade blocked by 1 resource: Foo ops/f0007: Migrating");
    let status = api.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!(status["health"], "healthy", "{status}");
    assert_eq!(agent.exited(), None);
}

#[test]
fn a_list_again_whose_version_is_gone_reads_the_latest() {
    let api = server(600);
    api.without_watch_cache();
    let (mut agent, _sa) = start(&api);
    wait_upgradeable(&api, &agent, "True", "No resource blocks an upgrade (600 checked)");
    assert_eq!(lists(&api), ["limit=500&resourceVersion=0", "limit=500&continue=500"], "paged by the server");

    let seen = lose_the_watch(&api, &agent);
    assert_eq!(
        lists(&api)[2..],
        [format!("limit=500&resourceVersion={seen}"), "limit=500".to_string(), "limit=500&continue=500".to_string()],
        "from the version seen, paged as the server pages; 410: the latest\n{}",
        agent.stderr()
    );
    api.put_custom(
        &format!("{FOOS}/f0550"),
        json!({"metadata": {"name": "f0550", "namespace": "ops"},
        "status": {"conditions": [condition("Migrating", "True")]}}),
    );
    wait_upgradeable(&api, &agent, "False", "Upgrade blocked by 1 resource: Foo ops/f0550: Migrating");
    let status = api.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!(status["health"], "healthy", "no problem: {status}");
    assert!(!agent.stderr().contains("Cannot "), "{}", agent.stderr());
    assert_eq!(agent.exited(), None);
}

#[test]
fn a_first_answer_cut_in_the_middle_of_a_resource_is_asked_again_whole() {
    let api = server(1000);
    api.fail_query_once("resourceVersion=0", Fault::CutBody);
    let (mut agent, _sa) = start(&api);
    wait_upgradeable(&api, &agent, "True", "No resource blocks an upgrade (1000 checked)");
    assert_eq!(lists(&api), ["limit=500&resourceVersion=0", "limit=500&resourceVersion=0"], "{}", agent.stderr());
    assert_eq!(agent.exited(), None);
}

#[test]
fn a_resource_over_the_bound_in_the_middle_of_an_answer_is_said() {
    let api = server(600);
    let mut big = foo("f0300-big");
    big["spec"] = json!({"blob": "x".repeat(5 << 20)});
    api.put_custom(&format!("{FOOS}/f0300-big"), big);
    let (mut agent, _sa) = start(&api);
    let said = wait_for(Duration::from_secs(20), Duration::from_millis(50), || {
        let status = api.status_document("ops", "kube9-operator-status")?;
        let error = status["error"].as_str()?;
        (status["health"] == "degraded" && error.contains("a single Foo")).then(|| error.to_string())
    });
    let peak = agent.peak_rss_kib();
    let said = said.unwrap_or_else(|| panic!("never said: {:?}\n{}", lists(&api), agent.stderr()));
    assert_eq!(
        said,
        "Cannot list foos.example.com: a single Foo (after the first 301 listed) is larger than 4194304 bytes, the \
         most one resource may be: the resources past it cannot be listed"
    );
    let asked = lists(&api);
    assert!(
        !asked.is_empty() && asked.iter().all(|q| q == "limit=500&resourceVersion=0"),
        "one request a try: {asked:?}"
    );
    println!("a 5 MiB Foo after 301 others: {said:?} after {} list requests; peak RSS {peak} KiB", asked.len());

    // Made smaller, the next try lists them all.
    api.put_custom(&format!("{FOOS}/f0300-big"), foo("f0300-big"));
    wait_upgradeable(&api, &agent, "True", "No resource blocks an upgrade (601 checked)");
    assert_eq!(agent.exited(), None);
}
