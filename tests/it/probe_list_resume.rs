//! A probe's paged list (a server without a watch cache pages even the
//! first list, `resourceVersion=0`) that fails partway goes on from that
//! page at the next try instead of starting over: the page that failed is
//! asked again with its `continue` token (and no version: the server
//! refuses one beside a token), and no other page is read twice; whether
//! the page was refused (a 503) or cut in the middle of a resource (the
//! resources of it read before the cut are read again, not twice counted).
//! Fake API server: the real one cannot be made to fail one page on demand.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::Fault;
use support::probes::{FOOS, fake_args, fake_env, fake_upgradeable, fake_with_foos, foo};
use support::{RunningAgent, opstatus_bin};

const TOKEN: &str = "sa-token-for-probe-list-resume";
const COUNT: usize = 2000;

#[test]
fn a_list_that_fails_partway_goes_on_from_its_page() {
    goes_on_from_its_page(Fault::Status { code: 503, retry_after: None });
}

#[test]
fn a_list_cut_in_the_middle_of_a_resource_goes_on_from_its_page() {
    goes_on_from_its_page(Fault::CutBody);
}

fn goes_on_from_its_page(fault: Fault) {
    let foos = (0..COUNT).map(|i| foo(&format!("f{i:04}"), "False"));
    let (api, sa) = fake_with_foos(TOKEN, foos, json!([]));
    api.without_watch_cache();
    // The third page (the fake's continue token is the index) fails once.
    api.fail_query_once("continue=1000", fault);
    let args = fake_args("60s", "1s", &["--events=false"]);
    let agent = RunningAgent::start(&opstatus_bin(), &args, &fake_env(api.port(), &sa));
    let up = fake_upgradeable(&api, &agent, "True", Duration::from_secs(30));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({COUNT} checked)"));

    let pages: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == FOOS && !r.query.contains("watch=1"))
        .map(|r| r.query)
        .collect();
    assert_eq!(
        pages,
        [
            "limit=500&resourceVersion=0",
            "limit=500&continue=500",
            "limit=500&continue=1000",
            "limit=500&continue=1000",
            "limit=500&continue=1500"
        ],
        "the failed page asked again, no other page twice\n{}",
        agent.stderr()
    );
}
