//! The operator container's own state as a signal (`--watch-container
//! NAME`): the sidecar's own Pod (`POD_NAME`), watched, and the named
//! container's restarts, `OOMKilled` last state and `CrashLoopBackOff`
//! reported as `degraded` with kubelet's words ([`judge`], pure), cleared
//! once it has run cleanly for a while.
//!
//! Cost: one watch on one Pod (`fieldSelector=metadata.name=`, never a
//! list of the namespace's pods), on a thread of its own with a client of
//! its own: a list by that name when the watch starts, then nothing until
//! the Pod changes or the watch ends on schedule (about every five
//! minutes), when the next one starts from the last version seen. It is
//! the probes' list-then-watch machine ([`crate::kube::reflector`]): a
//! watch the server ends, or whose connection is closed under it, is no
//! problem; a refused one is, after a jittered backoff. Of the Pod only the
//! containers' statuses are read, parsed as the answer arrives, kubelet's
//! words cut as they are read, and only the named one kept ([`pod`]).
//! A standby watches nothing: only the publisher's
//! status is read. It is not a readiness matter: kubelet already restarts
//! and unreadies the container; the status says so for those who read it.

pub(crate) mod judge;
pub(crate) mod pod;

use super::{Observation, Signal};
use crate::kube::reflector::{self, Ended, Event, Reflect, SILENCE_MARGIN, WATCH_SECONDS, WatchHealth};
use crate::kube::{Client, KubeError, Stop, WatchStream, Worker};
use crate::status::{Problem, Rule};
use crate::util::backoff::Jitter;
use crate::util::shutdown::Nudge;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Where the permission to read the Pod is granted.
const GRANT: &str = "see manifests/components/opstatus-watch-container";

/// What the thread leaves for the agent's checks.
#[derive(Default)]
struct Shared {
    /// The Pod as last read (`Some(None)`: it does not exist); `None`
    /// until a read answered.
    pod: Option<Option<judge::Pod>>,
    /// Why the Pod cannot be read now, and since when its watch is open.
    health: WatchHealth,
}

/// The signal: the Pod it watches and the container it judges.
pub(crate) struct ContainerWatch {
    namespace: String,
    pod: String,
    container: String,
    /// How long the container must run after a restart to count as well.
    clean_run: Duration,
    /// Wakes the agent's loop when the Pod changed; `None` (`opstatus
    /// once`): each check reads the Pod once instead of watching it.
    nudge: Option<Nudge>,
    watcher: Option<PodWatcher>,
}

impl ContainerWatch {
    pub(crate) fn new(
        namespace: String,
        pod: String,
        container: String,
        clean_run: Duration,
        nudge: Option<Nudge>,
    ) -> ContainerWatch {
        ContainerWatch { namespace, pod, container, clean_run, nudge, watcher: None }
    }

    fn judge(&self, pod: Option<&judge::Pod>, problem: Option<&str>) -> Option<String> {
        let (ns, name) = (&self.namespace, &self.pod);
        if let Some(why) = problem {
            return Some(format!("Cannot watch the operator's Pod {ns}/{name}: {why}"));
        }
        let Some(pod) = pod else { return Some(format!("Pod {ns}/{name} does not exist")) };
        match judge::judge(pod, &self.container, self.clean_run, SystemTime::now()) {
            Ok(verdict) => verdict,
            Err(why) => Some(format!("Pod {ns}/{name}: {why}")),
        }
    }
}

impl Signal for ContainerWatch {
    fn observe(&mut self, client: &mut Client, _now: Instant, into: &mut Observation) {
        let why = match &self.nudge {
            None => match read_pod(client, &self.namespace, &self.pod, &self.container) {
                Ok((pod, _)) => self.judge(pod.as_ref(), None),
                Err(e) => self.judge(None, Some(&e.granted_by(GRANT).to_string())),
            },
            Some(nudge) => {
                if self.watcher.is_none() {
                    let watch = (self.namespace.clone(), self.pod.clone(), self.container.clone());
                    match PodWatcher::start(client.sibling(), watch, nudge.clone()) {
                        Ok(w) => self.watcher = Some(w),
                        Err(e) => log::warn!("Cannot start the thread that watches the operator's Pod: {e}"),
                    }
                }
                let Some(watcher) = &self.watcher else { return };
                let shared = watcher.shared.lock().unwrap_or_else(|p| p.into_inner());
                // Until the first read answered, nothing is said.
                if shared.pod.is_none() && shared.health.problem.is_none() {
                    return;
                }
                let pod = shared.pod.as_ref().and_then(Option::as_ref);
                self.judge(pod, shared.health.problem_at(Instant::now()).map(String::as_str))
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

/// The Pod by name (its named container only), and the `resourceVersion`
/// to watch from: a list with a field selector, which the watch needs (a
/// Pod GET gives no list version) and which `list`/`watch` on pods allows.
fn read_pod(
    client: &mut Client,
    ns: &str,
    pod: &str,
    container: &str,
) -> Result<(Option<judge::Pod>, String), KubeError> {
    let path = format!("/api/v1/namespaces/{ns}/pods?fieldSelector=metadata.name%3D{pod}");
    let mut answer = client.get_stream(&path, &format!("list pods named {pod:?} in namespace {ns:?}"))?;
    let unreadable = |what: String| KubeError::Response { message: format!("the Pod list is {what}") };
    let read = match answer.next_value(pod::PodList(container))? {
        Some(Ok(read)) => read,
        Some(Err(e)) => return Err(unreadable(format!("{} (column {})", crate::lock::error_kind(&e), e.column()))),
        None => return Err(unreadable("empty".into())),
    };
    answer.finish();
    Ok(read)
}

/// The agent's handle on the watch thread; dropping it stops the thread
/// and closes its connection at once ([`Worker`]).
struct PodWatcher {
    shared: Arc<Mutex<Shared>>,
    _worker: Worker,
}

impl PodWatcher {
    fn start(
        client: Client,
        (ns, pod, container): (String, String, String),
        nudge: Nudge,
    ) -> std::io::Result<PodWatcher> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let for_thread = shared.clone();
        let worker = Worker::spawn("pod-watch", client, move |client, stop| {
            let mut run = Run { client, ns, pod, container, shared: for_thread, stop, nudge };
            reflector::drive(&mut run, &mut Jitter::from_os());
        })?;
        Ok(PodWatcher { shared, _worker: worker })
    }
}

/// The thread's side.
struct Run {
    client: Client,
    ns: String,
    pod: String,
    container: String,
    shared: Arc<Mutex<Shared>>,
    stop: Stop,
    nudge: Nudge,
}

impl Run {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Pod as last seen (`None`: it does not exist).
    fn set_pod(&self, pod: Option<judge::Pod>) {
        self.lock().pod = Some(pod);
        self.nudge.nudge();
    }
}

impl Reflect for Run {
    fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    fn list(&mut self, version: &mut String) -> Ended {
        match read_pod(&mut self.client, &self.ns, &self.pod, &self.container) {
            Ok((pod, listed)) => {
                *version = listed;
                self.set_pod(pod);
                Ended::Listed
            }
            Err(e) => Ended::ListFailed { retry_after: e.retry_after(), error: e.granted_by(GRANT).to_string() },
        }
    }

    fn open(&mut self, version: &str) -> Result<WatchStream, KubeError> {
        let path = format!(
            "/api/v1/namespaces/{}/pods?watch=1&fieldSelector=metadata.name%3D{}&resourceVersion={}\
             &allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}",
            self.ns,
            self.pod,
            percent_encoding::utf8_percent_encode(version, percent_encoding::NON_ALPHANUMERIC)
        );
        let action = format!("watch pods named {:?} in namespace {:?}", self.pod, self.ns);
        let lasting = Duration::from_secs(WATCH_SECONDS) + SILENCE_MARGIN;
        self.client.watch(&path, &action, lasting).map_err(|e| e.granted_by(GRANT))
    }

    fn next_event(&mut self, stream: &mut WatchStream, version: &mut String) -> Result<Option<Event>, KubeError> {
        let Some(event) = stream.next_value(pod::WatchEvent(&self.container))? else { return Ok(None) };
        let applied = Event::Applied { relist: false };
        Ok(Some(match event {
            Ok(pod::Event::Changed(pod, at)) => {
                *version = at;
                self.set_pod(Some(*pod));
                applied
            }
            Ok(pod::Event::Deleted(at)) => {
                *version = at;
                self.set_pod(None);
                applied
            }
            Ok(pod::Event::Bookmark(at)) => {
                *version = at;
                applied
            }
            Ok(pod::Event::Error { code: Some(410), .. }) => Event::Gone,
            Ok(pod::Event::Error { code, message }) => {
                let message = crate::util::text::sanitize(&message, crate::util::text::MAX_FOREIGN);
                let code = code.map(|c| format!(" ({c})")).unwrap_or_default();
                Event::Failed(format!("the watch ended with an error{code}: {message}"))
            }
            Ok(pod::Event::Other) => Event::Skipped,
            Err(e) => {
                Event::Failed(format!("a watched Pod is {} (column {})", crate::lock::error_kind(&e), e.column()))
            }
        }))
    }

    /// The words the signal says it with are its own ([`ContainerWatch`]).
    fn trouble(&self, why: &dyn std::fmt::Display) -> String {
        why.to_string()
    }

    fn health<R>(&self, f: impl FnOnce(&mut WatchHealth) -> R) -> R {
        f(&mut self.lock().health)
    }

    fn reported(&self, _: &Option<String>) {
        self.nudge.nudge();
    }
}
