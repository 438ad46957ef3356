//! The operator's leader as its leader-election Lease tells it
//! (`--follow-leader-lease`), read on every check. An answer (a holder, or
//! no holder) decides at once; a read that fails (403, 429, 5xx, a
//! timeout) does not: the last answer stands for a grace period, so one
//! failed read never demotes the publisher. A failure that lasts past the
//! grace is a reported problem, and meanwhile the publisher lock alone
//! decides, so exactly one instance still publishes and says why. Pure:
//! the clock comes in as arguments.

use std::time::{Duration, Instant};

/// What one read of the Lease said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LeaseRead {
    /// The pod the operator's leader runs in.
    Leader(String),
    /// The Lease answered: nobody leads (no Lease, no holder), and why.
    NoLeader(String),
    /// The Lease could not be read, and why.
    Failed(String),
}

#[derive(Debug, Default)]
pub(super) struct Leader {
    /// The last answer: `Ok(pod)`, or `Err(why nobody leads)`.
    answer: Option<Result<String, String>>,
    /// Since when reads fail, and the latest failure.
    failing: Option<(Instant, String)>,
}

impl Leader {
    pub(super) fn observe(&mut self, read: LeaseRead, now: Instant) {
        match read {
            LeaseRead::Leader(pod) => self.answered(Ok(pod)),
            LeaseRead::NoLeader(why) => self.answered(Err(why)),
            LeaseRead::Failed(why) => {
                let since = self.failing.as_ref().map_or(now, |(since, _)| *since);
                self.failing = Some((since, why));
            }
        }
    }

    fn answered(&mut self, answer: Result<String, String>) {
        self.answer = Some(answer);
        self.failing = None;
    }

    /// Whether reads have failed for `grace` or longer.
    fn lapsed(&self, now: Instant, grace: Duration) -> bool {
        self.failing.as_ref().is_some_and(|(since, _)| now.saturating_duration_since(*since) >= grace)
    }

    /// Who leads, for the lock's decision: `None` before the first read and
    /// once reads have failed for `grace` (the publisher lock decides);
    /// while they fail within it, the last answer, or the failure itself
    /// when there was none yet (stand by until the grace is over).
    pub(super) fn decides(&self, now: Instant, grace: Duration) -> Option<Result<&str, &str>> {
        if self.lapsed(now, grace) {
            return None;
        }
        match (&self.answer, &self.failing) {
            (Some(answer), _) => Some(answer.as_ref().map(String::as_str).map_err(String::as_str)),
            (None, Some((_, why))) => Some(Err(why.as_str())),
            (None, None) => None,
        }
    }

    /// Why the Lease is not followed, once reads have failed for `grace`.
    pub(super) fn problem(&self, now: Instant, grace: Duration) -> Option<String> {
        let (_, why) = self.failing.as_ref().filter(|_| self.lapsed(now, grace))?;
        Some(format!("{why}; the publisher lock decides who publishes until the Lease can be read again"))
    }

    /// Whether a failed read is being ridden out on the last answer.
    pub(super) fn failure(&self) -> Option<&str> {
        self.failing.as_ref().map(|(_, why)| why.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(14);

    #[test]
    fn a_failed_read_keeps_the_last_leader_for_the_grace_then_the_lock_decides() {
        let t0 = Instant::now();
        let mut leader = Leader::default();
        assert_eq!(leader.decides(t0, GRACE), None, "not read yet");
        leader.observe(LeaseRead::Leader("pod-a".into()), t0);
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 403".into()), t0 + GRACE);
        let failing = t0 + GRACE;
        assert_eq!(leader.decides(failing, GRACE), Some(Ok("pod-a")), "one failed read demotes nobody");
        leader.observe(LeaseRead::Failed("Cannot read Lease ns/l: 429".into()), failing + GRACE / 2);
        assert_eq!(leader.decides(failing + GRACE / 2, GRACE), Some(Ok("pod-a")), "the grace runs from the first");
        assert_eq!(leader.problem(failing + GRACE / 2, GRACE), None);
        let lapsed = failing + GRACE;
        assert_eq!(leader.decides(lapsed, GRACE), None, "past the grace the lock decides");
        let problem = leader.problem(lapsed, GRACE).expect("a lasting failure is reported");
        assert!(problem.starts_with("Cannot read Lease ns/l: 429; the publisher lock decides"), "{problem}");
        leader.observe(LeaseRead::Leader("pod-b".into()), lapsed);
        assert_eq!((leader.decides(lapsed, GRACE), leader.problem(lapsed, GRACE)), (Some(Ok("pod-b")), None));
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
}
