//! The pure half of Kubernetes Events: what happened ([`Occurrence`], made
//! by the transition functions), whether it may be sent ([`TokenBucket`]),
//! and the request body. No I/O; the clock is an argument.
//!
//! client-go's rules, kept: the event's name and fields, and a token bucket
//! per source and object bounding how many are sent. Changed: the bucket is
//! "a handful per minute" ([`BURST`], [`REFILL`]) instead of client-go's
//! burst 25 and one per 5 minutes (a recorder for a whole controller;
//! opstatus has one object and a few kinds of event, so 25 would let a
//! flapping operator write 25 events before any limit bites). Left out:
//! client-go's counting of identical events on the first one (a PATCH
//! with `count + 1`) and its "(combined from similar events)". Events
//! follow only published changes, and published health gets better only
//! after three checks in a row, so a flapping operator publishes one change
//! per episode; the bucket bounds them, and each event that passes it is
//! an object of its own, created once.

use crate::conditions::Status;
use crate::status::Health;
use crate::util::text::sanitize;
use crate::util::time::format_rfc3339;
use serde::Serialize;
use serde_json::json;
use std::borrow::Cow;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Events that may be sent at once: a flap there and back (two), a
/// publisher handover and an `Upgradeable` flip, with one to spare.
pub(crate) const BURST: u32 = 5;

/// One more event may be sent per this long, once the burst is spent: at
/// most five a minute for an operator that keeps flapping (at a 5 s check
/// interval it could change 12 times a minute), against client-go's one
/// per 5 minutes, which would hide most of a short incident's story.
pub(crate) const REFILL: Duration = Duration::from_secs(12);

/// The longest message sent: `events.k8s.io/v1`'s limit on `note`, which
/// kube-apiserver also applies when it converts a core event.
pub(crate) const MAX_MESSAGE: usize = 1024;

/// `reportingInstance` may be at most this long (the API's limit).
const MAX_INSTANCE: usize = 128;

/// `source.component` and `reportingComponent`.
pub(crate) const COMPONENT: &str = "opstatus";

pub(crate) const HEALTH_CHANGED: &str = "HealthChanged";
pub(crate) const UPGRADEABLE_CHANGED: &str = "UpgradeableChanged";
pub(crate) const BECAME_PUBLISHER: &str = "BecamePublisher";
pub(crate) const FOREIGN_WRITER: &str = "ForeignWriter";

/// The event's `type`, as the API spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) enum EventType {
    Normal,
    Warning,
}

/// Something worth an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Occurrence {
    pub kind: EventType,
    /// CamelCase, machine-readable.
    pub reason: &'static str,
    /// Cleaned and bounded ([`clean_message`]).
    pub message: String,
    /// When it happened: the event's timestamps say this, not when it was
    /// sent.
    pub at: SystemTime,
}

impl Occurrence {
    pub(crate) fn new(kind: EventType, reason: &'static str, message: &str, at: SystemTime) -> Occurrence {
        Occurrence { kind, reason, message: clean_message(message), at }
    }
}

/// A published health that differs from the one published before it:
/// `Normal` when it is healthy again, `Warning` otherwise, with the reason.
/// Nothing on the first publication (`before` is `None`): that is no
/// change anyone saw.
pub(crate) fn health_changed(
    before: Option<Health>,
    after: Health,
    why: Option<&str>,
    at: SystemTime,
) -> Option<Occurrence> {
    let before = before.filter(|b| *b != after)?;
    let mut message = format!("Health changed from {before} to {after}");
    if let Some(why) = why.filter(|w| !w.is_empty() && after != Health::Healthy) {
        message = format!("{message}: {why}");
    }
    let kind = if after == Health::Healthy { EventType::Normal } else { EventType::Warning };
    Some(Occurrence::new(kind, HEALTH_CHANGED, &message, at))
}

/// `Upgradeable` turned from `True` to `False` or back (`Unknown` is no
/// flip: it never blocks, and the last known value stands).
pub(crate) fn upgradeable_changed(before: Status, after: Status, why: &str, at: SystemTime) -> Option<Occurrence> {
    let known = |s| s != Status::Unknown;
    if before == after || !known(before) || !known(after) {
        return None;
    }
    let message = format!("Upgradeable changed from {} to {}: {why}", before.as_str(), after.as_str());
    let kind = if after == Status::True { EventType::Normal } else { EventType::Warning };
    Some(Occurrence::new(kind, UPGRADEABLE_CHANGED, &message, at))
}

/// This instance took the publisher lock over from another (`from`, when
/// known) or after standing by; `because` a leader's sidecar publishes
/// nothing (a warning, saying so), when it is why.
pub(crate) fn became_publisher(
    me: &str,
    configmap: &str,
    from: Option<&str>,
    because: Option<&str>,
    at: SystemTime,
) -> Occurrence {
    let from = from.map_or_else(|| "after standing by".to_string(), |f| format!("from {f}"));
    let message = format!("{me} publishes the status in ConfigMap {configmap}: took over {from}");
    match because {
        Some(why) => Occurrence::new(EventType::Warning, BECAME_PUBLISHER, &format!("{message}: {why}"), at),
        None => Occurrence::new(EventType::Normal, BECAME_PUBLISHER, &message, at),
    }
}

/// Another writer took the status key over; opstatus leaves the
/// ConfigMap to it until it has left the status alone `quiet` that long
/// (or the status is about to be stale).
pub(crate) fn foreign_writer(writer: &str, configmap: &str, quiet: Duration, at: SystemTime) -> Occurrence {
    let message = format!(
        "Field manager {writer} replaces the status in ConfigMap {configmap}: opstatus leaves it alone until {writer} \
         has not written it for {}s, or its status is about to be stale to readers",
        quiet.as_secs()
    );
    Occurrence::new(EventType::Warning, FOREIGN_WRITER, &message, at)
}

/// Another writer keeps writing the status key with a status stale to
/// readers (`why`): opstatus writes its own over it on every heartbeat.
pub(crate) fn foreign_writer_overwritten(writer: &str, configmap: &str, why: &str, at: SystemTime) -> Occurrence {
    let message = format!(
        "Field manager {writer} replaces the status in ConfigMap {configmap}, but {why}: opstatus writes its own \
         status over it on every heartbeat; stop {writer} writing the status key to end this"
    );
    Occurrence::new(EventType::Warning, FOREIGN_WRITER, &message, at)
}

/// A message fit for an event: printable, no credentials in a URL (a
/// user-info part or a query string shows as `***`), no kube9 API key,
/// at most [`MAX_MESSAGE`] bytes. Userinfo is refused where URLs enter,
/// and the key never reaches a message; this holds it for events too,
/// which more people may read than the ConfigMap.
pub(crate) fn clean_message(text: &str) -> String {
    let printable = sanitize(text, usize::MAX);
    let mut redacted = String::with_capacity(printable.len());
    for (i, word) in printable.split(' ').enumerate() {
        if i > 0 {
            redacted.push(' ');
        }
        redacted.push_str(&redact_word(word));
    }
    sanitize(&redacted, MAX_MESSAGE)
}

fn redact_word(word: &str) -> Cow<'_, str> {
    if word.contains("://") {
        let mut url = crate::util::url::redacted(word);
        if let Some(query) = url.find('?') {
            url.replace_range(query + 1.., "***");
        }
        return Cow::Owned(url);
    }
    match word.find("kdy_") {
        Some(at) => Cow::Owned(format!("{}kdy_***", &word[..at])),
        None => Cow::Borrowed(word),
    }
}

/// A token bucket: [`TokenBucket::try_take`] is true while tokens are
/// left; one comes back per `refill`, up to `burst`.
#[derive(Clone, Debug)]
pub(crate) struct TokenBucket {
    burst: u32,
    refill: Duration,
    tokens: u32,
    /// Since when the next token has been accruing (only while not full).
    since: Instant,
}

impl TokenBucket {
    pub(crate) fn new(burst: u32, refill: Duration, now: Instant) -> TokenBucket {
        TokenBucket { burst, refill: refill.max(Duration::from_millis(1)), tokens: burst, since: now }
    }

    /// Takes a token if one is left at `now`.
    pub(crate) fn try_take(&mut self, now: Instant) -> bool {
        self.refill_until(now);
        if self.tokens == 0 {
            return false;
        }
        if self.tokens == self.burst {
            self.since = now;
        }
        self.tokens -= 1;
        true
    }

    /// Whether every token is back at `now`: the flapping is over.
    pub(crate) fn is_full(&mut self, now: Instant) -> bool {
        self.refill_until(now);
        self.tokens == self.burst
    }

    fn refill_until(&mut self, now: Instant) {
        if self.tokens >= self.burst {
            return;
        }
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let earned = millis(now.saturating_duration_since(self.since)) / millis(self.refill);
        let missing = self.burst - self.tokens;
        if earned >= u64::from(missing) {
            self.tokens = self.burst;
        } else if earned > 0 {
            let earned = earned as u32; // < missing, a u32
            self.tokens += earned;
            self.since += self.refill * earned;
        }
    }
}

/// The object the events are about (`involvedObject`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InvolvedObject {
    /// `Pod` or `ConfigMap` (both core `v1`).
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    /// Empty until known (a ConfigMap's, after the first write). `kubectl
    /// describe` selects events by it.
    pub uid: String,
}

/// Who reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reporter {
    /// `reportingInstance`: this instance's identity.
    pub instance: String,
}

/// client-go's event name: the object's name, a dot, the time in
/// nanoseconds in hex; the object's part cut so that the whole is a valid
/// name (253 characters).
pub(crate) fn event_name(object: &str, at: SystemTime) -> String {
    let nanos = u64::try_from(at.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos()).unwrap_or(u64::MAX);
    let suffix = format!(".{nanos:x}");
    let mut prefix = &object[..object.len().min(253 - suffix.len())];
    prefix = prefix.trim_end_matches(['-', '.']);
    format!("{prefix}{suffix}")
}

/// The core `v1` Event to create (POST), one per occurrence.
pub(crate) fn create_body(object: &InvolvedObject, reporter: &Reporter, occurrence: &Occurrence) -> Vec<u8> {
    let mut involved =
        json!({"apiVersion": "v1", "kind": object.kind, "namespace": object.namespace, "name": object.name});
    if !object.uid.is_empty() {
        involved["uid"] = json!(object.uid);
    }
    let at = format_rfc3339(occurrence.at);
    let body = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(&object.name, occurrence.at), "namespace": object.namespace},
        "involvedObject": involved,
        "reason": occurrence.reason, "message": occurrence.message, "type": occurrence.kind,
        "source": {"component": COMPONENT},
        "firstTimestamp": at, "lastTimestamp": at, "count": 1,
        "reportingComponent": COMPONENT, "reportingInstance": sanitize(&reporter.instance, MAX_INSTANCE),
    });
    body.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + S(1_800_000_000 + secs)
    }

    fn pod() -> InvolvedObject {
        InvolvedObject { kind: "Pod", namespace: "ops".into(), name: "op-7d9f-x2".into(), uid: "1234-abcd".into() }
    }

    #[test]
    fn a_health_transition_says_from_what_to_what_and_why() {
        let why = "Operator health check http://127.0.0.1:8081/healthz failed: HTTP 503";
        let down = health_changed(Some(Health::Healthy), Health::Degraded, Some(why), at(0)).unwrap();
        assert_eq!((down.kind, down.reason), (EventType::Warning, HEALTH_CHANGED));
        assert_eq!(down.message, format!("Health changed from healthy to degraded: {why}"));
        let up = health_changed(Some(Health::Degraded), Health::Healthy, None, at(1)).unwrap();
        assert_eq!((up.kind, up.message.as_str()), (EventType::Normal, "Health changed from degraded to healthy"));
        let worse = health_changed(Some(Health::Degraded), Health::Unhealthy, Some("x"), at(2)).unwrap();
        assert_eq!(worse.kind, EventType::Warning);
        let better = health_changed(Some(Health::Unhealthy), Health::Degraded, Some("x"), at(2)).unwrap();
        assert_eq!(better.kind, EventType::Warning, "degraded is still not well");
        // No change, or nothing published before: no event.
        assert_eq!(health_changed(Some(Health::Degraded), Health::Degraded, Some("other"), at(3)), None);
        assert_eq!(health_changed(None, Health::Degraded, Some(why), at(3)), None);
    }

    #[test]
    fn upgradeable_flips_only_between_true_and_false() {
        let blocked = upgradeable_changed(Status::True, Status::False, "Upgrade blocked by 1 resource", at(0));
        let blocked = blocked.unwrap();
        assert_eq!((blocked.kind, blocked.reason), (EventType::Warning, UPGRADEABLE_CHANGED));
        assert_eq!(blocked.message, "Upgradeable changed from True to False: Upgrade blocked by 1 resource");
        assert_eq!(upgradeable_changed(Status::False, Status::True, "ok", at(0)).unwrap().kind, EventType::Normal);
        assert_eq!(upgradeable_changed(Status::True, Status::Unknown, "?", at(0)), None);
        assert_eq!(upgradeable_changed(Status::Unknown, Status::False, "?", at(0)), None);
        assert_eq!(upgradeable_changed(Status::False, Status::False, "?", at(0)), None);
    }

    #[test]
    fn becoming_the_publisher_names_who_was_before() {
        let e = became_publisher("pod-b", "ops/kube9-operator-status", Some("pod-a"), None, at(0));
        assert_eq!((e.kind, e.reason), (EventType::Normal, BECAME_PUBLISHER));
        assert_eq!(
            e.message,
            "pod-b publishes the status in ConfigMap ops/kube9-operator-status: took over from pod-a"
        );
        assert!(became_publisher("b", "ops/x", None, None, at(0)).message.ends_with("took over after standing by"));
        let e = became_publisher("b", "ops/x", None, Some("the operator's leader c publishes no status"), at(0));
        assert_eq!(e.kind, EventType::Warning, "standing in for a leader is no ordinary takeover");
        assert!(e.message.ends_with("after standing by: the operator's leader c publishes no status"), "{}", e.message);
    }

    #[test]
    fn messages_carry_no_credentials_and_stay_bounded() {
        let hostile = "check https://user:hunter2@op:8443/healthz?token=s3cret failed; key kdy_prod_abcdef \
                       (key=kdy_dev_x)\u{1b}[2J\nnext line";
        let m = clean_message(hostile);
        for secret in ["hunter2", "s3cret", "abcdef", "kdy_dev_x", "\u{1b}", "\n"] {
            assert!(!m.contains(secret), "{secret:?} in {m:?}");
        }
        assert!(m.contains("https://***@op:8443/healthz?***"), "{m}");
        assert!(m.contains("kdy_*** (key=kdy_***"), "{m}");
        // Text without secrets is kept as it is.
        let plain = "Health changed from healthy to degraded: watch http://127.0.0.1:8081/healthz: connection refused";
        assert_eq!(clean_message(plain), plain);
        let long = clean_message(&"é".repeat(5000));
        assert!(long.len() <= MAX_MESSAGE && long.ends_with('…'), "{}", long.len());
        let occurrence = health_changed(Some(Health::Healthy), Health::Degraded, Some(&"x".repeat(4000)), at(0));
        assert!(occurrence.unwrap().message.len() <= MAX_MESSAGE);
    }

    #[test]
    fn the_bucket_lets_a_burst_through_then_one_per_refill() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(BURST, REFILL, t0);
        assert!(bucket.is_full(t0));
        for i in 0..BURST {
            assert!(bucket.try_take(t0), "token {i} of the burst");
        }
        assert!(!bucket.try_take(t0));
        assert!(!bucket.try_take(t0 + REFILL - Duration::from_millis(1)));
        assert!(bucket.try_take(t0 + REFILL));
        assert!(!bucket.try_take(t0 + REFILL + S(1)));
        // Refill is measured from the last earned token, not from the take.
        assert!(bucket.try_take(t0 + REFILL * 2));
        assert!(!bucket.is_full(t0 + REFILL * 6));
        assert!(bucket.is_full(t0 + REFILL * 7));
        // A clock that does not move earns nothing; a huge gap fills it.
        let mut b = TokenBucket::new(2, REFILL, t0);
        assert!(b.try_take(t0) && b.try_take(t0) && !b.try_take(t0));
        assert!(b.is_full(t0 + S(1_000_000_000)));
    }

    /// 50 changes in 10 s let through the burst and one per refill.
    #[test]
    fn a_flapping_signal_is_bounded() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(BURST, REFILL, t0);
        let sent = (0..50).filter(|i| bucket.try_take(t0 + Duration::from_millis(200 * i))).count();
        assert_eq!(sent, BURST as usize);
        let mut bucket = TokenBucket::new(BURST, REFILL, t0);
        let per_hour = (0..720).filter(|i| bucket.try_take(t0 + S(5 * i))).count();
        assert_eq!(per_hour, BURST as usize + 299, "one per 12 s after the burst");
    }

    #[test]
    fn names_are_the_objects_and_valid() {
        assert_eq!(event_name("op-1", UNIX_EPOCH + Duration::from_nanos(255)), "op-1.ff");
        let long = format!("{}-{}", "a".repeat(240), "b".repeat(12));
        let name = event_name(&long, at(0));
        assert!(name.len() <= 253, "{}", name.len());
        assert!(name.starts_with("aaaa") && !name.contains("-."), "{name}");
    }

    #[test]
    fn the_bodies_are_core_v1_events() {
        let object = pod();
        let reporter = Reporter { instance: "op-7d9f-x2".into() };
        let o = health_changed(Some(Health::Healthy), Health::Degraded, Some("HTTP 503"), at(5)).unwrap();
        let body: Value = serde_json::from_slice(&create_body(&object, &reporter, &o)).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": event_name("op-7d9f-x2", at(5)), "namespace": "ops"},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "ops", "name": "op-7d9f-x2",
                                   "uid": "1234-abcd"},
                "reason": "HealthChanged", "message": "Health changed from healthy to degraded: HTTP 503",
                "type": "Warning",
                "source": {"component": "opstatus"},
                "firstTimestamp": "2027-01-15T08:00:05Z", "lastTimestamp": "2027-01-15T08:00:05Z", "count": 1,
                "reportingComponent": "opstatus", "reportingInstance": "op-7d9f-x2",
            })
        );
        // Without a uid, the field is left out rather than empty.
        let cm = InvolvedObject { kind: "ConfigMap", uid: String::new(), ..object };
        let bare = Reporter { instance: "i".repeat(300) };
        let body: Value = serde_json::from_slice(&create_body(&cm, &bare, &o)).unwrap();
        assert!(body["involvedObject"].get("uid").is_none());
        assert!(body["reportingInstance"].as_str().unwrap().len() <= MAX_INSTANCE);
    }
}
