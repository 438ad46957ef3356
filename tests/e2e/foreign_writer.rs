//! End to end, real kube-apiserver: another writer of the status
//! ConfigMap is not fought. The stand-in writes as kube9-operator's own
//! status writer does: as another user, on a loop, a GET and then a PUT
//! of the whole object (no annotations, its own status). opstatus says so
//! once (the log, `/metrics`, one Event, `opstatus get`), stops writing
//! the ConfigMap while the other writes, and takes it back once the
//! ConfigMap has been unchanged for its quiet period (five heartbeats:
//! 10 s at `--interval 2s`).

use crate::support;

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{release_bin, shared};
use support::events::{opstatus_events, summaries};
use support::http::{endpoint_from_log, get};
use support::run_args::Run;
use support::{run_to_end, wait_for};

const CM: &str = "kube9-operator-status";
const STANDIN_VERSION: &str = "9.9.9-standin";

/// One pass of the stand-in, as kube9-operator's writer makes it (a
/// client of its own, so a GET and a PUT a few milliseconds apart): GET,
/// then PUT of the whole object with its own status and without
/// opstatus's annotation. A 409 (opstatus wrote in between) is what the
/// real writer meets too: it tries again on its next pass.
fn replace_whole_object(client: &mut opstatus::testing::Client, ns: &str) -> bool {
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let Ok(Some(cm)) = client.get_path(&path, "get the status ConfigMap") else { return false };
    let cm: Value = serde_json::from_slice(&cm).unwrap();
    let status = json!({"mode": "operated", "tier": "free", "version": STANDIN_VERSION, "health": "healthy",
        "lastUpdate": support_time(), "registered": false, "error": null, "namespace": ns});
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM, "namespace": ns, "resourceVersion": cm["metadata"]["resourceVersion"],
                     "labels": cm["metadata"]["labels"]},
        "data": {"status": status.to_string()},
    });
    let put = format!("{path}?fieldManager=kube9-operator");
    client.put(&put, body.to_string().as_bytes(), "replace the status ConfigMap").is_ok()
}

fn support_time() -> String {
    opstatus::testing::format_rfc3339(SystemTime::now())
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn e2e_another_whole_object_writer_is_yielded_to_and_the_status_taken_back_when_it_stops() {
    let cp = shared();
    let pod = cp.deploy("foreign-writer");
    let ns = pod.namespace.clone();
    let agent = Run::every("2s").checks("1s").listen().start(&release_bin(), &cp.pod_env(&pod));
    let addr = wait_for(Duration::from_secs(10), Duration::from_millis(50), || endpoint_from_log(&agent.stderr()))
        .expect("the endpoint's address in the log");
    wait_for(Duration::from_secs(10), Duration::from_millis(100), || cp.status_document(&ns, CM))
        .expect("opstatus publishes");

    // The stand-in: a pass every 1.5 s, at most 60 passes, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let standin = {
        let (stop, ns) = (stop.clone(), ns.clone());
        std::thread::spawn(move || {
            let mut client = cp.admin_client();
            let mut replaced = 0;
            for _ in 0..60 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                replaced += usize::from(replace_whole_object(&mut client, &ns));
                std::thread::sleep(Duration::from_millis(1500));
            }
            replaced
        })
    };
    let warning = "Another writer replaces the status: field manager kube9-operator (Update)";
    wait_for(Duration::from_secs(15), Duration::from_millis(100), || agent.stderr().contains(warning).then_some(()))
        .unwrap_or_else(|| panic!("no warning naming the other writer:\n{}", agent.stderr()));
    let yielded = SystemTime::now();

    // While the other writes: not one write of opstatus's, one warning.
    std::thread::sleep(Duration::from_secs(12));
    let written_after = |t: SystemTime| {
        let ours = |e: &&support::control_plane::AuditEvent| e.verb == "patch" && e.code < 300 && e.received > t;
        cp.audit_events(&pod.user).iter().filter(ours).count()
    };
    assert_eq!(
        written_after(yielded + Duration::from_secs(1)),
        0,
        "opstatus fought the other writer:\n{}",
        agent.stderr()
    );
    assert_eq!(agent.stderr().matches(warning).count(), 1, "{}", agent.stderr());
    let doc = cp.status_document(&ns, CM).unwrap();
    assert_eq!(doc["version"], STANDIN_VERSION, "the other writer's status stands");
    let (_, metrics, _) = get(addr, "/metrics");
    assert_eq!(metric(&metrics, "opstatus_status_yielded"), Some(1.0), "{metrics}");
    assert_eq!(metric(&metrics, "opstatus_foreign_writer_yields_total"), Some(1.0), "{metrics}");
    let (_, status, _) = get(addr, "/status");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["yieldedTo"], "kube9-operator (Update)");
    let events = summaries(&opstatus_events(cp, &ns));
    let foreign: Vec<_> = events.iter().filter(|(_, reason, _)| reason == "ForeignWriter").collect();
    assert_eq!(foreign.len(), 1, "{events:?}");
    assert_eq!(foreign[0].0, "Warning");
    assert!(foreign[0].2.contains("kube9-operator (Update)"), "{:?}", foreign[0]);
    let args = ["get", "--kubeconfig", cp.kubeconfig(), "--namespace", &ns];
    let out = run_to_end(&release_bin(), &args, &[], Duration::from_secs(30));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("Written by:  kube9-operator (Update), not opstatus"), "{shown}");

    // The other writer stops: opstatus takes the status back after the
    // quiet period (10 s), and its lock with it.
    stop.store(true, Ordering::Relaxed);
    let passes = standin.join().unwrap();
    assert!(passes >= 5, "the stand-in replaced the ConfigMap only {passes} times");
    let stopped = Instant::now();
    let back = wait_for(Duration::from_secs(25), Duration::from_millis(200), || {
        cp.status_document(&ns, CM).filter(|d| d["version"] != STANDIN_VERSION)
    })
    .unwrap_or_else(|| panic!("opstatus did not take the status back:\n{}", agent.stderr()));
    let took = stopped.elapsed();
    assert!(took >= Duration::from_secs(8), "taken back after {took:?}, before the quiet period");
    assert_eq!(back["version"], "0.0.0-unknown");
    let cm = cp.configmap(&ns, CM).unwrap();
    assert!(cm["metadata"]["annotations"]["opstatus.kube9.dev/publisher"].is_string(), "{cm}");
    assert!(agent.stderr().contains("taking it back"), "{}", agent.stderr());
    let (_, metrics, _) = get(addr, "/metrics");
    assert_eq!(metric(&metrics, "opstatus_status_yielded"), Some(0.0), "{metrics}");
    println!(
        "e2e foreign writer: {passes} whole-object writes yielded to; status taken back {took:.2?} after they stopped"
    );
}
