//! The operator's own health as a signal: a failing watched URL or a stale
//! heartbeat file reaches the status ConfigMap at the check that saw it,
//! and recovery clears it once three checks in a row saw it. A connection the operator's side resets right
//! after a passing answer (its process exiting) is judged at the next
//! check.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::http::FakeOperator;
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-operator-watch-tests";

fn health_of(server: &FakeApiServer) -> Option<(String, Value)> {
    let doc = server.status_document("ops", "kube9-operator-status")?;
    Some((doc["health"].as_str()?.to_string(), doc["error"].clone()))
}

fn wait_health(server: &FakeApiServer, want: &str) -> (Instant, Value) {
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
        health_of(server).filter(|(h, _)| h == want).map(|(_, e)| (Instant::now(), e))
    })
    .unwrap_or_else(|| panic!("health never became {want}: {:?}", health_of(server)))
}

#[test]
fn a_failing_health_url_degrades_at_once_and_recovery_clears_it() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = FakeOperator::start();
    let _agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-url", operator.url())
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");

    // Each change is written at the check that saw it, not at the next
    // heartbeat (60 s): when the status changed, the operator had given
    // the new answer once or twice (one check of 1 s may pass while the
    // write is on its way on a busy machine), never many times.
    let checks = operator.answers();
    operator.set_code(500);
    let (_, error) = wait_health(&server, "degraded");
    let failed = operator.answers() - checks;
    assert!((1..=3).contains(&failed), "degraded published after {failed} failing checks");
    assert_eq!(error, format!("Operator health check {} failed: HTTP 500", operator.url()));

    let checks = operator.answers();
    operator.set_code(200);
    let (_, error) = wait_health(&server, "healthy");
    let passed = operator.answers() - checks;
    // A recovery holds for three checks in a row (the hysteresis that
    // keeps a flapping operator shown once).
    assert!((3..=4).contains(&passed), "recovery published after {passed} passing checks");
    assert_eq!(error, Value::Null);
    // At the check interval asked for (1 s), not the default (5 s): four
    // more checks within 10 s.
    let checks = operator.answers();
    let more = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        (operator.answers() >= checks + 4).then_some(())
    });
    assert!(more.is_some(), "{} checks in 10 s at a 1 s check interval", operator.answers() - checks);
}

/// The operator's `/healthz` on 127.0.0.1, one connection per check (it
/// answers `Connection: close`), numbered from 0: the connections in
/// `resets` are reset once the request arrived (closed with the request
/// unread, so the kernel sends a reset), as when the operator's process
/// exits under a check; the others are answered 200. `checks` counts the
/// connections handled. It stops when `stop` is set (and one more
/// connection comes).
fn resetting_operator(resets: &'static [usize], stop: Arc<AtomicBool>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/healthz", listener.local_addr().unwrap());
    let checks = Arc::new(AtomicUsize::new(0));
    let handled = checks.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            if resets.contains(&n) {
                // Wait for the request, then close without reading it.
                let _ = stream.peek(&mut [0; 1]);
                drop(stream);
            } else {
                let mut head = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while head.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            }
            handled.fetch_add(1, Ordering::SeqCst);
        }
    });
    (url, checks)
}

/// The health of each status opstatus published, in order, once
/// `resetting_operator` has handled `checks` checks (the last but one has
/// ended), and the log.
fn published_over_checks(resets: &'static [usize], checks: usize) -> (Vec<String>, String) {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, handled) = resetting_operator(resets, stop.clone());
    let agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-url", &url)
        .switch("--events=false")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_for(Duration::from_secs(60), Duration::from_millis(50), || {
        (handled.load(Ordering::SeqCst) >= checks).then_some(())
    })
    .unwrap_or_else(|| panic!("{checks} checks not seen in 60 s:\n{}", agent.stderr()));
    stop.store(true, Ordering::SeqCst);
    let log = agent.stderr();
    let published = support::published_health(&log).into_iter().map(String::from).collect();
    (published, log)
}

/// An operator that answered, then resets one check (its process exited
/// under it, say as its pod is deleted, a moment before the preStop hook
/// reaches opstatus), then answers again: nothing is published but
/// healthy. Reset on two checks in a row, it is published `degraded` with
/// the reset as the reason, and healthy again once it answered three
/// checks in a row.
#[test]
fn one_reset_after_a_pass_publishes_nothing_and_two_in_a_row_degrade() {
    // Checks 0 to 2 pass, 3 is reset, 4 to 6 pass.
    let (published, log) = published_over_checks(&[3], 7);
    assert_eq!(published, ["healthy"], "{log}");
    let warned = log.lines().any(|l| l.contains("WARN") && l.contains("health check"));
    assert!(!warned, "a reset after a pass is no warning yet:\n{log}");

    // Checks 3 and 4 reset; healthy again once three checks in a row
    // passed (5 to 7).
    let (published, log) = published_over_checks(&[3, 4], 9);
    assert_eq!(published, ["healthy", "degraded", "healthy"], "{log}");
    let said = log.lines().find(|l| l.contains("WARN") && l.contains("health check")).unwrap_or_default();
    assert!(said.to_lowercase().contains("reset"), "the reset is the reason: {said}\n{log}");
}

/// An operator whose port refuses connections once it answered (it
/// exited) is shown `degraded` with the refusal as the reason: the one
/// check a refusal right after a pass waits (the preStop hook's chance)
/// hides no operator that stays down. Judged by order: healthy, then
/// degraded, nothing between.
#[test]
fn an_operator_that_went_away_is_degraded_with_the_refusal() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let operator = FakeOperator::start();
    let url = operator.url();
    let agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-url", &url)
        .switch("--events=false")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    drop(operator);
    let (_, error) = wait_health(&server, "degraded");
    assert_eq!(error, format!("Operator health check {url} failed: connection refused"), "{}", agent.stderr());
    // The line is logged once the write's answer is read: after the server
    // stored it.
    assert!(agent.logged("health=degraded"), "{}", agent.stderr());
    let log = agent.stderr();
    let published: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Status updated:"))
        .filter_map(|l| l.split("health=").nth(1)?.split(',').next())
        .collect();
    assert_eq!(published, ["healthy", "degraded"], "{log}");
}

#[test]
fn a_critical_watch_makes_the_status_unhealthy() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    // The operator answers first (until then a starting instance publishes
    // nothing), then fails: an error status, not a stopped listener, whose
    // thread may still take a connection and reset it.
    let operator = FakeOperator::start();
    let url = operator.url();
    let _agent = Run::default_interval()
        .checks("1s")
        .flag("--watch-url", &url)
        .switch("--watch-critical")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    operator.set_code(503);
    let (_, error) = wait_health(&server, "unhealthy");
    assert_eq!(error, format!("Operator health check {url} failed: HTTP 503"));
}

#[test]
fn a_stale_heartbeat_file_degrades_and_a_touch_recovers() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("heartbeat");
    let file = dir.path().join("alive");
    std::fs::write(&file, "").unwrap();
    let _agent = Run::default_interval()
        .checks("1s")
        .flag("--watch-file", file.to_str().unwrap())
        .flag("--watch-max-age", "2s")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    let (_, error) = wait_health(&server, "degraded");
    let error = error.as_str().unwrap().to_string();
    assert!(error.starts_with(&format!("Operator heartbeat file {} was last touched", file.display())), "{error}");
    // The operator touches it again, as it does while it lives: healthy
    // once three checks in a row found it fresh.
    let touching = Arc::new(AtomicBool::new(true));
    let (still, path) = (touching.clone(), file.clone());
    let toucher = std::thread::spawn(move || {
        for _ in 0..100 {
            if !still.load(Ordering::SeqCst) {
                return;
            }
            std::fs::write(&path, "").unwrap();
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    wait_health(&server, "healthy");
    touching.store(false, Ordering::SeqCst);
    toucher.join().unwrap();
}

/// A heartbeat file that stays stale is one change of status, not one per
/// check: the reason names when the file was last touched, not its growing
/// age, so the checks after the first publish nothing new and log nothing.
/// 20 s of 1 s checks at the 60 s heartbeat: at most one write (and one
/// warning) after the one that said "degraded".
#[test]
fn a_heartbeat_file_that_stays_stale_is_written_once_not_on_every_check() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("stale-heartbeat");
    let file = dir.path().join("alive");
    std::fs::write(&file, "").unwrap();
    let agent = Run::every("60s")
        .checks("1s")
        .flag("--watch-file", file.to_str().unwrap())
        .flag("--watch-max-age", "2s")
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_health(&server, "healthy");
    let (stale_at, error) = wait_health(&server, "degraded");
    let writes = || server.requests().iter().filter(|r| r.method == "PATCH" && r.at > stale_at).count();
    let warnings = || agent.stderr().lines().filter(|l| l.contains("WARN") && l.contains("heartbeat file")).count();
    std::thread::sleep(Duration::from_secs(20));
    let (after, warned) = (writes(), warnings());
    println!("over 20 s of a stale heartbeat file: {after} status writes, {warned} warnings");
    assert!(after <= 1, "{after} writes while only the file's age changed:\n{}", agent.stderr());
    assert!(warned <= 2, "{warned} warnings while only the file's age changed:\n{}", agent.stderr());
    assert_eq!(health_of(&server), Some(("degraded".to_string(), error)), "still the same");
}
