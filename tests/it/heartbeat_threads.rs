//! A heartbeat is the agent thread's work alone: no other thread of the
//! process wakes for it.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-heartbeat-thread-tests";

/// A heartbeat wakes no thread but the agent's: the Events sender sleeps
/// until there is an Event to send (waking it on every check cost a
/// system call and two context switches per heartbeat).
#[test]
fn a_heartbeat_wakes_no_other_thread() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let agent = Run::every("1s").start(&opstatus_bin(), &pod_env(server.port(), &sa));
    let heartbeats = || agent.stderr().matches("Status updated:").count();
    let reached = |n: usize| {
        wait_for(Duration::from_secs(20), Duration::from_millis(20), || (heartbeats() >= n).then_some(())).is_some()
    };
    assert!(reached(2), "{}", agent.stderr());
    let before = other_threads_switches(agent.pid());
    assert!(before.keys().any(|name| name == "events"), "the Events sender runs: {before:?}");
    assert!(reached(heartbeats() + 4), "{}", agent.stderr());
    let after = other_threads_switches(agent.pid());
    assert_eq!(before, after, "context switches of the threads other than the agent's, over 4 heartbeats");
}

/// Each thread but the main one, by name, with its voluntary context
/// switches so far.
fn other_threads_switches(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut threads = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        if task.file_name().and_then(|n| n.to_str()) == Some(&pid.to_string()) {
            continue;
        }
        let name = std::fs::read_to_string(task.join("comm")).unwrap().trim().to_string();
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map(|v| v.trim().parse::<u64>().unwrap())
            .unwrap();
        threads.insert(name, switches);
    }
    threads
}
