//! The pro tier: API key from a file re-read while running, registration
//! with kube9-server and each of its answers, as they reach the status.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::fake_kube9::{Answer, FakeKube9};
use support::http::{endpoint_from_log, get};
use support::{RunningAgent, ServiceAccountDir, TempDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-pro-tier-tests";
const KEY: &str = "kdy_test_0123456789abcdefSECRET";

struct Setup {
    api: FakeApiServer,
    kube9: FakeKube9,
    sa: ServiceAccountDir,
    dir: TempDir,
}

impl Setup {
    fn new(answer: Answer) -> Setup {
        let api = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
        let kube9 = FakeKube9::start(answer);
        let dir = TempDir::new("pro");
        std::fs::write(dir.path().join("kube9-ca.crt"), &kube9.pki.ca_pem).unwrap();
        Setup { api, kube9, sa, dir }
    }

    fn key_file(&self) -> std::path::PathBuf {
        self.dir.path().join("api-key")
    }

    fn start(&self, server_url: &str, extra: &[&str], rust_log: &str) -> RunningAgent {
        let key = self.key_file();
        let ca = self.dir.path().join("kube9-ca.crt");
        let mut run = Run::every("60s").checks("1s").pro(&key, server_url, &ca);
        for flag in extra {
            run = run.switch(flag);
        }
        let mut env = pod_env(self.api.port(), &self.sa);
        env.push(("RUST_LOG".into(), rust_log.into()));
        run.start(&opstatus_bin(), &env)
    }

    fn status(&self) -> Option<Value> {
        self.api.status_document("ops", "kube9-operator-status")
    }

    fn wait_status(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        wait_for(Duration::from_secs(10), Duration::from_millis(20), || self.status().filter(|s| check(s)))
            .unwrap_or_else(|| panic!("never {what}: {:?}", self.status()))
    }
}

fn fields(s: &Value) -> (String, String, String, bool) {
    let f = |k: &str| s[k].as_str().unwrap_or_default().to_string();
    (f("mode"), f("tier"), f("health"), s["registered"].as_bool().unwrap_or(false))
}

#[test]
fn adding_a_key_registers_and_removing_it_returns_to_free() {
    let setup = Setup::new(Answer::Registered { cluster_id: "cls_test42".into(), status_interval_seconds: 60 });
    let agent = setup.start(&setup.kube9.url(), &[], "info");
    let s = setup.wait_status("the free tier", |s| s["mode"] == "operated");
    assert_eq!(fields(&s), ("operated".into(), "free".into(), "healthy".into(), false));
    assert!(s.get("clusterId").is_none());

    std::fs::write(setup.key_file(), format!("{KEY}\n")).unwrap();
    let s = setup.wait_status("registered", |s| s["registered"] == true);
    assert_eq!(fields(&s), ("enabled".into(), "pro".into(), "healthy".into(), true));
    assert_eq!(s["clusterId"], "cls_test42");

    let registrations = setup.kube9.requests();
    assert_eq!(registrations.len(), 1);
    let r = &registrations[0];
    assert_eq!(r.authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["operatorVersion"], "0.0.0-unknown", "never opstatus's own version");
    assert!(body["clusterIdentifier"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(body["approximateNodeCount"], 0, "listing nodes is not allowed (here: not served): 0");
    assert!(body["kubernetesVersion"].is_string());
    assert!(!String::from_utf8_lossy(&r.body).contains(KEY), "the key travels only in the header");

    std::fs::remove_file(setup.key_file()).unwrap();
    let s = setup.wait_status("free again", |s| s["mode"] == "operated");
    assert_eq!(fields(&s), ("operated".into(), "free".into(), "healthy".into(), false));
    assert!(s.get("clusterId").is_none(), "clusterId is gone: {s}");
    assert!(!agent.stderr().contains(KEY) && !agent.stderr().contains("0123456789abcdef"));
}

#[test]
fn an_invalid_key_falls_back_to_free_degraded_and_is_not_retried() {
    let setup = Setup::new(Answer::Unauthorized);
    std::fs::write(setup.key_file(), KEY).unwrap();
    let agent = setup.start(&setup.kube9.url(), &[], "info");
    let s = setup.wait_status("degraded", |s| s["health"] == "degraded");
    assert_eq!(fields(&s), ("operated".into(), "free".into(), "degraded".into(), false));
    assert_eq!(s["error"], "API key validation failed: 401 Unauthorized");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(setup.kube9.requests().len(), 1, "no retry until the key changes");
    assert!(agent.stderr().contains("ERROR Registration failed: API key validation failed: 401 Unauthorized"));

    // A new key is tried at once.
    setup.kube9.set_answer(Answer::Registered { cluster_id: "cls_new".into(), status_interval_seconds: 60 });
    std::fs::write(setup.key_file(), "kdy_test_anotherkey999").unwrap();
    let s = setup.wait_status("registered with the new key", |s| s["registered"] == true);
    assert_eq!(s["clusterId"], "cls_new");
}

#[test]
fn an_unreachable_server_is_degraded_with_the_reason() {
    let setup = Setup::new(Answer::ServerError);
    std::fs::write(setup.key_file(), KEY).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut agent = setup.start(&format!("https://{closed}"), &[], "info");
    let s = setup.wait_status("degraded", |s| s["health"] == "degraded");
    assert_eq!(fields(&s), ("enabled".into(), "free".into(), "degraded".into(), false));
    assert_eq!(s["error"], "Failed to connect to kube9-server: connection refused");
    assert!(agent.exited().is_none());
    assert!(agent.stderr().contains("; retrying in 300s"), "the first retry is 5 minutes away: {}", agent.stderr());
}

#[test]
fn server_errors_malformed_and_huge_answers_are_failures_not_crashes() {
    for (answer, reason) in [
        (Answer::ServerError, "kube9-server answered HTTP 500 to registration"),
        (Answer::Malformed, "kube9-server's answer to registration is not JSON"),
        (Answer::Huge, "kube9-server's answer could not be read: answer larger than 65536 bytes"),
        (Answer::Close, "Failed to connect to kube9-server: "),
    ] {
        let setup = Setup::new(answer);
        std::fs::write(setup.key_file(), KEY).unwrap();
        let mut agent = setup.start(&setup.kube9.url(), &[], "info");
        let s = setup.wait_status("degraded", |s| s["health"] == "degraded");
        assert!(s["error"].as_str().unwrap().starts_with(reason), "{reason}: {s}");
        assert!(agent.exited().is_none());
    }
}

#[test]
fn rate_limiting_is_honoured() {
    let setup = Setup::new(Answer::RateLimited { retry_after: "2".into() });
    std::fs::write(setup.key_file(), KEY).unwrap();
    let _agent = setup.start(&setup.kube9.url(), &[], "info");
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || (setup.kube9.requests().len() == 1).then_some(()))
        .unwrap();
    setup.kube9.set_answer(Answer::Registered { cluster_id: "cls_after_429".into(), status_interval_seconds: 60 });
    let s = setup.wait_status("registered after the wait", |s| s["registered"] == true);
    assert_eq!(s["clusterId"], "cls_after_429");
    let r = setup.kube9.requests();
    let gap = r[1].at - r[0].at;
    // Never before the 2 s asked for; and not after the failure backoff
    // (5 min) it would take otherwise: a busy machine only makes it later.
    assert!(
        gap >= Duration::from_millis(1950) && gap < Duration::from_secs(60),
        "retried after {gap:?}, asked for 2 s"
    );
}

#[test]
fn a_hung_server_delays_heartbeats_by_at_most_the_bound_and_probes_still_answer() {
    let setup = Setup::new(Answer::Hang(Duration::from_secs(60)));
    std::fs::write(setup.key_file(), KEY).unwrap();
    let agent = setup.start(&setup.kube9.url(), &["--interval", "1s", "--listen", "127.0.0.1:0"], "info");
    let addr =
        wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr())).unwrap();
    wait_for(Duration::from_secs(10), Duration::from_millis(5), || (!setup.kube9.requests().is_empty()).then_some(()))
        .unwrap();
    // While the registration call hangs (2 s, its response timeout),
    // probes are answered: many of them, where an endpoint that waited for
    // the call would answer one or two. A count, not a latency, so that a
    // busy machine cannot fail it.
    let registering = setup.kube9.requests()[0].at;
    let mut answered = 0;
    while registering.elapsed() < Duration::from_secs(2) && answered < 20 {
        let (code, _, _) = get(addr, "/healthz");
        assert_eq!(code, 200);
        answered += 1;
    }
    assert!(answered >= 10, "{answered} probes answered while the registration call hung");
    // Heartbeats go on: the call is given up after its 2 s, not after the
    // server's 60 s hang (no heartbeat at all in the 5 s).
    std::thread::sleep(Duration::from_secs(5).saturating_sub(registering.elapsed()));
    let heartbeats = setup.api.requests().iter().filter(|r| r.method == "PATCH" && r.at > registering).count();
    assert!(heartbeats >= 2, "{heartbeats} heartbeats in the 5 s after the registration call began (1 s interval)");
    let s = setup.status().unwrap();
    assert_eq!(s["error"], "Failed to connect to kube9-server: no answer within 2s");
}

#[test]
fn the_key_never_reaches_logs_status_or_metrics_at_trace() {
    let setup = Setup::new(Answer::Registered { cluster_id: "cls_trace".into(), status_interval_seconds: 60 });
    std::fs::write(setup.key_file(), KEY).unwrap();
    let agent = setup.start(&setup.kube9.url(), &["--listen", "127.0.0.1:0"], "trace");
    setup.wait_status("registered", |s| s["registered"] == true);
    let addr = endpoint_from_log(&agent.stderr()).unwrap();
    let served: String = ["/status", "/metrics", "/readyz"].iter().map(|p| get(addr, p).1).collect();
    let everything = format!("{}{}{}", agent.stderr(), served, setup.status().unwrap());
    assert!(everything.contains("TRACE"), "trace logging is on");
    for fragment in [KEY, &KEY[4..20], "SECRET"] {
        assert!(!everything.contains(fragment), "{fragment:?} leaked");
    }
}
