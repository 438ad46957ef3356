//! The readiness file and `opstatus probe`, the exec probe for images
//! without a shell.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end, wait_for};

const TOKEN: &str = "sa-token-for-readiness-file-tests";

fn probe(path: &std::path::Path, max_age: &str) -> (Option<i32>, String) {
    let out = run_to_end(
        &opstatus_bin(),
        &["probe", "--ready-file", path.to_str().unwrap(), "--max-age", max_age],
        &[],
        Duration::from_secs(10),
    );
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into())
}

#[test]
fn the_file_follows_readiness_and_is_removed_at_exit() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("ready");
    let ready = dir.path().join("ready");
    let (code, line) = probe(&ready, "30s");
    assert_eq!(code, Some(1));
    assert!(line.starts_with("not ready: no readiness file") && line.lines().count() == 1, "{line}");

    let mut agent = Run::every("2s")
        .checks("1s")
        .switch("--strict-readiness")
        .flag("--ready-file", ready.to_str().unwrap())
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || ready.exists().then_some(())).expect("ready file");
    let (code, line) = probe(&ready, "30s");
    assert_eq!(code, Some(0), "{line}");
    assert!(line.starts_with("ready: health=healthy, written "), "{line}");

    // Writes fail → unhealthy → the file goes away (strict readiness; by
    // default it answers for the operator, see probe_endpoint).
    server.set_sticky_fault(Fault::Status { code: 500, retry_after: None });
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (!ready.exists()).then_some(())).expect("removed");
    server.clear_sticky_fault();
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || ready.exists().then_some(())).expect("back");

    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()), Some(0));
    assert!(!ready.exists(), "removed at exit");
}

#[test]
fn a_file_left_by_a_killed_agent_goes_stale() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("stale");
    let ready = dir.path().join("ready");
    let mut agent = Run::default_interval()
        .checks("1s")
        .flag("--ready-file", ready.to_str().unwrap())
        .start(&opstatus_bin(), &pod_env(server.port(), &sa));
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || ready.exists().then_some(())).expect("ready file");
    agent.signal("KILL");
    agent.wait_exit(Duration::from_secs(5)).expect("killed");
    assert!(ready.exists(), "SIGKILL leaves the file behind");
    std::thread::sleep(Duration::from_millis(2100));
    let (code, line) = probe(&ready, "1s");
    assert_eq!(code, Some(1));
    assert!(line.contains("opstatus has stopped updating it"), "{line}");
}
