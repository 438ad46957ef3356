//! Plain-HTTP helpers: a stand-in for the operator's own health endpoint,
//! and a minimal client for opstatus's probe endpoint.

use super::fake_apiserver::FakeApiServer;
use super::run_args::Run;
use super::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The operator's `/healthz`, answering with a switchable status code. It
/// listens on 127.0.0.1 and stops when dropped.
pub struct FakeOperator {
    pub addr: SocketAddr,
    code: Arc<AtomicU16>,
    stop: Arc<AtomicBool>,
    answers: Arc<AtomicUsize>,
}

impl FakeOperator {
    pub fn start() -> FakeOperator {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let code = Arc::new(AtomicU16::new(200));
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(AtomicUsize::new(0));
        let (c, s, n) = (code.clone(), stop.clone(), answers.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let code = c.load(Ordering::SeqCst);
                let n = n.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                        line.clear();
                    }
                    let body = if code == 200 { "ok" } else { "not ok" };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    n.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        FakeOperator { addr, code, stop, answers }
    }

    pub fn url(&self) -> String {
        format!("http://{}/healthz", self.addr)
    }

    pub fn set_code(&self, code: u16) {
        self.code.store(code, Ordering::SeqCst);
    }

    /// How many requests it has answered (the checks of it so far).
    pub fn answers(&self) -> usize {
        self.answers.load(Ordering::SeqCst)
    }
}

impl Drop for FakeOperator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// `GET path` against `addr`: the status code and body, and how long the
/// answer took. Bounded by a 5 s timeout.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to the endpoint");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\nUser-Agent: kube-probe/1.30\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the answer");
    let took = started.elapsed();
    let code = response.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status line");
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body, took)
}

/// The address opstatus logged for its endpoint (`--listen 127.0.0.1:0`).
pub fn endpoint_from_log(log: &str) -> Option<SocketAddr> {
    log.lines().find_map(|l| l.split("on http://").nth(1)).and_then(|a| a.trim().parse().ok())
}

/// `opstatus run --interval 1s --listen 127.0.0.1:0` against `server`, and
/// the endpoint's address once `ready_path` answers 200.
pub fn agent_with_endpoint(
    server: &FakeApiServer,
    sa: &ServiceAccountDir,
    ready_path: &str,
) -> (RunningAgent, SocketAddr) {
    let agent = Run::every("1s").listen().start(&opstatus_bin(), &pod_env(server.port(), sa));
    let addr =
        wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr())).unwrap();
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || (get(addr, ready_path).0 == 200).then_some(()))
        .unwrap();
    (agent, addr)
}
