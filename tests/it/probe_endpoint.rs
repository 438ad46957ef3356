//! The probe and metrics endpoint: routes, and that no client (silent, slow,
//! many) and no hung API server can stop it or the heartbeat.

use crate::support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::fake_apiserver::{FakeApiServer, Fault};
use support::http::{endpoint_from_log, get};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-endpoint-tests";

/// Starts the agent with the endpoint on a free port; returns once the
/// endpoint answers (before the first tick it says `unhealthy: Starting`).
fn start(server: &FakeApiServer, sa: &ServiceAccountDir, interval: &str) -> (RunningAgent, SocketAddr) {
    start_with(server, sa, &["--interval", interval])
}

fn start_with(server: &FakeApiServer, sa: &ServiceAccountDir, args: &[&str]) -> (RunningAgent, SocketAddr) {
    let all: Vec<&str> = ["run", "--listen", "127.0.0.1:0"].iter().chain(args).copied().collect();
    let agent = RunningAgent::start(&opstatus_bin(), &all, &pod_env(server.port(), sa));
    let addr = wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()))
        .expect("the endpoint address in the log");
    (agent, addr)
}

fn wait_ready(addr: SocketAddr) {
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || (get(addr, "/readyz").0 == 200).then_some(()))
        .expect("ready after the first write");
}

#[test]
fn serves_health_readiness_status_and_metrics() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let (_agent, addr) = start(&server, &sa, "60s");
    server.wait_status_configmap(Duration::from_secs(10)).expect("first write");
    let ready = wait_for(Duration::from_secs(5), Duration::from_millis(20), || {
        let (code, body, _) = get(addr, "/readyz");
        (code == 200).then_some(body)
    });
    assert_eq!(ready.as_deref(), Some("healthy\n"));
    assert_eq!(get(addr, "/healthz").0, 200);
    let (code, body, _) = get(addr, "/status");
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (doc["mode"].as_str(), doc["health"].as_str(), doc["namespace"].as_str()),
        (Some("operated"), Some("healthy"), Some("ops"))
    );
    let (code, metrics, _) = get(addr, "/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("kube9_operator_status_updates_total{mode=\"operated\",health=\"healthy\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("kube9_operator_health_status{health=\"healthy\"} 1\n"), "{metrics}");
    assert!(metrics.contains("opstatus_status_write_duration_seconds_count 1\n"), "{metrics}");
    assert_eq!(get(addr, "/nope").0, 404);
    let mut post = TcpStream::connect(addr).unwrap();
    write!(post, "POST /readyz HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut post, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 405 ") && answer.contains("Allow: GET"), "{answer}");
}

/// By default readiness answers for the operator: failing status writes
/// (opstatus's own publishing) keep it ready, and its answer says why
/// opstatus itself is unhealthy.
#[test]
fn readyz_stays_200_and_says_so_while_writes_fail() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.set_sticky_fault(Fault::Status { code: 500, retry_after: None });
    let (_agent, addr) = start(&server, &sa, "60s");
    let body = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        let (code, body, _) = get(addr, "/readyz");
        (code == 200).then_some(body)
    })
    .expect("ready while writes fail");
    assert_eq!(
        body,
        "healthy; opstatus: unhealthy: Failed to write status ConfigMap: 500 InternalError: injected fault\n"
    );
    let (_, status, _) = get(addr, "/status");
    assert!(status.contains(r#""writeError":"Failed to write status ConfigMap: 500"#), "{status}");
}

/// With `--strict-readiness`, readiness answers for the whole verdict.
#[test]
fn readyz_is_503_with_the_reason_while_writes_fail_when_strict() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.set_sticky_fault(Fault::Status { code: 500, retry_after: None });
    let (_agent, addr) = start_with(&server, &sa, &["--interval", "60s", "--strict-readiness"]);
    let (code, body, _) = get(addr, "/readyz");
    assert_eq!(code, 503, "not ready before anything was written: {body}");
    let body = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        let (code, body, _) = get(addr, "/readyz");
        (code == 503 && body != "unhealthy: Starting\n").then_some(body)
    })
    .expect("readyz gives the write failure");
    assert_eq!(body, "unhealthy: Failed to write status ConfigMap: 500 InternalError: injected fault\n");
    let (_, metrics, _) = get(addr, "/metrics");
    assert!(metrics.contains("kube9_operator_health_status{health=\"unhealthy\"} 1\n"), "{metrics}");
    assert!(
        !metrics.contains("kube9_operator_status_update_errors_total{error_type=\"server_error\"} 0\n"),
        "{metrics}"
    );
    server.clear_sticky_fault();
    let back =
        wait_for(Duration::from_secs(10), Duration::from_millis(50), || (get(addr, "/readyz").0 == 200).then_some(()));
    assert!(back.is_some(), "ready again after the API server recovers");
}

#[test]
fn silent_and_slow_clients_delay_neither_probes_nor_heartbeats() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let (_agent, addr) = start(&server, &sa, "1s");
    wait_ready(addr);
    // 50 clients that connect and say nothing, 10 that trickle a byte a
    // second: each holds a connection until the 2 s per-connection deadline.
    let silent: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut slow: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let before = server.requests().len();
    let started = Instant::now();
    let mut worst = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(4) {
        for s in &mut slow {
            let _ = s.write_all(b"G");
        }
        let (code, _, took) = get(addr, "/readyz");
        assert_eq!(code, 200);
        worst = worst.max(took);
        std::thread::sleep(Duration::from_millis(100));
    }
    let heartbeats = server.requests().len() - before;
    drop(silent);
    assert!(worst < Duration::from_millis(250), "a probe took {worst:?} with 60 stalled clients connected");
    assert!((3..=6).contains(&heartbeats), "{heartbeats} heartbeats in 4 s at a 1 s interval");
}

#[test]
fn a_hundred_probes_are_answered_quickly_while_the_api_server_hangs() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let (_agent, addr) = start(&server, &sa, "1s");
    wait_ready(addr);
    server.set_sticky_fault(Fault::Hang(Duration::from_secs(30)));
    // Probe while the agent's thread is inside a write that will not be
    // answered (it gives up after its 5 s response timeout).
    let hung = server.requests().len();
    wait_for(Duration::from_secs(5), Duration::from_millis(5), || (server.requests().len() > hung).then_some(()))
        .expect("a write is in flight");
    let mut worst = Duration::ZERO;
    let started = Instant::now();
    for i in 0..100 {
        let path = ["/healthz", "/readyz", "/status", "/metrics"][i % 4];
        let (code, _, took) = get(addr, path);
        // /readyz turns 503 once the hung write has timed out; it answers.
        assert!(code == 200 || (path == "/readyz" && code == 503), "{path}: {code}");
        worst = worst.max(took);
    }
    assert!(started.elapsed() < Duration::from_secs(5), "the probes ran while the write hung");
    assert!(worst < Duration::from_millis(250), "the slowest of 100 probes took {worst:?}");
    println!("100 probes while the API server hangs: slowest {worst:?}");
}
