//! When the agent's loop does what, pure (the clock is an argument): the
//! next check (the check cadence from the last one; sooner after a watch's
//! nudge, but never closer than [`NUDGE_GAP`] to the last), the next status
//! write (a heartbeat after the last attempt's start, or the retry backoff's
//! delay after a failure), whether a write is due now, and how long a
//! stopping holder waits for a standby to take over ([`handover_wait`]).

use std::time::{Duration, Instant};

/// The shortest time between two checks when watches nudge the loop: a
/// flip is published well within a second, a flapping resource costs at
/// most a few checks a second.
pub(crate) const NUDGE_GAP: Duration = Duration::from_millis(200);

/// The loop's timetable.
pub(crate) struct Schedule {
    start: Instant,
    last_check: Option<Instant>,
    next_write: Instant,
    nudged: bool,
}

impl Schedule {
    /// A first check and a first write, both at `start`.
    pub(crate) fn new(start: Instant) -> Schedule {
        Schedule { start, last_check: None, next_write: start, nudged: false }
    }

    /// The next check is due at once (this instance just began to publish,
    /// and some signals waited for that).
    pub(crate) fn check_soon(&mut self) {
        self.last_check = None;
    }

    /// A watch saw a verdict change: check soon.
    pub(crate) fn nudge(&mut self) {
        self.nudged = true;
    }

    /// When the next check is due, `cadence` after the last one.
    pub(crate) fn next_check(&self, cadence: Duration) -> Instant {
        let next = self.last_check.map_or(self.start, |at| at + cadence);
        if self.nudged { next.min(self.last_check.map_or(self.start, |at| at + NUDGE_GAP)) } else { next }
    }

    /// When the loop wakes next: the next check, or the next write when
    /// this instance `writes` at all. A standby (or an instance waiting for
    /// its operator's first answer) has an overdue write it will not make:
    /// waking for it would wake at once, again and again, a core spent on
    /// nothing. It wakes for its checks; the one that makes it publish
    /// makes the overdue write due at once.
    pub(crate) fn next_wake(&self, cadence: Duration, writes: bool) -> Instant {
        let check = self.next_check(cadence);
        if writes { check.min(self.next_write) } else { check }
    }

    pub(crate) fn checked(&mut self, at: Instant) {
        self.last_check = Some(at);
        self.nudged = false;
    }

    /// Whether the status is written at `now`: the heartbeat is due, or
    /// what would be published changed (anything but the timestamp) while
    /// writes work; while they fail, a change waits for the retry, on the
    /// backoff's schedule.
    pub(crate) fn write_due(&self, now: Instant, changed: bool, failing: bool) -> bool {
        now >= self.next_write || (changed && !failing)
    }

    /// A write that started at `attempt` succeeded: the next heartbeat is
    /// one interval after its start, so the cadence does not drift by the
    /// request's duration.
    pub(crate) fn wrote(&mut self, attempt: Instant, interval: Duration) {
        self.next_write = attempt + interval;
    }

    /// A write failed: the retry is at `at`.
    pub(crate) fn retry_at(&mut self, at: Instant) {
        self.next_write = at;
    }
}

/// The longest a stopping holder waits for a standby to take over: well
/// inside kubelet's default 30 s grace period, whatever the settings.
pub(crate) const MAX_HANDOVER_WAIT: Duration = Duration::from_secs(20);

/// What a standby's take-over costs beyond its look and its check: the
/// read that sees the lock released and the write that claims it.
const TAKE_OVER_CALLS: Duration = Duration::from_secs(2);

/// How long a stopping holder waits for a standby to take the lock it
/// released: what a take-over costs the standby. It sees the release at
/// its next check (up to `check_interval` later), then checks its operator
/// as a whole (every watched URL, its own Pod when a URL refuses) before
/// it writes, as the holder's own checks do (`slowest_check`: the slowest
/// of its recent ones, [`CheckTimes`]), and reads and writes. At most
/// [`MAX_HANDOVER_WAIT`].
pub(crate) fn handover_wait(check_interval: Duration, slowest_check: Duration) -> Duration {
    (check_interval + slowest_check + TAKE_OVER_CALLS).min(MAX_HANDOVER_WAIT)
}

/// How long the last few checks took: the slowest of them is what a
/// standby's check costs at a take-over ([`handover_wait`]).
#[derive(Debug, Default)]
pub(crate) struct CheckTimes {
    took: [Duration; 8],
    next: usize,
}

impl CheckTimes {
    /// A check that began at `started` ended at `ended`.
    pub(crate) fn checked(&mut self, started: Instant, ended: Instant) {
        self.took[self.next] = ended.saturating_duration_since(started);
        self.next = (self.next + 1) % self.took.len();
    }

    /// The slowest of the last eight checks.
    pub(crate) fn slowest(&self) -> Duration {
        self.took.iter().copied().max().unwrap_or_default()
    }
}

/// How often to check: the check interval (at most the heartbeat) while
/// anything changes between heartbeats, else once per heartbeat (one
/// wake-up, one request).
pub(crate) fn check_cadence(interval: Duration, check_interval: Duration, looks_at_something: bool) -> Duration {
    if looks_at_something { check_interval.min(interval) } else { interval }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn an_agent_with_nothing_to_look_at_wakes_once_per_heartbeat() {
        assert_eq!(check_cadence(S(60), S(5), false), S(60), "basic mode: one wake-up, one write");
        assert_eq!(check_cadence(S(60), S(5), true), S(5));
        assert_eq!(check_cadence(S(2), S(5), true), S(2), "never slower than the heartbeat");
        assert_eq!(check_cadence(S(1), S(5), false), S(1));
    }

    #[test]
    fn checks_follow_the_cadence_and_a_nudge_brings_them_forward_within_a_gap() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        assert_eq!((s.next_check(S(5)), s.next_wake(S(5), true)), (t0, t0), "both at once at the start");
        s.checked(t0);
        assert_eq!(s.next_check(S(5)), t0 + S(5));
        s.nudge();
        assert_eq!(s.next_check(S(5)), t0 + NUDGE_GAP, "a nudge: soon, but not closer than the gap");
        s.checked(t0 + NUDGE_GAP);
        assert_eq!(s.next_check(S(5)), t0 + NUDGE_GAP + S(5), "a check clears the nudge");
        s.check_soon();
        assert_eq!(s.next_check(S(5)), t0, "due at once");
    }

    #[test]
    fn writes_follow_the_heartbeat_from_the_attempt_and_retries_the_backoff() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        assert!(s.write_due(t0, false, false), "the first write is at the start");
        s.wrote(t0, S(60));
        assert_eq!(s.next_wake(S(60), true), t0, "the first check is still due");
        s.checked(t0);
        assert_eq!(s.next_wake(S(60), true), t0 + S(60));
        assert!(!s.write_due(t0 + S(59), false, false));
        assert!(s.write_due(t0 + S(59), true, false), "a change goes out at once");
        assert!(!s.write_due(t0 + S(59), true, true), "unless writes fail: it waits for the retry");
        assert!(s.write_due(t0 + S(60), false, false));
        s.retry_at(t0 + S(61));
        assert_eq!(s.next_wake(S(60), true), t0 + S(60), "the next check comes first");
        assert!(s.write_due(t0 + S(61), false, true));
    }

    #[test]
    fn a_stopping_holder_waits_for_what_a_take_over_costs_a_standby() {
        let t0 = Instant::now();
        let mut times = CheckTimes::default();
        assert_eq!(handover_wait(S(5), times.slowest()), S(7), "checks that cost nothing: a check interval and 2 s");
        // Two watched URLs answering in 0.9 s each: a check of 1.8 s.
        times.checked(t0, t0 + Duration::from_millis(1800));
        for _ in 0..7 {
            times.checked(t0, t0 + Duration::from_millis(20));
        }
        assert_eq!(handover_wait(S(5), times.slowest()), Duration::from_millis(8800));
        // Eight quicker checks later the slow one is forgotten.
        times.checked(t0, t0 + Duration::from_millis(30));
        assert_eq!(times.slowest(), Duration::from_millis(30));
        assert_eq!(handover_wait(S(60), S(1)), MAX_HANDOVER_WAIT, "never past kubelet's grace period");
    }

    #[test]
    fn an_overdue_write_this_instance_does_not_make_never_wakes_it() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0);
        s.wrote(t0, S(2));
        s.checked(t0 + S(10));
        // The heartbeat was due at 2 s; a standby checks every second.
        assert_eq!(s.next_wake(S(1), false), t0 + S(11), "a standby wakes for its next check");
        assert_eq!(s.next_wake(S(1), true), t0 + S(2), "a publisher writes the overdue heartbeat at once");
    }
}
