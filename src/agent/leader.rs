//! The operator's leader as its leader-election Lease tells it
//! (`--follow-leader-lease`), read on every check. An answer (a holder, or
//! no holder) decides at once; a read that fails (403, 429, 5xx, a
//! timeout) does not: the last answer stands for a grace period, so one
//! failed read never demotes the publisher. A failure that lasts past the
//! grace is a reported problem, and meanwhile the publisher lock alone
//! decides, so exactly one instance still publishes and says why.
//!
//! A Lease is held only while it is renewed: client-go and
//! controller-runtime count a holder that has not renewed for its
//! `leaseDurationSeconds` as gone, whatever `holderIdentity` says. So a
//! Lease seen unchanged for its duration plus [`LEASE_GRACE`] (the
//! operator's leader died, or hangs, or the next one crash-loops before it
//! takes over) names no leader: the publisher lock decides who publishes,
//! and the status says `degraded`, naming the holder and when it last
//! renewed. So does a Lease that names nobody (or does not exist) for
//! longer than the grace the caller gives (one lease of the publisher
//! lock). Like client-go, the time is counted from when this instance
//! *saw* the Lease change, never by comparing the leader's clock with its
//! own. Pure: the clock comes in as arguments.

use crate::util::time::parse_rfc3339;
use std::time::{Duration, Instant, SystemTime};

/// How long past its `leaseDurationSeconds` a Lease not renewed still
/// names the leader: a few of client-go's 2 s retries, and a check.
pub(super) const LEASE_GRACE: Duration = Duration::from_secs(10);

/// client-go's lease duration, for a Lease that does not say its own.
pub(super) const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// What one read of the Lease said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LeaseRead {
    /// Someone holds the Lease.
    Held(Held),
    /// The Lease answered: nobody leads (no Lease, no holder), and why.
    NoLeader(String),
    /// The Lease could not be read, and why.
    Failed(String),
}

/// A Lease with a holder, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Held {
    /// `namespace/name`, for messages.
    pub lease: String,
    /// `spec.holderIdentity` (sanitised): `<pod name>_<uuid>`.
    pub holder: String,
    /// `spec.renewTime` as written (sanitised): a change of it is a renewal.
    pub renew_time: Option<String>,
    /// `spec.leaseDurationSeconds`, [`DEFAULT_LEASE_DURATION`] when missing.
    pub duration: Duration,
}

/// The last answer, since when it has been the same, and when a read last
/// confirmed it.
struct Answer {
    said: Result<Held, String>,
    since: Instant,
    confirmed: Instant,
}

#[derive(Default)]
pub(super) struct Leader {
    answer: Option<Answer>,
    /// Since when reads fail, and the latest failure.
    failing: Option<(Instant, String)>,
}

impl Leader {
    pub(super) fn observe(&mut self, read: LeaseRead, now: Instant) {
        match read {
            LeaseRead::Held(held) => self.answered(Ok(held), now),
            LeaseRead::NoLeader(why) => self.answered(Err(why), now),
            LeaseRead::Failed(why) => {
                let since = self.failing.as_ref().map_or(now, |(since, _)| *since);
                self.failing = Some((since, why));
            }
        }
    }

    fn answered(&mut self, said: Result<Held, String>, now: Instant) {
        match &mut self.answer {
            Some(answer) if answer.said == said => answer.confirmed = now,
            _ => self.answer = Some(Answer { said, since: now, confirmed: now }),
        }
        self.failing = None;
    }

    /// Whether reads have failed for `grace` or longer.
    fn lapsed(&self, now: Instant, grace: Duration) -> bool {
        self.failing.as_ref().is_some_and(|(since, _)| now.saturating_duration_since(*since) >= grace)
    }

    /// How long the answer has been the same as reads saw it, when that is
    /// long enough to mean nobody leads: a holder that has not renewed for
    /// its lease duration plus [`LEASE_GRACE`], or nobody named for
    /// `grace`. Only successful reads count: a failing read is not a Lease
    /// left alone.
    fn stuck_for(&self, grace: Duration) -> Option<Duration> {
        let answer = self.answer.as_ref()?;
        let unchanged = answer.confirmed.saturating_duration_since(answer.since);
        let limit = match &answer.said {
            Ok(held) => held.duration + LEASE_GRACE,
            Err(_) => grace,
        };
        (unchanged >= limit).then_some(unchanged)
    }

    /// Who leads, for the lock's decision: `None` before the first read,
    /// once reads have failed for `grace`, and while the Lease names no
    /// live leader ([`Self::stuck_for`]): the publisher lock decides then.
    /// While reads fail within the grace, the last answer, or the failure
    /// itself when there was none yet (stand by until the grace is over).
    pub(super) fn decides(&self, now: Instant, grace: Duration) -> Option<Result<&str, &str>> {
        if self.lapsed(now, grace) || self.stuck_for(grace).is_some() {
            return None;
        }
        match (&self.answer, &self.failing) {
            (Some(answer), _) => Some(answer.said.as_ref().map(|h| h.holder.as_str()).map_err(String::as_str)),
            (None, Some((_, why))) => Some(Err(why.as_str())),
            (None, None) => None,
        }
    }

    /// Why the Lease does not decide, as the status says it: its reads
    /// have failed for `grace`, or it names no live leader. `wall` dates
    /// the holder's last renewal, in whole minutes: the reason changes at
    /// most once a minute, not on every check.
    pub(super) fn problem(&self, now: Instant, grace: Duration, wall: SystemTime) -> Option<String> {
        if let Some((_, why)) = self.failing.as_ref().filter(|_| self.lapsed(now, grace)) {
            return Some(format!("{why}; the publisher lock decides who publishes until the Lease can be read again"));
        }
        let line = self.not_leading(grace)?;
        let unchanged = self.stuck_for(grace)?;
        Some(match &self.answer.as_ref()?.said {
            Ok(held) => {
                let renewed = held.renew_time.as_deref();
                // A renewTime ahead of this clock (the leader's node runs
                // ahead, or someone wrote a future time) is no recent
                // renewal: it says so, with how long reads saw it unchanged.
                let when = match renewed.and_then(parse_rfc3339).map(|at| wall.duration_since(at)) {
                    Some(Err(_)) => {
                        format!("ahead of this clock; unchanged for {} as seen from here", minutes(unchanged))
                    }
                    Some(Ok(age)) => format!("{} ago", minutes(age.max(unchanged))),
                    None => format!("{} ago", minutes(unchanged)),
                };
                format!(
                    "{line}: last renewed {} ({when}); the publisher lock decides who publishes until the Lease is \
                     renewed or taken over",
                    renewed.unwrap_or("never"),
                )
            }
            Err(_) => format!("{line}; the publisher lock decides who publishes until the operator elects a leader"),
        })
    }

    /// Why the Lease names no live leader, in words that do not change
    /// while it is left alone (for the log, once).
    pub(super) fn not_leading(&self, grace: Duration) -> Option<String> {
        self.stuck_for(grace)?;
        Some(match &self.answer.as_ref()?.said {
            Ok(held) => format!(
                "The operator's leader is not renewing its Lease: Lease {} names {}, not renewed for more than its \
                 leaseDurationSeconds ({}s) plus {}s",
                held.lease,
                held.holder,
                held.duration.as_secs(),
                LEASE_GRACE.as_secs()
            ),
            Err(why) => format!("{why}, for more than {}s", grace.as_secs()),
        })
    }

    /// Whether the Lease is being renewed: reads saw it change (a renewal, a
    /// new holder) within its lease duration.
    pub(super) fn renewing(&self, now: Instant) -> bool {
        let Some(answer) = &self.answer else { return false };
        matches!(&answer.said, Ok(held) if now.saturating_duration_since(answer.since) < held.duration)
    }

    /// The Lease's holder, as its last answer named it.
    pub(super) fn held(&self) -> Option<&Held> {
        self.answer.as_ref()?.said.as_ref().ok()
    }

    /// Whether a failed read is being ridden out on the last answer.
    pub(super) fn failure(&self) -> Option<&str> {
        self.failing.as_ref().map(|(_, why)| why.as_str())
    }
}

/// `3 min`, or `under a minute`: a reason that changes once a minute.
fn minutes(age: Duration) -> String {
    match age.as_secs() / 60 {
        0 => "under a minute".into(),
        m => format!("{m} min"),
    }
}

#[cfg(test)]
pub(in crate::agent) mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(14);
    const S: fn(u64) -> Duration = Duration::from_secs;

    /// A read of the Lease `ns/l` held by `holder`, renewed at `renew_time`
    /// (RFC 3339), for the default duration.
    pub(in crate::agent) fn held(holder: &str, renew_time: &str) -> LeaseRead {
        LeaseRead::Held(Held {
            lease: "ns/l".into(),
            holder: holder.into(),
            renew_time: Some(renew_time.into()),
            duration: DEFAULT_LEASE_DURATION,
        })
    }

    #[test]
    fn a_failed_read_keeps_the_last_leader_for_the_grace_then_the_lock_decides() {
        let t0 = Instant::now();
        let wall = SystemTime::now();
        let mut leader = Leader::default();
        assert_eq!(leader.decides(t0, GRACE), None, "not read yet");
        leader.observe(held("pod-a", "2026-11-26T06:00:00Z"), t0);
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 403".into()), t0 + GRACE);
        let failing = t0 + GRACE;
        assert_eq!(leader.decides(failing, GRACE), Some(Ok("pod-a")), "one failed read demotes nobody");
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 429".into()), failing + GRACE / 2);
        assert_eq!(leader.decides(failing + GRACE / 2, GRACE), Some(Ok("pod-a")), "the grace runs from the first");
        assert_eq!(leader.problem(failing + GRACE / 2, GRACE, wall), None, "failed reads are no unrenewed Lease");
        let lapsed = failing + GRACE;
        assert_eq!(leader.decides(lapsed, GRACE), None, "past the grace the lock decides");
        let problem = leader.problem(lapsed, GRACE, wall).expect("a lasting failure is reported");
        assert!(problem.starts_with("Cannot read Lease ns/l: 429; the publisher lock decides"), "{problem}");
        leader.observe(held("pod-b", "2026-11-26T06:00:40Z"), lapsed);
        assert_eq!((leader.decides(lapsed, GRACE), leader.problem(lapsed, GRACE, wall)), (Some(Ok("pod-b")), None));
    }

    #[test]
    fn an_answer_decides_at_once_and_a_failure_before_any_answer_stands_by_within_the_grace() {
        let t0 = Instant::now();
        let mut leader = Leader::default();
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 503".into()), t0);
        assert_eq!(leader.decides(t0, GRACE), Some(Err("Cannot read Lease ns/l: 503")));
        assert_eq!(leader.failure(), Some("Cannot read Lease ns/l: 503"));
        leader.observe(LeaseRead::NoLeader("Lease ns/l has no holder".into()), t0 + GRACE * 2);
        assert_eq!(
            leader.decides(t0 + GRACE * 2, GRACE),
            Some(Err("Lease ns/l has no holder")),
            "no lapse: it answered"
        );
        assert_eq!(leader.failure(), None);
    }

    #[test]
    fn a_lease_left_unrenewed_past_its_duration_and_the_grace_names_no_leader_and_says_who_and_since_when() {
        let t0 = Instant::now();
        let renewed = "2026-11-26T06:00:00Z";
        let wall = |secs| parse_rfc3339(renewed).unwrap() + S(secs);
        let mut leader = Leader::default();
        // Renewed every 2 s for a while: it leads.
        for i in 0..10 {
            let time = format!("2026-11-26T05:59:{:02}Z", 40 + i * 2);
            leader.observe(held("pod-a_1", &time), t0 + S(i * 2));
        }
        leader.observe(held("pod-a_1", renewed), t0 + S(20));
        // Then never again, read every 5 s.
        let limit = DEFAULT_LEASE_DURATION + LEASE_GRACE;
        let mut stuck_at = None;
        for i in 1..=20 {
            let now = t0 + S(20 + i * 5);
            leader.observe(held("pod-a_1", renewed), now);
            if leader.decides(now, GRACE).is_none() {
                stuck_at = Some(S(i * 5));
                break;
            }
            assert_eq!(leader.decides(now, GRACE), Some(Ok("pod-a_1")));
            assert_eq!(leader.problem(now, GRACE, wall(i * 5)), None);
        }
        assert_eq!(stuck_at, Some(limit), "no leader once unrenewed for 15 s + 10 s, as reads saw it");
        let now = t0 + S(20) + limit;
        let problem = leader.problem(now, GRACE, wall(25)).expect("a problem of the status");
        assert_eq!(
            problem,
            "The operator's leader is not renewing its Lease: Lease ns/l names pod-a_1, not renewed for more than its \
             leaseDurationSeconds (15s) plus 10s: last renewed 2026-11-26T06:00:00Z (under a minute ago); the \
             publisher lock decides who publishes until the Lease is renewed or taken over"
        );
        // The age by the clock, in minutes: the reason changes once a minute.
        let later = leader.problem(now, GRACE, wall(3 * 60 + 59)).unwrap();
        assert!(later.contains("(3 min ago)"), "{later}");
        assert_eq!(leader.problem(now, GRACE, wall(3 * 60 + 1)), Some(later));
        // A renewTime ahead of this clock is not "under a minute ago".
        let ahead = leader.problem(now, GRACE, wall(0) - S(3600)).unwrap();
        assert!(
            ahead.contains(
                "last renewed 2026-11-26T06:00:00Z (ahead of this clock; unchanged for under a minute as seen \
                            from here)"
            ),
            "{ahead}"
        );
        // A renewal, or another holder taking over: it leads again.
        leader.observe(held("pod-b_2", "2026-11-26T06:01:00Z"), now + S(5));
        assert_eq!(leader.decides(now + S(5), GRACE), Some(Ok("pod-b_2")));
        assert_eq!(leader.problem(now + S(5), GRACE, wall(60)), None);
        // Reads that fail do not age the Lease: the last answer stands
        // through the failing grace, not judged unrenewed for want of reads.
        for i in 1..=2 {
            leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 503".into()), now + S(5 + i * 6));
        }
        assert_eq!(leader.decides(now + S(17), GRACE), Some(Ok("pod-b_2")));
    }

    #[test]
    fn a_lease_that_names_nobody_for_longer_than_the_grace_leaves_it_to_the_lock_and_says_so() {
        let t0 = Instant::now();
        let wall = SystemTime::now();
        let mut leader = Leader::default();
        let why = "Lease ns/l has no holder: the operator has no leader right now";
        for i in 0..=GRACE.as_secs() {
            let now = t0 + S(i);
            leader.observe(LeaseRead::NoLeader(why.into()), now);
            if i < GRACE.as_secs() {
                assert_eq!(leader.decides(now, GRACE), Some(Err(why)), "{i} s: an election takes a moment");
                assert_eq!(leader.problem(now, GRACE, wall), None);
            }
        }
        let now = t0 + GRACE;
        assert_eq!(leader.decides(now, GRACE), None, "past the bound the lock decides");
        assert_eq!(
            leader.problem(now, GRACE, wall).as_deref(),
            Some(
                "Lease ns/l has no holder: the operator has no leader right now, for more than 14s; the publisher \
                 lock decides who publishes until the operator elects a leader"
            )
        );
        leader.observe(held("pod-a_1", "2026-11-26T06:00:00Z"), now + S(1));
        assert_eq!(leader.decides(now + S(1), GRACE), Some(Ok("pod-a_1")), "elected: it decides at once");
    }
}
