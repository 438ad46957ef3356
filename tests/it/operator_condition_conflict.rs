//! Another writer updates the OperatorCondition between opstatus's read and
//! its write (the operator sets its own conditions on the same object):
//! the PUT conflicts (409), opstatus reads again and retries, at most three
//! attempts per check; when all three conflict it says so (degraded) and
//! succeeds on the next check, the other writer's conditions intact; and
//! `/metrics` counts it.

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::http::{endpoint_from_log, get};
use support::probes::{OC, fake_args, fake_env, fake_with_foos, foo};
use support::resources::{condition, find};
use support::{RunningAgent, opstatus_bin, wait_for};

const TOKEN: &str = "sa-token-for-conflict-tests";

#[test]
fn conflicting_writes_are_retried_on_a_fresh_read_and_bounded() {
    let operators_own = condition("OperatorReady", "True");
    let (server, sa) = fake_with_foos(TOKEN, [foo("a", "True")], json!([operators_own]));
    // Three conflicts: every attempt of the first check loses the race.
    server.conflict_after_gets(OC, 3);
    let args = fake_args("60s", "1s", &["--listen", "127.0.0.1:0"]);
    let agent = RunningAgent::start(&opstatus_bin(), &args, &fake_env(server.port(), &sa));

    let written = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        server.custom(OC).filter(|oc| find(&oc["spec"]["conditions"], "Upgradeable").is_some())
    });
    let oc = written.unwrap_or_else(|| panic!("never written\n{}", agent.stderr()));
    let upgradeable = find(&oc["spec"]["conditions"], "Upgradeable").unwrap();
    assert_eq!(
        (upgradeable["status"].as_str(), upgradeable["message"].as_str()),
        (Some("False"), Some("Upgrade blocked by 1 resource: Foo ops/a: Migrating"))
    );
    assert_eq!(find(&oc["spec"]["conditions"], "OperatorReady"), Some(&operators_own));

    // First check: GET, PUT (409) three times, then give up until the next
    // check, which wins with one GET and one PUT.
    let on_oc: Vec<String> =
        server.requests().into_iter().filter(|r| r.path.starts_with(OC)).map(|r| r.method).collect();
    assert_eq!(on_oc, ["GET", "PUT", "GET", "PUT", "GET", "PUT", "GET", "PUT"]);
    // The recovery is logged right after the write the test just saw.
    let recovered = "OperatorCondition ops/op.v1 is writable again";
    let log = wait_for(Duration::from_secs(5), Duration::from_millis(20), || {
        Some(agent.stderr()).filter(|log| log.contains(recovered))
    });
    let log = log.unwrap_or_else(|| panic!("no {recovered:?} in the log:\n{}", agent.stderr()));
    assert!(
        log.contains("WARN  Failed to update OperatorCondition ops/op.v1: 409 Conflict: Operation cannot be fulfilled"),
        "{log}"
    );
    // /metrics counts it: one failed sync (three conflicts), one update.
    // (The endpoint's copy is refreshed at the end of the tick.)
    let endpoint = endpoint_from_log(&log).expect("the endpoint's address in the log");
    let want = [
        "opstatus_condition_syncs_total{sink=\"operator_condition\",result=\"failed\"} 1",
        "opstatus_condition_syncs_total{sink=\"operator_condition\",result=\"updated\"} 1",
        "opstatus_probe_resources 1",
        "opstatus_probe_blocking_resources 1",
    ];
    let counted = wait_for(Duration::from_secs(5), Duration::from_millis(50), || {
        let (code, metrics, _) = get(endpoint, "/metrics");
        (code == 200 && want.iter().all(|line| metrics.lines().any(|l| l == *line))).then_some(())
    });
    assert!(counted.is_some(), "missing {want:?} in:\n{}", get(endpoint, "/metrics").1);
    agent.assert_memory_bounded();
}
