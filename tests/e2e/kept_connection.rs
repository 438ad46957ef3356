//! End to end, real kube-apiserver: at a heartbeat interval longer than
//! ureq's default 15 s idle limit, every heartbeat goes over the one TLS
//! connection opened at start (no handshake per heartbeat).

use crate::support;
use crate::support::run_args::Run;

use std::collections::BTreeSet;
use std::time::Duration;
use support::control_plane::{release_bin, shared};
use support::wait_for;

/// The socket inodes of `pid`'s established TCP connections to `port`:
/// the process's sockets (`/proc/PID/fd`) matched against the kernel's TCP
/// table by inode, since the table itself is not per process.
fn connections_to(pid: u32, port: u16) -> BTreeSet<u64> {
    let mut mine = BTreeSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let target = target.to_string_lossy();
            if let Some(inode) = target.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                mine.insert(inode.parse::<u64>().unwrap());
            }
        }
    }
    let mut found = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let remote_port = f[2].rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            // Field 4 is the state (01: established), field 10 the inode.
            let inode: u64 = f[9].parse().unwrap_or(0);
            if remote_port == Some(port) && f[3] == "01" && mine.contains(&inode) {
                found.insert(inode);
            }
        }
    }
    found
}

#[test]
fn e2e_heartbeats_17s_apart_reuse_one_tls_connection() {
    let cp = shared();
    let pod = cp.deploy("kept");
    let agent = Run::every("17s").start(&release_bin(), &cp.pod_env(&pod));
    let heartbeats = || agent.stderr().matches("Status updated:").count();
    // The connection each heartbeat went over, sampled as it is written,
    // and every connection seen in between.
    let (mut per_heartbeat, mut seen) = (Vec::new(), BTreeSet::new());
    let done = wait_for(Duration::from_secs(100), Duration::from_millis(100), || {
        // The log first: the connection sampled after a heartbeat's line
        // carried that heartbeat.
        let written = heartbeats();
        let now = connections_to(agent.pid(), cp.port());
        seen.extend(now.iter().copied());
        if written > per_heartbeat.len() {
            per_heartbeat.push(now);
        }
        // Two idle intervals, each past ureq's default 15 s idle limit.
        (per_heartbeat.len() >= 3).then_some(())
    });
    assert!(done.is_some(), "only {} heartbeats at a 17 s interval: {}", per_heartbeat.len(), agent.stderr());
    let writes = cp.audit_events(&pod.user).iter().filter(|e| e.verb == "patch" && e.code == 200).count();
    assert!(writes >= 3, "{writes} status writes reached the API server");
    assert!(
        per_heartbeat.iter().all(|c| c.len() == 1) && per_heartbeat.windows(2).all(|w| w[0] == w[1]),
        "each heartbeat must go over the same one connection (socket inodes per heartbeat: {per_heartbeat:?})"
    );
    assert_eq!(seen.len(), 1, "one connection to the API server in all, 2 idle intervals of 17 s: {seen:?}");
    let log = agent.stderr();
    assert!(support::problems_logged(&log).is_empty(), "{log}");
}
