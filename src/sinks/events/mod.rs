//! Kubernetes Events (core `v1`, what `kubectl describe` and client-go's
//! recorder use) on each change a person would want to find later: a
//! published health transition, an `Upgradeable` flip, this instance
//! taking the publisher lock over.
//!
//! Not a [`super::Sink`]: a sink is given every check's verdict *as it
//! would be published* and its failure becomes a `degraded` problem. An
//! event must follow what *was* published (the agent tells the
//! [`Recorder`] after a successful status write), and failing to record
//! one must never touch health: it is logged once per change, counted in
//! `/metrics`, and that is all.
//!
//! Cost: nothing per heartbeat. An occurrence passes the token bucket or
//! is dropped (counted, logged once per flapping episode); what passes is
//! queued and sent by a thread of its own with a client of its own
//! ([`Events`]): a slow or hanging Events API never delays a status write,
//! and the queue is bounded (a full queue drops, counted). Each event sent
//! is one POST, an object of its own. The pure rules are in [`event`].

pub(crate) mod event;

use crate::conditions::{Desired, Status};
use crate::kube::{Client, KubeError};
use crate::util::reported::Reported;
use event::{BURST, InvolvedObject, Occurrence, REFILL, Reporter, TokenBucket};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

/// Where the permission is granted.
const GRANT: &str = "see manifests/base/role.yaml; with the status in another namespace, the Role opstatus-events of \
                     manifests/components/status-in-kube9-system";

/// Occurrences waiting to be sent (the bucket lets at most [`BURST`]
/// through at once; past this, new ones are dropped and counted).
const QUEUE: usize = 8;

/// Events by outcome, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EventCounts {
    pub created: u64,
    /// Not sent: over the rate limit.
    pub dropped: u64,
    /// Sent, and the API server refused or did not answer.
    pub failed: u64,
}

pub(crate) struct Recorder {
    object: InvolvedObject,
    reporter: Reporter,
    bucket: TokenBucket,
    /// Oldest first; a few at most.
    queue: Vec<Occurrence>,
    counts: EventCounts,
    /// Why events cannot be recorded, logged once per change.
    failure: Reported,
    /// Dropping was logged; said again once the bucket has refilled.
    throttled: bool,
    /// `Upgradeable` as last seen while publishing.
    upgradeable: Option<Status>,
}

impl Recorder {
    pub(crate) fn new(object: InvolvedObject, reporter: Reporter, now: Instant) -> Recorder {
        Recorder {
            object,
            reporter,
            bucket: TokenBucket::new(BURST, REFILL, now),
            queue: Vec::new(),
            counts: EventCounts::default(),
            failure: Reported::default(),
            throttled: false,
            upgradeable: None,
        }
    }

    /// `Pod ns/name`, for log lines.
    pub(crate) fn describe(&self) -> String {
        let o = &self.object;
        format!("{} {}/{}", o.kind, o.namespace, o.name)
    }

    /// The ConfigMap's uid, once a write told it (events about a ConfigMap
    /// only: `kubectl describe` selects events by uid too).
    pub(crate) fn configmap_uid(&mut self, uid: &str) {
        if self.object.kind == "ConfigMap" && self.object.uid != uid {
            self.object.uid = uid.to_string();
        }
    }

    /// Queues `occurrence` if the rate limit lets it through.
    pub(crate) fn record(&mut self, occurrence: Occurrence, now: Instant) {
        if self.throttled && self.bucket.is_full(now) {
            self.throttled = false;
        }
        if !self.bucket.try_take(now) || self.queue.len() >= QUEUE {
            self.counts.dropped += 1;
            if !self.throttled {
                self.throttled = true;
                log::warn!(
                    "Too many Kubernetes Events (over {BURST} at once, then one per {}s): dropping some, first \"{}\"",
                    REFILL.as_secs(),
                    occurrence.message
                );
            }
            return;
        }
        self.queue.push(occurrence);
    }

    /// On each check while publishing: an event when `Upgradeable` flipped.
    pub(crate) fn observe_upgradeable(&mut self, upgradeable: Option<&Desired>, now: Instant, wall: SystemTime) {
        let Some(d) = upgradeable.filter(|d| d.status != Status::Unknown) else { return };
        if let Some(before) = self.upgradeable.replace(d.status)
            && let Some(o) = event::upgradeable_changed(before, d.status, &d.message, wall)
        {
            self.record(o, now);
        }
    }

    /// Another instance publishes now: what it sees is not ours to compare.
    pub(crate) fn stand_by(&mut self) {
        self.upgradeable = None;
    }

    /// The oldest queued event's body and namespace, taken off the queue.
    fn next_job(&mut self) -> Option<(Vec<u8>, String)> {
        let occurrence = (!self.queue.is_empty()).then(|| self.queue.remove(0))?;
        Some((event::create_body(&self.object, &self.reporter, &occurrence), self.object.namespace.clone()))
    }

    /// Records what sending an event did.
    fn finish(&mut self, namespace: &str, result: Result<Vec<u8>, KubeError>) {
        let why = match result {
            Ok(_) => {
                self.counts.created += 1;
                None
            }
            Err(e) => {
                self.counts.failed += 1;
                Some(explain(&e.granted_by(GRANT), namespace))
            }
        };
        self.failure.update(why, log::Level::Warn, "Kubernetes Events are recorded again");
    }
}

/// The recorder, shared with the thread that sends its events with a
/// client of its own: the agent's loop only queues (under a lock held for
/// microseconds), so a slow or hanging Events API never delays a heartbeat.
pub(crate) struct Events {
    shared: Arc<(Mutex<Recorder>, Condvar)>,
}

impl Events {
    /// Starts the sending thread.
    pub(crate) fn start(recorder: Recorder, mut client: Client) -> std::io::Result<Events> {
        let shared = Arc::new((Mutex::new(recorder), Condvar::new()));
        let theirs = shared.clone();
        let stack = crate::kube::CLIENT_STACK;
        std::thread::Builder::new().name("events".into()).stack_size(stack).spawn(move || {
            let (lock, wake) = &*theirs;
            loop {
                let (body, namespace) = {
                    let mut recorder = lock.lock().unwrap_or_else(|p| p.into_inner());
                    loop {
                        if let Some(job) = recorder.next_job() {
                            break job;
                        }
                        recorder = wake.wait(recorder).unwrap_or_else(|p| p.into_inner());
                    }
                };
                // One request; its own bounds (the client's per-phase timeouts).
                let path = format!("/api/v1/namespaces/{namespace}/events");
                let result = client.create(&path, &body, &format!("create events in namespace {namespace:?}"));
                lock.lock().unwrap_or_else(|p| p.into_inner()).finish(&namespace, result);
            }
        })?;
        Ok(Events { shared })
    }

    fn recorder(&self) -> MutexGuard<'_, Recorder> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn counts(&self) -> EventCounts {
        self.recorder().counts
    }

    pub(crate) fn configmap_uid(&self, uid: &str) {
        self.recorder().configmap_uid(uid);
    }

    /// Queues `occurrence` (if the rate limit lets it through) and wakes
    /// the sender.
    pub(crate) fn record(&self, occurrence: Occurrence, now: Instant) {
        let mut recorder = self.recorder();
        recorder.record(occurrence, now);
        self.wake_if_queued(recorder);
    }

    pub(crate) fn observe_upgradeable(&self, upgradeable: Option<&Desired>, now: Instant, wall: SystemTime) {
        let mut recorder = self.recorder();
        recorder.observe_upgradeable(upgradeable, now, wall);
        self.wake_if_queued(recorder);
    }

    /// Wakes the sender only when there is something to send: this runs on
    /// every check, and waking a thread for nothing (a system call and a
    /// context switch each way) was a good part of a heartbeat's cost.
    fn wake_if_queued(&self, recorder: MutexGuard<'_, Recorder>) {
        let queued = !recorder.queue.is_empty();
        drop(recorder);
        if queued {
            self.shared.1.notify_one();
        }
    }

    pub(crate) fn stand_by(&self) {
        self.recorder().stand_by();
    }
}

/// A failure as the log says it, once per change: the same text for every
/// event that fails the same way (no event names, which differ).
fn explain(e: &KubeError, namespace: &str) -> String {
    let why = match e.code() {
        Some(403) => format!("403 Forbidden: grant create on events in namespace {namespace:?} ({GRANT})"),
        _ => e.to_string(),
    };
    format!("Cannot record Kubernetes Events (health is unaffected): {why}")
}
