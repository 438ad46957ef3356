//! A probe's first list cut in the middle of its one answer (the watch
//! cache answers whole) is asked again, and the retry has the whole
//! budget: each resource it reads counts as progress, also those the cut
//! try had read already. 4,000 Foos handed on at 100 kB/s (a slow link:
//! six seconds for the answer, three to where the cut was) and
//! `--interval 1s`, so a second without a resource stops a list: the cut
//! try, then one retry that completes; no list is stopped for want of
//! progress. Fake API server: the real one cannot be made to cut one
//! answer on demand.

use crate::support;

use std::time::Duration;
use support::fake_apiserver::Fault;
use support::probes::{FOOS, SlowProxy, fake_args, fake_env, fake_upgradeable, fake_with_foos, foo};
use support::{RunningAgent, opstatus_bin};

const TOKEN: &str = "sa-token-for-probe-list-cut";
const COUNT: usize = 4000;

#[test]
fn a_first_list_cut_mid_answer_is_read_again_whole() {
    let foos = (0..COUNT).map(|i| foo(&format!("f{i:04}"), "False"));
    let (api, sa) = fake_with_foos(TOKEN, foos, serde_json::json!([]));
    // The first answer is cut halfway (the fake's cut: half its bytes).
    api.fail_query_once("resourceVersion=0", Fault::CutBody);
    let proxy = SlowProxy::start(api.port(), 100_000);
    let mut env = fake_env(proxy.port(), &sa);
    env.push(("RUST_LOG".into(), "debug".into()));
    let agent = RunningAgent::start(&opstatus_bin(), &fake_args("1s", "1s", &["--events=false"]), &env);
    let up = fake_upgradeable(&api, &agent, "True", Duration::from_secs(90));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({COUNT} checked)"));

    let lists: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == FOOS && !r.query.contains("watch=1"))
        .map(|r| r.query)
        .collect();
    let log = agent.stderr();
    assert!(!log.contains("listing made no progress"), "the retry was stopped:\n{log}");
    assert_eq!(lists, ["limit=500&resourceVersion=0"; 2], "the cut try and one retry\n{log}");
}
