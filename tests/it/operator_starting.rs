//! A starting pod says nothing false: opstatus usually starts before its
//! operator, and until the operator has answered its health check once
//! (or the start-up allowance is spent) it publishes nothing — no status
//! write, no Event, no "health checks pass again" — while `/readyz` says
//! `Starting`. An operator that never answers is shown `degraded` once the
//! allowance is spent, saying it has not answered since opstatus started.

use crate::support;
use crate::support::run_args::Run;
use support::operator_endpoint::{free_addr, operator_up};

use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::http::{endpoint_from_log, get};
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-operator-starting-tests";
const CM_PATH: &str = "/api/v1/namespaces/ops/configmaps/kube9-operator-status";

/// Every status document written to the ConfigMap, with when, in order.
fn statuses(server: &FakeApiServer) -> Vec<(Instant, Value)> {
    let mut out = Vec::new();
    for r in server.requests().into_iter().filter(|r| r.path == CM_PATH && r.method != "GET") {
        let Ok(body) = serde_json::from_slice::<Value>(&r.body) else { continue };
        let Some(text) = body["data"]["status"].as_str() else { continue };
        out.push((r.at, serde_json::from_str(text).expect("a status document")));
    }
    out
}

/// Requests that wrote anything but the status ConfigMap's reads: the
/// ConfigMap (created, labelled, written) and Events.
fn writes(server: &FakeApiServer) -> Vec<String> {
    let writes = server.requests().into_iter().filter(|r| r.method != "GET");
    writes.map(|r| format!("{} {}", r.method, r.path)).collect()
}

#[test]
fn a_fresh_install_publishes_nothing_until_its_operator_answers_then_healthy() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = free_addr();
    let url = format!("http://{operator}/healthz");
    let agent = Run::every("60s")
        .checks("1s")
        .listen()
        .flag("--watch-url", &url)
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let started = Instant::now();
    let endpoint = wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()))
        .expect("the endpoint's address in the log");
    // The operator starts answering 4 s later: until then, not a write.
    let answers_after = Duration::from_secs(4);
    let mut readyz_while_starting = Vec::new();
    while started.elapsed() < answers_after {
        let (code, body, _) = get(endpoint, "/readyz");
        readyz_while_starting.push((code, body));
        std::thread::sleep(Duration::from_millis(250));
    }
    let before_the_operator = writes(&server);
    let stop = Arc::new(AtomicBool::new(false));
    operator_up(operator, stop.clone());
    let up = Instant::now();
    let healthy = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        statuses(&server).into_iter().find(|(_, doc)| doc["health"] == "healthy")
    });
    let (at, _) =
        healthy.unwrap_or_else(|| panic!("never published healthy: {:?}\n{}", statuses(&server), agent.stderr()));
    // A moment for anything that would follow (an Event goes out on its own thread).
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let log = agent.stderr();
    assert!(before_the_operator.is_empty(), "wrote before the operator answered: {before_the_operator:?}\n{log}");
    let published = statuses(&server);
    assert!(published.iter().all(|(_, doc)| doc["health"] == "healthy"), "not all healthy: {published:?}\n{log}");
    let events: Vec<String> = writes(&server).into_iter().filter(|w| w.contains("/events")).collect();
    assert!(events.is_empty(), "Events on a fresh install: {events:?}\n{log}");
    assert!(!log.contains("pass again"), "nothing had passed before:\n{log}");
    let warned = log.lines().any(|l| l.contains("WARN") && l.contains("health check"));
    assert!(!warned, "a starting operator is no warning:\n{log}");
    assert!(
        readyz_while_starting.iter().all(|(code, body)| *code == 503 && body.starts_with("unhealthy: Starting")),
        "{readyz_while_starting:?}"
    );
    println!(
        "operator starting: nothing written for the {answers_after:?} before the operator answered; its first status \
         healthy {:.1?} after it did; /readyz {} times 503 Starting meanwhile",
        at.saturating_duration_since(up),
        readyz_while_starting.len()
    );
}

#[test]
fn an_operator_that_never_answers_is_published_degraded_once_the_allowance_is_spent() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let url = format!("http://{}/healthz", free_addr());
    let allowance = Duration::from_secs(4);
    let agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-url", &url)
        .flag("--startup-allowance", "4s")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let started = Instant::now();
    let first = wait_for(allowance + Duration::from_secs(10), Duration::from_millis(20), || {
        statuses(&server).into_iter().next()
    });
    let (at, doc) = first.unwrap_or_else(|| panic!("nothing published:\n{}", agent.stderr()));
    let took = at.saturating_duration_since(started);
    assert_eq!(doc["health"], "degraded", "{doc}");
    assert_eq!(
        doc["error"],
        format!(
            "The operator has not answered since opstatus started (a start-up allowance of 4s): Operator health \
             check {url} failed: connection refused"
        )
    );
    // Not before the allowance (the test's clock starts a moment after
    // opstatus's), and after it within a check and the write, with room
    // for a loaded machine.
    assert!(took + Duration::from_millis(500) >= allowance, "published {took:?} after start: {doc}");
    assert!(took <= allowance + Duration::from_secs(5), "published {took:?} after start, the allowance is 4 s");
    let log = agent.stderr();
    assert!(log.contains("has not answered in the 4s since opstatus started"), "{log}");
    println!("operator never answers: degraded published {took:.1?} after start (allowance {allowance:?})");
}

#[test]
fn opstatus_once_does_not_wait_for_the_operator() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let url = format!("http://{}/healthz", free_addr());
    let out = support::run_to_end(
        &opstatus_bin(),
        &["once", "--watch-url", &url],
        &pod_env(server.port(), &sa),
        Duration::from_secs(20),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = server.status_document("ops", "kube9-operator-status").expect("once writes at once");
    assert_eq!(doc["health"], "degraded", "{doc}");
    assert_eq!(doc["error"], format!("Operator health check {url} failed: connection refused"));
}
