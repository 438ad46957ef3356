//! End to end, real kube-apiserver: the probe's watch is broken mid-stream
//! by an API server restart. It resumes (from its version, or by listing
//! again when the restarted server answers 410 Gone), and a flip after the
//! restart still reaches the OperatorCondition; the check interval is 30 s,
//! so only the watch can make that quick.

use crate::support;

use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{ControlPlane, release_bin};
use support::resources::find;
use support::{RunningAgent, wait_for};

const NAME: &str = "demo-operator.v3.0.0";

#[test]
fn e2e_a_watch_broken_by_a_restart_resumes() {
    let mut cp = ControlPlane::start();
    cp.install_crd("foos.example.com");
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy("watch-restart");
    let ns = pod.namespace.clone();
    cp.apply_manifests("manifests/olm", &ns, &[]);
    cp.grant_operator_condition_as_olm(&ns, NAME);
    cp.create_operator_condition(&ns, NAME, &[]);
    for i in 0..20 {
        cp.create_foo(&ns, &format!("foo-{i}"), &[("Migrating", "False")]);
    }
    let mut env = cp.pod_env(&pod);
    env.push(("OPERATOR_CONDITION_NAME".into(), NAME.into()));
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let args = ["run", "--interval", "60s", "--check-interval", "30s", "--probe", probe, "--probe-namespace", &ns];
    let mut agent = RunningAgent::start(&release_bin(), &args, &env);
    let upgradeable = |cp: &ControlPlane, status: &str| {
        let oc = cp.operator_condition(&ns, NAME);
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == status).cloned()
    };
    let up = wait_for(Duration::from_secs(20), Duration::from_millis(100), || upgradeable(&cp, "True"));
    assert!(up.is_some(), "never Upgradeable=True\n{}", agent.stderr());

    cp.stop_apiserver();
    std::thread::sleep(Duration::from_secs(3));
    let back = SystemTime::now();
    cp.start_apiserver();

    // Flip as soon as the server is back; the watch may still be waiting
    // out its backoff (a few seconds after a 3 s outage).
    let started = Instant::now();
    cp.set_foo_conditions(&ns, "foo-7", &[("Migrating", "True")]);
    let blocked = wait_for(Duration::from_secs(40), Duration::from_millis(50), || upgradeable(&cp, "False"));
    assert!(blocked.is_some(), "the flip after the restart was never seen\n{}", agent.stderr());
    let seen = started.elapsed();

    // Once resumed, a flip is published within a second again.
    let started = Instant::now();
    cp.set_foo_conditions(&ns, "foo-7", &[("Migrating", "False")]);
    let flipped = cp.admin_request_time("patch", "/foos/foo-7/status");
    let up = wait_for(Duration::from_secs(10), Duration::from_millis(20), || upgradeable(&cp, "True"));
    assert!(up.is_some(), "the second flip was never seen\n{}", agent.stderr());
    let latency = cp.update_latency(&pod.user, "/operatorconditions/", flipped);
    assert!(latency <= Duration::from_secs(1), "published {latency:?} after the flip ({:?} polled)", started.elapsed());
    assert_eq!(agent.exited(), None);

    // It waits for a standby to take over (up to 20 s with 30 s checks).
    agent.signal("TERM");
    assert!(agent.wait_exit(Duration::from_secs(30)).is_some());
    let events = wait_for(Duration::from_secs(5), Duration::from_millis(100), || {
        let events = cp.audit_events(&pod.user);
        events.iter().any(|e| e.verb == "watch" && e.received >= back).then_some(events)
    })
    .expect("the resumed watch is audited once it ended");
    let after: Vec<_> = events.iter().filter(|e| e.uri.contains("/foos") && e.received >= back).collect();
    let lists = after.iter().filter(|e| e.verb == "list").count();
    let watches = after.iter().filter(|e| e.verb == "watch").count();
    assert!(watches >= 1 && lists <= 2, "{after:?}");
    println!(
        "e2e watch restart: the flip right after a 3 s outage seen in {seen:.1?}; after it, {lists} list(s) and \
         {watches} watch(es); the next flip written {latency:.2?} after it"
    );
}
