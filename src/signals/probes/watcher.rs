//! One probed collection kept current by list-then-watch, on a thread of
//! its own, so the agent's loop never waits for it.
//!
//! The state machine is client-go's reflector, small ([`Machine`], pure):
//! a paged list (bounded by the [`Pager`](super::Pager)) fills a fresh
//! [`Store`] and gives the `resourceVersion` to watch from; the watch
//! (`allowWatchBookmarks`, `timeoutSeconds` of [`WATCH_SECONDS`] plus up to
//! a minute of jitter) applies each event; when the server ends it, the
//! next watch starts from the last version seen, at once; a broken stream
//! or a refused watch tries again from there after a bounded, jittered
//! backoff; `410 Gone` (the status, or an `ERROR` event with that code)
//! lists again. So with nothing changing a collection costs one request
//! every five minutes or so, however many resources it holds.
//!
//! The thread ([`Watcher`]) owns its own [`Client`] (a sibling of the
//! agent's: same credentials, its own connection), publishes into
//! [`Shared`], and nudges the agent's loop when a resource's verdict
//! changed, so a flip reaches the OperatorCondition without waiting for the
//! next check. Failures are reported in [`Shared::problem`] (the status
//! turns degraded) and the store keeps its last contents; a watch the
//! server ended on schedule, or that reconnected, is no problem.

use super::list::{Budget, Listing};
use super::store::{Applied, Store};
use super::{GRANT, grammar::ProbeSpec, percent_encode};
use crate::kube::{Client, KubeError, Stop, Worker};
use crate::util::backoff::{Backoff, Jitter};
use crate::util::shutdown::Nudge;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A watch's `timeoutSeconds`, before jitter (client-go: 5 to 10 min).
/// With nothing changing, this is how often a collection costs a request.
pub(crate) const WATCH_SECONDS: u64 = 300;

/// Up to this many seconds are added to [`WATCH_SECONDS`], so the
/// watches of many instances do not end together.
const WATCH_JITTER_SECONDS: u64 = 60;

/// How long past its `timeoutSeconds` a watch may go silent before it is
/// given up as broken (a server that vanished without closing).
const SILENCE_MARGIN: Duration = Duration::from_secs(30);

/// A watch that lasted this long was healthy: the next one starts at once
/// and the backoff starts over (and, open this long, its collection's
/// problem is no longer reported). One that ends sooner without an event
/// backs off, so a server that accepts watches and drops them at once is
/// not hammered.
pub(crate) const HEALTHY_WATCH: Duration = Duration::from_secs(10);

/// The reconnect backoff: client-go's reflector uses 800 ms to 30 s.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// One collection: where it is listed and watched, and how its resources
/// are judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Collection {
    /// `/apis/GROUP/VERSION[/namespaces/NS]/RESOURCE`.
    pub path: String,
    /// `foos.example.com`: for messages.
    pub name: String,
    /// ` in namespace "ops"`, ` in all namespaces` or nothing: for the
    /// action an RBAC rule must allow.
    pub scope: String,
    pub spec: ProbeSpec,
    pub kind: String,
}

impl Collection {
    /// The problem of what its store holds (too many resources, some that
    /// could not be read).
    pub(crate) fn store_problem(&self, store: &Store) -> Option<String> {
        store.problem(&self.kind).map(|u| format!("Probing {}{}: {u}", self.name, self.scope))
    }
}

/// What the thread publishes for the agent's checks.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// `None` until the first list completed.
    pub store: Option<Store>,
    /// While the first list runs: the resources it listed so far.
    pub listing: Option<usize>,
    /// Why the collection may be out of date; `None` while all is well.
    pub problem: Option<String>,
    /// Since when the current watch is open: once for [`HEALTHY_WATCH`],
    /// the problem is stale (a quiet collection's watch delivers nothing).
    pub watching_since: Option<Instant>,
}

impl Shared {
    /// The problem to report `now`.
    pub(crate) fn problem_at(&self, now: Instant) -> Option<&String> {
        let working = self.watching_since.is_some_and(|t| now.saturating_duration_since(t) >= HEALTHY_WATCH);
        self.problem.as_ref().filter(|_| !working)
    }
}

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

/// The agent's handle on one collection's thread. Dropping it stops the
/// thread at once: it wakes from a wait to retry, and its connection is
/// shut down under the request or watch it may be blocked on (so it holds
/// no API-server connection a moment later); it never starts another
/// request.
pub(crate) struct Watcher {
    pub collection: Collection,
    pub shared: Arc<Mutex<Shared>>,
    _worker: Worker,
}

/// Everything the thread needs.
struct Run {
    client: Client,
    collection: Collection,
    shared: Arc<Mutex<Shared>>,
    stop: Stop,
    nudge: Nudge,
    /// The list under way, kept between tries ([`Listing`]).
    listing: Listing,
    jitter: Jitter,
}

impl Watcher {
    /// Starts the thread. `client` is the thread's own.
    pub(crate) fn start(
        client: Client,
        collection: Collection,
        nudge: Nudge,
        list_budget: Duration,
    ) -> std::io::Result<Watcher> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (for_thread, thread_collection) = (shared.clone(), collection.clone());
        let worker = Worker::spawn("probe-watch", client, move |client, stop| {
            let jitter = Jitter::from_os();
            let listing = Listing::new(Budget::growing(list_budget, Instant::now()));
            let run = Run { client, collection: thread_collection, shared: for_thread, stop, nudge, listing, jitter };
            run.run();
        })?;
        Ok(Watcher { collection, shared, _worker: worker })
    }
}

impl Run {
    fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    fn run(mut self) {
        let mut machine = Machine::default();
        let mut step = Step::List;
        let mut version = String::new();
        while !self.stopped() {
            let ended = match step {
                Step::List => self.list(&mut version),
                Step::Watch => {
                    let ended = self.watch(&mut version, &mut machine);
                    self.lock().watching_since = None;
                    ended
                }
            };
            if self.stopped() {
                return;
            }
            let plan = machine.after(ended, self.jitter.next_u64());
            if let Some(problem) = plan.problem {
                self.report(problem);
            }
            let until = Instant::now() + plan.delay;
            while !self.stopped() && Instant::now() < until {
                std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
            }
            step = plan.step;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn report(&self, problem: Option<String>) {
        let mut shared = self.lock();
        if shared.problem != problem {
            match &problem {
                Some(e) => log::debug!("Probe of {}: {e}", self.collection.name),
                None if shared.problem.is_some() => {
                    log::debug!("Probe of {}: listing and watching work again", self.collection.name)
                }
                None => {}
            }
            shared.problem = problem;
            drop(shared);
            self.nudge.nudge();
        }
    }

    /// The paged list into a fresh store, which replaces the old one when
    /// complete (until then the last one stands). A list stops only when
    /// it fails or stops making progress ([`Budget::growing`]); a failed
    /// request leaves it to go on from its page at the next try. While
    /// the first list runs, [`Shared::listing`] says how far it got.
    fn list(&mut self, version: &mut String) -> Ended {
        let first = self.lock().store.is_none();
        let (shared, name) = (self.shared.clone(), &self.collection.name);
        let (started, mut said) = (Instant::now(), Instant::now());
        let mut progress = |listed: usize| {
            if first {
                shared.lock().unwrap_or_else(|p| p.into_inner()).listing = Some(listed);
                if said.elapsed() >= super::LIST_BUDGET {
                    said = Instant::now();
                    log::info!("Listing {name}: {listed} so far (the first list: nothing is said of it until done)");
                }
            }
        };
        let listed = self.listing.run(&mut self.client, &self.collection, &mut progress);
        match listed {
            Ok(store) => {
                if first && started.elapsed() >= super::LIST_BUDGET {
                    let (c, took) = (&self.collection, started.elapsed().as_secs());
                    log::info!("Listed {} {}{} in {took} s", store.len(), c.name, c.scope);
                }
                version.clone_from(&store.resource_version);
                let mut shared = self.lock();
                shared.store = Some(store);
                shared.listing = None;
                drop(shared);
                self.nudge.nudge();
                Ended::Listed
            }
            Err(e) => {
                let retry_after = e.retry_after();
                let at = if self.listing.at_start() {
                    String::new()
                } else {
                    let (listed, pages) = (self.listing.listed(), self.listing.pages());
                    format!(" (the next try goes on from page {} with {listed} listed)", pages + 1)
                };
                Ended::ListFailed {
                    error: format!("Cannot list {}: {}{at}", self.collection.name, e.granted_by(GRANT)),
                    retry_after,
                }
            }
        }
    }

    fn gone(&self) -> Ended {
        let error = format!(
            "Cannot watch {}: its watches end at once with 410 Gone (the version watched from is compacted away): \
             listing again after a backoff",
            self.collection.name
        );
        Ended::Gone { error }
    }

    fn watch(&mut self, version: &mut String, machine: &mut Machine) -> Ended {
        let seconds = WATCH_SECONDS + self.jitter.next_u64() % (WATCH_JITTER_SECONDS + 1);
        let path = format!(
            "{}?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={seconds}",
            self.collection.path,
            percent_encode(version)
        );
        let action = format!("watch {}{}", self.collection.name, self.collection.scope);
        let started = Instant::now();
        let lasting = Duration::from_secs(seconds) + SILENCE_MARGIN;
        let mut stream = match self.client.watch(&path, &action, lasting) {
            Ok(stream) => stream,
            Err(e) if e.code() == Some(410) => return self.gone(),
            Err(e) => {
                let retry_after = e.retry_after();
                return Ended::WatchFailed {
                    error: format!("Cannot watch {}: {}", self.collection.name, e.granted_by(GRANT)),
                    relist: false,
                    retry_after,
                };
            }
        };
        // Established: once it delivers an event (or stays open for
        // HEALTHY_WATCH), the collection is current again; a watch that
        // ends before that clears nothing.
        self.lock().watching_since = Some(started);
        let mut line = Vec::new();
        let mut delivered = false;
        loop {
            let closed = |delivered| Ended::Closed { lasted: started.elapsed(), delivered };
            match stream.next_line(&mut line) {
                Ok(true) => {}
                Ok(false) => return closed(delivered),
                // A line over the bound: an event was not seen, so the
                // store may be wrong; said, and listed again.
                Err(e @ KubeError::Response { .. }) => {
                    let error = format!("Cannot watch {}: {e}", self.collection.name);
                    return Ended::WatchFailed { error, relist: true, retry_after: None };
                }
                Err(e) => {
                    log::debug!("Watch of {} ended: {e}; resuming from version {version}", self.collection.name);
                    return closed(delivered);
                }
            }
            if self.stopped() {
                return closed(delivered);
            }
            let applied = {
                let mut shared = self.lock();
                let Some(store) = shared.store.as_mut() else { return self.gone() };
                let applied = store.apply(&line, &self.collection.spec);
                version.clone_from(&store.resource_version);
                applied
            };
            if matches!(applied, Applied::Quiet | Applied::Changed) && !delivered {
                delivered = true;
                machine.delivered();
                self.report(None);
            }
            match applied {
                Applied::Quiet => {}
                Applied::Changed => self.nudge.nudge(),
                Applied::Gone => return self.gone(),
                Applied::Failed(why) => {
                    return Ended::WatchFailed {
                        error: format!("Cannot watch {}: {why}", self.collection.name),
                        relist: true,
                        retry_after: None,
                    };
                }
            }
        }
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
    fn a_watch_open_long_enough_hides_its_old_problem() {
        let t0 = Instant::now();
        let mut shared = Shared { problem: Some("Cannot watch foos: refused".into()), ..Shared::default() };
        assert!(shared.problem_at(t0).is_some());
        shared.watching_since = Some(t0);
        assert!(shared.problem_at(t0 + HEALTHY_WATCH - Duration::from_millis(1)).is_some());
        assert_eq!(shared.problem_at(t0 + HEALTHY_WATCH), None);
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
