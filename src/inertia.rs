//! Inertia: what an output publishes changes only once the new state has
//! held for its window (pure; the clock is an argument).
//!
//! One model for every output that has it: the kube9 health
//! (`--health-inertia`), `Upgradeable` on the OperatorCondition and the
//! ClusterOperator (`--upgradeable-inertia`) and the ClusterOperator's
//! `Degraded` (`--degraded-inertia`). Each has two windows: one for a
//! change towards worse (health degraded, an upgrade blocked), so that a
//! blip shorter than it is never published; and one for a change towards
//! better, so that, say, `Upgradeable=True` goes out only once the
//! blocking resources have been clear for a while and an upgrade does not
//! start the second a migration ends. A window of zero publishes at once,
//! as an output without inertia does.
//!
//! The first state observed is published at once: there is nothing yet to
//! hold on to (the start-up allowance, not inertia, covers an operator
//! that is only starting), unless the output said a state already
//! ([`Inertia::seed`]: read back after a restart or a takeover), which
//! then holds as published. Worse goes out sooner than better: a pending
//! change towards better that reverses before its window ends is
//! forgotten (better must hold unbroken); one towards worse is forgotten
//! only once better has held for its own window, so flapping cannot hide
//! it: it is published once its window since its first check has passed,
//! whatever that check saw, and then held while the flapping goes on. One
//! that moves further the same way (healthy → degraded → unhealthy) keeps
//! counting from its first check, and the state published at the end is
//! the worst seen last. A published state holds "since" the first check
//! that saw it, which the outputs say in their reason or message only
//! where inertia is on, so that their words without it stay as they were.

use std::time::{Duration, Instant, SystemTime};

/// The longest window a flag takes: an hour (a held state longer than that
/// is no blip; the cluster should hear of it).
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(3600);

/// How long a change must hold before it is published, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Windows {
    /// Towards worse: health degraded or unhealthy, an upgrade blocked.
    pub worse: Duration,
    /// Towards better: health recovered, an upgrade no longer blocked.
    pub better: Duration,
}

impl Windows {
    /// Whether either window holds anything back.
    pub(crate) fn is_on(self) -> bool {
        !self.worse.is_zero() || !self.better.is_zero()
    }

    /// Parses `WORSE[,BETTER]` (`30s`, `0,2m`), each duration read by
    /// `duration` and at most [`MAX_WINDOW`]; a missing `BETTER` is zero.
    /// What is wrong completes "FLAG: VALUE …": of one window, as of any
    /// duration; of two, naming the one.
    pub(crate) fn parse(text: &str, duration: fn(&str) -> Result<Duration, String>) -> Result<Windows, String> {
        let one = |part: &str| -> Result<Duration, String> {
            let d = duration(part.trim())?;
            if d > MAX_WINDOW {
                return Err(format!("must be between 0s and {}s", MAX_WINDOW.as_secs()));
            }
            Ok(d)
        };
        let Some((worse, better)) = text.split_once(',') else {
            return Ok(Windows { worse: one(text)?, better: Duration::ZERO });
        };
        if better.contains(',') {
            return Err("is not WORSE[,BETTER]: two windows at most (e.g. 30s, or 0,5m)".into());
        }
        let named = |which: &str, part: &str| {
            one(part).map_err(|why| format!("gives the window towards {which} as {:?}, which {why}", part.trim()))
        };
        Ok(Windows { worse: named("worse", worse)?, better: named("better", better)? })
    }
}

/// A state and since when it has held: the monotonic time the windows are
/// measured with, and the wall time outputs say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Since<S> {
    pub state: S,
    pub at: Instant,
    pub wall: SystemTime,
}

/// A change not published yet: the state seen now, since when the change
/// has held, and when it is published if it holds on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending<S> {
    pub state: S,
    pub since: SystemTime,
    pub due: SystemTime,
}

/// One output's inertia over a state ranked by `Ord`: greater is worse.
#[derive(Clone, Debug)]
pub(crate) struct Inertia<S> {
    windows: Windows,
    published: Option<Since<S>>,
    /// A change from `published`, since its first check.
    pending: Option<Since<S>>,
    /// While a change is pending: since when the state seen is back to the
    /// published one (a reversal, which cancels the change once it has
    /// held for its own window).
    back: Option<Instant>,
}

impl<S: Copy + Ord> Inertia<S> {
    /// The first state observed is published at once.
    pub(crate) fn new(windows: Windows) -> Inertia<S> {
        Inertia { windows, published: None, pending: None, back: None }
    }

    /// Before the first observation: `state` is what the output already
    /// says (read back from it after a restart or a takeover), published
    /// since `since`; the first state observed is then a change like any
    /// other, counted from that observation.
    pub(crate) fn seed(&mut self, state: S, since: SystemTime, now: Instant) {
        if self.published.is_none() {
            self.published = Some(Since { state, at: now, wall: since });
        }
    }

    /// The window a change from `from` to `to` must hold for.
    fn window(&self, from: S, to: S) -> Duration {
        if to > from { self.windows.worse } else { self.windows.better }
    }

    /// Takes the state seen at `now` (`wall` the same instant on the wall
    /// clock) and says which state to publish.
    pub(crate) fn observe(&mut self, state: S, now: Instant, wall: SystemTime) -> S {
        let published = *self.published.get_or_insert(Since { state, at: now, wall });
        let held = |since: Instant, window: Duration| now.saturating_duration_since(since) >= window;
        let publish = |inertia: &mut Inertia<S>, change: Since<S>| {
            (inertia.published, inertia.pending, inertia.back) = (Some(change), None, None);
            change.state
        };
        if state == published.state {
            let Some(pending) = self.pending else { return state };
            // Back where it was published: a change towards better is
            // cancelled at once (it must hold unbroken); one towards worse
            // only once better has held for its window, and it is published
            // when its own window ends first: a flapping operator is shown.
            let back = *self.back.get_or_insert(now);
            let cancel_after = if pending.state > state { self.windows.better } else { Duration::ZERO };
            if held(back, cancel_after) {
                (self.pending, self.back) = (None, None);
            } else if held(pending.at, self.window(state, pending.state)) {
                return publish(self, pending);
            }
            return published.state;
        }
        self.back = None;
        let worse = state > published.state;
        let at = match self.pending {
            Some(p) if (p.state > published.state) == worse => (p.at, p.wall),
            _ => (now, wall),
        };
        let change = Since { state, at: at.0, wall: at.1 };
        if held(change.at, self.window(published.state, state)) {
            return publish(self, change);
        }
        self.pending = Some(change);
        published.state
    }

    /// The change being held back, and when it would be published.
    pub(crate) fn pending(&self) -> Option<Pending<S>> {
        let published = self.published?;
        let p = self.pending?;
        Some(Pending { state: p.state, since: p.wall, due: p.wall + self.window(published.state, p.state) })
    }
}

/// A value whose state is under [`Inertia`]: while a change is held back,
/// the last value seen in the published state stands in (the kube9 health
/// with its reason, an `Upgradeable` condition with its message).
#[derive(Clone, Debug)]
pub(crate) struct HeldValue<T, S> {
    inertia: Inertia<S>,
    /// The last value seen in the published state.
    kept: Option<T>,
    /// The last value seen in a pending state: kept once that is published
    /// on a check that saw it reversed (a flapping operator).
    pending: Option<T>,
}

impl<T: Clone, S: Copy + Ord> HeldValue<T, S> {
    pub(crate) fn new(windows: Windows) -> HeldValue<T, S> {
        HeldValue { inertia: Inertia::new(windows), kept: None, pending: None }
    }

    /// Before the first observation: `value`, in `state`, is what the
    /// output says, since `since` ([`Inertia::seed`]).
    pub(crate) fn seed(&mut self, value: T, state: S, since: SystemTime, now: Instant) {
        if self.inertia.published.is_none() {
            self.inertia.seed(state, since, now);
            self.kept = Some(value);
        }
    }

    /// Takes the value seen at `now`, in `state`.
    pub(crate) fn observe(&mut self, value: &T, state: S, now: Instant, wall: SystemTime) {
        let before = self.inertia.published.map(|p| p.state);
        let published = self.inertia.observe(state, now, wall);
        if published == state {
            self.kept = Some(value.clone());
            return;
        }
        if before != Some(published) {
            self.kept = self.pending.take();
        }
        self.pending = Some(value.clone());
    }

    /// What to publish of `value` (in `state`) as of the last observation:
    /// `value` itself when its state is the one published, else the value
    /// kept from it; with since when the published state has held (`None`
    /// before the first observation).
    pub(crate) fn held(&self, value: T, state: S) -> (T, Option<SystemTime>) {
        match (self.inertia.published, &self.kept) {
            (Some(p), _) if p.state == state => (value, Some(p.wall)),
            (Some(p), Some(kept)) => (kept.clone(), Some(p.wall)),
            _ => (value, None),
        }
    }

    pub(crate) fn pending(&self) -> Option<Pending<S>> {
        self.inertia.pending()
    }
}

/// A change an output holds back, as `/status` shows it: which output,
/// the state it would publish, since when that has held and when it goes
/// out if it holds on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingChange {
    pub output: String,
    pub state: String,
    pub since: SystemTime,
    pub due: SystemTime,
}

impl PendingChange {
    pub(crate) fn new<S>(output: String, state: &str, pending: Pending<S>) -> PendingChange {
        PendingChange { output, state: state.into(), since: pending.since, due: pending.due }
    }
}

/// ` (since 2026-11-28T07:01:02Z)`: what a reason or message under inertia
/// ends with.
pub(crate) fn since_note(wall: SystemTime) -> String {
    format!(" (since {})", crate::util::time::format_rfc3339(wall))
}

/// A reason or message and the time its ` (since …)` note says, the note
/// taken off; the text as it is, and `None`, without one.
pub(crate) fn split_since(text: &str) -> (&str, Option<SystemTime>) {
    let note = text.strip_suffix(')').and_then(|t| t.rsplit_once(" (since "));
    match note.and_then(|(before, at)| Some((before, crate::util::time::parse_rfc3339(at)?))) {
        Some((before, at)) => (before, Some(at)),
        None => (text, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A clock: the monotonic and the wall instant `s` seconds in.
    fn at(t0: Instant, s: u64) -> (Instant, SystemTime) {
        (t0 + secs(s), SystemTime::UNIX_EPOCH + secs(1_800_000_000 + s))
    }

    fn observe<S: Copy + Ord>(inertia: &mut Inertia<S>, state: S, t0: Instant, s: u64) -> S {
        let (now, wall) = at(t0, s);
        inertia.observe(state, now, wall)
    }

    #[test]
    fn a_change_towards_worse_is_published_once_it_held_for_its_window() {
        let t0 = Instant::now();
        let mut inertia = Inertia::new(Windows { worse: secs(10), better: Duration::ZERO });
        assert_eq!(observe(&mut inertia, 0, t0, 0), 0, "the first state at once");
        assert_eq!(observe(&mut inertia, 1, t0, 1), 0);
        assert_eq!(inertia.pending(), Some(Pending { state: 1, since: at(t0, 1).1, due: at(t0, 11).1 }));
        assert_eq!(observe(&mut inertia, 1, t0, 10), 0, "9 s of a 10 s window");
        assert_eq!(observe(&mut inertia, 1, t0, 11), 1, "held 10 s");
        assert_eq!(inertia.pending(), None);
        assert_eq!(inertia.published.map(|p| p.wall), Some(at(t0, 1).1), "held since its first check");
        assert_eq!(observe(&mut inertia, 0, t0, 12), 0, "no window towards better: at once");
    }

    #[test]
    fn a_flap_shorter_than_the_window_is_never_published_and_a_new_one_starts_over() {
        let t0 = Instant::now();
        let mut inertia = Inertia::new(Windows { worse: secs(10), better: Duration::ZERO });
        observe(&mut inertia, 0, t0, 0);
        assert_eq!(observe(&mut inertia, 1, t0, 1), 0);
        assert_eq!(observe(&mut inertia, 0, t0, 9), 0, "the flap ended");
        assert_eq!(inertia.pending(), None);
        assert_eq!(observe(&mut inertia, 1, t0, 10), 0);
        assert_eq!(observe(&mut inertia, 1, t0, 19), 0, "counted from 10 s, not 1 s");
        assert_eq!(observe(&mut inertia, 1, t0, 20), 1);
    }

    #[test]
    fn a_change_towards_better_has_its_own_window() {
        let t0 = Instant::now();
        let mut inertia = Inertia::new(Windows { worse: Duration::ZERO, better: secs(30) });
        assert_eq!(observe(&mut inertia, 1, t0, 0), 1);
        assert_eq!(observe(&mut inertia, 0, t0, 5), 1);
        assert_eq!(inertia.pending().map(|p| (p.state, p.due)), Some((0, at(t0, 35).1)));
        assert_eq!(observe(&mut inertia, 1, t0, 20), 1, "blocked again: the clear spell is forgotten");
        assert_eq!(observe(&mut inertia, 0, t0, 21), 1);
        assert_eq!(observe(&mut inertia, 0, t0, 50), 1);
        assert_eq!(observe(&mut inertia, 0, t0, 51), 0, "clear for 30 s");
        assert_eq!(observe(&mut inertia, 1, t0, 52), 1, "no window towards worse: at once");
    }

    #[test]
    fn a_change_that_goes_further_the_same_way_keeps_counting() {
        let t0 = Instant::now();
        let mut inertia = Inertia::new(Windows { worse: secs(10), better: secs(10) });
        observe(&mut inertia, 0, t0, 0);
        assert_eq!(observe(&mut inertia, 1, t0, 1), 0);
        assert_eq!(observe(&mut inertia, 2, t0, 6), 0);
        assert_eq!(inertia.pending().map(|p| (p.state, p.due)), Some((2, at(t0, 11).1)));
        assert_eq!(observe(&mut inertia, 2, t0, 11), 2, "worse since 1 s: the state seen now is published");
        assert_eq!(observe(&mut inertia, 1, t0, 12), 2);
        assert_eq!(observe(&mut inertia, 0, t0, 21), 2, "better since 12 s: 9 s");
        assert_eq!(observe(&mut inertia, 0, t0, 22), 0, "10 s");
    }

    #[test]
    fn zero_windows_publish_every_state_at_once_and_a_seeded_state_counts_as_published() {
        let t0 = Instant::now();
        let mut none = Inertia::new(Windows::default());
        for (s, state) in [0, 2, 1, 0, 2].into_iter().enumerate() {
            assert_eq!(observe(&mut none, state, t0, s as u64), state);
            assert_eq!(none.pending(), None);
        }
        assert!(!Windows::default().is_on());
        let mut degraded = Inertia::new(Windows { worse: secs(120), better: Duration::ZERO });
        degraded.seed(false, at(t0, 0).1, t0);
        assert!(!observe(&mut degraded, true, t0, 0), "not degraded at start: the window applies");
        assert!(observe(&mut degraded, true, t0, 120));
    }

    #[test]
    fn a_held_value_stands_in_for_the_values_of_a_pending_state() {
        let t0 = Instant::now();
        let mut held: HeldValue<&str, u8> = HeldValue::new(Windows { worse: secs(10), better: Duration::ZERO });
        assert_eq!(held.held("before any", 1), ("before any", None));
        let (now, wall) = at(t0, 0);
        held.observe(&"ok", 0, now, wall);
        let (now, wall1) = at(t0, 1);
        held.observe(&"bad: a", 1, now, wall1);
        assert_eq!(held.held("bad: a", 1), ("ok", Some(wall)), "the published state's last value");
        assert_eq!(held.held("fine again", 0), ("fine again", Some(wall)));
        let (now, wall11) = at(t0, 11);
        held.observe(&"bad: b", 1, now, wall11);
        assert_eq!(held.held("bad: c", 1), ("bad: c", Some(wall1)), "published, since its first check");
        assert_eq!(held.pending(), None);
    }

    /// An operator in a restart loop: bad at every other check, 1 s apart.
    fn flapping(inertia: &mut Inertia<u8>, t0: Instant, from: u64, to: u64) -> Vec<u8> {
        (from..to).map(|s| observe(inertia, (s % 2) as u8, t0, s)).collect()
    }

    #[test]
    fn a_flapping_state_is_published_once_and_held_until_the_better_one_holds() {
        let t0 = Instant::now();
        let mut inertia = Inertia::new(Windows { worse: Duration::ZERO, better: secs(3) });
        assert_eq!(observe(&mut inertia, 0, t0, 0), 0);
        let published = flapping(&mut inertia, t0, 1, 21);
        assert_eq!(published, [1; 20], "bad at once, then held: good never holds 3 s");
        assert_eq!(observe(&mut inertia, 0, t0, 22), 1, "good since 20 s: 2 s of 3");
        assert_eq!(observe(&mut inertia, 0, t0, 23), 0, "good for 3 s");
    }

    #[test]
    fn a_window_towards_worse_does_not_hide_a_flapping_state_for_ever() {
        let t0 = Instant::now();
        let mut inertia = Inertia::new(Windows { worse: secs(8), better: secs(3) });
        observe(&mut inertia, 0, t0, 0);
        let published = flapping(&mut inertia, t0, 1, 30);
        let first_bad = published.iter().position(|s| *s == 1).expect("published");
        assert_eq!(first_bad + 1, 9, "8 s after the first bad check: {published:?}");
        assert!(published[first_bad..].iter().all(|s| *s == 1), "held while it flaps: {published:?}");
        assert_eq!(inertia.published.map(|p| p.wall), Some(at(t0, 1).1), "bad since its first check");
        // A bad blip shorter than the window, then good for longer than 3 s:
        // nothing published.
        let mut calm = Inertia::new(Windows { worse: secs(8), better: secs(3) });
        for (s, state) in [(0, 0), (1, 1), (2, 0), (3, 0), (4, 0), (5, 0), (6, 1), (7, 0), (11, 0)] {
            assert_eq!(observe(&mut calm, state, t0, s), 0, "{s}");
        }
        assert_eq!(calm.pending(), None);
    }

    #[test]
    fn a_seeded_state_counts_as_published_since_its_own_time() {
        let t0 = Instant::now();
        let mut held: HeldValue<&str, bool> = HeldValue::new(Windows { worse: Duration::ZERO, better: secs(20) });
        let since = at(t0, 0).1 - secs(600);
        held.seed("blocked, as read back", true, since, t0);
        let (now, wall) = at(t0, 1);
        held.observe(&"clear", false, now, wall);
        assert_eq!(held.held("clear", false), ("blocked, as read back", Some(since)), "the window counts from here");
        let (now, wall) = at(t0, 21);
        held.observe(&"clear", false, now, wall);
        assert_eq!(held.held("clear", false), ("clear", Some(at(t0, 1).1)));
        held.seed("ignored once observed", true, since, t0);
        assert_eq!(held.held("clear", false).0, "clear");
    }

    #[test]
    fn a_state_published_on_a_reversed_check_keeps_its_own_value() {
        let t0 = Instant::now();
        let mut held: HeldValue<&str, u8> = HeldValue::new(Windows { worse: secs(2), better: secs(5) });
        for (s, value, state) in [(0, "ok", 0), (1, "bad: a", 1), (2, "ok", 0), (3, "ok", 0)] {
            let (now, wall) = at(t0, s);
            held.observe(&value, state, now, wall);
        }
        assert_eq!(held.held("ok", 0), ("bad: a", Some(at(t0, 1).1)), "bad for 2 s, with the reason it had");
    }

    #[test]
    fn windows_parse_worse_then_better_within_bounds() {
        let plain = |v: &str| v.parse::<u64>().map(Duration::from_secs).map_err(|_| "is not a number".to_string());
        assert_eq!(Windows::parse("30", plain), Ok(Windows { worse: secs(30), better: Duration::ZERO }));
        assert_eq!(Windows::parse("0, 120", plain), Ok(Windows { worse: Duration::ZERO, better: secs(120) }));
        assert_eq!(Windows::parse("3601", plain), Err("must be between 0s and 3600s".into()));
        assert_eq!(
            Windows::parse("5,x", plain),
            Err("gives the window towards better as \"x\", which is not a number".into())
        );
        assert_eq!(
            Windows::parse("3601,0", plain),
            Err("gives the window towards worse as \"3601\", which must be between 0s and 3600s".into())
        );
        assert_eq!(
            Windows::parse("5,6,7", plain),
            Err("is not WORSE[,BETTER]: two windows at most (e.g. 30s, or 0,5m)".into())
        );
        assert!(Windows::parse("", plain).is_err());
    }

    #[test]
    fn the_note_says_since_when_in_rfc_3339_and_reads_back() {
        let at = SystemTime::UNIX_EPOCH + secs(1_795_849_262);
        assert_eq!(since_note(at), " (since 2026-11-28T07:01:02Z)");
        assert_eq!(split_since(&format!("Blocked{}", since_note(at))), ("Blocked", Some(at)));
        assert_eq!(split_since("Blocked (since then)"), ("Blocked (since then)", None));
        assert_eq!(split_since("Blocked"), ("Blocked", None));
    }
}
