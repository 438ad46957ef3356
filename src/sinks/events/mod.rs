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
//! queued and sent by [`Recorder::flush`], one request per tick at most,
//! so events add at most one bounded call to any tick. The pure rules are
//! in [`correlator`].

pub(crate) mod correlator;

use crate::conditions::{Desired, Status};
use crate::kube::{Client, KubeError};
use crate::util::reported::Reported;
use correlator::{BURST, Correlator, InvolvedObject, Occurrence, REFILL, Reporter, TokenBucket};
use std::time::{Duration, Instant, SystemTime};

/// Where the permission is granted.
const GRANT: &str = "see manifests/base/role.yaml";

/// Occurrences waiting to be sent (one goes per tick; the bucket lets at
/// most [`BURST`] through at once).
const QUEUE: usize = 8;

/// Events by outcome, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EventCounts {
    pub created: u64,
    /// Repeats counted on an event already recorded.
    pub patched: u64,
    /// Not sent: over the rate limit.
    pub dropped: u64,
    /// Sent, and the API server refused or did not answer.
    pub failed: u64,
}

pub(crate) struct Recorder {
    object: InvolvedObject,
    reporter: Reporter,
    bucket: TokenBucket,
    correlator: Correlator,
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
            correlator: Correlator::default(),
            queue: Vec::new(),
            counts: EventCounts::default(),
            failure: Reported::default(),
            throttled: false,
            upgradeable: None,
        }
    }

    /// `Pod ns/name`, for log lines.
    pub(crate) fn describe(&self) -> String {
        self.object.describe()
    }

    pub(crate) fn counts(&self) -> EventCounts {
        self.counts
    }

    /// The longest [`Self::flush`] can take: one call.
    pub(crate) fn worst_case(&self) -> Duration {
        crate::kube::call_bound()
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
            && let Some(o) = correlator::upgradeable_changed(before, d.status, &d.message, wall)
        {
            self.record(o, now);
        }
    }

    /// Another instance publishes now: what it sees is not ours to compare.
    pub(crate) fn stand_by(&mut self) {
        self.upgradeable = None;
    }

    /// Whether an event waits to be sent (one goes out per tick).
    pub(crate) fn pending(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Sends the oldest queued event: at most one request.
    pub(crate) fn flush(&mut self, client: &mut Client) {
        if self.queue.is_empty() {
            return;
        }
        let occurrence = self.queue.remove(0);
        let plan = self.correlator.plan(&self.object, &occurrence);
        let namespace = &self.object.namespace;
        let result = if plan.repeat {
            let path = format!("/api/v1/namespaces/{namespace}/events/{}", plan.name);
            let action = format!("patch events in namespace {namespace:?}");
            client.merge_patch(&path, &correlator::repeat_patch(&occurrence, &plan), &action)
        } else {
            let path = format!("/api/v1/namespaces/{namespace}/events");
            let body = correlator::create_body(&self.object, &self.reporter, &occurrence, &plan);
            client.create(&path, &body, &format!("create events in namespace {namespace:?}")).map(drop)
        };
        match result {
            Ok(()) => {
                if plan.repeat {
                    self.counts.patched += 1;
                } else {
                    self.counts.created += 1;
                }
                self.correlator.record(&occurrence, &plan);
                self.failure.update(None, log::Level::Warn, "Kubernetes Events are recorded again");
            }
            // The event expired (the API server keeps them an hour): the
            // next flush creates it anew.
            Err(e) if plan.repeat && e.code() == Some(404) => {
                self.correlator.forget(&plan.name);
                self.queue.insert(0, occurrence);
            }
            Err(e) => {
                self.counts.failed += 1;
                let why = explain(&e.granted_by(GRANT), namespace);
                self.failure.update(Some(why), log::Level::Warn, "Kubernetes Events are recorded again");
            }
        }
    }
}

/// A failure as the log says it, once per change: the same text for every
/// event that fails the same way (no event names, which differ).
fn explain(e: &KubeError, namespace: &str) -> String {
    let why = match e.code() {
        Some(403) => format!("403 Forbidden: grant create and patch on events in namespace {namespace:?} ({GRANT})"),
        _ => e.to_string(),
    };
    format!("Cannot record Kubernetes Events (health is unaffected): {why}")
}
