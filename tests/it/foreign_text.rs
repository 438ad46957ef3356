//! Text from outside (kube9-server's error details, an API server's
//! `Status` message, the ConfigMap `opstatus get` reads) reaches logs, the
//! published status and the terminal without control characters (an ESC
//! sequence or a bare CR would rewrite an admin's terminal or forge a log
//! line) and cut at about 1 KiB.

use crate::support;
use crate::support::run_args::Run;

use serde_json::json;
use std::time::{Duration, SystemTime};
use support::fake_apiserver::{FakeApiServer, Fault};
use support::fake_kube9::{Answer, FakeKube9};
use support::{RunningAgent, ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end, wait_for};

const TOKEN: &str = "sa-token-for-foreign-text";
/// Clears the screen, moves home, sets the window title, overwrites the line.
const HOSTILE: &str = "\u{1b}[2J\u{1b}[H\u{1b}]0;owned\u{7}\rall good\n2026-11-23T10:00:00Z INFO forged line";

fn controls(text: &str) -> Vec<char> {
    text.chars().filter(|c| c.is_control() && *c != '\n').collect()
}

#[test]
fn kube9_server_details_are_logged_and_published_printable_and_bounded() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let details = format!("{HOSTILE} {}", "x".repeat(10_000));
    let kube9 = FakeKube9::start(Answer::Raw { code: 400, body: json!({"details": details}), retry_after: None });
    let dir = TempDir::new("foreign");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &kube9.pki.ca_pem).unwrap();
    let mut env = pod_env(api.port(), &sa);
    env.push(("KUBE9_API_KEY".into(), "kdy_test_foreign123".into()));
    let url = kube9.url();
    let args = ["run", "--interval", "60s", "--server-url", &url, "--server-ca-file", ca.to_str().unwrap()];
    let agent = RunningAgent::start(&opstatus_bin(), &args, &env);
    let status = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        api.status_document("ops", "kube9-operator-status").filter(|s| s["health"] == "degraded")
    });
    let status = status.unwrap_or_else(|| panic!("never degraded\n{}", agent.stderr()));
    let error = status["error"].as_str().unwrap();
    assert!(
        error.starts_with("kube9-server rejected the registration request:  [2J [H ]0;owned  all good "),
        "{error}"
    );
    assert!(controls(error).is_empty() && error.len() < 1200, "{error:?}");
    let log = wait_for(Duration::from_secs(5), Duration::from_millis(20), || {
        Some(agent.stderr()).filter(|l| l.contains("rejected the registration request (400)"))
    })
    .unwrap();
    assert!(controls(&log).is_empty(), "controls {:?} in the log:\n{log}", controls(&log));
    assert!(!log.lines().any(|l| l.starts_with("2026-11-23T10:00:00Z")), "a forged log line:\n{log}");
    assert!(log.lines().all(|l| l.len() < 2600), "a log line over the bound");
}

#[test]
fn an_api_servers_status_message_is_logged_printable_and_bounded() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let message = format!("{HOSTILE} {}", "m".repeat(10_000));
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                      "reason": "Invalid", "code": 422});
    api.push_faults([Fault::Raw { code: 422, body: body.to_string().into_bytes() }]);
    let agent = Run::every("60s").start(&opstatus_bin(), &pod_env(api.port(), &sa));
    let log = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        Some(agent.stderr()).filter(|l| l.contains("422 Invalid"))
    });
    let log = log.unwrap_or_else(|| panic!("the failed write was not logged\n{}", agent.stderr()));
    assert!(log.contains("422 Invalid:  [2J [H ]0;owned  all good "), "{log}");
    assert!(controls(&log).is_empty(), "controls {:?} in the log:\n{log}", controls(&log));
    assert!(!log.lines().any(|l| l.starts_with("2026-11-23T10:00:00Z")), "a forged log line:\n{log}");
    assert!(log.lines().all(|l| l.len() < 2600), "a log line over the bound");
}

#[test]
fn get_prints_a_hostile_configmap_without_control_characters() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let status = json!({"mode": "operated", "tier": "free", "version": "1.0.0\u{1b}[8m", "health": "degraded",
        "lastUpdate": opstatus::testing::format_rfc3339(SystemTime::now()), "registered": false,
        "error": format!("{HOSTILE} {}", "e".repeat(10_000)), "namespace": "ops\u{9b}2J"});
    api.put_object(
        "ops",
        "kube9-operator-status",
        json!({"kind": "ConfigMap", "apiVersion": "v1",
               "metadata": {"name": "kube9-operator-status", "namespace": "ops"}, "data": {"status": status.to_string()}}),
    );
    let out =
        run_to_end(&opstatus_bin(), &["get", "--namespace", "ops"], &pod_env(api.port(), &sa), Duration::from_secs(20));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(controls(&text).is_empty(), "controls {:?} printed:\n{text}", controls(&text));
    assert!(
        text.contains("Error:        [2J [H ]0;owned  all good 2026-11-23T10:00:00Z INFO forged line eee"),
        "{text}"
    );
    // One fact a line: the status's eight, then where it was found, why
    // the mode is what it is, and what each extension version shows.
    assert_eq!(text.lines().count(), 11, "one fact a line:\n{text}");
    // The error is shown twice (Error, and in Why), each time cut at 1 KiB.
    assert!(text.len() < 2 * 1400, "the error is cut: {} bytes", text.len());
}
