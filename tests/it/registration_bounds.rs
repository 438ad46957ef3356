//! kube9-server's numbers are outside input: a `Retry-After` or a
//! `reregistrationIntervalHours` too large for a deadline is held to its
//! range (a retry at most 1 h, re-registration 1 h–7 d), and the agent keeps
//! running and heartbeating instead of aborting on an `Instant` overflow.

use crate::support;
use crate::support::run_args::Run;

use serde_json::json;
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::fake_kube9::{Answer, FakeKube9};
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-registration-bounds";
const KEY: &str = "kdy_test_boundsKEY0123";

fn heartbeats(api: &FakeApiServer) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/configmaps/kube9-operator-status"))
        .count()
}

/// Runs the agent at a 1 s heartbeat against a kube9-server giving `answer`,
/// waits for `published`, then checks that the agent is alive and still
/// writes a heartbeat a second.
fn survives(answer: Answer, published: impl Fn(&serde_json::Value) -> bool) -> (String, usize) {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let kube9 = FakeKube9::start(answer);
    let dir = TempDir::new("bounds");
    let (key, ca) = (dir.path().join("key"), dir.path().join("ca.crt"));
    std::fs::write(&key, KEY).unwrap();
    std::fs::write(&ca, &kube9.pki.ca_pem).unwrap();
    let url = kube9.url();
    let mut agent = Run::every("1s").pro(&key, &url, &ca).start(&opstatus_bin(), &pod_env(api.port(), &sa));
    let status = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        api.status_document("ops", "kube9-operator-status").filter(|s| published(s))
    });
    let status = status.unwrap_or_else(|| panic!("never published; exit {:?}\n{}", agent.exited(), agent.stderr()));
    let before = heartbeats(&api);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(agent.exited(), None, "the agent must not exit\n{}", agent.stderr());
    let after = heartbeats(&api);
    assert!(after >= before + 2, "heartbeats {before} → {after} in 4 s\n{}", agent.stderr());
    assert_eq!(kube9.requests().len(), 1, "no retry before the clamped wait");
    (status["error"].as_str().unwrap_or_default().to_string(), after - before)
}

#[test]
fn a_retry_after_of_twenty_digits_waits_an_hour_and_the_heartbeat_goes_on() {
    let answer = Answer::Raw {
        code: 429,
        body: json!({"error": "RATE_LIMITED"}),
        retry_after: Some("99999999999999999999".into()),
    };
    let (error, _) = survives(answer, |s| s["health"] == "degraded");
    assert_eq!(error, "kube9-server is rate limiting registration; retrying in 3600s");
}

#[test]
fn a_reregistration_interval_of_3e15_hours_is_a_week_and_the_heartbeat_goes_on() {
    // 3e15 written as an integer: a JSON float is not a number of hours and
    // is ignored (the 24 h default); the integer overflowed `Instant`.
    let answer = Answer::Raw {
        code: 200,
        body: json!({"status": "registered", "clusterId": "cls_bounds", "tier": "pro",
                     "configuration": {"statusUpdateIntervalSeconds": 1, "reregistrationIntervalHours": 3_000_000_000_000_000u64}}),
        retry_after: None,
    };
    let (error, _) = survives(answer, |s| s["registered"] == true);
    assert_eq!(error, "");
}
