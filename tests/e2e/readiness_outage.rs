//! End to end, real kube-apiserver, the readiness contract: an API-server
//! outage (a loopback proxy in front of it, cut for 20 s) does not unready
//! the operator — `/readyz` answers 200 to every sample while `/status` and
//! `/metrics` show the failing writes, and after recovery the status is
//! current again. With `--strict-readiness` the same outage answers 503.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{release_bin, shared};
use support::http::{endpoint_from_log, get};
use support::tcp_proxy::TcpProxy;
use support::{RunningAgent, wait_for};

const OUTAGE: Duration = Duration::from_secs(20);

/// Codes `/readyz` answered during an outage, and what `/status` and
/// `/metrics` said at its end.
fn through_an_outage(strict: bool) -> (Vec<u16>, Value, String) {
    let cp = shared();
    let pod = cp.deploy(if strict { "ready-strict" } else { "ready-outage" });
    let ns = pod.namespace.as_str();
    let proxy = TcpProxy::start(cp.port());
    let env = support::pod_env(proxy.port(), &pod.sa);
    let mut args = vec!["run", "--interval", "2s", "--listen", "127.0.0.1:0"];
    if strict {
        args.push("--strict-readiness");
    }
    let agent = RunningAgent::start(&release_bin(), &args, &env);
    let endpoint = wait_for(Duration::from_secs(20), Duration::from_millis(100), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint: {}", agent.stderr()));
    wait_for(Duration::from_secs(20), Duration::from_millis(100), || cp.status_document(ns, "kube9-operator-status"))
        .expect("a first status");
    // The endpoint's snapshot follows the write at the end of its tick.
    let ready = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        (get(endpoint, "/readyz").0 == 200).then_some(())
    });
    assert!(ready.is_some(), "/readyz never 200 before the outage: {}", agent.stderr());

    proxy.cut();
    let cut_at = Instant::now();
    let mut codes = Vec::new();
    while cut_at.elapsed() < OUTAGE {
        codes.push(get(endpoint, "/readyz").0);
        std::thread::sleep(Duration::from_millis(500));
    }
    let status: Value = serde_json::from_str(&get(endpoint, "/status").1).unwrap();
    let metrics = get(endpoint, "/metrics").1;

    proxy.restore();
    let restored = SystemTime::now();
    let current = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        let doc = cp.status_document(ns, "kube9-operator-status")?;
        let updated = opstatus::testing::parse_rfc3339(doc["lastUpdate"].as_str()?)?;
        (updated + Duration::from_secs(1) >= restored).then_some(doc)
    });
    let current = current.unwrap_or_else(|| panic!("no write after recovery: {}", agent.stderr()));
    assert_eq!(current["health"], "healthy", "{current}");
    // The endpoint's snapshot follows the write at the end of its tick.
    let healthy = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        let (code, body, _) = get(endpoint, "/readyz");
        (code == 200 && body == "healthy\n").then_some(())
    });
    assert!(healthy.is_some(), "/readyz after recovery: {:?}", get(endpoint, "/readyz"));
    (codes, status, metrics)
}

#[test]
fn readyz_stays_ready_through_an_apiserver_outage_unless_strict() {
    let (codes, status, metrics) = through_an_outage(false);
    assert!(codes.len() >= 30, "{} samples", codes.len());
    assert!(codes.iter().all(|c| *c == 200), "/readyz during the outage: {codes:?}");
    let write_error = status["writeError"].as_str().unwrap_or_else(|| panic!("/status: {status}"));
    assert!(write_error.starts_with("Failed to write status ConfigMap"), "{write_error}");
    let errors: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("kube9_operator_status_update_errors_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(errors >= 1.0, "{metrics}");

    let (codes, _, _) = through_an_outage(true);
    assert!(codes.contains(&503), "--strict-readiness: {codes:?}");
}
