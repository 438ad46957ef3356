//! End to end, real kube-apiserver: another writer of the status
//! ConfigMap is not fought. The stand-in writes as kube9-operator's own
//! status writer does: as another user, on a loop, a GET and then a PUT
//! of the whole object (no annotations, its own status, a fresh
//! `lastUpdate`). opstatus says so once (the log, `/metrics`, one Event,
//! `opstatus get`), and no instance writes the ConfigMap while the other
//! writes — two replicas, one of them restarted, included — nor acts as
//! publisher anywhere else. It takes the status back a quiet period (five
//! heartbeats: 10 s at `--interval 2s`) after the other writer's last
//! write, and before readers would call the status that writer left stale
//! (an edit that keeps an old `lastUpdate`); a controller that stamps an
//! annotation meanwhile changes nothing of that.

use crate::support;

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use support::control_plane::{AuditEvent, ControlPlane, Deployed, release_bin, shared};
use support::events::{opstatus_events, summaries};
use support::http::{endpoint_from_log, get};
use support::replicas::{another_replica, replica_env};
use support::run_args::Run;
use support::{RunningAgent, run_to_end, wait_for};

const CM: &str = "kube9-operator-status";
const STANDIN_VERSION: &str = "9.9.9-standin";

/// One pass of the stand-in, as kube9-operator's writer makes it (a
/// client of its own, so a GET and a PUT a few milliseconds apart): GET,
/// then PUT of the whole object with its own status and without
/// opstatus's annotation. A 409 (opstatus wrote in between) is what the
/// real writer meets too: it tries again on its next pass.
fn replace_whole_object(client: &mut opstatus::testing::Client, ns: &str, age: Duration) -> bool {
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let Ok(Some(cm)) = client.get_path(&path, "get the status ConfigMap") else { return false };
    let cm: Value = serde_json::from_slice(&cm).unwrap();
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM, "namespace": ns, "resourceVersion": cm["metadata"]["resourceVersion"],
                     "labels": cm["metadata"]["labels"]},
        "data": {"status": standin_status(ns, SystemTime::now() - age).to_string()},
    });
    let put = format!("{path}?fieldManager=kube9-operator");
    client.put(&put, body.to_string().as_bytes(), "replace the status ConfigMap").is_ok()
}

fn standin_status(ns: &str, last_update: SystemTime) -> Value {
    json!({"mode": "operated", "tier": "free", "version": STANDIN_VERSION, "health": "healthy",
        "lastUpdate": opstatus::testing::format_rfc3339(last_update), "registered": false, "error": null,
        "namespace": ns})
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// The stand-in on a thread: a pass every `every`, at most `passes`, until
/// stopped. [`StandIn::stop`] gives when each of its writes went through.
struct StandIn {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<SystemTime>>,
}

impl StandIn {
    fn start(cp: &'static ControlPlane, ns: &str, every: Duration, passes: usize) -> StandIn {
        StandIn::stamping(cp, ns, every, passes, Duration::ZERO)
    }

    /// A stand-in whose status's `lastUpdate` is `age` old when written.
    fn stamping(cp: &'static ControlPlane, ns: &str, every: Duration, passes: usize, age: Duration) -> StandIn {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, ns) = (stop.clone(), ns.to_string());
        let thread = std::thread::spawn(move || {
            let mut client = cp.admin_client();
            let mut written = Vec::new();
            for _ in 0..passes {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if replace_whole_object(&mut client, &ns, age) {
                    written.push(SystemTime::now());
                }
                std::thread::sleep(every);
            }
            written
        });
        StandIn { stop, thread }
    }

    fn stop(self) -> Vec<SystemTime> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }

    /// Waits for its last pass.
    fn finish(self) -> Vec<SystemTime> {
        self.thread.join().unwrap()
    }
}

/// What readers saw, sampled every 250 ms (at most 10 minutes) until
/// stopped: when, the status's version, and whether a reader calls it
/// stale (`opstatus get`'s rules, the kube9 extension's).
struct Readers {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(SystemTime, String, bool)>>,
}

impl Readers {
    fn start(cp: &'static ControlPlane, ns: &str) -> Readers {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, path) = (stop.clone(), format!("/api/v1/namespaces/{ns}/configmaps/{CM}"));
        let thread = std::thread::spawn(move || {
            let mut client = cp.admin_client();
            let mut seen = Vec::new();
            for _ in 0..2400 {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(Some(cm)) = client.get_path(&path, "read the status as readers do") {
                    let cm: Value = serde_json::from_slice(&cm).unwrap();
                    if let Some(text) = cm["data"]["status"].as_str() {
                        let now = SystemTime::now();
                        let reading = opstatus::testing::interpret(Some(text), now).unwrap();
                        let version = reading.status.map(|s| s.version).unwrap_or_default();
                        seen.push((now, version, reading.stale));
                    }
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            seen
        });
        Readers { stop, thread }
    }

    fn stop(self) -> Vec<(SystemTime, String, bool)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// opstatus's writes of the status ConfigMap (PATCHes that went through)
/// by `users`, received between `from` and `to`.
fn status_writes(cp: &ControlPlane, users: &[&str], from: SystemTime, to: SystemTime) -> Vec<AuditEvent> {
    let ours = |e: &AuditEvent| {
        e.verb == "patch"
            && e.code < 300
            && e.uri.contains(&format!("/configmaps/{CM}"))
            && (from..=to).contains(&e.received)
    };
    users.iter().flat_map(|u| cp.audit_events(u)).filter(ours).collect()
}

/// Starts `run` as a fresh deployment's opstatus (in a namespace named
/// after `label`) and waits until it has published: its deployment and
/// agent.
fn publishing(cp: &'static ControlPlane, label: &str, run: Run) -> (Deployed, RunningAgent) {
    let pod = cp.deploy(label);
    let agent = run.start(&release_bin(), &cp.pod_env(&pod));
    wait_for(Duration::from_secs(10), Duration::from_millis(100), || cp.status_document(&pod.namespace, CM))
        .expect("opstatus publishes");
    (pod, agent)
}

/// The probe endpoint's address, from the log of an agent run with
/// `Run::listen`.
fn endpoint(agent: &RunningAgent) -> std::net::SocketAddr {
    wait_for(Duration::from_secs(10), Duration::from_millis(50), || endpoint_from_log(&agent.stderr()))
        .expect("the endpoint's address in the log")
}

#[test]
fn e2e_another_whole_object_writer_is_yielded_to_and_the_status_taken_back_when_it_stops() {
    let cp = shared();
    let (pod, agent) = publishing(cp, "foreign-writer", Run::every("2s").checks("1s").listen());
    let ns = pod.namespace.clone();
    let addr = endpoint(&agent);

    // The stand-in: a pass every 1.5 s, at most 60 passes, until told to stop.
    let standin = StandIn::start(cp, &ns, Duration::from_millis(1500), 60);
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
    let passes = standin.stop().len();
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
    assert!(agent.logged("taking it back"), "{}", agent.stderr());
    let (_, metrics, _) = get(addr, "/metrics");
    assert_eq!(metric(&metrics, "opstatus_status_yielded"), Some(0.0), "{metrics}");
    println!(
        "e2e foreign writer: {passes} whole-object writes yielded to; status taken back {took:.2?} after they stopped"
    );
}

/// The status back from the stand-in: when readers first saw opstatus's.
fn taken_back(cp: &ControlPlane, ns: &str, within: Duration) -> Option<SystemTime> {
    wait_for(within, Duration::from_millis(200), || {
        cp.status_document(ns, CM).filter(|d| d["version"] != STANDIN_VERSION).map(|_| SystemTime::now())
    })
}

const YIELD_WARNING: &str = "Another writer replaces the status: field manager kube9-operator (Update)";

/// Two replicas (each with a ClusterOperator to keep) beside a writer that
/// replaces the whole object every 3 s: both stand by and neither writes
/// anything, the holder included (no ClusterOperator request,
/// `opstatus_publisher` 0); a new pod of a rolling update, started while
/// the other writer writes, yields too. Once it stops, the status is back
/// after the quiet period, and readers never saw it stale.
#[test]
fn e2e_two_replicas_and_a_restarted_one_leave_a_whole_object_writer_alone_then_take_the_status_back() {
    let cp = shared();
    let pod = cp.deploy("foreign-replicas");
    let ns = pod.namespace.clone();
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    let name = format!("foreign-replicas-{ns}");
    cp.install_crd("clusteroperators.config.openshift.io");
    cp.apply_manifests("manifests/openshift", &ns, &[("demo-operator", &name)]);
    cp.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &format!("opstatus-b-{ns}"),
        &format!("--clusterrole=opstatus-cluster-operator-{ns}"),
        &format!("--serviceaccount={ns}:opstatus-b"),
    ]);
    let run = Run::every("2s").checks("1s").listen().flag("--cluster-operator", &name);
    let a = run.start(&release_bin(), &replica_env(cp, &pod.sa, "pod-a"));
    assert!(a.logged_within("Publishing as pod-a", Duration::from_secs(10)), "{}", a.stderr());
    let b = run.start(&release_bin(), &replica_env(cp, &sa_b, "pod-b"));
    assert!(b.logged_within("Standing by: pod-a publishes", Duration::from_secs(10)), "{}", b.stderr());
    let readers = Readers::start(cp, &ns);
    let standin = StandIn::start(cp, &ns, Duration::from_secs(3), 12);

    // What each says once the holder met the other writer (asserted
    // below, after what counts most: whether anyone fought it).
    let a_yielded = a.logged_within(YIELD_WARNING, Duration::from_secs(15));
    let b_yielded = b.logged_within(YIELD_WARNING, Duration::from_secs(5));
    let both_yielded = SystemTime::now();
    std::thread::sleep(Duration::from_secs(3));
    let metrics: Vec<_> = [&a, &b]
        .iter()
        .map(|agent| {
            let (_, metrics, _) = get(endpoint_from_log(&agent.stderr()).unwrap(), "/metrics");
            (metric(&metrics, "opstatus_publisher"), metric(&metrics, "opstatus_status_yielded"))
        })
        .collect();
    // A rolling update replaces pod-a while the other writer writes on.
    a.signal("KILL");
    let a_log = a.stderr();
    drop(a);
    let a2 = run.start(&release_bin(), &replica_env(cp, &pod.sa, "pod-a2"));
    let a2_yielded = a2.logged_within(YIELD_WARNING, Duration::from_secs(15));
    let writes = standin.finish();
    assert!(writes.len() >= 8, "the stand-in replaced the ConfigMap only {} times", writes.len());
    let (first, last) = (writes[0], *writes.last().unwrap());
    let users = [pod.user.as_str(), user_b.as_str()];
    let fought = status_writes(cp, &users, first, last + Duration::from_secs(1));
    let takeovers: usize = [&a_log, &b.stderr(), &a2.stderr()].iter().map(|l| l.matches("Publishing as").count()).sum();
    assert!(
        fought.is_empty(),
        "opstatus wrote over the other writer {} times while it wrote {} times ({takeovers} times publishing)",
        fought.len(),
        writes.len()
    );
    assert!(a_yielded && b_yielded && a2_yielded, "{a_log}\n{}\n{}", b.stderr(), a2.stderr());
    assert_eq!(metrics, [(Some(0.0), Some(1.0)); 2], "opstatus_publisher and opstatus_status_yielded while yielding");
    let sink_requests: Vec<_> = users
        .iter()
        .flat_map(|u| cp.audit_events(u))
        .filter(|e| e.uri.contains("clusteroperators") && e.received > both_yielded + Duration::from_secs(1))
        .filter(|e| e.received < last)
        .collect();
    assert!(sink_requests.is_empty(), "a yielding instance kept the ClusterOperator: {sink_requests:?}");

    // The writer stopped: the status is back after the quiet period (10 s).
    let back = taken_back(cp, &ns, Duration::from_secs(40));
    let seen = readers.stop();
    let back = back.unwrap_or_else(|| panic!("not taken back:\n{}\n{}", b.stderr(), a2.stderr()));
    let took = back.duration_since(last).unwrap();
    assert!(took >= Duration::from_secs(8), "taken back {took:?} after the last write, before the quiet period");
    assert!(took <= Duration::from_secs(25), "taken back {took:?} after the last write");
    let stale = seen.iter().filter(|(_, _, stale)| *stale).count();
    let undone =
        seen.iter().filter(|(t, v, _)| *t > first + Duration::from_secs(1) && *t < last && v != STANDIN_VERSION);
    let undone = undone.count();
    assert_eq!((stale, undone), (0, 0), "readers saw a stale status or opstatus's amid the other writer's");
    println!(
        "e2e foreign writer, two replicas and a restart: {} foreign writes, {} undone, {undone} reads of opstatus's \
         status amid them, {takeovers} times publishing; taken back {took:.1?} after the last; {stale} stale reads \
         of {}",
        writes.len(),
        fought.len(),
        seen.len()
    );
}

/// At the 60 s default, a `kubectl edit`-style patch (its own field
/// manager) leaves a status stamped 230 s before: readers would call it
/// stale 70 s later. opstatus's next heartbeat meets it; the status is
/// opstatus's again before it turns stale, counted from its own
/// `lastUpdate`.
#[test]
fn e2e_an_edit_that_keeps_an_old_last_update_is_taken_back_before_readers_call_it_stale() {
    let cp = shared();
    let (pod, agent) = publishing(cp, "foreign-edit", Run::default_interval().checks("1s"));
    let ns = pod.namespace.clone();
    let readers = Readers::start(cp, &ns);
    let edited = SystemTime::now();
    let stamped = edited - Duration::from_secs(230);
    let body = json!({"data": {"status": standin_status(&ns, stamped).to_string()}});
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}?fieldManager=kubectl-edit");
    cp.admin_client().merge_patch(&path, body.to_string().as_bytes(), "edit the status").unwrap();
    let stale_at = stamped + opstatus_stale_after();

    let back = taken_back(cp, &ns, Duration::from_secs(100));
    std::thread::sleep(Duration::from_secs(1));
    let seen = readers.stop();
    let stale: Vec<_> = seen.iter().filter(|(_, _, stale)| *stale).map(|(t, _, _)| *t).collect();
    let stale_for = stale.last().map(|t| t.duration_since(stale[0]).unwrap_or_default());
    assert!(stale.is_empty(), "readers saw the status stale for {stale_for:?}:\n{}", agent.stderr());
    let back = back.unwrap_or_else(|| panic!("not taken back within 100 s:\n{}", agent.stderr()));
    let took = back.duration_since(edited).unwrap();
    let room = stale_at.duration_since(back).unwrap_or_default();
    println!(
        "e2e edit with an old lastUpdate: taken back {took:.1?} after the edit, {room:.1?} before it would be stale"
    );
}

/// When readers call a status stale (the spec's 5 minutes).
fn opstatus_stale_after() -> Duration {
    Duration::from_secs(300)
}

/// A controller that stamps an annotation every 2 s under its own field
/// manager changes the object, not the status: the quiet period still
/// ends 10 s after the other writer's last write.
#[test]
fn e2e_a_controller_stamping_an_annotation_does_not_keep_opstatus_yielded() {
    let cp = shared();
    let (pod, agent) = publishing(cp, "foreign-stamped", Run::every("2s").checks("1s"));
    let ns = pod.namespace.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let stamper = {
        let (stop, path) = (stop.clone(), format!("/api/v1/namespaces/{ns}/configmaps/{CM}?fieldManager=stamper"));
        std::thread::spawn(move || {
            let mut client = cp.admin_client();
            let mut stamps = Vec::new();
            for n in 0..40 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let body = json!({"metadata": {"annotations": {"example.com/stamped": n.to_string()}}});
                if client.merge_patch(&path, body.to_string().as_bytes(), "stamp the ConfigMap").is_ok() {
                    stamps.push(SystemTime::now());
                }
                std::thread::sleep(Duration::from_secs(2));
            }
            stamps
        })
    };
    let writes = StandIn::start(cp, &ns, Duration::from_millis(1500), 5).finish();
    assert!(agent.logged(YIELD_WARNING), "{}", agent.stderr());
    let last = *writes.last().expect("the stand-in wrote");
    let back = taken_back(cp, &ns, Duration::from_secs(30));
    stop.store(true, Ordering::Relaxed);
    let stamps = stamper.join().unwrap();
    let back = back.unwrap_or_else(|| panic!("kept yielded while the annotation was stamped:\n{}", agent.stderr()));
    let took = back.duration_since(last).unwrap();
    let stamped_meanwhile = stamps.iter().filter(|t| **t > last && **t < back).count();
    assert!(stamped_meanwhile >= 3, "the stamper stamped {stamped_meanwhile} times before the status was back");
    assert!(took <= Duration::from_secs(25), "taken back {took:?} after the last write");
    println!(
        "e2e stamped annotation: taken back {took:.1?} after the last write, {stamped_meanwhile} stamps meanwhile"
    );
}

/// A writer that replaces the whole ConfigMap every 3 s with a status an
/// hour old: readers call that stale, so opstatus writes its own over it
/// (as often as its heartbeat comes), and says so once: the log, `/status`,
/// one Event, a metric.
#[test]
fn e2e_a_writer_of_a_stale_status_is_written_over_and_said_once() {
    let cp = shared();
    let (pod, agent) = publishing(cp, "foreign-stale", Run::every("2s").checks("1s").listen());
    let ns = pod.namespace.clone();
    let addr = endpoint(&agent);
    let from = SystemTime::now();
    let standin = StandIn::stamping(cp, &ns, Duration::from_secs(3), 10, Duration::from_secs(3600));
    // `/status` says so while the other writer is there (the episode ends
    // a quiet period after its last write).
    let overwriting = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        let status: Value = serde_json::from_str(&get(addr, "/status").1).ok()?;
        status["overwriting"].as_str().map(String::from)
    });
    assert_eq!(overwriting.as_deref(), Some("kube9-operator (Update)"), "{}", agent.stderr());
    let passes = standin.finish().len();
    std::thread::sleep(Duration::from_secs(3));
    let log = agent.stderr();
    let warning = "Another writer keeps writing a stale status: field manager kube9-operator (Update)";
    assert_eq!(log.matches(warning).count(), 1, "said once:\n{log}");
    assert!(!log.contains("Another writer replaces the status"), "not yielded to:\n{log}");
    let written = status_writes(cp, &[&pod.user], from, SystemTime::now()).len();
    assert!(written >= 5, "opstatus took its status back only {written} times");
    let doc = cp.status_document(&ns, CM).unwrap();
    assert_ne!(doc["version"], STANDIN_VERSION, "opstatus's status stands: {doc}");
    let (_, metrics, _) = get(addr, "/metrics");
    assert_eq!(metric(&metrics, "opstatus_foreign_writer_overwrites_total"), Some(1.0), "{metrics}");
    assert_eq!(metric(&metrics, "opstatus_foreign_writer_yields_total"), Some(0.0), "{metrics}");
    let events = summaries(&opstatus_events(cp, &ns));
    let foreign: Vec<_> = events.iter().filter(|(_, reason, _)| reason == "ForeignWriter").collect();
    assert_eq!(foreign.len(), 1, "{events:?}");
    assert!(foreign[0].2.contains("stale to readers"), "{:?}", foreign[0]);
    println!(
        "e2e stale foreign writer: {passes} whole-object writes of an hour-old status; opstatus wrote over them \
         {written} times and said so once"
    );
}
