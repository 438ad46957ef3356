//! The publisher's state machine: where this instance stands in
//! publishing the status ([`State`]), what can happen to it ([`Event`]),
//! and one pure function from the one to the next ([`transition`]) that
//! says what the shell should do or say about it ([`Action`]). No I/O;
//! the clock is an argument.
//!
//! The rules stay where they are and are the machine's inputs: the
//! start-up allowance ([`super::super::startup`]), another writer of the status
//! ([`crate::writers`]), the publisher lock ([`crate::lock`]) and the
//! operator's leader ([`super::super::leader`]). They apply in that order: while
//! the operator has not answered nothing is read or written; while another
//! writer keeps the status key the lock decides nothing; then the leader,
//! when followed and known, decides; else the lock does. What the rules
//! remember between events (when the lock last changed, the Lease's last
//! answer, the other writer's last write, the operator's first answer) is
//! [`Memory`]. [`super`] (the publisher) reads and writes, logs, and feeds the
//! events in; `docs/architecture.md` draws the machine.

use super::super::leader::{Leader, LeaseRead};
use super::super::startup::Startup;
use crate::lock::{self, Decision, Observer, OwnState, Record};
use crate::signals::OperatorAnswer;
use crate::sinks::configmap::Current;
use crate::writers::{Patience, Turn, Writer, Yielding};
use std::time::{Duration, Instant, SystemTime};

/// Where this instance stands. It holds the lock only once a write of its
/// claim succeeded: two instances deciding at once may both claim, but the
/// `resourceVersion` lets one write win, so only one ever holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// The operator has not answered its health checks since opstatus
    /// started and the allowance is not spent: nothing is read or written.
    /// A followed leader still decides (`standing_by`: another pod leads).
    Starting { standing_by: bool },
    /// The lock was not read yet: the first write reads it.
    Unknown,
    /// The lock is free, released, expired or its own, or this pod leads
    /// the operator: its next write claims it.
    Claiming,
    /// A write of its claim succeeded: it publishes, and every heartbeat
    /// renews the lock.
    Holding,
    /// Another instance holds the lock, another pod leads the operator, or
    /// this pod is stopping: it reads the ConfigMap once per check.
    StandingBy,
    /// Another writer keeps the status key: nobody of opstatus writes,
    /// and this instance looks once per heartbeat and at `until`.
    Yielding { to: Writer, until: SystemTime },
    /// A stopping holder released the lock and waits for a standby to
    /// take it.
    HandingOver,
}

impl State {
    /// Whether this instance publishes now.
    pub(super) fn publishing(&self) -> bool {
        matches!(self, State::Holding | State::HandingOver)
    }

    /// Whether this instance should try to write: it publishes, or it has
    /// not read the lock yet, or it may take it.
    pub(super) fn may_write(&self) -> bool {
        matches!(self, State::Unknown | State::Claiming | State::Holding | State::HandingOver)
    }

    fn standing_by(&self) -> bool {
        matches!(self, State::StandingBy | State::Starting { standing_by: true })
    }
}

/// What can happen to the publisher, as the shell feeds it in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// A check of the operator's health checks: whether they passed
    /// ([`answered`]).
    OperatorChecked { passed: bool },
    /// kubelet's preStop hook: the pod is stopping.
    PodStopping,
    /// The followed Lease was read (on a check): who leads decides now.
    LeaseRead(LeaseRead),
    /// The status ConfigMap was read: a standby's look, a first look, or
    /// the look after a refused write.
    ConfigMapRead(Current),
    /// A write of this instance's claim (a renewal, or a release) went
    /// through: the object as written.
    Written(Current),
    /// A write was refused with 409: somebody changed the ConfigMap. The
    /// followed Lease as read again, if it is followed.
    Conflict { lease: Option<LeaseRead> },
    /// A write failed otherwise: it is retried with backoff, the lock as
    /// it was.
    WriteFailed,
    /// A stopping holder's release was written: it waits for a standby.
    HandOver,
    /// The ConfigMap as a handing-over holder reads it while it waits.
    HandoverRead(Current),
    /// The handover wait ran out (or a read in it failed): nobody took over.
    HandoverEnded,
}

/// What the shell does or says after a transition (once each: the news of
/// a change, never the state again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// The start-up rule moved: waiting, answered, or spent (say so).
    Startup(Startup),
    /// The lock's annotation is no record: taken as expired (why).
    LockUnreadable(String),
    /// It stands by, and why (said once per change).
    StandBy(String),
    /// Another writer keeps the status key: yield until the time given.
    Yield { writer: Writer, until: SystemTime },
    /// Another writer keeps writing a stale status: written over (why).
    Overwrite { writer: Writer, why: String },
    /// The other writer left the status alone (for `quiet_for`): taken back.
    Resume { writer: Writer, quiet_for: Duration },
    /// It publishes now; `took_over`: the news of a takeover (from whom,
    /// when known), when it stood by or another held the lock.
    Publish { took_over: Option<Option<String>> },
    /// A standby took the lock a stopping holder released.
    HandedOver(String),
    /// Read the ConfigMap again and feed it in ([`Event::ConfigMapRead`]).
    ReadAgain,
}

/// The clock, as the rules read it: the monotonic one for what this
/// instance saw and when, the wall clock for times written in objects.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    pub now: Instant,
    pub wall: SystemTime,
}

impl Clock {
    pub(super) fn read() -> Clock {
        Clock { now: Instant::now(), wall: SystemTime::now() }
    }
}

/// The rules' settings: who this instance is, and the durations that
/// follow the heartbeat interval as it is now.
#[derive(Clone, Debug)]
pub(super) struct Rules {
    /// This instance's identity in the lock.
    pub me: String,
    /// The pod it runs in: what the operator's Lease names.
    pub pod: String,
    /// The lease it announces when it holds the lock; also how long the
    /// last answer of a failing Lease stands.
    pub lease: Duration,
    /// How long a stopping instance leaves a free lock to others.
    pub operator_wait: Duration,
    /// How long another writer keeps the status, and how often a yielding
    /// instance looks.
    pub patience: Patience,
    check_interval: Duration,
    /// How long a starting instance publishes nothing while its operator
    /// has not answered.
    pub allowance: Duration,
}

impl Rules {
    pub(super) fn new(me: String, interval: Duration, check_interval: Duration, allowance: Duration) -> Rules {
        Rules {
            pod: me.clone(),
            me,
            lease: lock::lease_duration(interval),
            operator_wait: lock::operator_wait(interval),
            patience: Patience::new(interval, check_interval),
            check_interval,
            allowance,
        }
    }

    /// The lease follows the heartbeat interval as it is now (kube9-server
    /// may ask for a longer one): a holder that writes less often than its
    /// lease would lose the lock to a healthy standby between two
    /// heartbeats.
    pub(super) fn follow_interval(&mut self, interval: Duration) {
        self.lease = lock::lease_duration(interval);
        self.operator_wait = lock::operator_wait(interval);
        self.patience = Patience::new(interval, self.check_interval);
    }
}

/// What the rules remember between events.
#[derive(Debug)]
pub(super) struct Memory {
    /// The ConfigMap's version and lock as last read or written; `None`
    /// until the first read.
    pub current: Option<Current>,
    /// When the lock record last changed, as seen from here.
    observer: Observer,
    /// Who leads the operator, as its Lease last answered (when followed).
    pub leader: Leader,
    /// Whether the ConfigMap is left to another writer, and what of it
    /// the writers' rule remembers.
    pub yielding: Yielding,
    /// What this instance knows of its operator and its pod.
    own: OwnState,
    /// Where it stands with its operator's first answer.
    pub startup: Startup,
    /// Whether it stood by since it last held the lock.
    stood_by: bool,
    /// Another instance seen holding the lock, last.
    last_other: Option<String>,
}

impl Memory {
    pub(super) fn new(started: Instant) -> Memory {
        Memory {
            current: None,
            observer: Observer::default(),
            leader: Leader::default(),
            yielding: Yielding::default(),
            own: OwnState::new(started),
            startup: Startup::Answered,
            stood_by: false,
            last_other: None,
        }
    }
}

/// Whether the operator's health checks count as its answer: a check not
/// answered in time (pending) is none.
pub(super) fn answered(answer: &OperatorAnswer) -> bool {
    *answer == OperatorAnswer::Answered
}

/// The publisher: its state, its rules' settings and their memory.
#[derive(Debug)]
pub(super) struct Machine {
    pub state: State,
    pub rules: Rules,
    pub memory: Memory,
}

impl Machine {
    pub(super) fn new(rules: Rules, started: Instant) -> Machine {
        Machine { state: State::Unknown, rules, memory: Memory::new(started) }
    }

    /// Feeds one event in: the new state is kept, the actions returned.
    pub(super) fn on(&mut self, event: Event, clock: Clock) -> Vec<Action> {
        let state = std::mem::replace(&mut self.state, State::Unknown);
        let (state, actions) = transition(state, event, clock, &self.rules, &mut self.memory);
        self.state = state;
        actions
    }

    /// Whether a check should read the ConfigMap at `wall`: once it was
    /// read, while this instance does not publish (the holder's writes
    /// tell it all it needs), and while it yields only once per heartbeat
    /// and when the status is due back.
    pub(super) fn wants_look(&self, wall: SystemTime) -> bool {
        self.memory.current.is_some()
            && !self.state.publishing()
            && self.memory.yielding.due(wall, &self.rules.patience)
    }

    /// The record a write carries (a claim or a renewal; released when
    /// `release`) and the version it is written against, once read.
    pub(super) fn claim(&self, release: bool, wall: SystemTime) -> Option<(Record, &str)> {
        let current = self.memory.current.as_ref()?;
        let record = Record::claim(&self.rules.me, current.lock.record(), self.rules.lease, wall);
        let record = if release { record.released(wall) } else { record };
        Some((record, &current.resource_version))
    }

    /// Who holds the lock, as last seen (`None`: nobody, or not read yet).
    pub(super) fn holder(&self) -> Option<&str> {
        let record = self.memory.current.as_ref()?.lock.record()?;
        Some(record.holder_identity.as_str()).filter(|h| !h.is_empty())
    }
}

/// One step: the state after `event` at `clock`, and what to do or say.
pub(super) fn transition(
    state: State,
    event: Event,
    clock: Clock,
    rules: &Rules,
    memory: &mut Memory,
) -> (State, Vec<Action>) {
    let mut actions = Vec::new();
    let out = &mut actions;
    let state = match event {
        Event::OperatorChecked { passed } => operator_checked(state, passed, clock, rules, memory, out),
        Event::PodStopping => {
            memory.own.stopping(clock.now);
            state
        }
        Event::LeaseRead(read) => {
            memory.leader.observe(read, clock.now);
            decide(state, clock.now, rules, memory, out)
        }
        Event::ConfigMapRead(current) => {
            memory.current = Some(current);
            look(state, clock, rules, memory, out)
        }
        Event::Written(written) => {
            let previous = memory.current.as_ref().and_then(|c| c.lock.record()).map(|r| &r.holder_identity);
            let previous = previous.filter(|h| !h.is_empty() && **h != rules.me).cloned();
            memory.current = Some(written);
            match state {
                State::Holding | State::HandingOver => state,
                _ => {
                    let took_over =
                        (memory.stood_by || previous.is_some()).then(|| previous.or_else(|| memory.last_other.clone()));
                    memory.stood_by = false;
                    out.push(Action::Publish { took_over });
                    State::Holding
                }
            }
        }
        // Someone changed the ConfigMap since: look at the lock again.
        Event::Conflict { lease } => {
            if let Some(read) = lease {
                memory.leader.observe(read, clock.now);
            }
            out.push(Action::ReadAgain);
            state
        }
        Event::WriteFailed => state,
        Event::HandOver => match state {
            State::Holding => State::HandingOver,
            other => other,
        },
        Event::HandoverRead(current) => {
            let holder = current.lock.record().map(|r| r.holder_identity.clone()).unwrap_or_default();
            memory.current = Some(current);
            match state {
                State::HandingOver if !holder.is_empty() && holder != rules.me => {
                    out.push(Action::HandedOver(holder));
                    State::StandingBy
                }
                other => other,
            }
        }
        Event::HandoverEnded => match state {
            State::HandingOver => State::Holding,
            other => other,
        },
    };
    (state, actions)
}

/// A check of the operator's health checks: the start-up rule, and a
/// standby that waited for the first answer decides again at once.
fn operator_checked(
    state: State,
    passed: bool,
    clock: Clock,
    rules: &Rules,
    memory: &mut Memory,
    out: &mut Vec<Action>,
) -> State {
    let first = memory.own.checked(passed);
    let before = memory.startup;
    memory.startup = Startup::at(memory.own.unanswered_for(clock.now), rules.allowance);
    match (before, memory.startup) {
        (Startup::Answered, Startup::Waiting { .. })
        | (Startup::Waiting { .. }, Startup::Answered | Startup::Spent) => out.push(Action::Startup(memory.startup)),
        _ => {}
    }
    // The wait can begin only at the first check, which comes before any
    // read or write of the ConfigMap: only the leader has decided then.
    let state = match (state, memory.startup.waiting()) {
        (state @ (State::Unknown | State::Claiming | State::StandingBy), true) => {
            State::Starting { standing_by: state == State::StandingBy }
        }
        (State::Starting { standing_by: true }, false) => State::StandingBy,
        (State::Starting { standing_by: false }, false) => State::Unknown,
        (state, _) => state,
    };
    if first && state == State::StandingBy && memory.current.is_some() {
        return decide(state, clock.now, rules, memory, out);
    }
    state
}

/// After a read of the ConfigMap: whose the status is, by the rule every
/// instance reads from the object ([`crate::writers`]), then (when it is
/// opstatus's) who holds the lock. A read while starting is kept, and
/// decides nothing until the start ends.
fn look(state: State, clock: Clock, rules: &Rules, memory: &mut Memory, out: &mut Vec<Action>) -> State {
    let Some(current) = &memory.current else { return state };
    let turn = memory.yielding.observe(current.foreign.as_ref(), clock.wall, &rules.patience);
    if matches!(state, State::Starting { .. }) {
        return state;
    }
    let ours = |state: State| match state {
        State::Yielding { .. } => State::StandingBy,
        other => other,
    };
    match turn {
        Turn::Ours => decide(ours(state), clock.now, rules, memory, out),
        Turn::StillTheirs(to, until) => State::Yielding { to, until },
        Turn::Yield(writer, until) => {
            memory.stood_by = true;
            out.push(Action::Yield { writer: writer.clone(), until });
            State::Yielding { to: writer, until }
        }
        Turn::Overwrite(writer, why) => {
            if !state.standing_by() {
                out.push(Action::Overwrite { writer, why });
            }
            decide(state, clock.now, rules, memory, out)
        }
        Turn::Resume(writer, last_write) => {
            let quiet_for = last_write.and_then(|at| clock.wall.duration_since(at).ok()).unwrap_or_default();
            out.push(Action::Resume { writer, quiet_for });
            decide(ours(state), clock.now, rules, memory, out)
        }
    }
}

/// Who publishes, by the leader (when followed and it decides) or the
/// lock. Nothing while the status is another writer's.
fn decide(state: State, now: Instant, rules: &Rules, memory: &mut Memory, out: &mut Vec<Action>) -> State {
    if matches!(state, State::Yielding { .. }) {
        return state;
    }
    let leader = memory.leader.decides(now, rules.lease).map(|l| l.map(lock::leader_pod));
    let Some(current) = &memory.current else {
        // Before the first read only the operator's leader can decide;
        // when its Lease cannot decide (unrenewed, unread), the first
        // write reads the lock.
        return match leader.map(|leader| lock::follow(&rules.pod, leader)) {
            Some(decision) => apply(state, decision, memory, out),
            None if state == State::StandingBy => State::Unknown,
            None if state.standing_by() => State::Starting { standing_by: false },
            None => state,
        };
    };
    let other = current.lock.record().map(|r| &r.holder_identity).filter(|h| !h.is_empty() && **h != rules.me);
    if let Some(other) = other {
        memory.last_other = Some(other.clone());
    }
    let unchanged = memory.observer.observe(&current.lock, now);
    if let lock::Seen::Unreadable(why) = &current.lock
        && unchanged.is_zero()
    {
        out.push(Action::LockUnreadable(why.clone()));
    }
    let own = memory.own.at(now);
    let decision = lock::decide(&rules.me, &rules.pod, &current.lock, unchanged, leader, own, rules.operator_wait);
    apply(state, decision, memory, out)
}

fn apply(state: State, decision: Decision, memory: &mut Memory, out: &mut Vec<Action>) -> State {
    match decision {
        Decision::Publish => match state {
            State::Holding | State::HandingOver => state,
            State::Starting { .. } => State::Starting { standing_by: false },
            _ => State::Claiming,
        },
        Decision::StandBy(why) => {
            memory.stood_by = true;
            out.push(Action::StandBy(why));
            match state {
                State::Starting { .. } => State::Starting { standing_by: true },
                _ => State::StandingBy,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::leader::Held;
    use super::*;
    use crate::lock::Seen;
    use crate::writers::Foreign;

    const S: fn(u64) -> Duration = Duration::from_secs;
    /// The defaults: a heartbeat every 60 s (a 130 s lease, a 290 s quiet
    /// period), a check every 5 s, a 60 s start-up allowance.
    const INTERVAL: Duration = Duration::from_secs(60);

    fn wall(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + S(1_800_000_000 + secs)
    }

    /// One instance, `pod-a`, fed events at seconds from its start.
    struct Run {
        machine: Machine,
        t0: Instant,
    }

    impl Run {
        fn new() -> Run {
            let t0 = Instant::now();
            Run { machine: Machine::new(Rules::new("pod-a".into(), INTERVAL, S(5), S(60)), t0), t0 }
        }

        fn at(&mut self, secs: u64, event: Event) -> Vec<Action> {
            self.machine.on(event, Clock { now: self.t0 + S(secs), wall: wall(secs) })
        }

        fn state(&self) -> &State {
            &self.machine.state
        }

        /// Holding since `secs`: it found no ConfigMap and created it.
        fn holding(secs: u64) -> Run {
            let mut run = Run::new();
            run.at(secs, Event::ConfigMapRead(configmap(Seen::Absent)));
            assert_eq!(run.at(secs, Event::Written(held_by("pod-a"))), [Action::Publish { took_over: None }]);
            run
        }
    }

    fn configmap(lock: Seen) -> Current {
        Current { resource_version: "7".into(), lock, uid: "uid-1".into(), foreign: None }
    }

    fn held_by(who: &str) -> Current {
        configmap(Seen::Record(Record::claim(who, None, S(130), wall(0))))
    }

    fn released_by(who: &str) -> Current {
        configmap(Seen::Record(Record::claim(who, None, S(130), wall(0)).released(wall(1))))
    }

    /// kube9-operator's own writer replaced the whole ConfigMap (the lock
    /// annotation gone): its managedFields time and its status's lastUpdate.
    fn replaced_by_kube9(written: Option<SystemTime>, last_update: SystemTime) -> Current {
        let writer = Writer { manager: "kube9-operator".into(), operation: "Update".into() };
        let foreign = Foreign { writer, written, last_update: Some(last_update), text: 1 };
        Current { foreign: Some(foreign), ..configmap(Seen::Absent) }
    }

    fn lease(holder: &str) -> Event {
        let held = Held { lease: "ns/op".into(), holder: holder.into(), renew_time: None, duration: S(15) };
        Event::LeaseRead(LeaseRead::Held(held))
    }

    const FAILED: Event = Event::OperatorChecked { passed: false };
    const PASSED: Event = Event::OperatorChecked { passed: true };

    #[test]
    fn a_starting_instance_reads_and_writes_nothing_until_the_first_answer_or_the_end_of_the_allowance() {
        let mut run = Run::new();
        assert_eq!(run.at(0, FAILED), [Action::Startup(Startup::Waiting { left: S(60) })]);
        assert_eq!(run.state(), &State::Starting { standing_by: false });
        assert!(!run.machine.state.may_write() && !run.machine.state.publishing());
        assert!(run.at(30, FAILED).is_empty(), "said once");
        assert_eq!(run.at(45, PASSED), [Action::Startup(Startup::Answered)]);
        assert_eq!(run.state(), &State::Unknown, "its first write reads the lock");
        assert!(run.machine.state.may_write());

        // No answer for the whole allowance: it publishes, saying so.
        let mut run = Run::new();
        run.at(0, FAILED);
        assert!(run.at(59, FAILED).is_empty());
        assert_eq!(run.at(60, FAILED), [Action::Startup(Startup::Spent)]);
        assert_eq!((run.state(), run.machine.memory.startup), (&State::Unknown, Startup::Spent));
        assert!(run.at(65, PASSED).is_empty(), "a late answer is no news");
        assert_eq!(run.machine.memory.startup, Startup::Answered);

        // Nothing watched: nothing to wait for.
        assert!(Run::new().machine.state.may_write());
    }

    #[test]
    fn a_followed_leader_decides_while_the_operator_starts_and_after() {
        let mut run = Run::new();
        run.at(0, FAILED);
        let another = Action::StandBy("pod-b publishes (the operator's leader)".into());
        assert_eq!(run.at(0, lease("pod-b_1")), [another]);
        assert_eq!(run.state(), &State::Starting { standing_by: true });
        assert_eq!(run.at(5, PASSED), [Action::Startup(Startup::Answered)]);
        assert_eq!(run.state(), &State::StandingBy);
        assert!(!run.machine.state.may_write());
        assert!(run.at(10, lease("pod-a_2")).is_empty());
        assert_eq!(run.state(), &State::Claiming, "this pod leads: its next write claims the lock");
        // A Lease that cannot be read before any answer: stand by for now.
        let mut run = Run::new();
        let failed = Event::LeaseRead(LeaseRead::Failed("Cannot read Lease ns/op: 403".into()));
        assert_eq!(run.at(0, failed), [Action::StandBy("Cannot read Lease ns/op: 403".into())]);
        assert_eq!(run.state(), &State::StandingBy);
        // Past the grace (a lease of the lock) the first write reads the lock.
        run.at(130, Event::LeaseRead(LeaseRead::Failed("Cannot read Lease ns/op: 403".into())));
        assert_eq!(run.state(), &State::Unknown);
    }

    #[test]
    fn the_first_write_claims_a_missing_or_own_lock_with_no_takeover_news() {
        let mut run = Run::new();
        assert!(run.at(0, Event::ConfigMapRead(configmap(Seen::Absent))).is_empty());
        assert_eq!(run.state(), &State::Claiming);
        let (record, version) = run.machine.claim(false, wall(0)).unwrap();
        assert_eq!((record.holder_identity.as_str(), version), ("pod-a", "7"));
        assert_eq!(run.at(0, Event::Written(held_by("pod-a"))), [Action::Publish { took_over: None }]);
        assert!(run.machine.state.publishing());
        assert_eq!(run.machine.holder(), Some("pod-a"));
        assert!(run.at(60, Event::Written(held_by("pod-a"))).is_empty(), "a renewal is no news");
        // A released claim (`once`, a handover) names nobody.
        let (released, _) = run.machine.claim(true, wall(60)).unwrap();
        assert_eq!(released.holder_identity, "");
        // A restarted container finds its own lock.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-a")));
        assert_eq!(run.at(0, Event::Written(held_by("pod-a"))), [Action::Publish { took_over: None }]);
    }

    #[test]
    fn a_standby_reads_each_check_and_takes_an_expired_or_released_lock_over_saying_from_whom() {
        let mut run = Run::new();
        let b = Action::StandBy("pod-b publishes".into());
        assert_eq!(run.at(0, Event::ConfigMapRead(held_by("pod-b"))), std::slice::from_ref(&b));
        assert_eq!(run.state(), &State::StandingBy);
        assert!(run.machine.wants_look(wall(5)), "a standby looks on every check");
        assert_eq!(run.at(129, Event::ConfigMapRead(held_by("pod-b"))), [b], "unchanged for less than its lease");
        assert!(run.at(130, Event::ConfigMapRead(held_by("pod-b"))).is_empty());
        assert_eq!(run.state(), &State::Claiming, "expired");
        let took_over = Some(Some("pod-b".to_string()));
        assert_eq!(run.at(131, Event::Written(held_by("pod-a"))), [Action::Publish { took_over }]);
        assert!(!run.machine.wants_look(wall(136)), "the holder's writes tell it all");

        // Released by its holder (a handover): taken at once, from the one
        // it stood by for.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-b")));
        assert!(run.at(5, Event::ConfigMapRead(released_by("pod-b"))).is_empty());
        assert_eq!(run.state(), &State::Claiming);
        let took_over = Some(Some("pod-b".to_string()));
        assert_eq!(run.at(6, Event::Written(held_by("pod-a"))), [Action::Publish { took_over }]);
    }

    #[test]
    fn a_409_on_a_heartbeat_reads_the_configmap_again_and_keeps_or_loses_the_lock() {
        let mut run = Run::holding(0);
        assert_eq!(run.at(60, Event::Conflict { lease: None }), [Action::ReadAgain]);
        assert_eq!(run.state(), &State::Holding, "nothing decided before the read");
        assert!(run.at(60, Event::ConfigMapRead(held_by("pod-a"))).is_empty());
        assert_eq!(run.state(), &State::Holding, "only its own version moved (a label, an annotation)");
        run.at(120, Event::Conflict { lease: None });
        assert_eq!(run.at(120, Event::ConfigMapRead(held_by("pod-b"))), [Action::StandBy("pod-b publishes".into())]);
        assert_eq!(run.state(), &State::StandingBy);
        assert!(!run.machine.state.may_write() && !run.machine.state.publishing());
        // Any other failure is retried with backoff, the lock as it was.
        let mut run = Run::holding(0);
        assert!(run.at(60, Event::WriteFailed).is_empty());
        assert_eq!(run.state(), &State::Holding);
    }

    #[test]
    fn while_another_writer_keeps_the_status_nobody_writes_until_it_is_quiet_then_the_lock_decides() {
        let mut run = Run::holding(0);
        // kube9-operator replaced the ConfigMap at 55 s; the 60 s heartbeat
        // is refused and reads it.
        let replaced = replaced_by_kube9(Some(wall(55)), wall(55));
        run.at(60, Event::Conflict { lease: None });
        let actions = run.at(60, Event::ConfigMapRead(replaced.clone()));
        // Back before readers call its status stale: 300 s less a check and 10 s.
        let until = wall(55 + 285);
        let kube9 = Writer { manager: "kube9-operator".into(), operation: "Update".into() };
        assert_eq!(actions, [Action::Yield { writer: kube9.clone(), until }]);
        assert_eq!(run.state(), &State::Yielding { to: kube9.clone(), until });
        assert!(!run.machine.state.may_write() && !run.machine.state.publishing());
        assert!(!run.machine.wants_look(wall(65)) && run.machine.wants_look(wall(120)), "once per heartbeat");
        assert!(run.at(120, Event::ConfigMapRead(replaced.clone())).is_empty());
        assert_eq!(run.state(), &State::Yielding { to: kube9.clone(), until });
        // The lock decides nothing meanwhile, nor does a first answer.
        assert!(run.at(125, lease("pod-a_1")).is_empty() && run.at(125, PASSED).is_empty());
        assert!(matches!(run.state(), State::Yielding { .. }));
        // Due back: taken back, and the lock (gone with the PUT) decides.
        let actions = run.at(340, Event::ConfigMapRead(replaced));
        assert_eq!(actions, [Action::Resume { writer: kube9, quiet_for: S(285) }]);
        assert_eq!(run.state(), &State::Claiming);
        let news = run.at(340, Event::Written(held_by("pod-a")));
        assert_eq!(news, [Action::Publish { took_over: Some(None) }], "it stood by: news, from nobody known");
    }

    #[test]
    fn another_writer_of_a_stale_status_is_written_over_by_the_holder_and_said_once() {
        let mut run = Run::holding(0);
        // A writer that keeps writing a status an hour old.
        let stale = replaced_by_kube9(None, wall(0));
        assert!(run.at(3600, Event::ConfigMapRead(stale.clone())).is_empty(), "first seen: a status left long ago");
        let Action::Overwrite { writer, why } = &run.at(3603, Event::ConfigMapRead(stale.clone()))[0] else {
            panic!("seen again: not said")
        };
        assert_eq!(writer.manager, "kube9-operator");
        assert!(why.ends_with("stale to readers"), "{why}");
        assert_eq!(run.state(), &State::Holding);
        assert!(run.at(3606, Event::ConfigMapRead(stale.clone())).is_empty(), "once per episode");
        // A standby takes no part in it: the holder says it.
        let mut run = Run::new();
        let stood_by = Current { lock: held_by("pod-b").lock, ..stale };
        run.at(3600, Event::ConfigMapRead(stood_by.clone()));
        assert_eq!(run.at(3603, Event::ConfigMapRead(stood_by)), [Action::StandBy("pod-b publishes".into())]);
    }

    #[test]
    fn the_operators_leader_changing_moves_publishing_to_the_sidecar_beside_it() {
        let mut run = Run::new();
        assert!(run.at(0, lease("pod-a_1")).is_empty());
        assert_eq!(run.state(), &State::Claiming, "decided before the first read");
        assert!(run.at(0, Event::ConfigMapRead(held_by("pod-b"))).is_empty(), "the leader, not the lock, decides");
        let from_b = Action::Publish { took_over: Some(Some("pod-b".into())) };
        assert_eq!(run.at(0, Event::Written(held_by("pod-a"))), std::slice::from_ref(&from_b));
        let b_leads = Action::StandBy("pod-b publishes (the operator's leader)".into());
        assert_eq!(run.at(5, lease("pod-b_2")), [b_leads]);
        assert_eq!(run.state(), &State::StandingBy);
        assert!(run.at(10, lease("pod-a_3")).is_empty());
        assert_eq!(run.state(), &State::Claiming);
        assert_eq!(run.at(10, Event::Written(held_by("pod-a"))), [from_b], "it stood by: news again");
        // A 409 reads the Lease again, but only the read after it decides.
        run.at(70, Event::Conflict { lease: Some(LeaseRead::NoLeader("Lease ns/op has no holder".into())) });
        assert_eq!(run.state(), &State::Holding);
        let actions = run.at(70, Event::ConfigMapRead(held_by("pod-a")));
        assert_eq!(
            (run.state(), actions),
            (&State::StandingBy, vec![Action::StandBy("Lease ns/op has no holder".into())])
        );
    }

    #[test]
    fn a_stopping_holder_hands_over_and_holds_on_when_nobody_takes_the_lock() {
        let mut run = Run::holding(0);
        assert!(run.at(10, Event::HandOver).is_empty());
        assert_eq!(run.state(), &State::HandingOver);
        assert!(run.machine.state.publishing(), "until another takes the lock");
        assert!(run.at(11, Event::HandoverRead(released_by("pod-a"))).is_empty());
        assert_eq!(run.state(), &State::HandingOver);
        assert_eq!(run.at(12, Event::HandoverRead(held_by("pod-b"))), [Action::HandedOver("pod-b".into())]);
        assert_eq!(run.state(), &State::StandingBy);

        let mut run = Run::holding(0);
        run.at(10, Event::HandOver);
        assert!(run.at(16, Event::HandoverEnded).is_empty());
        assert_eq!(run.state(), &State::Holding, "nobody took over: publishing on");
        // A standby has nothing to hand over.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-b")));
        run.at(1, Event::HandOver);
        assert_eq!(run.state(), &State::StandingBy);
    }

    #[test]
    fn a_stopping_pod_leaves_a_free_lock_to_the_instances_that_stay_for_a_heartbeat() {
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-b")));
        assert!(run.at(1, Event::PodStopping).is_empty());
        let Action::StandBy(why) = &run.at(5, Event::ConfigMapRead(released_by("pod-b")))[0] else {
            panic!("took the lock while stopping")
        };
        assert!(why.starts_with("this pod is stopping"), "{why}");
        assert_eq!(run.at(60, Event::ConfigMapRead(released_by("pod-b"))).len(), 1, "for less than a heartbeat");
        assert!(run.at(61, Event::ConfigMapRead(released_by("pod-b"))).is_empty());
        assert_eq!(run.state(), &State::Claiming, "nobody took it in a heartbeat (the operator wait)");
    }

    #[test]
    fn a_standby_decides_again_at_its_operators_first_answer() {
        // The allowance spent, it read the lock held by pod-b at 61 s.
        let mut run = Run::new();
        run.at(0, FAILED);
        run.at(60, FAILED);
        run.at(61, Event::ConfigMapRead(held_by("pod-b")));
        assert_eq!(run.state(), &State::StandingBy);
        run.at(190, FAILED);
        assert_eq!(run.state(), &State::StandingBy, "no answer: the next check decides");
        run.at(191, PASSED);
        assert_eq!(run.state(), &State::Claiming, "the lock unchanged for its lease: expired");
    }

    #[test]
    fn an_unreadable_lock_is_taken_as_expired_and_said_when_first_seen() {
        let mut run = Run::new();
        let unreadable = configmap(Seen::parse(Some("garbage")));
        let actions = run.at(0, Event::ConfigMapRead(unreadable.clone()));
        assert!(matches!(&actions[..], [Action::LockUnreadable(why)] if why.contains("is not a lock record")));
        assert_eq!(run.state(), &State::Claiming);
        assert!(run.at(5, Event::ConfigMapRead(unreadable)).is_empty());
    }

    #[test]
    fn a_read_while_starting_is_kept_and_decides_nothing() {
        let mut run = Run::new();
        run.at(0, FAILED);
        assert!(run.at(1, Event::ConfigMapRead(held_by("pod-b"))).is_empty());
        assert_eq!(run.state(), &State::Starting { standing_by: false });
        assert_eq!(run.machine.holder(), Some("pod-b"));
    }

    #[test]
    fn a_check_that_is_pending_is_no_answer() {
        assert!(answered(&OperatorAnswer::Answered));
        assert!(!answered(&OperatorAnswer::Pending));
        assert!(!answered(&OperatorAnswer::Down("connection refused".into())));
    }
}
