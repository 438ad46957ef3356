//! An operator in a restart loop (its port up for 1.25 s, then gone for
//! 1 s, over and over) is shown `degraded` once and held there while it
//! flaps: one published change and one write, where every flip of its
//! checks was a status write (and an Event); healthy again only once it
//! has answered three checks in a row. Its own Pod, read when a refusal
//! follows a pass (is it being deleted?), is read once, not at every
//! restart: a Pod found staying is not asked about again for 30 s. With
//! `--health-inertia` longer than any of its bad spells it is shown all
//! the same, once that window has passed since its first bad check.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::operator_endpoint::free_addr;
use support::run_args::Run;
use support::{ServiceAccountDir, opstatus_bin, pod_env, published_health, wait_for};

const TOKEN: &str = "sa-token-for-operator-flapping";
const UP: Duration = Duration::from_millis(1250);
const DOWN: Duration = Duration::from_secs(1);
/// How long the operator flaps.
const FLAPPING: Duration = Duration::from_secs(24);
/// The sidecar's own Pod, which is not being deleted.
const POD: &str = "/api/v1/namespaces/ops/pods/op-0";

/// The operator: answers 200 on `addr` while up; on each restart its
/// listener and every connection it accepted are gone (refused, reset), as
/// when its process dies. Flaps while `flapping` is set, then stays up
/// until `stop`; bounded to a few minutes either way.
struct RestartLoop {
    addr: SocketAddr,
    flapping: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    restarts: Arc<AtomicU64>,
}

impl RestartLoop {
    fn start() -> RestartLoop {
        let addr = free_addr();
        let (flapping, stop, restarts) =
            (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (flaps, stops, counted) = (flapping.clone(), stop.clone(), restarts.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(240);
            while !stops.load(Ordering::SeqCst) && Instant::now() < deadline {
                let up_until = if flaps.load(Ordering::SeqCst) { Instant::now() + UP } else { deadline };
                serve_until(addr, up_until, &stops, &flaps);
                if flaps.load(Ordering::SeqCst) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(DOWN);
                }
            }
        });
        RestartLoop { addr, flapping, stop, restarts }
    }

    fn url(&self) -> String {
        format!("http://{}/healthz", self.addr)
    }
}

impl Drop for RestartLoop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One life of the operator: listens on `addr` and answers every request
/// on every connection until `until` (or `stop`, or, while up for good,
/// until it starts flapping again), then drops them all.
fn serve_until(addr: SocketAddr, until: Instant, stop: &AtomicBool, flapping: &AtomicBool) {
    let Ok(listener) = TcpListener::bind(addr) else { return };
    listener.set_nonblocking(true).unwrap();
    let mut connections: Vec<BufReader<TcpStream>> = Vec::new();
    let steady = !flapping.load(Ordering::SeqCst);
    while Instant::now() < until && !stop.load(Ordering::SeqCst) && !(steady && flapping.load(Ordering::SeqCst)) {
        if let Ok((stream, _)) = listener.accept() {
            stream.set_nonblocking(false).unwrap();
            stream.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
            connections.push(BufReader::new(stream));
        }
        connections.retain_mut(answer);
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Answers the requests that arrived on `connection`; false once closed.
fn answer(connection: &mut BufReader<TcpStream>) -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        match connection.read_line(&mut line) {
            Ok(0) => return false,
            Ok(_) if line == "\r\n" => {
                let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
                if connection.get_mut().write_all(ok).is_err() {
                    return false;
                }
            }
            Ok(_) => {}
            Err(_) => return true,
        }
    }
}

/// The status writes so far (not the one that labels a new ConfigMap).
fn writes(api: &FakeApiServer) -> usize {
    let status = |r: &&support::https::Recorded| r.method == "PATCH" && r.query.contains("fieldManager=opstatus&");
    api.requests().iter().filter(status).count()
}

/// Changes of the published health in the agent's log.
fn flips(log: &str) -> usize {
    published_health(log).windows(2).filter(|w| w[0] != w[1]).count()
}

/// The operator, the API server and opstatus (with its account's
/// directory, which must outlive it).
type Flapping = (RestartLoop, FakeApiServer, support::RunningAgent, ServiceAccountDir);

fn flapping_run(extra: &[&str]) -> Flapping {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    api.put_custom(POD, serde_json::json!({"kind": "Pod", "metadata": {"name": "op-0", "namespace": "ops"}}));
    let mut env = pod_env(api.port(), &sa);
    env.push(("POD_NAME".into(), "op-0".into()));
    let operator = RestartLoop::start();
    let mut run = Run::every("60s").checks("1s").flag("--watch-url", operator.url());
    for pair in extra.chunks(2) {
        run = run.flag(pair[0], pair[1]);
    }
    let agent = run.start(&opstatus_bin(), &env);
    (operator, api, agent, sa)
}

#[test]
fn an_operator_in_a_restart_loop_is_shown_degraded_once_held_while_it_flaps_and_healthy_once_it_holds() {
    let (operator, api, agent, _sa) = flapping_run(&[]);
    std::thread::sleep(FLAPPING);
    let log = agent.stderr();
    let (flipped, written, restarts) = (flips(&log), writes(&api), operator.restarts.load(Ordering::SeqCst));
    let pod_reads = api.requests().iter().filter(|r| r.method == "GET" && r.path == POD).count();
    println!(
        "restart loop: {restarts} restarts in {FLAPPING:?}: {flipped} published changes, {written} status writes, \
         {pod_reads} reads of its own Pod"
    );
    assert!(pod_reads <= 1, "its own Pod read {pod_reads} times: {log}");
    assert!(restarts >= 8, "the operator restarted {restarts} times");
    assert_eq!(published_health(&log).first(), Some(&"healthy"), "its first answer is published: {log}");
    assert_eq!(flipped, 1, "degraded once, then held: {:?}\n{log}", published_health(&log));
    // The first status and the change to degraded; while degraded, a change
    // of its reason is a change of what the status says, and is written:
    // an operator whose failures alternate between a refusal and the
    // lateness window ("3 or more of the last 6 checks") costs a write or
    // two more, as the machine's load shifts its restarts against the
    // checks. Every flip was a write before (13 in this run's time).
    assert!((2..=5).contains(&written), "the first status, the change and its reasons: {written} writes\n{log}");
    assert_eq!(published_health(&log).last(), Some(&"degraded"));

    // It stays up: healthy once three checks in a row passed (the last
    // refusals leave the lateness window first).
    operator.flapping.store(false, Ordering::SeqCst);
    let healthy = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        (published_health(&agent.stderr()).last() == Some(&"healthy")).then(Instant::now)
    });
    assert!(healthy.is_some(), "never healthy again: {}", agent.stderr());
    assert_eq!(flips(&agent.stderr()), 2, "{}", agent.stderr());
}

#[test]
fn health_inertia_longer_than_each_bad_spell_still_shows_a_flapping_operator() {
    let (operator, _api, agent, _sa) = flapping_run(&["--health-inertia", "6s"]);
    let shown = wait_for(FLAPPING, Duration::from_millis(100), || {
        published_health(&agent.stderr()).contains(&"degraded").then_some(())
    });
    let log = agent.stderr();
    assert!(shown.is_some(), "a flapping operator never shown under --health-inertia 6s: {log}");
    std::thread::sleep(Duration::from_secs(8));
    let log = agent.stderr();
    assert_eq!(flips(&log), 1, "shown once, then held: {:?}\n{log}", published_health(&log));
    assert!(operator.restarts.load(Ordering::SeqCst) >= 4);
}
