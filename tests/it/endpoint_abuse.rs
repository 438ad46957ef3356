//! Probe endpoint abuse: a thousand held connections, oversize heads,
//! binary garbage, slow readers. The heartbeat keeps its schedule, probes
//! keep being answered once the flood's connections time out, and memory
//! stays bounded (the endpoint holds at most 256 connections × 4 KiB).

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::ServiceAccountDir;
use support::fake_apiserver::FakeApiServer;
use support::http::{agent_with_endpoint, get};

const TOKEN: &str = "sa-token-for-endpoint-abuse-tests";

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn answer_to(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(request);
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

#[test]
fn a_thousand_held_connections_and_garbage_do_not_stop_the_heartbeat() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let (agent, addr) = agent_with_endpoint(&server, &sa, "/readyz");
    let rss_before = rss_kib(agent.pid());

    // Oversize heads, binary garbage and bad request lines get a clean answer.
    let mut huge = b"GET /readyz HTTP/1.1\r\nX-Pad: ".to_vec();
    huge.resize(64 * 1024, b'a');
    assert!(answer_to(addr, &huge).starts_with("HTTP/1.1 431 "));
    assert!(answer_to(addr, b"\x00\xff\x13\x37garbage\r\n\r\n").starts_with("HTTP/1.1 400 "));
    assert!(answer_to(addr, b"GET /readyz\r\n\r\n").starts_with("HTTP/1.1 400 "));

    // A thousand connections opened and held, each having sent a few bytes.
    let before = server.requests().len();
    let started = Instant::now();
    let mut held = Vec::new();
    for _ in 0..1000 {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(b"GET /re");
            held.push(s);
        }
    }
    std::thread::sleep(Duration::from_secs(4));
    let rss_during = rss_kib(agent.pid());
    // Once the flood's connections have hit their 2 s deadline, probes work.
    let (code, _, took) = get(addr, "/healthz");
    let heartbeats = server.requests().len() - before;
    let elapsed = started.elapsed();
    drop(held);
    assert_eq!(code, 200);
    // Not queued behind the flood: a probe that waited for the held
    // connections would wait for their 2 s deadline. Half of it is a bound
    // a busy machine meets for one loopback request (an idle one answers
    // in about a millisecond).
    assert!(took < Duration::from_secs(1), "probe took {took:?} after the flood");
    let expected = elapsed.as_secs();
    assert!(
        heartbeats as u64 + 1 >= expected,
        "{heartbeats} heartbeats in {elapsed:?}: the flood delayed the heartbeat"
    );
    assert!(rss_during < rss_before + 2048, "RSS grew from {rss_before} KiB to {rss_during} KiB");
    println!("1000 held connections: {heartbeats} heartbeats in {elapsed:?}, RSS {rss_before} → {rss_during} KiB");
}
