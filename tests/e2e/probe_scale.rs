//! End to end, real kube-apiserver: 2,000 Foos (`OPSTATUS_PROBE_SCALE_FOOS`
//! for another count). The probe lists them once, from the API server's
//! watch cache in one answer (`resourceVersion=0`, read as it arrives, so
//! one resource bounds the memory a list costs), then watches:
//! flipping `Migrating` on one of them moves `Upgradeable` on the
//! OperatorCondition within one second (timed on the API server's clock),
//! and with nothing changing the Foos cost no request at all for the
//! quiet period (the watch's `timeoutSeconds` is 300 to 360 s). The test
//! prints the latency, the requests and the process's peak RSS. First,
//! before OLM's CRD exists: the missing API is a clear `degraded` reason,
//! not a crash. That first step needs an API server without OLM's CRD,
//! which other tests install: this test has a control plane of its own.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{ControlPlane, release_bin};
use support::resources::{FOOS, condition, find};
use support::{RunningAgent, run_to_end, wait_for};

const NAME: &str = "demo-operator.v2.0.0";
const FOO_COUNT: usize = 2000;

/// How long nothing changes while the requests are counted.
const QUIET: Duration = Duration::from_secs(20);

#[test]
fn e2e_one_foo_among_thousands_moves_upgradeable() {
    let cp = ControlPlane::start();
    cp.install_crd("foos.example.com");
    let pod = cp.deploy("scale");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    cp.grant_operator_condition_as_olm(ns, NAME);
    let mut env = cp.pod_env(&pod);
    env.push(("OPERATOR_CONDITION_NAME".into(), NAME.into()));
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let args = ["--check-interval", "1s", "--probe", probe, "--probe-namespace", ns];

    // OLM is not installed yet: the status says so, the command still works.
    let once: Vec<&str> = ["once"].iter().chain(args.iter()).copied().collect();
    let out = run_to_end(&release_bin(), &once, &env, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let status = cp.status_document(ns, "kube9-operator-status").unwrap();
    assert_eq!(status["health"], "degraded");
    assert_eq!(status["error"], "The OperatorCondition API (operators.coreos.com/v2) is not served: is OLM installed?");

    cp.install_crd("operatorconditions.operators.coreos.com");
    cp.create_operator_condition(ns, NAME, &[]);
    let started = Instant::now();
    let foo_count: usize =
        std::env::var("OPSTATUS_PROBE_SCALE_FOOS").ok().and_then(|n| n.parse().ok()).unwrap_or(FOO_COUNT);
    // Eight clients at once: the API server, not one client's round trips,
    // sets the pace.
    let cp_ref = &cp;
    std::thread::scope(|scope| {
        for first in 0..8 {
            scope.spawn(move || {
                let mut admin = cp_ref.admin_client();
                let collection = format!("{FOOS}/namespaces/{ns}/foos");
                for i in (first..foo_count).step_by(8) {
                    let name = format!("foo-{i:04}");
                    let object = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name, "namespace": ns}, "spec": {}});
                    let created = admin.create(&collection, object.to_string().as_bytes(), "create foos").unwrap();
                    // The status update must carry the resourceVersion just created.
                    let mut with_status: serde_json::Value = serde_json::from_slice(&created).unwrap();
                    with_status["status"] = json!({"conditions": [condition("Migrating", "False")]});
                    admin
                        .put(&format!("{collection}/{name}/status"), with_status.to_string().as_bytes(), "update foos/status")
                        .unwrap();
                }
            });
        }
    });
    println!("created {foo_count} Foos with status in {:.1?}", started.elapsed());

    let mut agent = RunningAgent::start(&release_bin(), &[&["run", "--interval", "60s"][..], &args].concat(), &env);
    let upgradeable = || {
        let oc = cp.operator_condition(ns, NAME);
        find(&oc["spec"]["conditions"], "Upgradeable").cloned()
    };
    let up = wait_for(Duration::from_secs(60), Duration::from_millis(100), || {
        upgradeable().filter(|c| c["status"] == "True")
    });
    let up = up.unwrap_or_else(|| panic!("never Upgradeable=True: {:?}\n{}", upgradeable(), agent.stderr()));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({foo_count} checked)"));

    // Nothing changes for a while (the requests are counted at the end).
    let quiet_from = SystemTime::now();
    std::thread::sleep(QUIET);
    let quiet_until = SystemTime::now();

    let one = format!("foo-{:04}", foo_count * 617 / 1000);
    cp.set_foo_conditions(ns, &one, &[("Migrating", "True")]);
    let flipped = cp.admin_request_time("patch", &format!("/foos/{one}/status"));
    let blocked = wait_for(Duration::from_secs(30), Duration::from_millis(50), || {
        upgradeable().filter(|c| c["status"] == "False")
    });
    let blocked = blocked.unwrap_or_else(|| panic!("never Upgradeable=False\n{}", agent.stderr()));
    assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Foo {ns}/{one}: Migrating"));

    // Timed on the API server's clock (the audit log), not by polling.
    let latency = cp.update_latency(&pod.user, "/operatorconditions/", flipped);
    assert!(latency <= Duration::from_secs(1), "published {latency:?} after the flip");

    let peak = agent.peak_rss_kib();
    agent.assert_memory_bounded();
    assert_eq!(agent.exited(), None);
    // The audit log has a watch of a custom resource once it ended (v1.20
    // logs neither stage before): stop the agent, which ends its watch.
    agent.signal("TERM");
    assert!(agent.wait_exit(Duration::from_secs(5)).is_some());
    let events = wait_for(Duration::from_secs(5), Duration::from_millis(100), || {
        let events = cp.audit_events(&pod.user);
        events.iter().any(|e| e.verb == "watch").then_some(events)
    })
    .expect("the watch is audited once it ended");

    // `once`'s list before the Foos existed (the latest: a quorum read),
    // then one list from the watch cache and one watch from its version,
    // which lasted until the agent stopped.
    let foos: Vec<_> = events.iter().filter(|e| e.uri.contains("/foos")).collect();
    let during: Vec<_> = foos.iter().filter(|e| e.received >= quiet_from && e.received < quiet_until).collect();
    assert!(during.is_empty(), "requests on the Foos while nothing changed: {during:?}");
    let lists: Vec<_> = events.iter().filter(|e| e.verb == "list" && e.uri.contains("/foos")).collect();
    assert!(lists.iter().all(|e| e.code == 200), "{lists:?}");
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert!(lists[0].uri.ends_with("/foos?limit=500"), "once: the latest: {lists:?}");
    assert!(lists[1].uri.ends_with("/foos?limit=500&resourceVersion=0"), "the watch cache: {lists:?}");
    let watches: Vec<_> = foos.iter().filter(|e| e.verb == "watch").collect();
    assert_eq!(watches.len(), 1, "{watches:?}");
    let watch = &watches[0].uri;
    assert!(watch.contains("allowWatchBookmarks=true") && watch.contains("timeoutSeconds="), "{watch}");
    println!(
        "e2e scale: {foo_count} Foos; one list in one answer, one watch; \
         0 requests in {QUIET:?} with nothing changing; flip → Upgradeable=False written {latency:.2?} later; \
         opstatus peak RSS {peak} KiB"
    );
}
