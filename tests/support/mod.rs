//! Helpers shared by the integration and end-to-end tests.
//!
//! Every loop here is bounded in count and time, every server listens on
//! 127.0.0.1 only, and every process started is stopped by its PID when its
//! handle drops (also when the test fails).

#![allow(dead_code)] // Each test binary uses a different subset.

pub mod arch;
pub mod client_cert;
pub mod connect_proxy;
pub mod control_plane;
pub mod events;
pub mod fake_apiserver;
pub mod fake_kube9;
pub mod http;
pub mod https;
pub mod kubebuilder;
pub mod markdown;
pub mod monitoring;
pub mod node;
pub mod operator_endpoint;
pub mod pki;
pub mod probes;
pub mod replicas;
pub mod requests;
pub mod resources;
pub mod run_args;
pub mod sockets;
pub mod tcp_proxy;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The opstatus binary cargo built for these tests.
pub fn opstatus_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_opstatus"))
}

/// A kubeconfig in `dir` for the API server at `server` (a URL) with the
/// bearer token `token`, trusting `ca_pem` (written beside it), with
/// `extra` lines added to the cluster; its context's namespace is `ops`.
pub fn token_kubeconfig(dir: &TempDir, server: &str, ca_pem: &str, token: &str, extra: &str) -> PathBuf {
    let ca = dir.path().join("ca.crt");
    fs::write(&ca, ca_pem).unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters:\n- name: k\n  cluster:\n    server: {server}\n    certificate-authority: {}\n{extra}\
         contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n    namespace: ops\n\
         users:\n- name: u\n  user:\n    token: {token}\n",
        ca.display()
    );
    let path = dir.path().join("kubeconfig");
    fs::write(&path, text).unwrap();
    path
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("opstatus-test-{label}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A service-account directory as kubelet projects it into a pod.
pub struct ServiceAccountDir {
    pub dir: TempDir,
}

impl ServiceAccountDir {
    pub fn new(token: &str, ca_pem: &str, namespace: &str) -> ServiceAccountDir {
        let dir = TempDir::new("sa");
        fs::write(dir.path().join("ca.crt"), ca_pem).unwrap();
        fs::write(dir.path().join("namespace"), namespace).unwrap();
        let sa = ServiceAccountDir { dir };
        sa.write_token(token);
        sa
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Replaces the token the way kubelet does: write aside, then rename.
    pub fn write_token(&self, token: &str) {
        let tmp = self.path().join(".token.tmp");
        fs::write(&tmp, token).unwrap();
        fs::rename(&tmp, self.path().join("token")).unwrap();
    }
}

/// The environment of opstatus "as in a pod" talking to 127.0.0.1:`port`.
pub fn pod_env(port: u16, sa: &ServiceAccountDir) -> Vec<(String, String)> {
    vec![
        ("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()),
        ("KUBERNETES_SERVICE_PORT".into(), port.to_string()),
        ("OPSTATUS_SERVICE_ACCOUNT_DIR".into(), sa.path().display().to_string()),
    ]
}

/// Runs opstatus to completion with exactly `env` (nothing inherited, so a
/// developer's KUBECONFIG cannot leak in), bounded by `timeout`.
pub fn run_to_end(bin: &Path, args: &[&str], env: &[(String, String)], timeout: Duration) -> Output {
    let mut child = command(bin, args, env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("opstatus {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The log the tests read: opstatus's default (`info`), plus the line on
/// every heartbeat (off by default), which tests count heartbeats by. A
/// test's own `RUST_LOG` replaces it.
pub const TEST_LOG: &str = "info,opstatus::heartbeat=info";

fn command(bin: &Path, args: &[&str], env: &[(String, String)]) -> Command {
    let mut c = Command::new(bin);
    c.args(args).env_clear().env("HOME", "/nonexistent").env("RUST_LOG", TEST_LOG);
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null());
    c
}

/// The most memory a running agent may use under any fault: the release
/// build's steady ~2 MiB, plus the 4 MiB response-body limit, plus slack.
/// A debug build (what `cargo test` builds for the integration tests) maps
/// more, unoptimised code: twice the bound. Either way, a 50 MiB answer
/// buffered would be far above it.
pub const PEAK_RSS_BOUND_KIB: u64 = if cfg!(debug_assertions) { 16 * 1024 } else { 8 * 1024 };

/// A running `opstatus run`, killed by PID when dropped. Its stderr goes to
/// a file so the test can read the log while it runs.
pub struct RunningAgent {
    child: Child,
    log: TempDir,
}

impl RunningAgent {
    pub fn start(bin: &Path, args: &[&str], env: &[(String, String)]) -> RunningAgent {
        let log = TempDir::new("log");
        let file = fs::File::create(log.path().join("stderr")).unwrap();
        let child = command(bin, args, env).stdout(Stdio::null()).stderr(file).spawn().unwrap();
        RunningAgent { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(self.log.path().join("stderr")).unwrap_or_default()
    }

    /// Whether the log says `line` within 15 s. What the agent did is often
    /// seen on the API server before the agent, given its answer, logs it.
    pub fn logged(&self, line: &str) -> bool {
        self.logged_within(line, Duration::from_secs(15))
    }

    /// Whether the log says `line` within `within`.
    pub fn logged_within(&self, line: &str, within: Duration) -> bool {
        wait_for(within, Duration::from_millis(50), || self.stderr().contains(line).then_some(())).is_some()
    }

    /// The process's peak resident set size so far, in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Asserts that memory stayed bounded through whatever the test did:
    /// the steady state is ~2 MiB; 4 MiB of response body may be read.
    pub fn assert_memory_bounded(&self) {
        let peak = self.peak_rss_kib();
        assert!(peak <= PEAK_RSS_BOUND_KIB, "peak RSS {peak} KiB, bound {PEAK_RSS_BOUND_KIB} KiB");
    }

    /// `None` while running, else the exit status.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Sends `signal` (e.g. "TERM") to the process by PID.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status().unwrap();
        assert!(ok.success(), "kill -{signal} {}", self.pid());
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunningAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- opstatus stderr ---\n{}", self.stderr());
        }
    }
}

/// Polls `check` every `every` until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, every: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// The WARN and ERROR lines of a log, but for two start-up notes: that the
/// status ConfigMap is outside the namespaces the kube9 extension searches
/// (every test namespace is), and that no operator version was given (most
/// tests give none).
pub fn problems_logged(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .filter(|l| !l.contains("is outside kube9-system and default") && !l.contains("No operator version given"))
        .collect()
}

/// The health each status update published, in order, from the agent's
/// log (`Status updated: … health=H, …`).
pub fn published_health(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("Status updated:"))
        .filter_map(|l| l.split("health=").nth(1)?.split(',').next())
        .collect()
}

/// Checks a heartbeat cadence as a server saw it, without racing the
/// clock: `offsets[k]` is when write k arrived, counted from a moment
/// taken before the agent started.
///
/// - No write comes early: write k arrives at least k intervals after the
///   start, as a sleep never ends early and each heartbeat is an interval
///   after the last one's start. A doubled heartbeat, or a write before
///   the interval, fails this whatever the machine's load (a loaded
///   machine only makes writes later).
/// - None is skipped: the median gap is under one and a half intervals.
///   A schedule that skips every other heartbeat (or waits two intervals)
///   has a median of two; a busy machine delays some wake-ups, not most
///   of them by half an interval.
///
/// How late the writes come on an idle machine is the benchmark's figure
/// (`scripts/bench.sh --timings`), not a test's.
pub fn assert_cadence(offsets: &[Duration], interval: Duration) {
    assert!(offsets.len() >= 3, "too few writes to judge a cadence: {offsets:?}");
    // The server's and the test's clocks round differently (the audit log
    // has microseconds).
    let rounding = Duration::from_millis(5);
    for (k, at) in offsets.iter().enumerate() {
        assert!(*at + rounding >= interval * k as u32, "write {k} came {at:?} after the start: early ({offsets:?})");
    }
    let mut gaps: Vec<Duration> = offsets.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    gaps.sort();
    let median = gaps[gaps.len() / 2];
    assert!(median < interval * 3 / 2, "median gap {median:?} for a {interval:?} heartbeat: skipped ({offsets:?})");
}

/// `kubectl kustomize DIR` offline (no cluster read): the YAML, or
/// kustomize's error.
pub fn kustomize(dir: &Path) -> Result<String, String> {
    let out = Command::new("kubectl")
        .args(["kustomize", dir.to_str().unwrap()])
        .env("KUBECONFIG", "/dev/null")
        .output()
        .expect("kubectl");
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    if out.status.success() { Ok(text(out.stdout)) } else { Err(text(out.stderr)) }
}
