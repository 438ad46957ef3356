//! End to end, real kube-apiserver: Kubernetes Events on published health
//! changes. A watched URL flipping healthy → degraded → healthy gives
//! exactly two events about the sidecar's Pod (what `kubectl describe pod`
//! shows); a signal flapping as fast as it is published gives a bounded
//! number, each event sent one POST and one object; losing the
//! permission to record events changes nothing in the status and is logged once; and
//! `--events=false` sends no event request at all.

use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::control_plane::{ControlPlane, Deployed, release_bin, shared};
use support::events::{create_pod, event_requests, opstatus_events, summaries};
use support::http::{FakeOperator, endpoint_from_log, get};
use support::{RunningAgent, wait_for};

const CM: &str = "kube9-operator-status";
const POD: &str = "example-operator-7d9f5c-x2k4q";
/// The rate limit: a burst of 5, then one per 12 s.
const BURST: usize = 5;
const REFILL: Duration = Duration::from_secs(12);

fn start(
    cp: &ControlPlane,
    pod: &Deployed,
    uid: Option<&str>,
    operator: &FakeOperator,
    extra: &[&str],
) -> RunningAgent {
    let url = operator.url();
    let mut args = vec!["run", "--interval", "60s", "--check-interval", "1s", "--watch-url", &url];
    args.extend_from_slice(extra);
    let mut env = cp.pod_env(pod);
    if let Some(uid) = uid {
        env.push(("POD_NAME".into(), POD.into()));
        env.push(("POD_UID".into(), uid.into()));
    }
    RunningAgent::start(&release_bin(), &args, &env)
}

fn health(cp: &ControlPlane, ns: &str) -> Option<(String, Value)> {
    let doc = cp.status_document(ns, CM)?;
    Some((doc["health"].as_str()?.to_string(), doc["error"].clone()))
}

fn wait_health(cp: &ControlPlane, ns: &str, want: &str) -> Value {
    wait_for(Duration::from_secs(15), Duration::from_millis(100), || {
        health(cp, ns).filter(|(h, _)| h == want).map(|(_, e)| e)
    })
    .unwrap_or_else(|| panic!("never {want}: {:?}", health(cp, ns)))
}

fn wait_events(cp: &ControlPlane, ns: &str, n: usize) -> Vec<Value> {
    wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        Some(opstatus_events(cp, ns)).filter(|e| e.len() >= n)
    })
    .unwrap_or_else(|| panic!("fewer than {n} events: {:?}", summaries(&opstatus_events(cp, ns))))
}

#[test]
fn e2e_a_flip_and_back_is_two_events_on_the_pod() {
    let cp = shared();
    let pod = cp.deploy("events");
    let ns = pod.namespace.as_str();
    let uid = create_pod(cp, ns, POD);
    let operator = FakeOperator::start();
    let agent = start(cp, &pod, Some(&uid), &operator, &[]);
    wait_health(cp, ns, "healthy");
    std::thread::sleep(Duration::from_secs(2));
    assert!(opstatus_events(cp, ns).is_empty(), "the first status is no change");

    operator.set_code(503);
    let why = wait_health(cp, ns, "degraded");
    operator.set_code(200);
    wait_health(cp, ns, "healthy");
    wait_events(cp, ns, 2);
    // Heartbeats and checks go on: still two, one request each.
    std::thread::sleep(Duration::from_secs(3));
    let events = opstatus_events(cp, ns);
    let why = why.as_str().unwrap();
    assert_eq!(
        summaries(&events),
        [
            ("Warning".into(), "HealthChanged".into(), format!("Health changed from healthy to degraded: {why}")),
            ("Normal".into(), "HealthChanged".into(), "Health changed from degraded to healthy".into()),
        ]
    );
    for e in &events {
        let involved = &e["involvedObject"];
        assert_eq!((involved["kind"].as_str(), involved["apiVersion"].as_str()), (Some("Pod"), Some("v1")), "{e}");
        assert_eq!((involved["namespace"].as_str(), involved["name"].as_str()), (Some(ns), Some(POD)), "{e}");
        assert_eq!(involved["uid"].as_str(), Some(uid.as_str()), "{e}");
        assert_eq!(e["count"], 1, "{e}");
        assert_eq!((e["reportingComponent"].as_str(), e["reportingInstance"].as_str()), (Some("opstatus"), Some(POD)));
        assert!(e["metadata"]["name"].as_str().unwrap().starts_with(&format!("{POD}.")), "{e}");
    }
    let requests = event_requests(cp, &pod.user);
    let calls: Vec<(&str, u16)> = requests.iter().map(|e| (e.verb.as_str(), e.code)).collect();
    assert_eq!(calls, [("create", 201), ("create", 201)], "{requests:?}");

    let described = cp.kubectl_ok(&["-n", ns, "describe", "pod", POD]);
    assert!(described.contains("HealthChanged") && described.contains("opstatus"), "{described}");
    println!("kubectl describe pod {POD}:\n{described}");
    assert!(problems_besides_the_watch(&agent.stderr()).is_empty(), "{}", agent.stderr());
}

/// The WARN and ERROR lines of `log` but the watch's own (the flips).
fn problems_besides_the_watch(log: &str) -> Vec<&str> {
    support::problems_logged(log).into_iter().filter(|l| !l.contains("Operator health check")).collect()
}

/// The value of `opstatus_events_total{result="…"}`.
fn events_metric(metrics: &str, result: &str) -> u64 {
    let series = format!("opstatus_events_total{{result=\"{result}\"}} ");
    let line = metrics.lines().find(|l| l.starts_with(&series)).unwrap_or_else(|| panic!("no {series}: {metrics}"));
    line[series.len()..].trim().parse().unwrap()
}

/// Published changes of health this test makes: well past the burst, and
/// past what the bucket refills in the minute a busy machine may take.
const FLAPS: usize = 16;

#[test]
fn e2e_an_operator_flapping_at_every_check_gives_a_bounded_number_of_events() {
    let cp = shared();
    let pod = cp.deploy("events-flap");
    let ns = pod.namespace.as_str();
    let uid = create_pod(cp, ns, POD);
    let operator = FakeOperator::start();
    let agent = start(cp, &pod, Some(&uid), &operator, &["--listen", "127.0.0.1:0"]);
    wait_health(cp, ns, "healthy");
    let endpoint =
        wait_for(Duration::from_secs(5), Duration::from_millis(50), || endpoint_from_log(&agent.stderr())).unwrap();
    // Each flip is counted from opstatus's own log, which may say "healthy"
    // a moment after the ConfigMap does: counted from before that line, the
    // first flip would pass at once and the operator flip back unseen.
    wait_for(Duration::from_secs(5), Duration::from_millis(20), || {
        (support::published_health(&agent.stderr()) == ["healthy"]).then_some(())
    })
    .unwrap_or_else(|| panic!("the first publication is not in the log: {}", agent.stderr()));

    // The operator flips as soon as opstatus published its last flip:
    // degraded at the next check (1 s), healthy at the third in a row (the
    // hysteresis), however slowly a busy machine runs them.
    let started = Instant::now();
    for flip in 0..FLAPS {
        let before = support::published_health(&agent.stderr()).len();
        operator.set_code(if flip % 2 == 0 { 503 } else { 200 });
        wait_for(Duration::from_secs(15), Duration::from_millis(20), || {
            (support::published_health(&agent.stderr()).len() > before).then_some(())
        })
        .unwrap_or_else(|| panic!("flip {flip} was not published: {}", agent.stderr()));
    }
    let flapped = started.elapsed();
    wait_health(cp, ns, "healthy");
    // Let the queue drain (one event per 1 s check) and any refill pass.
    std::thread::sleep(Duration::from_secs(4));
    let elapsed = started.elapsed();

    // Every published change is an occurrence; each was created or dropped
    // by the rate limit.
    let log = agent.stderr();
    let changes = support::published_health(&log).windows(2).filter(|w| w[0] != w[1]).count();
    let (_, metrics, _) = get(endpoint, "/metrics");
    let [created, dropped, failed] = ["created", "dropped", "failed"].map(|r| events_metric(&metrics, r));
    assert_eq!(failed, 0, "{log}");
    assert_eq!(created + dropped, changes as u64, "{changes} changes: {metrics}");
    assert!(!metrics.contains("result=\"patched\""), "{metrics}");
    let sent = created as usize;
    let bound = BURST + (elapsed.as_secs_f64() / REFILL.as_secs_f64()).ceil() as usize;
    assert!(changes >= FLAPS, "{changes} changes published\n{log}");
    assert!(bound < changes, "the test must flap past what the bucket allows: bound {bound}, {changes} changes");
    assert!(sent <= bound, "{sent} event requests for {changes} changes in {elapsed:?} (bound {bound})");
    let requests = event_requests(cp, &pod.user);
    assert_eq!(requests.len(), sent, "one request per event sent: {requests:?}");
    assert!(requests.iter().all(|e| e.verb == "create" && e.code == 201), "{requests:?}");
    let said = log.matches("Too many Kubernetes Events").count();
    assert_eq!(said, usize::from(dropped > 0), "the drops are logged once: {log}");

    // Each event sent is an object of its own.
    let events = opstatus_events(cp, ns);
    assert_eq!(events.len(), sent, "{:?}", summaries(&events));
    assert!(events.iter().all(|e| e["count"] == 1), "{events:?}");
    println!(
        "e2e events flapping: {FLAPS} flips in {flapped:.1?} published {changes} changes; {sent} event requests \
         ({created} Event objects created), {dropped} dropped"
    );
}

#[test]
fn e2e_without_the_permission_to_record_events_the_status_is_unchanged_and_it_is_logged_once() {
    let cp = shared();
    let pod = cp.deploy("events-rbac");
    let ns = pod.namespace.as_str();
    let uid = create_pod(cp, ns, POD);
    let operator = FakeOperator::start();
    let agent = start(cp, &pod, Some(&uid), &operator, &["--interval", "2s"]);
    wait_health(cp, ns, "healthy");
    operator.set_code(503);
    wait_health(cp, ns, "degraded");
    wait_events(cp, ns, 1);

    // The Role without its events rule (rules[1]).
    let can = |verb: &str| {
        let out = cp.kubectl(&["auth", "can-i", verb, "events", "-n", ns, "--as", &pod.user], None);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    cp.kubectl_ok(&[
        "-n",
        ns,
        "patch",
        "role",
        "opstatus-status-writer",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/rules/1/resources/0","value":"events"},{"op":"remove","path":"/rules/1"}]"#,
    ]);
    wait_for(Duration::from_secs(10), Duration::from_millis(100), || (can("create") == "no").then_some(()))
        .expect("the permission is gone");
    let heartbeats = || agent.stderr().matches("Status updated:").count();
    let before = heartbeats();

    operator.set_code(200);
    assert!(wait_health(cp, ns, "healthy").is_null());
    operator.set_code(503);
    let why = wait_health(cp, ns, "degraded");
    assert!(why.as_str().unwrap().starts_with("Operator health check"), "{why}");
    operator.set_code(200);
    assert!(wait_health(cp, ns, "healthy").is_null(), "the status does not mention events");
    let refused = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        let r = event_requests(cp, &pod.user);
        Some(r).filter(|r| r.iter().filter(|e| e.code == 403).count() >= 3)
    })
    .expect("three events refused");
    // Heartbeats go on (every 2 s), and health stays healthy.
    std::thread::sleep(Duration::from_secs(5));
    assert!(heartbeats() >= before + 4, "{} heartbeats since the revocation", heartbeats() - before);
    assert_eq!(health(cp, ns).map(|(h, _)| h).as_deref(), Some("healthy"));
    let log = agent.stderr();
    let warned: Vec<&str> = log.lines().filter(|l| l.contains("Cannot record Kubernetes Events")).collect();
    assert_eq!(warned.len(), 1, "logged once: {log}");
    assert!(warned[0].contains(" WARN "), "{}", warned[0]);
    assert!(
        warned[0].contains(&format!(
            "403 Forbidden: grant create on events in namespace \"{ns}\" (see manifests/base/role.yaml;"
        )),
        "{}",
        warned[0]
    );
    assert_eq!(problems_besides_the_watch(&log), warned, "nothing else went wrong");
    assert!(log.lines().all(|l| !l.contains("health=unhealthy")), "{log}");

    // Granted again: the next event goes through, and that is said once.
    cp.apply_base_manifests(ns);
    wait_for(Duration::from_secs(10), Duration::from_millis(100), || (can("create") == "yes").then_some(()))
        .expect("the permission is back");
    operator.set_code(503);
    wait_health(cp, ns, "degraded");
    let recorded = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        agent.stderr().contains("Kubernetes Events are recorded again").then_some(())
    });
    assert!(recorded.is_some(), "{}", agent.stderr());
    let refused = refused.iter().filter(|e| e.code == 403).count();
    println!("e2e events without RBAC: {refused} event requests refused; the status stayed as it was");
}

#[test]
fn e2e_events_false_sends_no_event_request() {
    let cp = shared();
    let pod = cp.deploy("events-off");
    let ns = pod.namespace.as_str();
    let uid = create_pod(cp, ns, POD);
    let operator = FakeOperator::start();
    let agent = start(cp, &pod, Some(&uid), &operator, &["--events=false"]);
    wait_health(cp, ns, "healthy");
    operator.set_code(503);
    wait_health(cp, ns, "degraded");
    operator.set_code(200);
    wait_health(cp, ns, "healthy");
    std::thread::sleep(Duration::from_secs(3));
    assert!(event_requests(cp, &pod.user).is_empty(), "{:?}", event_requests(cp, &pod.user));
    assert!(opstatus_events(cp, ns).is_empty());
    assert!(!agent.stderr().contains("Kubernetes Events"), "{}", agent.stderr());
}
