//! `accept()` errors other than "try again" (here EMFILE: the agent runs
//! with a low descriptor limit and clients use them all up) must not spin a
//! core: the endpoint pauses accepting, keeps serving and closing the
//! connections it has, and answers again once the clients leave. The low
//! descriptor limit is set with `prlimit` (util-linux).

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::http::{endpoint_from_log, get};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-endpoint-accept-error-tests";
/// Enough for the agent to start and talk to the API server, few enough
/// for a few dozen connections to exhaust.
const NOFILE: u32 = 40;

/// CPU time (user + system) the process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn clock_ticks_per_second() -> u64 {
    let out = std::process::Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
}

/// The share of one core the process used over `window`, in percent.
fn cpu_percent(pid: u32, window: Duration) -> f64 {
    let (t0, before) = (Instant::now(), cpu_ticks(pid));
    std::thread::sleep(window);
    let used = (cpu_ticks(pid) - before) as f64 / clock_ticks_per_second() as f64;
    100.0 * used / t0.elapsed().as_secs_f64()
}

/// `GET /healthz` answered 200 within a second; false on any failure.
fn healthz_ok(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.1 200 ")
}

#[test]
fn out_of_descriptors_the_endpoint_pauses_instead_of_spinning() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let limit = format!("--nofile={NOFILE}:{NOFILE}");
    let bin = opstatus_bin();
    let args = [limit.as_str(), bin.to_str().unwrap(), "run", "--interval", "1s", "--listen", "127.0.0.1:0"];
    // prlimit execs the agent: the PID is the agent's.
    let agent = RunningAgent::start(Path::new("/usr/bin/prlimit"), &args, &pod_env(server.port(), &sa));
    let addr: SocketAddr =
        wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr())).unwrap();
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || (get(addr, "/healthz").0 == 200).then_some(()))
        .unwrap();
    let idle = cpu_percent(agent.pid(), Duration::from_secs(2));

    // More connections than the agent has descriptors: the rest wait in
    // the listen queue, and accept() fails with EMFILE.
    let mut clients = Vec::new();
    for _ in 0..150 {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            clients.push(s);
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let exhausted = cpu_percent(agent.pid(), Duration::from_secs(3));
    let emfile = agent.stderr().contains("cannot accept connections (Too many open files");
    drop(clients);

    // Once the clients are gone the endpoint answers again.
    let answered = wait_for(Duration::from_secs(20), Duration::from_millis(200), || healthz_ok(addr).then_some(()));
    println!("CPU with the limit of {NOFILE} descriptors: idle {idle:.1} %, exhausted {exhausted:.1} %");
    assert!(exhausted < 20.0, "the agent used {exhausted:.1} % of a core while out of descriptors");
    assert!(emfile, "accept() never failed for want of descriptors: the test proved nothing");
    assert!(answered.is_some(), "the endpoint did not answer after the clients left");
}
