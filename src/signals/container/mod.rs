//! The operator container's own state as a signal (`--watch-container
//! NAME`): the sidecar's own Pod (`POD_NAME`), watched, and the named
//! container's restarts, `OOMKilled` last state and `CrashLoopBackOff`
//! reported as `degraded` with kubelet's words ([`judge`], pure), cleared
//! once it has run cleanly for a while.
//!
//! Cost: one watch on one Pod (`fieldSelector=metadata.name=`, never a
//! list of the namespace's pods), on a thread of its own with a client of
//! its own: a GET when the watch starts, then nothing until the Pod
//! changes or the watch ends on schedule (about every five minutes). A
//! standby watches nothing: only the publisher's status is read. It is not
//! a readiness matter: kubelet already restarts and unreadies the
//! container; the status says so for those who read it.

pub(crate) mod judge;

use super::{Observation, Signal};
use crate::kube::{Client, KubeError, Stop, Worker};
use crate::status::{Problem, Rule};
use crate::util::backoff::{Backoff, Jitter};
use crate::util::shutdown::Nudge;
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Where the permission to read the Pod is granted.
const GRANT: &str = "see manifests/components/opstatus-watch-container";

/// The watch's `timeoutSeconds`: how often a quiet Pod costs a request.
const WATCH_SECONDS: u64 = 300;

/// A watch that delivered nothing and ended sooner backs off.
const HEALTHY_WATCH: Duration = Duration::from_secs(10);

/// What the thread leaves for the agent's checks.
#[derive(Default)]
struct Shared {
    pod: Option<judge::Pod>,
    /// Why the Pod cannot be read now.
    problem: Option<String>,
}

/// The signal: the Pod it watches and the container it judges.
pub(crate) struct ContainerWatch {
    namespace: String,
    pod: String,
    container: String,
    /// Wakes the agent's loop when the Pod changed; `None` (`opstatus
    /// once`): each check reads the Pod once instead of watching it.
    nudge: Option<Nudge>,
    watcher: Option<PodWatcher>,
}

impl ContainerWatch {
    pub(crate) fn new(namespace: String, pod: String, container: String, nudge: Option<Nudge>) -> ContainerWatch {
        ContainerWatch { namespace, pod, container, nudge, watcher: None }
    }

    fn judge(&self, pod: Option<&judge::Pod>, problem: Option<&str>) -> Option<String> {
        let (ns, name) = (&self.namespace, &self.pod);
        if let Some(why) = problem {
            return Some(format!("Cannot watch the operator's Pod {ns}/{name}: {why}"));
        }
        let Some(pod) = pod else { return Some(format!("Pod {ns}/{name} does not exist")) };
        match judge::judge(pod, &self.container, SystemTime::now()) {
            Ok(verdict) => verdict,
            Err(why) => Some(format!("Pod {ns}/{name}: {why}")),
        }
    }
}

impl Signal for ContainerWatch {
    fn observe(&mut self, client: &mut Client, _now: Instant, into: &mut Observation) {
        let why = match &self.nudge {
            None => match read_pod(client, &self.namespace, &self.pod) {
                Ok((pod, _)) => self.judge(pod.as_ref(), None),
                Err(e) => self.judge(None, Some(&e.granted_by(GRANT).to_string())),
            },
            Some(nudge) => {
                if self.watcher.is_none() {
                    let watch = (self.namespace.clone(), self.pod.clone());
                    match PodWatcher::start(client.sibling(), watch, nudge.clone()) {
                        Ok(w) => self.watcher = Some(w),
                        Err(e) => log::warn!("Cannot start the thread that watches the operator's Pod: {e}"),
                    }
                }
                let Some(watcher) = &self.watcher else { return };
                let shared = watcher.shared.lock().unwrap_or_else(|p| p.into_inner());
                // Until the first read answered, nothing is said.
                if shared.pod.is_none() && shared.problem.is_none() && !watcher.read_once.load(Ordering::SeqCst) {
                    return;
                }
                self.judge(shared.pod.as_ref(), shared.problem.as_deref())
            }
        };
        into.problems.extend(why.map(|why| Problem::degraded(Rule::Container, why)));
    }

    fn waits_for_the_lock(&self) -> bool {
        true
    }

    fn stand_by(&mut self) {
        self.watcher = None;
    }

    fn worst_case(&self) -> Duration {
        crate::kube::call_bound()
    }
}

/// The Pod by name, and the `resourceVersion` to watch from: a list with
/// a field selector, which the watch needs (a Pod GET gives no list
/// version) and which `get`/`list`/`watch` on pods allows.
fn read_pod(client: &mut Client, ns: &str, pod: &str) -> Result<(Option<judge::Pod>, String), KubeError> {
    #[derive(Deserialize)]
    struct List {
        metadata: ListMeta,
        items: Vec<judge::Pod>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ListMeta {
        #[serde(default)]
        resource_version: String,
    }
    let path = format!("/api/v1/namespaces/{ns}/pods?fieldSelector=metadata.name%3D{pod}");
    let body = client.get_required(&path, &format!("list pods named {pod:?} in namespace {ns:?}"))?;
    let list: List = serde_json::from_slice(&body).map_err(|e| KubeError::Response {
        message: format!("the Pod list is {} (column {})", crate::lock::error_kind(&e), e.column()),
    })?;
    Ok((list.items.into_iter().next(), list.metadata.resource_version))
}

/// The agent's handle on the watch thread; dropping it stops the thread
/// and closes its connection at once ([`Worker`]).
struct PodWatcher {
    shared: Arc<Mutex<Shared>>,
    /// Whether a read of the Pod has answered at least once.
    read_once: Arc<AtomicBool>,
    _worker: Worker,
}

impl PodWatcher {
    fn start(client: Client, (ns, pod): (String, String), nudge: Nudge) -> std::io::Result<PodWatcher> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let read_once = Arc::new(AtomicBool::new(false));
        let (for_thread, read) = (shared.clone(), read_once.clone());
        let worker = Worker::spawn("pod-watch", client, move |client, stop| {
            Run { client, ns, pod, shared: for_thread, read_once: read, stop, nudge }.run();
        })?;
        Ok(PodWatcher { shared, read_once, _worker: worker })
    }
}

/// The thread's side.
struct Run {
    client: Client,
    ns: String,
    pod: String,
    shared: Arc<Mutex<Shared>>,
    read_once: Arc<AtomicBool>,
    stop: Stop,
    nudge: Nudge,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    object: Option<Box<serde_json::value::RawValue>>,
}

impl Run {
    fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    fn set(&self, pod: Option<Option<judge::Pod>>, problem: Option<String>) {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pod) = pod {
            shared.pod = pod;
        }
        shared.problem = problem;
        drop(shared);
        self.read_once.store(true, Ordering::SeqCst);
        self.nudge.nudge();
    }

    /// Read, then watch from there; again when the watch ends; after a
    /// failure or a watch that ended at once, after a jittered backoff.
    fn run(mut self) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        let mut jitter = Jitter::from_os();
        while !self.stopped() {
            let healthy = match self.read_and_watch() {
                Ok(healthy) => healthy,
                Err(e) => {
                    self.set(None, Some(e.granted_by(GRANT).to_string()));
                    false
                }
            };
            if healthy {
                backoff.reset();
            } else if !self.stopped() {
                std::thread::park_timeout(backoff.next_delay(jitter.next_u64(), None));
            }
        }
    }

    /// One read and one watch; `Ok(true)` when the watch was healthy
    /// (delivered an event or lasted [`HEALTHY_WATCH`]).
    fn read_and_watch(&mut self) -> Result<bool, KubeError> {
        let (pod, version) = read_pod(&mut self.client, &self.ns, &self.pod)?;
        self.set(Some(pod), None);
        let path = format!(
            "/api/v1/namespaces/{}/pods?watch=1&fieldSelector=metadata.name%3D{}&resourceVersion={version}\
             &timeoutSeconds={WATCH_SECONDS}",
            self.ns, self.pod
        );
        let action = format!("watch pods named {:?} in namespace {:?}", self.pod, self.ns);
        let lasting = Duration::from_secs(WATCH_SECONDS + 30);
        let mut stream = self.client.watch(&path, &action, lasting)?;
        let started = Instant::now();
        let mut delivered = false;
        let mut line = Vec::new();
        while !self.stopped() && stream.next_line(&mut line)? {
            let event: Event = serde_json::from_slice(&line).map_err(|e| KubeError::Response {
                message: format!("a Pod watch event is {} (column {})", crate::lock::error_kind(&e), e.column()),
            })?;
            let pod = || -> Result<judge::Pod, KubeError> {
                let raw = event.object.as_deref().map_or("{}", |o| o.get());
                serde_json::from_str(raw).map_err(|e| KubeError::Response {
                    message: format!("a watched Pod is {} (column {})", crate::lock::error_kind(&e), e.column()),
                })
            };
            match event.kind.as_str() {
                "ADDED" | "MODIFIED" => self.set(Some(Some(pod()?)), None),
                "DELETED" => self.set(Some(None), None),
                // 410 Gone and the like: read again.
                "ERROR" => return Ok(delivered),
                _ => continue,
            }
            delivered = true;
        }
        Ok(delivered || started.elapsed() >= HEALTHY_WATCH)
    }
}
