//! The reflector's decisions, pure: what a list-then-watch does after each
//! list and each watch (client-go's reflector, small). Every watch of
//! opstatus runs this one machine: a probed collection's
//! (`signals/probes/watcher.rs`) and the operator's Pod
//! (`signals/container/`), so a watch the server ends on schedule, or
//! whose connection is closed under it, means the same to both: no
//! problem, the next watch at once from the last version seen.
//!
//! A list gives the `resourceVersion` to watch from; when the server ends
//! a watch, the next starts from the last version seen, at once; a broken
//! stream or a refused watch tries again from there after a bounded,
//! jittered backoff ([`BACKOFF_BASE`] to [`BACKOFF_CAP`]); `410 Gone` lists
//! again. The randomness comes in as an argument. [`drive`] is the one loop
//! that carries the decisions out on a watch's thread, for any [`Reflect`],
//! and reads each watch; only what an event does is the owner's
//! ([`Reflect::next_event`]).

use super::{KubeError, WatchStream};
use crate::util::backoff::{Backoff, Jitter};
use std::time::{Duration, Instant};

/// A watch's `timeoutSeconds` (client-go: 5 to 10 min; a probe's watch
/// adds jitter). With nothing changing, this is how often a watched object
/// or collection costs a request.
pub(crate) const WATCH_SECONDS: u64 = 300;

/// How long past its `timeoutSeconds` a watch may go silent before it is
/// given up as broken (a server that vanished without closing).
pub(crate) const SILENCE_MARGIN: Duration = Duration::from_secs(30);

/// A watch that lasted this long was healthy: the next one starts at once
/// and the backoff starts over (and, open this long, its collection's
/// problem is no longer reported). One that ends sooner without an event
/// backs off, so a server that accepts watches and drops them at once is
/// not hammered.
pub(crate) const HEALTHY_WATCH: Duration = Duration::from_secs(10);

/// The reconnect backoff: client-go's reflector uses 800 ms to 30 s.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// How a list or a watch ended: what [`Machine::after`] decides on.
#[derive(Debug)]
pub(crate) enum Ended {
    Listed,
    ListFailed {
        error: String,
        retry_after: Option<Duration>,
    },
    /// The watch ran for `lasted` and ended: on the server's schedule, or
    /// broken (which reconnecting fixes, so no problem by itself).
    /// `delivered`: it carried at least one event.
    Closed {
        lasted: Duration,
        delivered: bool,
    },
    /// The watch was refused, or its stream said something that cannot be
    /// followed (`relist`: the store may have missed events).
    WatchFailed {
        error: String,
        relist: bool,
        retry_after: Option<Duration>,
    },
    /// 410 Gone: the version watched from was compacted away. `error` is
    /// what is reported when it keeps happening.
    Gone {
        error: String,
    },
    /// The owner wants what it watches listed again, at once: no problem.
    Relist,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    List,
    Watch,
}

/// What to do next, after how long, and what to report.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub step: Step,
    pub delay: Duration,
    /// `Some(None)`: clear the problem; `Some(Some(e))`: report `e`.
    pub problem: Option<Option<String>>,
}

/// The reflector's decisions, pure: the randomness is an argument.
///
/// Only a watch that works (it delivered an event, or stayed open for
/// [`HEALTHY_WATCH`]) clears a watch's problem and resets the backoff; a
/// list that works does not, nor does a watch that ends before delivering
/// anything. So a server whose lists work and whose every watch fails at
/// once (an `ERROR` event, 410 Gone, a refusal) gets a list and a watch
/// per backoff step, doubling to [`BACKOFF_CAP`], and the problem stays
/// reported instead of flapping once a second.
#[derive(Debug)]
pub(crate) struct Machine {
    backoff: Backoff,
    /// 410s since the last working watch: the first relists at once, more
    /// back off and are reported.
    gone: u32,
    /// Why the last watch failed, since the last one that worked: what a
    /// list that works leaves reported (a list's failure in between is
    /// past).
    troubled: Option<String>,
}

impl Default for Machine {
    fn default() -> Self {
        Machine { backoff: Backoff::new(BACKOFF_BASE, BACKOFF_CAP), gone: 0, troubled: None }
    }
}

impl Machine {
    /// The watch works (an event arrived): the collection is current, the
    /// backoff starts over; the caller clears the problem.
    pub(crate) fn delivered(&mut self) {
        self.backoff.reset();
        self.gone = 0;
        self.troubled = None;
    }

    pub(crate) fn after(&mut self, ended: Ended, random: u64) -> Plan {
        let plan = |step, delay, problem| Plan { step, delay, problem };
        match ended {
            // A watch's trouble stands until a watch works.
            Ended::Listed if self.troubled.is_some() => plan(Step::Watch, Duration::ZERO, Some(self.troubled.clone())),
            Ended::Listed => {
                self.backoff.reset();
                plan(Step::Watch, Duration::ZERO, Some(None))
            }
            Ended::ListFailed { error, retry_after } => {
                plan(Step::List, self.backoff.next_delay(random, retry_after), Some(Some(error)))
            }
            Ended::Closed { lasted, delivered } if delivered || lasted >= HEALTHY_WATCH => {
                self.delivered();
                plan(Step::Watch, Duration::ZERO, Some(None))
            }
            Ended::Closed { .. } => plan(Step::Watch, self.backoff.next_delay(random, None), None),
            Ended::WatchFailed { error, relist, retry_after } => {
                self.troubled = Some(error.clone());
                let step = if relist { Step::List } else { Step::Watch };
                plan(step, self.backoff.next_delay(random, retry_after), Some(Some(error)))
            }
            Ended::Relist => plan(Step::List, Duration::ZERO, None),
            Ended::Gone { error } => {
                self.gone += 1;
                if self.gone == 1 {
                    return plan(Step::List, Duration::ZERO, None);
                }
                self.troubled = Some(error.clone());
                plan(Step::List, self.backoff.next_delay(random, None), Some(Some(error)))
            }
        }
    }
}

/// What a watch's thread keeps for the agent's checks beside what it
/// watches: why it may be out of date, and since when its current watch is
/// open (once for [`HEALTHY_WATCH`], the problem is past: a quiet
/// object's watch delivers nothing).
#[derive(Debug, Default)]
pub(crate) struct WatchHealth {
    /// Why what is watched may be out of date; `None` while all is well.
    pub problem: Option<String>,
    pub watching_since: Option<Instant>,
}

impl WatchHealth {
    /// The problem to report `now`: none once the current watch has been
    /// open for [`HEALTHY_WATCH`].
    pub(crate) fn problem_at(&self, now: Instant) -> Option<&String> {
        let works = self.watching_since.is_some_and(|t| now.saturating_duration_since(t) >= HEALTHY_WATCH);
        self.problem.as_ref().filter(|_| !works)
    }
}

/// What a watch's owner made of one event ([`Reflect::next_event`]).
pub(crate) enum Event {
    /// Applied: the watch works. `relist`: the owner wants what it
    /// watches listed again, at once.
    Applied { relist: bool },
    /// An event the watch does not follow: read on.
    Skipped,
    /// `410 Gone` in an `ERROR` event (or nothing listed to apply it to).
    Gone,
    /// The stream cannot be followed from here (the why): listed again.
    Failed(String),
}

/// What one list-then-watch needs from its owner: the list, the watch
/// and what it makes of each event, where its [`WatchHealth`] is kept, who
/// is told of a problem, and whether to stop.
pub(crate) trait Reflect {
    /// Whether the owner asked the thread to stop.
    fn stopped(&self) -> bool;
    /// Lists what is watched; on success sets `version` to watch from.
    fn list(&mut self, version: &mut String) -> Ended;
    /// Opens a watch from `version`.
    fn open(&mut self, version: &str) -> Result<WatchStream, KubeError>;
    /// Reads the next event from `stream` and applies it, moving `version`;
    /// `Ok(None)` when the server ended the watch.
    fn next_event(&mut self, stream: &mut WatchStream, version: &mut String) -> Result<Option<Event>, KubeError>;
    /// A watch's problem (`why`) in the owner's words.
    fn trouble(&self, why: &dyn std::fmt::Display) -> String;
    /// Runs `f` on the owner's [`WatchHealth`], under the owner's lock.
    fn health<R>(&self, f: impl FnOnce(&mut WatchHealth) -> R) -> R;
    /// Another problem was reported (`None`: none): the owner wakes the
    /// agent's loop.
    fn reported(&self, problem: &Option<String>);
}

/// Reports `problem` (`None`: none) as `owner`'s, as [`Plan::problem`]
/// says.
fn report(owner: &impl Reflect, problem: Option<String>) {
    let before = owner.health(|h| std::mem::replace(&mut h.problem, problem.clone()));
    if before != problem {
        owner.reported(&problem);
    }
}

/// Watches from `version`, moving it with every event, until the watch
/// ends: `watching_since` is set once it is established, and once an event
/// arrives the watch works (`machine.delivered()`, no problem [`report`]ed).
/// 410 Gone lists again; a stream that breaks or is closed under it (a
/// restarting server, a proxy's idle timeout) is no problem: the next watch
/// resumes from `version`.
fn watch<R: Reflect>(owner: &mut R, version: &mut String, machine: &mut Machine) -> Ended {
    let gone = |owner: &R| Ended::Gone {
        error: owner.trouble(
            &"its watches end at once with 410 Gone (the version watched from is compacted away): listing again \
              after a backoff",
        ),
    };
    let started = Instant::now();
    let mut stream = match owner.open(version) {
        Ok(stream) => stream,
        Err(e) if e.code() == Some(410) => return gone(owner),
        Err(e) => return Ended::WatchFailed { error: owner.trouble(&e), relist: false, retry_after: e.retry_after() },
    };
    owner.health(|h| h.watching_since = Some(started));
    let mut delivered = false;
    while !owner.stopped() {
        let failed = |error| Ended::WatchFailed { error, relist: true, retry_after: None };
        match owner.next_event(&mut stream, version) {
            Ok(Some(Event::Applied { relist })) => {
                if !delivered {
                    delivered = true;
                    machine.delivered();
                    report(owner, None);
                }
                if relist {
                    return Ended::Relist;
                }
            }
            Ok(Some(Event::Skipped)) => {}
            Ok(Some(Event::Gone)) => return gone(owner),
            Ok(Some(Event::Failed(why))) => return failed(owner.trouble(&why)),
            Ok(None) => break,
            // An event over the bound was not seen: what is kept may be
            // wrong; listed again.
            Err(e @ KubeError::Response { .. }) => return failed(owner.trouble(&e)),
            Err(e) => {
                log::debug!("{}; resuming from version {version}", owner.trouble(&e));
                break;
            }
        }
    }
    Ended::Closed { lasted: started.elapsed(), delivered }
}

/// Lists, then watches from there, as the [`Machine`] says: the next watch
/// at once when one ends, after a jittered backoff when one fails or ends
/// at once, a list again after 410 Gone; until `owner` stops (the wait
/// between tries is a park, which a stop's unpark cuts short).
pub(crate) fn drive(owner: &mut impl Reflect, jitter: &mut Jitter) {
    let mut machine = Machine::default();
    let (mut step, mut version) = (Step::List, String::new());
    while !owner.stopped() {
        let ended = match step {
            Step::List => owner.list(&mut version),
            Step::Watch => {
                let ended = watch(owner, &mut version, &mut machine);
                owner.health(|h| h.watching_since = None);
                ended
            }
        };
        if owner.stopped() {
            return;
        }
        let plan = machine.after(ended, jitter.next_u64());
        if let Some(problem) = plan.problem {
            report(owner, problem);
        }
        let until = Instant::now() + plan.delay;
        while !owner.stopped() && Instant::now() < until {
            std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
        }
        step = plan.step;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn gone() -> Ended {
        Ended::Gone { error: "Cannot watch foos: 410 Gone".into() }
    }

    fn failed(relist: bool) -> Ended {
        Ended::WatchFailed { error: "Cannot watch foos: refused".into(), relist, retry_after: None }
    }

    #[test]
    fn a_watch_open_long_enough_hides_its_old_problem() {
        let t0 = Instant::now();
        let mut health = WatchHealth { problem: Some("Cannot watch foos: refused".into()), watching_since: None };
        assert!(health.problem_at(t0).is_some());
        health.watching_since = Some(t0);
        assert!(health.problem_at(t0 + HEALTHY_WATCH - Duration::from_millis(1)).is_some());
        assert_eq!(health.problem_at(t0 + HEALTHY_WATCH), None);
    }

    #[test]
    fn a_list_then_watches_that_end_on_schedule_cost_nothing_more() {
        let mut m = Machine::default();
        assert_eq!(m.after(Ended::Listed, 0), Plan { step: Step::Watch, delay: Duration::ZERO, problem: Some(None) });
        for _ in 0..3 {
            let plan = m.after(Ended::Closed { lasted: S(300), delivered: false }, u64::MAX);
            assert_eq!(plan, Plan { step: Step::Watch, delay: Duration::ZERO, problem: Some(None) }, "no delay");
        }
    }

    #[test]
    fn broken_and_refused_watches_back_off_within_bounds_and_resume() {
        let mut m = Machine::default();
        m.after(Ended::Listed, 0);
        // A stream that breaks at once (a restarting server) backs off.
        let plan = m.after(Ended::Closed { lasted: Duration::from_millis(5), delivered: false }, u64::MAX);
        assert_eq!((plan.step, plan.delay, plan.problem), (Step::Watch, BACKOFF_BASE, None));
        // Refused watches are reported and back off, doubling up to the cap.
        let mut ceilings = Vec::new();
        for _ in 0..8 {
            let plan = m.after(failed(false), u64::MAX);
            assert_eq!(plan.step, Step::Watch, "resumes from the last version");
            assert_eq!(plan.problem, Some(Some("Cannot watch foos: refused".into())));
            let ceiling = m.backoff.ceiling(m.backoff.failures() - 1);
            assert!(plan.delay >= BACKOFF_BASE && plan.delay <= ceiling, "{plan:?} over {ceiling:?}");
            ceilings.push(ceiling.as_secs());
        }
        assert_eq!(ceilings, [2, 4, 8, 16, 30, 30, 30, 30], "doubling up to the cap");
        // A list that works clears none of it, nor does the backoff start over.
        assert_eq!(m.after(Ended::Listed, 0).problem, Some(Some("Cannot watch foos: refused".into())));
        m.after(failed(false), u64::MAX);
        assert_eq!(m.backoff.failures(), 10, "still counting");
        // Once a watch ran well, the next starts at once.
        assert_eq!(m.after(Ended::Closed { lasted: S(60), delivered: false }, u64::MAX).delay, Duration::ZERO);
        assert_eq!(m.after(failed(false), u64::MAX).delay, BACKOFF_BASE, "the backoff started over");
    }

    #[test]
    fn gone_relists_at_once_but_not_in_a_loop() {
        let mut m = Machine::default();
        m.after(Ended::Listed, 0);
        assert_eq!(m.after(gone(), u64::MAX), Plan { step: Step::List, delay: Duration::ZERO, problem: None });
        m.after(Ended::Listed, 0);
        let again = m.after(gone(), u64::MAX);
        assert_eq!(again.step, Step::List);
        assert!(again.delay >= BACKOFF_BASE, "a second 410 without a healthy watch between backs off");
        assert_eq!(again.problem, Some(Some("Cannot watch foos: 410 Gone".into())), "and is reported");
        let ceilings: Vec<u64> = (0..6)
            .map(|_| {
                let listed = m.after(Ended::Listed, 0).problem;
                assert_eq!(listed, Some(Some("Cannot watch foos: 410 Gone".into())), "a list does not clear it");
                m.after(gone(), u64::MAX);
                m.backoff.ceiling(m.backoff.failures() - 1).as_secs()
            })
            .collect();
        assert_eq!(ceilings, [2, 4, 8, 16, 30, 30], "the backoff grows: lists do not reset it");
        m.after(Ended::Listed, 0);
        m.after(Ended::Closed { lasted: S(300), delivered: false }, 0);
        assert_eq!(m.after(gone(), u64::MAX).delay, Duration::ZERO, "after a healthy watch, at once again");
    }

    #[test]
    fn only_a_watch_that_delivers_clears_its_problem() {
        let mut m = Machine::default();
        m.after(Ended::Listed, 0);
        m.after(failed(true), u64::MAX);
        m.after(Ended::ListFailed { error: "Cannot list foos: 503".into(), retry_after: None }, 0);
        let listed = m.after(Ended::Listed, 0).problem;
        assert_eq!(listed, Some(Some("Cannot watch foos: refused".into())), "the watch's, not the list's");
        let quick = m.after(Ended::Closed { lasted: S(1), delivered: false }, u64::MAX);
        assert_eq!((quick.problem, m.backoff.failures()), (None, 3), "an empty watch: still backing off");
        m.delivered();
        let plan = m.after(Ended::Closed { lasted: S(1), delivered: true }, u64::MAX);
        assert_eq!((plan.problem, plan.delay), (Some(None), Duration::ZERO));
        assert_eq!(m.after(failed(false), u64::MAX).delay, BACKOFF_BASE, "the backoff started over");
    }

    #[test]
    fn failed_lists_and_bad_streams_are_reported_and_relisted() {
        let mut m = Machine::default();
        let plan = m.after(Ended::ListFailed { error: "Cannot list foos: 403".into(), retry_after: Some(S(20)) }, 0);
        assert_eq!(plan, Plan { step: Step::List, delay: S(20), problem: Some(Some("Cannot list foos: 403".into())) });
        assert_eq!(m.after(Ended::Listed, 0).problem, Some(None), "a complete list clears it");
        let plan = m.after(failed(true), 0);
        assert_eq!(plan.step, Step::List, "the store may have missed events");
        assert!(plan.problem.is_some());
        let listed = m.after(Ended::Listed, 0).problem;
        assert_eq!(listed, plan.problem, "a watch's problem waits for a watch that works");
    }
}
