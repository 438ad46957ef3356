//! The publisher lock: which of the instances that share a status ConfigMap
//! publishes (the status, and every other sink). Pure: the record, and the
//! decision from what was seen and when; the clock is an argument.
//!
//! The lock is client-go's leader-election record (`holderIdentity`,
//! `leaseDurationSeconds`, `acquireTime`, `renewTime`,
//! `leaderTransitions`), kept in an annotation of the status ConfigMap
//! itself, so the holder's one write per heartbeat is also its renewal, and
//! every write carries the `resourceVersion` it last saw (optimistic
//! concurrency: two instances can never both claim it). The kube9 document
//! in `data.status` holds nothing of it.
//!
//! Like client-go, a standby never compares the holder's timestamps with
//! its own clock (the nodes' clocks may differ): it notes *when it saw* the
//! record change, and the lock is expired when it has not changed for the
//! record's lease duration since.

use crate::util::text::sanitize;
use crate::util::time::format_rfc3339;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant, SystemTime};

/// The annotation that holds the record, as JSON.
pub(crate) const ANNOTATION: &str = "opstatus.kube9.dev/publisher";

/// Lease durations read from a record are clamped to this range: a record
/// from outside must not make a standby wait for ever, nor take over at
/// once from a holder that is alive. The upper end stays ten seconds below
/// the age at which readers call a status stale: no lease, however it was
/// written, silences the publishers for longer than readers tolerate.
pub(crate) const LEASE_RANGE: (Duration, Duration) =
    (Duration::from_secs(2), Duration::from_secs(crate::reader::STALE_AFTER.as_secs() - 10));

/// The lease a holder announces: two heartbeats and ten seconds, so one
/// failed heartbeat (retried with backoff) does not lose the lock, and a
/// crashed holder is replaced before readers call the status stale
/// (5 minutes): 130 s at the default 60 s interval, at most 290 s.
pub(crate) fn lease_duration(interval: Duration) -> Duration {
    (interval * 2 + Duration::from_secs(10)).clamp(LEASE_RANGE.0, LEASE_RANGE.1)
}

/// client-go's `LeaderElectionRecord`, as JSON, its fields in client-go's
/// order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    /// Empty when released.
    pub holder_identity: String,
    pub lease_duration_seconds: u64,
    pub acquire_time: String,
    pub renew_time: String,
    #[serde(default)]
    pub leader_transitions: u64,
}

impl Record {
    /// The record `me` writes: a renewal of `previous` when it already
    /// held it, else an acquisition (one more transition).
    pub(crate) fn claim(me: &str, previous: Option<&Record>, lease: Duration, now: SystemTime) -> Record {
        let now_text = format_rfc3339(now);
        let (acquire_time, transitions) = match previous {
            Some(p) if p.holder_identity == me => (p.acquire_time.clone(), p.leader_transitions),
            Some(p) => {
                (now_text.clone(), p.leader_transitions.saturating_add(u64::from(!p.holder_identity.is_empty())))
            }
            None => (now_text.clone(), 0),
        };
        Record {
            holder_identity: me.to_string(),
            lease_duration_seconds: lease.as_secs(),
            acquire_time,
            renew_time: now_text,
            leader_transitions: transitions,
        }
    }

    /// The record a holder leaves when it stops: nobody holds it, and the
    /// next instance that looks may take it at once.
    pub(crate) fn released(&self, now: SystemTime) -> Record {
        Record {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            renew_time: format_rfc3339(now),
            ..self.clone()
        }
    }

    fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_duration_seconds).clamp(LEASE_RANGE.0, LEASE_RANGE.1)
    }

    /// The record's JSON text: the annotation's value.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a struct of strings and numbers always serialises")
    }
}

/// What the annotation said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// No annotation: nobody ever published here (or an older opstatus).
    Absent,
    Record(Record),
    /// Not a record: treated as expired (with a warning), never a crash.
    Unreadable(String),
}

impl Seen {
    /// Parses the annotation's value (`None`: no annotation). Anyone who
    /// may patch the ConfigMap writes it: its text is sanitised and bounded
    /// here, where it enters, so no log line, message or `get` shows it raw
    /// (an identity longer than a pod name cannot be ours either way), and
    /// a parse error says where, never quoting the input.
    pub(crate) fn parse(value: Option<&str>) -> Seen {
        match value {
            None => Seen::Absent,
            Some(text) => match serde_json::from_str::<Record>(text) {
                Ok(mut r) => {
                    r.holder_identity = sanitize(&r.holder_identity, MAX_IDENTITY);
                    r.acquire_time = sanitize(&r.acquire_time, MAX_TIME);
                    r.renew_time = sanitize(&r.renew_time, MAX_TIME);
                    Seen::Record(r)
                }
                Err(e) => Seen::Unreadable(format!(
                    "annotation {ANNOTATION} is not a lock record ({} at column {})",
                    error_kind(&e),
                    e.column()
                )),
            },
        }
    }

    pub(crate) fn record(&self) -> Option<&Record> {
        match self {
            Seen::Record(r) => Some(r),
            _ => None,
        }
    }
}

/// What an instance should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write (acquire, or renew what it holds).
    Publish,
    /// Someone else publishes (or nobody may: the reason).
    StandBy(String),
}

/// What an instance knows of its own operator, as time goes by: when it
/// started, whether the operator's health checks (`--watch-url`,
/// `--watch-file`) passed since (`None`: nobody said, as in `opstatus
/// once` or with nothing watched) and since when its pod is stopping
/// (kubelet's preStop hook, or its Pod seen being deleted).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnState {
    started: Instant,
    answered: Option<bool>,
    stopping: Option<Instant>,
}

impl OwnState {
    pub(crate) fn new(started: Instant) -> OwnState {
        OwnState { started, answered: None, stopping: None }
    }

    /// After a check of the health checks: true the first time they pass.
    pub(crate) fn checked(&mut self, passed: bool) -> bool {
        let first = passed && self.answered != Some(true);
        self.answered = Some(passed || self.answered == Some(true));
        first
    }

    /// kubelet's preStop hook came (the first time counts).
    pub(crate) fn stopping(&mut self, now: Instant) {
        self.stopping.get_or_insert(now);
    }

    /// How long the health checks have gone without passing once since the
    /// instance started; `None` once they passed, or when nothing said.
    pub(crate) fn unanswered_for(&self, now: Instant) -> Option<Duration> {
        (self.answered == Some(false)).then(|| now.saturating_duration_since(self.started))
    }

    /// How long ago the pod began stopping, if it did.
    pub(crate) fn stopping_for(&self, now: Instant) -> Option<Duration> {
        self.stopping.map(|since| now.saturating_duration_since(since))
    }
}

/// How long a stopping instance leaves a free lock to the others: one
/// heartbeat (what readers wait between two writes anyway), at least 15 s,
/// never longer than a lease (so it never holds back longer than an
/// expired lock does).
pub(crate) fn operator_wait(interval: Duration) -> Duration {
    interval.max(Duration::from_secs(15)).min(lease_duration(interval))
}

/// Remembers when the record last changed, as seen from here.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observer {
    last: Option<(Seen, Instant)>,
}

impl Observer {
    /// Notes what was seen at `now`; returns how long it has been unchanged.
    pub(crate) fn observe(&mut self, seen: &Seen, now: Instant) -> Duration {
        match &self.last {
            Some((previous, since)) if previous == seen => now.saturating_duration_since(*since),
            _ => {
                self.last = Some((seen.clone(), now));
                Duration::ZERO
            }
        }
    }
}

/// Who may publish: `me` (this instance's identity in the lock), given
/// what the annotation says and how long it has been unchanged; `leader`
/// is the pod the operator's own leader election names, when the sidecar
/// follows it and it decides (`Err`: it cannot be told, with the reason):
/// it is compared with `pod`, the pod this instance runs in, not with `me`
/// (an `--identity` of its own names the instance, not its pod).
///
/// A lock that is free (released, expired, unreadable) is not taken for
/// up to `wait` after the pod began stopping (`stopping`: its operator is
/// going away, the status is for the instances that stay). A status
/// nobody ever wrote, and a lock that is already `me`'s (a restarted
/// container), are taken at once. (An instance whose operator has not
/// answered since it started does not get this far: it publishes nothing
/// for the start-up allowance, `agent::startup`.)
pub(crate) fn decide(
    me: &str,
    pod: &str,
    seen: &Seen,
    unchanged_for: Duration,
    leader: Option<Result<&str, &str>>,
    stopping: Option<Duration>,
    wait: Duration,
) -> Decision {
    if let Some(leader) = leader {
        return follow(pod, leader);
    }
    match seen {
        Seen::Absent => return Decision::Publish,
        Seen::Record(r) if r.holder_identity == me => return Decision::Publish,
        _ => {}
    }
    match stopping {
        _ if !lapsed(seen, unchanged_for, Duration::ZERO) => {
            let holder = seen.record().map_or("", |r| r.holder_identity.as_str());
            Decision::StandBy(format!("{holder} publishes"))
        }
        Some(since) if since < wait => Decision::StandBy(format!(
            "this pod is stopping: leaving the free lock to the instances that stay, for up to {}s",
            wait.as_secs()
        )),
        _ => Decision::Publish,
    }
}

/// Whether nobody holds the lock as `seen`, unchanged for `unchanged_for`:
/// released, unreadable, or not renewed for its record's lease; no record
/// at all (the ConfigMap or its annotation missing) once it has been so
/// for `lease`.
pub(crate) fn lapsed(seen: &Seen, unchanged_for: Duration, lease: Duration) -> bool {
    match seen {
        Seen::Record(r) => r.holder_identity.is_empty() || unchanged_for >= r.lease(),
        Seen::Unreadable(_) => true,
        Seen::Absent => unchanged_for >= lease,
    }
}

/// The operator's leader decides, whatever the lock says: the sidecar in
/// the `leader` pod (`Err`: it cannot be told, with the reason) takes the
/// lock at once (with the resourceVersion it saw, so a concurrent write
/// still wins) and everyone else stands by. `pod` is the pod this instance
/// runs in, not its identity in the lock (`--identity` names the
/// instance, not its pod).
pub(crate) fn follow(pod: &str, leader: Result<&str, &str>) -> Decision {
    match leader {
        Ok(leader) if leader == pod => Decision::Publish,
        Ok(leader) => Decision::StandBy(format!("{leader} publishes (the operator's leader)")),
        Err(why) => Decision::StandBy(why.to_string()),
    }
}

/// The longest identity kept from outside: a pod name's limit.
pub(crate) const MAX_IDENTITY: usize = 253;
/// The longest time text kept from outside (RFC 3339 with nanoseconds is 35).
const MAX_TIME: usize = 64;

/// What kind of JSON error, without serde's quote of the input (which can
/// be as long as the annotation).
pub(crate) fn error_kind(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "unexpected fields or types",
        serde_json::error::Category::Eof => "cut short",
    }
}

/// The pod a controller-runtime / client-go Lease names: its
/// `holderIdentity` is `<pod name>_<uuid>` (or the bare pod name).
pub(crate) fn leader_pod(holder_identity: &str) -> &str {
    match holder_identity.rsplit_once('_') {
        Some((pod, _)) if !pod.is_empty() => pod,
        _ => holder_identity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    /// The decision of an instance whose operator answers.
    fn answered(me: &str, seen: &Seen, unchanged_for: Duration, leader: Option<Result<&str, &str>>) -> Decision {
        decide(me, me, seen, unchanged_for, leader, None, Duration::from_secs(60))
    }

    fn held_by(who: &str) -> Seen {
        Seen::Record(Record::claim(who, None, Duration::from_secs(130), at(0)))
    }

    #[test]
    fn the_record_is_client_gos() {
        let r = Record::claim("pod-a", None, Duration::from_secs(130), at(0));
        assert_eq!(
            r.to_json(),
            r#"{"holderIdentity":"pod-a","leaseDurationSeconds":130,"acquireTime":"2027-01-15T08:00:00Z","renewTime":"2027-01-15T08:00:00Z","leaderTransitions":0}"#
        );
        assert_eq!(Seen::parse(Some(&r.to_json())), Seen::Record(r.clone()));
        // A renewal keeps the acquisition; a takeover counts a transition.
        let renewed = Record::claim("pod-a", Some(&r), Duration::from_secs(130), at(60));
        assert_eq!((renewed.acquire_time.as_str(), renewed.leader_transitions), (r.acquire_time.as_str(), 0));
        assert_ne!(renewed.renew_time, r.renew_time);
        let taken = Record::claim("pod-b", Some(&renewed), Duration::from_secs(130), at(200));
        assert_eq!((taken.holder_identity.as_str(), taken.leader_transitions), ("pod-b", 1));
        let released = taken.released(at(300));
        assert_eq!((released.holder_identity.as_str(), released.lease_duration_seconds), ("", 1));
        // Taking a released lock is no new transition of a holder.
        assert_eq!(Record::claim("pod-c", Some(&released), Duration::from_secs(130), at(301)).leader_transitions, 1);
    }

    #[test]
    fn the_record_reads_back_as_written() {
        let odd = "pod-\"a\\\u{1}\n\u{7f}\u{2028}ünï";
        let records = [
            Record::claim("pod-a", None, Duration::from_secs(130), at(0)),
            Record::claim("pod-a", None, Duration::from_secs(130), at(0)).released(at(1)),
            Record {
                holder_identity: odd.into(),
                lease_duration_seconds: u64::MAX,
                acquire_time: odd.into(),
                renew_time: "\\\"".into(),
                leader_transitions: u64::MAX,
            },
        ];
        for r in records {
            let json = r.to_json();
            // Read back as written, but for the control characters a record
            // from outside loses on the way in.
            let read = Seen::parse(Some(&json));
            let expected = Record {
                holder_identity: sanitize(&r.holder_identity, MAX_IDENTITY),
                acquire_time: sanitize(&r.acquire_time, MAX_TIME),
                renew_time: sanitize(&r.renew_time, MAX_TIME),
                ..r.clone()
            };
            assert_eq!(read, Seen::Record(expected), "{json}");
        }
    }

    #[test]
    fn lease_is_two_heartbeats_and_ten_seconds_within_bounds() {
        assert_eq!(lease_duration(Duration::from_secs(60)), Duration::from_secs(130));
        assert_eq!(lease_duration(Duration::from_secs(1)), Duration::from_secs(12));
        assert_eq!(lease_duration(Duration::from_secs(240)), Duration::from_secs(290));
    }

    #[test]
    fn who_publishes() {
        let lease = Duration::from_secs(130);
        assert_eq!(answered("a", &Seen::Absent, Duration::ZERO, None), Decision::Publish);
        assert_eq!(answered("a", &held_by("a"), Duration::ZERO, None), Decision::Publish);
        assert_eq!(answered("b", &held_by("a"), Duration::ZERO, None), Decision::StandBy("a publishes".into()));
        assert_eq!(
            answered("b", &held_by("a"), lease - Duration::from_secs(1), None),
            Decision::StandBy("a publishes".into())
        );
        assert_eq!(answered("b", &held_by("a"), lease, None), Decision::Publish, "expired");
        let released = Seen::Record(held_by("a").record().unwrap().released(at(5)));
        assert_eq!(answered("b", &released, Duration::ZERO, None), Decision::Publish);
    }

    #[test]
    fn an_unreadable_or_foreign_annotation_is_expired_never_a_crash() {
        for text in ["", "garbage", "{}", r#"{"holderIdentity":5}"#, "[1,2]", "\u{1b}[2J"] {
            let seen = Seen::parse(Some(text));
            assert!(matches!(seen, Seen::Unreadable(_)), "{text:?}");
            assert_eq!(answered("b", &seen, Duration::ZERO, None), Decision::Publish);
        }
        // A huge lease from outside is clamped.
        let mut r = held_by("a").record().unwrap().clone();
        r.lease_duration_seconds = u64::MAX;
        assert_eq!(answered("b", &Seen::Record(r), LEASE_RANGE.1, None), Decision::Publish);
    }

    #[test]
    fn every_lease_stays_below_what_readers_tolerate() {
        // Readers call a status stale after STALE_AFTER: no lease, ours at
        // any interval kube9-server may ask for or one read from outside,
        // may keep a standby from taking over until then.
        for seconds in 1..=240 {
            let lease = lease_duration(Duration::from_secs(seconds));
            assert!(lease < crate::reader::STALE_AFTER, "{seconds} s interval: {lease:?}");
        }
        let mut r = held_by("a").record().unwrap().clone();
        r.lease_duration_seconds = 900;
        let limit = crate::reader::STALE_AFTER - Duration::from_secs(10);
        assert_eq!(answered("b", &Seen::Record(r), limit, None), Decision::Publish);
    }

    #[test]
    fn foreign_text_from_the_lock_is_sanitised_and_bounded() {
        let hostile = format!("pod-a\u{1b}[2J\r\n\u{202e}{}", "x".repeat(200_000));
        let text = serde_json::json!({"holderIdentity": hostile, "leaseDurationSeconds": 130,
            "acquireTime": "\u{1b}]0;t\u{7}", "renewTime": "9".repeat(5000), "leaderTransitions": 1})
        .to_string();
        let seen = Seen::parse(Some(&text));
        let r = seen.record().unwrap();
        for field in [&r.holder_identity, &r.acquire_time, &r.renew_time] {
            assert!(!field.chars().any(|c| c.is_control() || c == '\u{202e}'), "{field:?}");
        }
        assert!(r.holder_identity.len() <= MAX_IDENTITY && r.holder_identity.starts_with("pod-a [2J"));
        assert!(r.renew_time.len() <= MAX_TIME);
        let Decision::StandBy(why) = answered("b", &seen, Duration::ZERO, None) else { panic!("publishes") };
        assert!(why.len() < 300 && !why.contains('\u{1b}'), "{why}");

        // An unreadable annotation is named with where it broke, not quoted.
        let long = format!(r#"{{"holderIdentity": 5, "renewTime": "{}"}}"#, "\u{1b}x".repeat(100_000));
        let Seen::Unreadable(why) = Seen::parse(Some(&long)) else { panic!("read") };
        assert!(why.len() < 200 && !why.contains('\u{1b}'), "{why}");
        assert!(why.contains("unexpected fields or types at column"), "{why}");
    }

    #[test]
    fn transitions_saturate_instead_of_wrapping() {
        let mut r = held_by("a").record().unwrap().clone();
        r.leader_transitions = u64::MAX;
        let taken = Record::claim("b", Some(&r), Duration::from_secs(130), at(10));
        assert_eq!(taken.leader_transitions, u64::MAX);
    }

    #[test]
    fn the_operators_leader_decides_when_followed() {
        let seen = held_by("pod-a");
        assert_eq!(answered("pod-b", &seen, Duration::ZERO, Some(Ok("pod-b"))), Decision::Publish);
        assert_eq!(
            answered("pod-a", &seen, Duration::ZERO, Some(Ok("pod-b"))),
            Decision::StandBy("pod-b publishes (the operator's leader)".into())
        );
        assert_eq!(
            answered("pod-a", &seen, Duration::ZERO, Some(Err("no leader yet"))),
            Decision::StandBy("no leader yet".into())
        );
        assert_eq!(leader_pod("pod-b_0f3a-uuid"), "pod-b");
        assert_eq!(leader_pod("my_operator-7d9f_1234"), "my_operator-7d9f");
        assert_eq!(leader_pod("pod-b"), "pod-b");
        assert_eq!(leader_pod("_x"), "_x");
    }

    /// Every identity the start check lets through reads back from the
    /// lock as it was written, so a restarted instance knows its own
    /// lock; the ones it refuses include every one that would not.
    #[test]
    fn every_identity_the_start_check_passes_reads_back_as_written() {
        let chars = (0..0x3100u32).chain(0xfe00..0x10000).chain([0x1f600, 0xe0001, 0x10ffff]);
        let mut refused = 0;
        for c in chars.filter_map(char::from_u32) {
            let identity = format!("op{c}a");
            let Ok(checked) = crate::cli::check_identity(&identity) else {
                refused += 1;
                continue;
            };
            let written = Record::claim(&checked, None, Duration::from_secs(130), at(0)).to_json();
            let read = Seen::parse(Some(&written));
            assert_eq!(read.record().map(|r| r.holder_identity.as_str()), Some(identity.as_str()), "{c:?}");
        }
        assert!(refused > 60, "controls, white space and bidirectional controls are refused: {refused}");
        // At the length limit, in bytes, as the lock keeps it.
        let long = "é".repeat(126) + "a";
        assert_eq!(long.len(), 253);
        assert!(crate::cli::check_identity(&long).is_ok());
        assert!(crate::cli::check_identity(&format!("{long}a")).is_err());
        assert!(crate::cli::check_identity("op-a\u{202e}").is_err(), "the right-to-left override");
    }

    /// `POD_NAME=op-a`, `--identity op-a-sidecar`, the Lease held by
    /// `op-a_1234`: the sidecar in pod op-a publishes, under its identity.
    #[test]
    fn the_leader_is_compared_with_the_pod_not_the_identity() {
        let decide_in = |pod: &str| {
            let leader = Some(Ok(leader_pod("op-a_1234")));
            decide("op-a-sidecar", pod, &Seen::Absent, Duration::ZERO, leader, None, Duration::ZERO)
        };
        assert_eq!(decide_in("op-a"), Decision::Publish);
        assert_eq!(decide_in("op-b"), Decision::StandBy("op-a publishes (the operator's leader)".into()));
        let r = Record::claim("op-a-sidecar", None, Duration::from_secs(130), at(0));
        assert_eq!(r.holder_identity, "op-a-sidecar", "the lock names the identity");
    }

    #[test]
    fn a_lock_lapses_when_released_unreadable_unrenewed_or_missing_for_a_lease() {
        let lease = Duration::from_secs(130);
        let released = Seen::Record(held_by("a").record().unwrap().released(at(5)));
        assert!(lapsed(&released, Duration::ZERO, lease));
        assert!(lapsed(&Seen::parse(Some("garbage")), Duration::ZERO, lease));
        assert!(!lapsed(&held_by("a"), lease - Duration::from_secs(1), lease));
        assert!(lapsed(&held_by("a"), lease, lease), "the record's own lease");
        // No record: a status nobody wrote yet is not free until it has
        // stayed so for the lease given.
        assert!(!lapsed(&Seen::Absent, lease - Duration::from_secs(1), lease));
        assert!(lapsed(&Seen::Absent, lease, lease));
    }

    #[test]
    fn a_stopping_pod_leaves_a_free_lock_to_the_instances_that_stay_for_a_while() {
        let wait = Duration::from_secs(60);
        let released = Seen::Record(held_by("a").record().unwrap().released(at(5)));
        let stopping = |secs| Some(Duration::from_secs(secs));
        let Decision::StandBy(why) = decide("b", "b", &released, Duration::ZERO, None, stopping(0), wait) else {
            panic!("a stopping pod took the lock")
        };
        assert_eq!(why, "this pod is stopping: leaving the free lock to the instances that stay, for up to 60s");
        assert_eq!(decide("b", "b", &released, Duration::ZERO, None, stopping(60), wait), Decision::Publish);
        // What it holds it keeps (nobody took it over: it goes on publishing).
        assert_eq!(decide("a", "a", &held_by("a"), Duration::ZERO, None, stopping(0), wait), Decision::Publish);
        // A lock held by another stays theirs, stopping or not.
        let Decision::StandBy(why) = decide("b", "b", &held_by("a"), Duration::ZERO, None, stopping(0), wait) else {
            panic!("took a live lock")
        };
        assert_eq!(why, "a publishes");
    }

    #[test]
    fn what_an_instance_knows_of_its_operator_as_time_goes_by() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut own = OwnState::new(t0);
        assert_eq!(own.unanswered_for(t0 + s(5)), None);
        assert!(!own.checked(false));
        assert_eq!(own.unanswered_for(t0 + s(5)), Some(s(5)), "counted from the start, not the first check");
        assert!(own.checked(true), "the first answer");
        assert_eq!(own.unanswered_for(t0 + s(6)), None);
        assert!(!own.checked(false), "then down again: it has answered once");
        assert!(!own.checked(true));
        assert_eq!(own.stopping_for(t0 + s(9)), None);
        own.stopping(t0 + s(10));
        own.stopping(t0 + s(12));
        assert_eq!(own.stopping_for(t0 + s(13)), Some(s(3)), "from the first preStop hook");
    }

    #[test]
    fn the_operator_wait_is_a_heartbeat_at_least_15_s_never_longer_than_a_lease() {
        assert_eq!(operator_wait(Duration::from_secs(60)), Duration::from_secs(60));
        assert_eq!(operator_wait(Duration::from_secs(2)), Duration::from_secs(14), "the lease at 2 s");
        assert_eq!(operator_wait(Duration::from_secs(5)), Duration::from_secs(15));
        assert_eq!(operator_wait(Duration::from_secs(240)), Duration::from_secs(240));
        for seconds in 1..=240 {
            let interval = Duration::from_secs(seconds);
            assert!(operator_wait(interval) <= lease_duration(interval), "{seconds} s");
        }
    }

    #[test]
    fn the_observer_measures_how_long_a_record_is_unchanged() {
        let mut o = Observer::default();
        let t0 = Instant::now();
        let a = held_by("a");
        assert_eq!(o.observe(&a, t0), Duration::ZERO);
        assert_eq!(o.observe(&a, t0 + Duration::from_secs(7)), Duration::from_secs(7));
        let renewed = Seen::Record(Record::claim("a", a.record(), Duration::from_secs(130), at(60)));
        assert_eq!(o.observe(&renewed, t0 + Duration::from_secs(8)), Duration::ZERO);
        assert_eq!(o.observe(&renewed, t0 + Duration::from_secs(10)), Duration::from_secs(2));
    }
}
