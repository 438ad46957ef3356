//! End to end, real kube-apiserver: 2,000 Foos. Flipping `Migrating` on one
//! of them moves `Upgradeable` on the OperatorCondition within one check
//! interval plus one second; the list is paged (`limit` + `continue`), so
//! the process's peak RSS stays bounded by a page, which the test prints.
//! First, before OLM's CRD exists: the missing API is a clear `degraded`
//! reason, not a crash.

mod support;

use serde_json::json;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{release_bin, shared};
use support::resources::{FOOS, condition, find};
use support::{RunningAgent, run_to_end, wait_for};

const NAME: &str = "demo-operator.v2.0.0";
const FOO_COUNT: usize = 2000;

#[test]
fn e2e_one_foo_among_thousands_moves_upgradeable() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    let pod = cp.deploy("scale");
    let ns = pod.namespace.as_str();
    let subject = format!("namespace: {ns}");
    cp.apply_manifests("manifests/olm", ns, &[("namespace: kube9-system", &subject)]);
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
    let mut admin = cp.admin_client();
    for i in 0..FOO_COUNT {
        let name = format!("foo-{i:04}");
        let object = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name, "namespace": ns}, "spec": {}});
        let collection = format!("{FOOS}/namespaces/{ns}/foos");
        let created = admin.create(&collection, object.to_string().as_bytes(), "create foos").unwrap();
        // The status update must carry the resourceVersion just created.
        let mut with_status: serde_json::Value = serde_json::from_slice(&created).unwrap();
        with_status["status"] = json!({"conditions": [condition("Migrating", "False")]});
        admin
            .put(&format!("{collection}/{name}/status"), with_status.to_string().as_bytes(), "update foos/status")
            .unwrap();
    }
    println!("created {FOO_COUNT} Foos with status in {:.1?}", started.elapsed());

    let mut agent = RunningAgent::start(&release_bin(), &[&["run", "--interval", "60s"][..], &args].concat(), &env);
    let upgradeable = || {
        let oc = cp.operator_condition(ns, NAME);
        find(&oc["spec"]["conditions"], "Upgradeable").cloned()
    };
    let up = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        upgradeable().filter(|c| c["status"] == "True")
    });
    let up = up.unwrap_or_else(|| panic!("never Upgradeable=True: {:?}\n{}", upgradeable(), agent.stderr()));
    assert_eq!(up["message"], format!("No resource blocks an upgrade ({FOO_COUNT} checked)"));

    cp.set_foo_conditions(ns, "foo-1234", &[("Migrating", "True")]);
    let flipped = cp.admin_request_time("patch", "/foos/foo-1234/status");
    let blocked = wait_for(Duration::from_secs(30), Duration::from_millis(50), || {
        upgradeable().filter(|c| c["status"] == "False")
    });
    let blocked = blocked.unwrap_or_else(|| panic!("never Upgradeable=False\n{}", agent.stderr()));
    assert_eq!(blocked["message"], format!("Upgrade blocked by 1 resource: Foo {ns}/foo-1234: Migrating"));

    // Timed on the API server's clock (the audit log), not by polling.
    let latency = cp.update_latency(&pod.user, "/operatorconditions/", flipped);
    assert!(latency <= Duration::from_secs(2), "published {latency:?} after the flip (check interval 1 s + 1 s)");

    // Each check pages through the Foos: 2,000 / 250 = 8 lists. (The first
    // list is `once`'s, before the Foos existed; the last check may still
    // be running.)
    let events = cp.audit_events(&pod.user);
    let lists: Vec<_> = events.iter().filter(|e| e.verb == "list" && e.uri.contains("/foos")).collect();
    assert!(lists.iter().all(|e| e.uri.contains("limit=250") && e.code == 200));
    let mut checks: Vec<Vec<SystemTime>> = Vec::new();
    for e in lists.iter().skip(1) {
        if !e.uri.contains("continue=") {
            checks.push(Vec::new());
        }
        checks.last_mut().expect("a check starts with a first page").push(e.received);
    }
    let complete = &checks[..checks.len() - 1];
    assert!(!complete.is_empty() && complete.iter().all(|pages| pages.len() == 8), "{checks:?}");
    let mut spans: Vec<Duration> =
        complete.iter().map(|pages| pages[7].duration_since(pages[0]).unwrap_or_default()).collect();
    spans.sort();

    let peak = agent.peak_rss_kib();
    println!(
        "e2e scale: {FOO_COUNT} Foos; {} full checks of 8 pages, first to last page {:.0?} (median); \
         flip → Upgradeable=False written {latency:.2?} later; opstatus peak RSS {peak} KiB",
        complete.len(),
        spans[spans.len() / 2]
    );
    agent.assert_memory_bounded();
    assert_eq!(agent.exited(), None);
}
