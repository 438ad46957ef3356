//! End to end, real kube-apiserver: inertia (`src/inertia.rs`), judged by
//! the audit log.
//!
//! - `--health-inertia`: a failure of the operator's health shorter than
//!   the window never reaches the API server (no write but the first);
//!   one longer than it is published by one write, never before the window
//!   has passed, its reason saying since when; the recovery once three
//!   checks in a row saw it.
//! - `--upgradeable-inertia 0,W`: a block goes out at once; the blocking
//!   resource clear for less than the window sends nothing; clear for
//!   longer, `Upgradeable=True` goes out in one update, never before the
//!   window has passed; the Events say only the flips published. The
//!   window holds across a restart of the sidecar and a takeover by a
//!   standby: each reads the published condition back before it writes.
//!
//! Meanwhile `/status` shows the change held back and when it would be
//! published. Each short change is ended only once `/status` shows it held
//! back (opstatus has seen it), and judged by what was sent, so no step
//! races the clock; the windows are long beside the one-second checks.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};
use support::control_plane::{AuditEvent, ControlPlane, Deployed, release_bin, shared};
use support::events::{create_pod, opstatus_events, summaries};
use support::http::{FakeOperator, endpoint_from_log, get};
use support::replicas::{another_replica, bind_role, replica_env};
use support::resources::find;
use support::{RunningAgent, wait_for};

/// Long enough that the short spells below (a few checks, and the kubectl
/// calls around them, seconds each on a busy machine) stay within it.
const WINDOW: Duration = Duration::from_secs(20);

/// `/status` as JSON.
fn status_view(addr: SocketAddr) -> Value {
    let (code, body, _) = get(addr, "/status");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The endpoint's address, from the start line.
fn endpoint(agent: &RunningAgent) -> SocketAddr {
    wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint:\n{}", agent.stderr()))
}

/// Waits until `/status` holds back a change to `state`; returns it.
fn wait_pending(addr: SocketAddr, state: &str, agent: &RunningAgent) -> Value {
    wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        let view = status_view(addr);
        view["pending"].as_array()?.iter().find(|p| p["state"] == state).cloned()
    })
    .unwrap_or_else(|| panic!("{state} never pending: {}\n{}", status_view(addr), agent.stderr()))
}

/// Waits until `/status` holds nothing back.
fn wait_nothing_pending(addr: SocketAddr) {
    wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        status_view(addr).get("pending").is_none().then_some(())
    })
    .unwrap_or_else(|| panic!("still pending: {}", status_view(addr)));
}

/// The requests on `uri_part` with `verb`, received at or after `since`.
fn sent(cp: &ControlPlane, pod: &Deployed, uri_part: &str, verb: &str, since: SystemTime) -> Vec<AuditEvent> {
    cp.audit_events(&pod.user)
        .into_iter()
        .filter(|e| e.uri.contains(uri_part) && e.verb == verb && e.received >= since)
        .collect()
}

/// A pending change's window: `publishAt` − `since`.
fn window_of(pending: &Value) -> Duration {
    let at = |k: &str| opstatus::testing::parse_rfc3339(pending[k].as_str().unwrap()).unwrap();
    at("publishAt").duration_since(at("since")).unwrap()
}

/// ` (since T)` at the end of `text`: T.
fn since_in(text: &str) -> SystemTime {
    let stamp = text.rsplit(" (since ").next().and_then(|t| t.strip_suffix(')')).unwrap_or_else(|| panic!("{text}"));
    opstatus::testing::parse_rfc3339(stamp).unwrap_or_else(|| panic!("{text}"))
}

/// Whole seconds: the audit log and RFC 3339 stamps are to the second.
fn floor(t: SystemTime) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs())
}

#[test]
fn e2e_health_inertia_a_flap_shorter_than_the_window_never_reaches_the_api_server() {
    let cp = shared();
    let pod = cp.deploy("inertia-health");
    let ns = pod.namespace.as_str();
    let operator = FakeOperator::start();
    let mut agent = Run::every("60s")
        .checks("1s")
        .listen()
        .flag("--watch-url", operator.url())
        .flag("--health-inertia", format!("{}s", WINDOW.as_secs()))
        .switch("--events=false")
        .start(&release_bin(), &cp.pod_env(&pod));
    let addr = endpoint(&agent);
    let doc = || cp.status_document(ns, "kube9-operator-status");
    let wait_health = |want: &str| {
        wait_for(WINDOW * 3, Duration::from_millis(100), || doc().filter(|d| d["health"] == want))
            .unwrap_or_else(|| panic!("never {want}: {:?}\n{}", doc(), agent.stderr()))
    };
    let first = wait_health("healthy");
    assert!(first["error"].is_null(), "{first}");
    let started = SystemTime::now();

    // A flap shorter than the window: seen (held back, /status says so and
    // when it would go out), ended, and forgotten.
    let flap_began = SystemTime::now();
    operator.set_code(503);
    let pending = wait_pending(addr, "health=degraded", &agent);
    assert_eq!(pending["output"], format!("ConfigMap {ns}/kube9-operator-status"));
    assert_eq!(window_of(&pending), WINDOW);
    // Two more failing checks: a flap of a few checks, not one.
    let failing = operator.answers();
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (operator.answers() >= failing + 2).then_some(()))
        .expect("two more failing checks");
    operator.set_code(200);
    let flapped = SystemTime::now();
    wait_nothing_pending(addr);
    let after = operator.answers();
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || (operator.answers() >= after + 2).then_some(()))
        .expect("two more checks");
    let short = flapped.duration_since(flap_began).unwrap();
    assert!(short < WINDOW, "the short flap lasted {short:?}: the machine stalled beyond the {WINDOW:?} window");
    assert_eq!(
        sent(cp, &pod, "/configmaps/", "patch", started).len(),
        0,
        "a flap shorter than the window reached the API server"
    );
    assert_eq!(doc().unwrap()["health"], "healthy");

    // A failure longer than the window: one write, never before the window.
    let broke = SystemTime::now();
    operator.set_code(503);
    let degraded = wait_health("degraded");
    let writes = sent(cp, &pod, "/configmaps/", "patch", floor(broke));
    assert_eq!(writes.len(), 1, "one write for the failure: {writes:?}");
    let held = writes[0].received.duration_since(floor(broke)).unwrap_or_default();
    assert!(
        held >= WINDOW - Duration::from_secs(1),
        "published {held:?} after the failure, before the {WINDOW:?} window"
    );
    let error = degraded["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("Operator health check {} failed: HTTP 503 (since ", operator.url())),
        "{error}"
    );
    let since = since_in(error);
    assert!(
        since >= floor(broke) && since <= writes[0].received,
        "since {since:?}, broke {broke:?}, written {writes:?}"
    );

    // Recovery: published once three checks in a row saw it.
    let fixed = SystemTime::now();
    operator.set_code(200);
    let healthy = wait_health("healthy");
    assert!(healthy["error"].is_null(), "{healthy}");
    assert_eq!(sent(cp, &pod, "/configmaps/", "patch", fixed).len(), 1, "one write for the recovery");
    // After the first write, every request on the ConfigMap was a write,
    // one per change: inertia adds none.
    let on_cm: Vec<_> = cp
        .audit_events(&pod.user)
        .into_iter()
        .filter(|e| e.uri.contains("/configmaps/") && e.received >= started)
        .collect();
    assert!(on_cm.iter().all(|e| e.verb == "patch"), "{on_cm:?}");
    assert_eq!(on_cm.len(), 2, "degraded, healthy: {on_cm:?}");
    assert_eq!(agent.exited(), None);
    println!(
        "e2e health inertia: a {short:.1?} flap sent nothing; a longer failure one write {held:.1?} after it began"
    );
}

const OC: &str = "demo-operator.v1.0.0";

#[test]
fn e2e_upgradeable_inertia_true_only_once_clear_for_the_window() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy("inertia-upgradeable");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.grant_operator_condition_as_olm(ns, OC);
    cp.create_operator_condition(ns, OC, &[]);
    cp.create_foo(ns, "alpha", &[("Migrating", "True")]);
    let uid = create_pod(cp, ns, "demo-operator-0");
    let mut env = cp.pod_env(&pod);
    env.push(("OPERATOR_CONDITION_NAME".into(), OC.into()));
    // The Events are about this pod: they follow what was published.
    env.push(("POD_NAME".into(), "demo-operator-0".into()));
    env.push(("POD_UID".into(), uid));
    let mut agent = Run::every("60s")
        .checks("1s")
        .listen()
        .flag("--probe", "example.com/v1/foos:Upgradeable=!Migrating")
        .flag("--probe-namespace", ns)
        .flag("--upgradeable-inertia", format!("0,{}s", WINDOW.as_secs()))
        .start(&release_bin(), &env);
    let addr = endpoint(&agent);
    let upgradeable = || find(&cp.operator_condition(ns, OC)["spec"]["conditions"], "Upgradeable").cloned();
    let wait_upgradeable = |want: &str| {
        wait_for(WINDOW * 3, Duration::from_millis(100), || upgradeable().filter(|c| c["status"] == want))
            .unwrap_or_else(|| panic!("Upgradeable never {want}: {:?}\n{}", upgradeable(), agent.stderr()))
    };
    // The first state at once, saying since when.
    let blocked = wait_upgradeable("False");
    let message = blocked["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("Upgrade blocked by 1 resource: Foo {ns}/alpha: Migrating (since ")),
        "{message}"
    );
    let started = SystemTime::now();

    // Clear for less than the window: held back, then blocked again: nothing sent.
    let clear_began = SystemTime::now();
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "False")]);
    let pending = wait_pending(addr, "Upgradeable=True", &agent);
    assert_eq!(pending["output"], format!("OperatorCondition {ns}/{OC}"));
    assert_eq!(window_of(&pending), WINDOW);
    // Clear for a few checks, not one.
    std::thread::sleep(Duration::from_secs(2));
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "True")]);
    let reblocked = SystemTime::now();
    wait_nothing_pending(addr);
    let short = reblocked.duration_since(clear_began).unwrap();
    assert!(short < WINDOW, "the clear spell lasted {short:?}: the machine stalled beyond the {WINDOW:?} window");
    assert_eq!(sent(cp, &pod, "/operatorconditions/", "update", started).len(), 0, "a short clear spell was sent");
    assert_eq!(upgradeable().unwrap()["status"], "False");

    // Clear for longer than the window: one update, never before it.
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "False")]);
    let cleared = cp.admin_request_time("patch", &format!("/namespaces/{ns}/foos/alpha/status"));
    let up = wait_upgradeable("True");
    let updates = sent(cp, &pod, "/operatorconditions/", "update", cleared);
    assert_eq!(updates.len(), 1, "{updates:?}");
    let held = updates[0].received.duration_since(cleared).unwrap_or_default();
    assert!(held >= WINDOW - Duration::from_secs(1), "Upgradeable=True {held:?} after the clearance");
    let message = up["message"].as_str().unwrap();
    assert!(message.starts_with("No resource blocks an upgrade (1 checked) (since "), "{message}");
    assert!(since_in(message) >= floor(cleared), "{message}");

    // A block again: at once (no window towards worse).
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "True")]);
    wait_upgradeable("False");
    // Its Events say the two flips published, not the clear spell held back.
    let flips = || {
        let events = opstatus_events(cp, ns);
        let said = summaries(&events).into_iter().filter(|(_, reason, _)| reason == "UpgradeableChanged");
        said.map(|(_, _, message)| message).collect::<Vec<_>>()
    };
    let said = wait_for(Duration::from_secs(20), Duration::from_millis(100), || Some(flips()).filter(|f| f.len() >= 2))
        .unwrap_or_else(|| panic!("fewer than two Upgradeable events: {:?}", flips()));
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[0].starts_with("Upgradeable changed from False to True: No resource blocks"), "{said:?}");
    assert!(said[1].starts_with("Upgradeable changed from True to False: Upgrade blocked"), "{said:?}");
    assert_eq!(agent.exited(), None);
    println!("e2e Upgradeable inertia: a {short:.1?} clear spell sent nothing; True {held:.1?} after the clearance");
}

/// `opstatus run` (`env` names its pod) beside the OperatorCondition, with
/// `--upgradeable-inertia 0,WINDOW`, and its endpoint.
fn replica(env: Vec<(String, String)>, ns: &str) -> (RunningAgent, SocketAddr) {
    let agent = Run::every("2s")
        .checks("1s")
        .listen()
        .flag("--probe", "example.com/v1/foos:Upgradeable=!Migrating")
        .flag("--probe-namespace", ns)
        .flag("--operator-condition", OC)
        .flag("--upgradeable-inertia", format!("0,{}s", WINDOW.as_secs()))
        .start(&release_bin(), &env);
    let addr = endpoint(&agent);
    (agent, addr)
}

#[test]
fn e2e_upgradeable_inertia_holds_across_a_restart_and_a_takeover() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy("inertia-restart");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.grant_operator_condition_as_olm(ns, OC);
    cp.create_operator_condition(ns, OC, &[]);
    cp.create_foo(ns, "alpha", &[("Migrating", "True")]);
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    bind_role(cp, ns, "opstatus-b", &format!("opstatus-probe-reader-{ns}"));
    bind_role(cp, ns, "opstatus-b", OC);
    let env_a = replica_env(cp, &pod.sa, "pod-a");
    let upgradeable = || find(&cp.operator_condition(ns, OC)["spec"]["conditions"], "Upgradeable").cloned();
    let wait_upgradeable = |want: &str, logs: &[&RunningAgent]| {
        wait_for(WINDOW * 3, Duration::from_millis(100), || upgradeable().filter(|c| c["status"] == want))
            .unwrap_or_else(|| {
                let logs: Vec<String> = logs.iter().map(|a| a.stderr()).collect();
                panic!("Upgradeable never {want}: {:?}\n{}", upgradeable(), logs.join("\n--\n"))
            })
    };
    // When Upgradeable=True reached the OperatorCondition after `cleared`,
    // written by `user`.
    let published_true = |user: &str, cleared: SystemTime| {
        let updates: Vec<AuditEvent> = cp
            .audit_events(user)
            .into_iter()
            .filter(|e| e.uri.contains("/operatorconditions/") && e.verb == "update" && e.received >= cleared)
            .collect();
        assert_eq!(updates.len(), 1, "one update, the clearance: {updates:?}");
        updates[0].received.duration_since(cleared).unwrap_or_default()
    };

    // A restart while the clearance is held back: the restarted sidecar
    // reads Upgradeable=False back and counts the window from its own first
    // check, so True goes out a whole window after the restart.
    let (mut a, addr_a) = replica(env_a.clone(), ns);
    wait_upgradeable("False", &[&a]);
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "False")]);
    let cleared = cp.admin_request_time("patch", &format!("/namespaces/{ns}/foos/alpha/status"));
    wait_pending(addr_a, "Upgradeable=True", &a);
    a.signal("TERM");
    assert!(a.wait_exit(Duration::from_secs(20)).is_some(), "{}", a.stderr());
    let restarted = SystemTime::now();
    let (a, addr_a) = replica(env_a, ns);
    let up = wait_upgradeable("True", &[&a]);
    let after_clear = published_true(&pod.user, cleared);
    let after_restart = after_clear.saturating_sub(restarted.duration_since(cleared).unwrap_or_default());
    assert!(
        after_restart >= WINDOW - Duration::from_secs(1),
        "Upgradeable=True {after_restart:?} after the restart ({after_clear:?} after the clearance)\n{}",
        a.stderr()
    );
    assert!(up["message"].as_str().unwrap().starts_with("No resource blocks an upgrade (1 checked) (since "), "{up}");

    // A takeover: pod-b stands by; pod-a stops while a clearance is held
    // back; pod-b reads Upgradeable=False back and holds the clearance for
    // a whole window from its takeover.
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "True")]);
    wait_upgradeable("False", &[&a]);
    let (b, _) = replica(replica_env(cp, &sa_b, "pod-b"), ns);
    let standing = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        b.stderr().contains("Standing by: pod-a publishes").then_some(())
    });
    assert!(standing.is_some(), "pod-b never stood by\n{}", b.stderr());
    cp.set_foo_conditions(ns, "alpha", &[("Migrating", "False")]);
    let cleared = cp.admin_request_time("patch", &format!("/namespaces/{ns}/foos/alpha/status"));
    wait_pending(addr_a, "Upgradeable=True", &a);
    a.signal("TERM");
    let took = wait_for(Duration::from_secs(20), Duration::from_millis(50), || {
        b.stderr().contains("Publishing as pod-b").then(SystemTime::now)
    });
    let took = took.unwrap_or_else(|| panic!("pod-b never took over\n{}\n{}", a.stderr(), b.stderr()));
    wait_upgradeable("True", &[&a, &b]);
    let after_clear = published_true(&user_b, cleared);
    let after_takeover = after_clear.saturating_sub(took.duration_since(cleared).unwrap_or_default());
    assert!(
        after_takeover >= WINDOW - Duration::from_secs(2),
        "Upgradeable=True {after_takeover:?} after the takeover ({after_clear:?} after the clearance)\n{}",
        b.stderr()
    );
    println!(
        "e2e Upgradeable inertia across a restart and a takeover: True {after_restart:.1?} after the restart, \
         {after_takeover:.1?} after the takeover (window {WINDOW:?})"
    );
}
