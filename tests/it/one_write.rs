//! A heartbeat leaves as one TLS record on the kept connection: the
//! request's head and its body together, not one record each (two
//! `sendto`s, which is what ureq's own TLS transport sends).
//!
//! A TCP relay between opstatus and the fake API server reads the TLS
//! record headers opstatus sends (their framing is in clear: type,
//! version, length) and counts the encrypted records after the handshake.
//!
//! And a heartbeat is the agent thread's work alone: no other thread of
//! the process wakes for it.

use crate::support;
use crate::support::run_args::Run;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-one-write-tests";

/// Counts what goes through it towards the server; stops when dropped.
struct Relay {
    port: u16,
    connections: Arc<AtomicUsize>,
    /// TLS records of type application data (23) sent by the client.
    records: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let relay = Relay {
            port: listener.local_addr().unwrap().port(),
            connections: Arc::default(),
            records: Arc::default(),
            stop: Arc::default(),
        };
        let (connections, records, stop) = (relay.connections.clone(), relay.records.clone(), relay.stop.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                connections.fetch_add(1, Ordering::Relaxed);
                client.set_nonblocking(false).unwrap();
                let server = TcpStream::connect(upstream).unwrap();
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || copy(s2, c2, None));
                let records = records.clone();
                std::thread::spawn(move || copy(client, server, Some(records)));
            }
        });
        relay
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies until either side closes; with `records`, counts the client's
/// application-data records by walking the record headers.
fn copy(mut from: TcpStream, mut to: TcpStream, records: Option<Arc<AtomicUsize>>) {
    let mut buf = [0u8; 16 * 1024];
    let mut pending = Vec::new();
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
        if let Some(records) = &records {
            pending.extend_from_slice(&buf[..n]);
            while pending.len() >= 5 {
                let length = u16::from_be_bytes([pending[3], pending[4]]) as usize;
                if pending.len() < 5 + length {
                    break;
                }
                if pending[0] == 23 {
                    records.fetch_add(1, Ordering::Relaxed);
                }
                pending.drain(..5 + length);
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[test]
fn each_heartbeat_is_one_tls_record_on_the_kept_connection() {
    let server = FakeApiServer::start(TOKEN);
    let relay = Relay::start(([127, 0, 0, 1], server.port()).into());
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let agent = Run::every("1s").start(&opstatus_bin(), &pod_env(relay.port, &sa));
    let heartbeats = || agent.stderr().matches("Status updated:").count();
    let reached = |n: usize| {
        wait_for(Duration::from_secs(20), Duration::from_millis(20), || (heartbeats() >= n).then_some(())).is_some()
    };
    assert!(reached(2), "{}", agent.stderr());
    let (requests, records) = (server.requests().len(), relay.records.load(Ordering::Relaxed));
    assert!(reached(heartbeats() + 4), "{}", agent.stderr());
    let sent: Vec<_> = server.requests()[requests..].iter().map(|r| (r.method.clone(), r.body.len())).collect();
    let new_records = relay.records.load(Ordering::Relaxed) - records;
    assert!(sent.len() >= 4 && sent.iter().all(|(m, body)| m == "PATCH" && *body > 0), "{sent:?}");
    // The relay may have counted a request whose answer is still on its
    // way: at most one record ahead of the requests the server has seen.
    assert!(
        new_records == sent.len() || new_records == sent.len() + 1,
        "{new_records} TLS records for {} requests with a body",
        sent.len()
    );
    assert_eq!(relay.connections.load(Ordering::Relaxed), 1, "the connection was kept");
}

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
