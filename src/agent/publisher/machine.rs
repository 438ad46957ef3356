//! The publisher's state machine: where this instance stands in
//! publishing the status ([`State`]), what can happen to it ([`Event`]),
//! and one pure function from the one to the next ([`transition`]) that
//! says what the shell should do or say ([`Action`]). No I/O; the clock is
//! an argument.
//!
//! The rules are the machine's inputs, applied in this order: the start-up
//! allowance ([`super::super::startup`]: nothing read or written while the
//! operator has not answered), another writer of the status
//! ([`crate::writers`]: the lock decides nothing while it keeps the status
//! key), the operator's leader ([`super::super::leader`], when followed and
//! it decides, unless its sidecar does not publish) and the publisher lock
//! ([`crate::lock`]). What they remember between events is [`Memory`]. The
//! states that write carry the version of the ConfigMap they write
//! against, so no state writes on what it did not decide.
//! `docs/architecture.md` draws the machine.

use super::super::leader::{Leader, LeaseRead};
use super::super::startup::Startup;
use crate::lock::{self, Decision, Observer, OwnState, Record, Seen};
use crate::sinks::configmap::Current;
use crate::writers::{Patience, Turn, Writer, Yielding};
use std::time::{Duration, Instant, SystemTime};

/// Where this instance stands. It holds the lock only once a write of its
/// claim succeeded: each claim carries the `resourceVersion` its state
/// carries, so of two instances deciding at once one write wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// The operator has not answered its health checks since opstatus
    /// started and the allowance is not spent: nothing is read or written.
    /// A followed leader still decides (`standing_by`: another pod leads).
    Starting { standing_by: bool },
    /// The lock is not known (not read yet, or read before the operator's
    /// first answer): the next write reads the ConfigMap first.
    Unknown,
    /// The lock was free, released, expired or its own, or this pod leads
    /// the operator, in this version: the next write claims it against it
    /// (a missing ConfigMap is created first, holding no lock).
    Claiming(Current),
    /// A write of its claim succeeded (this version): it publishes, and
    /// every heartbeat renews the lock.
    Holding(Current),
    /// Another instance holds the lock, another pod leads the operator, or
    /// this pod is stopping: it reads the ConfigMap once per check.
    StandingBy,
    /// Another writer keeps the status key: nobody of opstatus writes,
    /// and this instance looks once per heartbeat and at `until`.
    Yielding { to: Writer, until: SystemTime },
    /// A stopping holder released the lock (this version) and waits for a
    /// standby to take it.
    HandingOver(Current),
}

impl State {
    /// Whether this instance publishes now.
    pub(super) fn publishing(&self) -> bool {
        matches!(self, State::Holding(_) | State::HandingOver(_))
    }

    /// Whether this instance writes: it publishes, it has not read the lock
    /// yet, or it may take it.
    pub(super) fn may_write(&self) -> bool {
        matches!(self, State::Unknown | State::Claiming(_) | State::Holding(_) | State::HandingOver(_))
    }

    fn standing_by(&self) -> bool {
        matches!(self, State::StandingBy | State::Starting { standing_by: true })
    }

    /// The ConfigMap a write goes against, when this state writes and the
    /// ConfigMap exists.
    fn against(&self) -> Option<&Current> {
        let (State::Claiming(c) | State::Holding(c) | State::HandingOver(c)) = self else { return None };
        Some(c).filter(|c| !c.resource_version.is_empty())
    }
}

/// What can happen to the publisher, as the shell feeds it in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// A check of the operator's health checks: whether they passed.
    OperatorChecked { passed: bool },
    /// kubelet's preStop hook: the pod is stopping.
    PodStopping,
    /// The followed Lease was read (on a check): who leads decides now.
    LeaseRead(LeaseRead),
    /// The status ConfigMap was read (a missing one has no
    /// `resourceVersion`).
    ConfigMapRead(Current),
    /// The ConfigMap as a write's first look left it, when the lock was
    /// unknown or the ConfigMap missing (read, or created holding no lock):
    /// a claim decided on a missing ConfigMap goes against the one created.
    Init(Current),
    /// A write of this instance's claim (a renewal, or a release) went
    /// through: the object as written.
    Written(Current),
    /// A write was refused with 409; the followed Lease as read again. The
    /// shell reads the ConfigMap next, and that read decides.
    Conflict { lease: Option<LeaseRead> },
    /// A stopping holder's release was written: it waits for a standby.
    HandOver,
    /// The handover wait ran out (or a read in it failed): nobody took over.
    HandoverEnded,
}

/// What the shell does or says after a transition (once each: the news of
/// a change, never the state again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::agent) enum Action {
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
}

/// The clock: monotonic for what this instance saw, wall for objects.
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
    /// The lease it announces; also the grace of a failing Lease's answer.
    pub lease: Duration,
    /// How long a stopping instance leaves a free lock to others.
    pub operator_wait: Duration,
    /// How long another writer keeps the status, how often one looks.
    pub patience: Patience,
    check_interval: Duration,
    /// The start-up allowance.
    pub allowance: Duration,
}

impl Rules {
    pub(super) fn new(me: String, pod: String, interval: Duration, check: Duration, allowance: Duration) -> Rules {
        Rules {
            me,
            pod,
            lease: lock::lease_duration(interval),
            operator_wait: lock::operator_wait(interval),
            patience: Patience::new(interval, check),
            check_interval: check,
            allowance,
        }
    }

    /// The lease follows the heartbeat interval as it is now (kube9-server
    /// may ask for a longer one), so a healthy holder keeps the lock.
    pub(super) fn follow_interval(&mut self, interval: Duration) {
        self.lease = lock::lease_duration(interval);
        self.operator_wait = lock::operator_wait(interval);
        self.patience = Patience::new(interval, self.check_interval);
    }
}

/// What the rules remember between events.
pub(super) struct Memory {
    /// The ConfigMap as last read or written (read missing: the lock kept).
    pub current: Option<Current>,
    /// When the lock record last changed, as seen from here.
    observer: Observer,
    /// Who leads the operator, as its Lease last answered (when followed).
    pub leader: Leader,
    /// What the writers' rule remembers of another writer.
    pub yielding: Yielding,
    /// What this instance knows of its operator and its pod.
    own: OwnState,
    /// Where it stands with its operator's first answer.
    pub startup: Startup,
    /// Whether it stood by since it last held the lock.
    stood_by: bool,
    /// Another instance seen holding the lock, last.
    last_other: Option<String>,
    /// The leader's pod whose sidecar is silent, while this one stands in.
    pub silent_leader: Option<String>,
}

/// The publisher: its state, its rules' settings and their memory.
pub(super) struct Machine {
    pub state: State,
    pub rules: Rules,
    pub memory: Memory,
}

impl Machine {
    pub(super) fn new(rules: Rules, started: Instant) -> Machine {
        let memory = Memory {
            current: None,
            observer: Observer::default(),
            leader: Leader::default(),
            yielding: Yielding::default(),
            own: OwnState::new(started),
            startup: Startup::Answered,
            stood_by: false,
            last_other: None,
            silent_leader: None,
        };
        Machine { state: State::Unknown, rules, memory }
    }

    /// Feeds one event in: the new state is kept, the actions returned.
    pub(super) fn on(&mut self, event: Event, clock: Clock) -> Vec<Action> {
        let state = std::mem::replace(&mut self.state, State::Unknown);
        let (state, actions) = transition(state, event, clock, &self.rules, &mut self.memory);
        self.state = state;
        actions
    }

    /// Whether a check reads the ConfigMap at `wall`: a standby always, a
    /// yielding instance once per heartbeat and when the status is due
    /// back, a holder only while it stands in for a silent leader (to hand
    /// back once that leader's sidecar takes the lock).
    pub(super) fn wants_look(&self, wall: SystemTime) -> bool {
        match &self.state {
            State::StandingBy => true,
            State::Yielding { .. } => self.memory.yielding.due(wall, &self.rules.patience),
            State::Holding(_) => self.memory.silent_leader.is_some(),
            _ => false,
        }
    }

    /// The record a write carries (released when `release`) and the
    /// version it goes against; `None` when the state writes nothing or
    /// must look first (the lock unknown, the ConfigMap missing).
    pub(super) fn claim(&self, release: bool, wall: SystemTime) -> Option<(Record, &str)> {
        let against = self.state.against()?;
        let record = Record::claim(&self.rules.me, against.lock.record(), self.rules.lease, wall);
        let record = if release { record.released(wall) } else { record };
        Some((record, &against.resource_version))
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
        // The ConfigMap created (or found) for a claim on a missing one,
        // still holding no lock: the claim stands, against it.
        Event::Init(created)
            if matches!(&state, State::Claiming(c) if c.resource_version.is_empty())
                && created.lock == Seen::Absent
                && created.foreign.is_none() =>
        {
            memory.current = Some(created.clone());
            State::Claiming(created)
        }
        Event::ConfigMapRead(mut current) | Event::Init(mut current) => {
            // A deleted ConfigMap releases no lock: the record last seen
            // stands until its lease runs out, as a silent holder's does
            // (a holder's next write creates the ConfigMap again).
            if let Some(last) = memory.current.as_ref().filter(|_| current.resource_version.is_empty()) {
                current.lock = last.lock.clone();
            }
            memory.current = Some(current);
            look(state, clock, rules, memory, out)
        }
        Event::Written(written) => {
            let previous = memory.current.as_ref().and_then(|c| c.lock.record()).map(|r| &r.holder_identity);
            let previous = previous.filter(|h| !h.is_empty() && **h != rules.me).cloned();
            memory.current = Some(written.clone());
            memory.yielding.wrote(clock.wall);
            match state {
                State::Holding(_) => State::Holding(written),
                State::HandingOver(_) => State::HandingOver(written),
                _ => {
                    let took_over =
                        (memory.stood_by || previous.is_some()).then(|| previous.or_else(|| memory.last_other.clone()));
                    memory.stood_by = false;
                    out.push(Action::Publish { took_over });
                    State::Holding(written)
                }
            }
        }
        Event::Conflict { lease } => {
            if let Some(read) = lease {
                memory.leader.observe(read, clock.now);
            }
            state
        }
        Event::HandOver => match state {
            State::Holding(c) => State::HandingOver(c),
            other => other,
        },
        Event::HandoverEnded => match state {
            State::HandingOver(c) => State::Holding(c),
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
    // What was decided before it is forgotten: the lock is read again.
    let state = match (state, memory.startup.waiting()) {
        (State::StandingBy, true) => State::Starting { standing_by: true },
        (State::Unknown | State::Claiming(_), true) => State::Starting { standing_by: false },
        (State::Starting { standing_by: true }, false) => State::StandingBy,
        (State::Starting { standing_by: false }, false) => State::Unknown,
        (state, _) => state,
    };
    if first && state == State::StandingBy && memory.current.is_some() {
        return decide(state, clock.now, rules, memory, out);
    }
    state
}

/// After a read of the ConfigMap: whose the status is ([`crate::writers`],
/// a stopping holder's included), then who holds the lock. A read while
/// starting is kept, and decides nothing until the start ends.
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
            memory.silent_leader = None;
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
/// lock; a stopping holder only learns whether a standby took it.
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
    if let State::HandingOver(_) = state {
        return handing_over(current, rules, out);
    }
    let other = current.lock.record().map(|r| &r.holder_identity).filter(|h| !h.is_empty() && **h != rules.me);
    if let Some(other) = other {
        memory.last_other = Some(other.clone());
    }
    let unchanged = memory.observer.observe(&current.lock, now);
    if let Seen::Unreadable(why) = &current.lock
        && unchanged.is_zero()
    {
        out.push(Action::LockUnreadable(why.clone()));
    }
    // The leader's sidecar publishes, unless it does not: when the lock
    // has lapsed (nobody renewed it for its lease) while another pod renews
    // the Lease, the lock decides, and the instance that takes it keeps it
    // until the leader's sidecar claims it.
    let silent = match leader {
        Some(Ok(leader)) if leader != rules.pod => {
            let mine = current.lock.record().is_some_and(|r| r.holder_identity == rules.me)
                && memory.silent_leader.as_deref() == Some(leader);
            let lapsed = lock::lapsed(&current.lock, unchanged, rules.lease) && memory.leader.renewing(now);
            (mine || lapsed).then(|| leader.to_string())
        }
        _ => None,
    };
    let leader = leader.filter(|_| silent.is_none());
    let stopping = memory.own.stopping_for(now);
    let decision = lock::decide(&rules.me, &rules.pod, &current.lock, unchanged, leader, stopping, rules.operator_wait);
    memory.silent_leader = silent;
    apply(state, decision, memory, out)
}

/// A stopping holder's look while it waits: handed over once another
/// instance holds the lock, else still waiting.
fn handing_over(current: &Current, rules: &Rules, out: &mut Vec<Action>) -> State {
    let holder = current.lock.record().map(|r| r.holder_identity.as_str()).unwrap_or_default();
    if holder.is_empty() || holder == rules.me {
        return State::HandingOver(current.clone());
    }
    out.push(Action::HandedOver(holder.to_string()));
    State::StandingBy
}

fn apply(state: State, decision: Decision, memory: &mut Memory, out: &mut Vec<Action>) -> State {
    match (decision, state, &memory.current) {
        (Decision::Publish, State::Starting { .. }, _) => State::Starting { standing_by: false },
        (Decision::Publish, State::Holding(_), Some(c)) if !c.resource_version.is_empty() => State::Holding(c.clone()),
        (Decision::Publish, _, Some(c)) => State::Claiming(c.clone()),
        (Decision::Publish, _, None) => State::Unknown,
        (Decision::StandBy(why), state, _) => {
            memory.stood_by = true;
            memory.silent_leader = None;
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
            Run { machine: Machine::new(Rules::new("pod-a".into(), "pod-a".into(), INTERVAL, S(5), S(60)), t0), t0 }
        }

        fn at(&mut self, secs: u64, event: Event) -> Vec<Action> {
            self.machine.on(event, Clock { now: self.t0 + S(secs), wall: wall(secs) })
        }

        /// The state's name (what it carries is the tests' business where
        /// they say so).
        fn state(&self) -> &'static str {
            match &self.machine.state {
                State::Starting { standing_by: false } => "Starting",
                State::Starting { standing_by: true } => "Starting, standing by",
                State::Unknown => "Unknown",
                State::Claiming(_) => "Claiming",
                State::Holding(_) => "Holding",
                State::StandingBy => "StandingBy",
                State::Yielding { .. } => "Yielding",
                State::HandingOver(_) => "HandingOver",
            }
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

    /// A read of the Lease held by `holder`, renewed for the `n`th time.
    fn renewed(holder: &str, n: u64) -> Event {
        let held =
            Held { lease: "ns/op".into(), holder: holder.into(), renew_time: Some(n.to_string()), duration: S(15) };
        Event::LeaseRead(LeaseRead::Held(held))
    }

    /// A ConfigMap that does not exist (any more).
    fn missing() -> Current {
        Current { resource_version: String::new(), lock: Seen::Absent, uid: String::new(), foreign: None }
    }

    const FAILED: Event = Event::OperatorChecked { passed: false };
    const PASSED: Event = Event::OperatorChecked { passed: true };

    #[test]
    fn a_starting_instance_reads_and_writes_nothing_until_the_first_answer_or_the_end_of_the_allowance() {
        let mut run = Run::new();
        assert_eq!(run.at(0, FAILED), [Action::Startup(Startup::Waiting { left: S(60) })]);
        assert_eq!(run.state(), "Starting");
        assert!(!run.machine.state.may_write() && !run.machine.state.publishing());
        assert!(run.at(30, FAILED).is_empty(), "said once");
        assert_eq!(run.at(45, PASSED), [Action::Startup(Startup::Answered)]);
        assert_eq!(run.state(), "Unknown", "its first write reads the lock");
        assert!(run.machine.state.may_write());

        // No answer for the whole allowance: it publishes, saying so.
        let mut run = Run::new();
        run.at(0, FAILED);
        assert!(run.at(59, FAILED).is_empty());
        assert_eq!(run.at(60, FAILED), [Action::Startup(Startup::Spent)]);
        assert_eq!((run.state(), run.machine.memory.startup), ("Unknown", Startup::Spent));
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
        assert_eq!(run.state(), "Starting, standing by");
        assert_eq!(run.at(5, PASSED), [Action::Startup(Startup::Answered)]);
        assert_eq!(run.state(), "StandingBy");
        assert!(!run.machine.state.may_write());
        assert!(run.at(10, lease("pod-a_2")).is_empty());
        assert_eq!(run.state(), "Unknown", "this pod leads: its next write reads the lock and claims it");
        // A Lease that cannot be read before any answer: stand by for now.
        let mut run = Run::new();
        let failed = Event::LeaseRead(LeaseRead::Failed("Cannot read Lease ns/op: 403".into()));
        assert_eq!(run.at(0, failed), [Action::StandBy("Cannot read Lease ns/op: 403".into())]);
        assert_eq!(run.state(), "StandingBy");
        // Past the grace (a lease of the lock) the first write reads the lock.
        run.at(130, Event::LeaseRead(LeaseRead::Failed("Cannot read Lease ns/op: 403".into())));
        assert_eq!(run.state(), "Unknown");
    }

    #[test]
    fn the_first_write_claims_a_missing_or_own_lock_with_no_takeover_news() {
        let mut run = Run::new();
        assert!(run.at(0, Event::ConfigMapRead(configmap(Seen::Absent))).is_empty());
        assert_eq!(run.state(), "Claiming");
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
        assert_eq!(run.state(), "StandingBy");
        assert!(run.machine.wants_look(wall(5)), "a standby looks on every check");
        assert_eq!(run.at(129, Event::ConfigMapRead(held_by("pod-b"))), [b], "unchanged for less than its lease");
        assert!(run.at(130, Event::ConfigMapRead(held_by("pod-b"))).is_empty());
        assert_eq!(run.state(), "Claiming", "expired");
        let took_over = Some(Some("pod-b".to_string()));
        assert_eq!(run.at(131, Event::Written(held_by("pod-a"))), [Action::Publish { took_over }]);
        assert!(!run.machine.wants_look(wall(136)), "the holder's writes tell it all");

        // Released by its holder (a handover): taken at once, from the one
        // it stood by for.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-b")));
        assert!(run.at(5, Event::ConfigMapRead(released_by("pod-b"))).is_empty());
        assert_eq!(run.state(), "Claiming");
        let took_over = Some(Some("pod-b".to_string()));
        assert_eq!(run.at(6, Event::Written(held_by("pod-a"))), [Action::Publish { took_over }]);
    }

    #[test]
    fn a_409_on_a_heartbeat_reads_the_configmap_again_and_keeps_or_loses_the_lock() {
        let mut run = Run::holding(0);
        assert!(run.at(60, Event::Conflict { lease: None }).is_empty());
        assert_eq!(run.state(), "Holding", "nothing decided before the read");
        assert!(run.at(60, Event::ConfigMapRead(held_by("pod-a"))).is_empty());
        assert_eq!(run.state(), "Holding", "only its own version moved (a label, an annotation)");
        run.at(120, Event::Conflict { lease: None });
        assert_eq!(run.at(120, Event::ConfigMapRead(held_by("pod-b"))), [Action::StandBy("pod-b publishes".into())]);
        assert_eq!(run.state(), "StandingBy");
        assert!(!run.machine.state.may_write() && !run.machine.state.publishing());
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
        assert_eq!(run.machine.state, State::Yielding { to: kube9.clone(), until });
        assert!(!run.machine.state.may_write() && !run.machine.state.publishing());
        assert!(!run.machine.wants_look(wall(65)) && run.machine.wants_look(wall(120)), "once per heartbeat");
        assert!(run.at(120, Event::ConfigMapRead(replaced.clone())).is_empty());
        assert_eq!(run.machine.state, State::Yielding { to: kube9.clone(), until });
        // The lock decides nothing meanwhile, nor does a first answer.
        assert!(run.at(125, lease("pod-a_1")).is_empty() && run.at(125, PASSED).is_empty());
        assert_eq!(run.state(), "Yielding");
        // Due back: taken back, and the lock (gone with the PUT) decides.
        let actions = run.at(340, Event::ConfigMapRead(replaced));
        assert_eq!(actions, [Action::Resume { writer: kube9, quiet_for: S(285) }]);
        assert_eq!(run.state(), "Claiming");
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
        assert_eq!(run.state(), "Holding");
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
        assert_eq!(run.state(), "Unknown", "decided before the first read: its write reads the lock first");
        assert!(run.at(0, Event::ConfigMapRead(held_by("pod-b"))).is_empty(), "the leader, not the lock, decides");
        let from_b = Action::Publish { took_over: Some(Some("pod-b".into())) };
        assert_eq!(run.at(0, Event::Written(held_by("pod-a"))), std::slice::from_ref(&from_b));
        let b_leads = Action::StandBy("pod-b publishes (the operator's leader)".into());
        assert_eq!(run.at(5, lease("pod-b_2")), [b_leads]);
        assert_eq!(run.state(), "StandingBy");
        assert!(run.at(10, lease("pod-a_3")).is_empty());
        assert_eq!(run.state(), "Claiming");
        assert_eq!(run.at(10, Event::Written(held_by("pod-a"))), [from_b], "it stood by: news again");
        // A 409 reads the Lease again, but only the read after it decides.
        run.at(70, Event::Conflict { lease: Some(LeaseRead::NoLeader("Lease ns/op has no holder".into())) });
        assert_eq!(run.state(), "Holding");
        let actions = run.at(70, Event::ConfigMapRead(held_by("pod-a")));
        assert_eq!((run.state(), actions), ("StandingBy", vec![Action::StandBy("Lease ns/op has no holder".into())]));
    }

    #[test]
    fn a_stopping_holder_hands_over_and_holds_on_when_nobody_takes_the_lock() {
        let mut run = Run::holding(0);
        assert!(run.at(10, Event::HandOver).is_empty());
        assert_eq!(run.state(), "HandingOver");
        assert!(run.machine.state.publishing(), "until another takes the lock");
        assert!(run.at(11, Event::ConfigMapRead(released_by("pod-a"))).is_empty());
        assert_eq!(run.state(), "HandingOver");
        assert_eq!(run.at(12, Event::ConfigMapRead(held_by("pod-b"))), [Action::HandedOver("pod-b".into())]);
        assert_eq!(run.state(), "StandingBy");

        let mut run = Run::holding(0);
        run.at(10, Event::HandOver);
        assert!(run.at(16, Event::HandoverEnded).is_empty());
        assert_eq!(run.state(), "Holding", "nobody took over: publishing on");
        // A standby has nothing to hand over.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-b")));
        run.at(1, Event::HandOver);
        assert_eq!(run.state(), "StandingBy");
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
        assert_eq!(run.state(), "Claiming", "nobody took it in a heartbeat (the operator wait)");
    }

    #[test]
    fn a_standby_decides_again_at_its_operators_first_answer() {
        // The allowance spent, it read the lock held by pod-b at 61 s.
        let mut run = Run::new();
        run.at(0, FAILED);
        run.at(60, FAILED);
        run.at(61, Event::ConfigMapRead(held_by("pod-b")));
        assert_eq!(run.state(), "StandingBy");
        run.at(190, FAILED);
        assert_eq!(run.state(), "StandingBy", "no answer: the next check decides");
        run.at(191, PASSED);
        assert_eq!(run.state(), "Claiming", "the lock unchanged for its lease: expired");
    }

    #[test]
    fn an_unreadable_lock_is_taken_as_expired_and_said_when_first_seen() {
        let mut run = Run::new();
        let unreadable = configmap(Seen::parse(Some("garbage")));
        let actions = run.at(0, Event::ConfigMapRead(unreadable.clone()));
        assert!(matches!(&actions[..], [Action::LockUnreadable(why)] if why.contains("is not a lock record")));
        assert_eq!(run.state(), "Claiming");
        assert!(run.at(5, Event::ConfigMapRead(unreadable)).is_empty());
    }

    #[test]
    fn a_read_while_starting_is_kept_and_decides_nothing() {
        let mut run = Run::new();
        run.at(0, FAILED);
        assert!(run.at(1, Event::ConfigMapRead(held_by("pod-b"))).is_empty());
        assert_eq!(run.state(), "Starting");
        assert_eq!(run.machine.holder(), Some("pod-b"));
    }

    #[test]
    fn a_claim_interrupted_by_the_start_up_wait_is_forgotten_and_the_lock_read_again_before_any_write() {
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(configmap(Seen::Absent)));
        assert_eq!(run.state(), "Claiming");
        run.at(0, FAILED);
        assert_eq!(run.state(), "Starting");
        // Meanwhile another instance took the lock, and this one read it.
        assert!(run.at(1, Event::ConfigMapRead(held_by("pod-b"))).is_empty());
        run.at(5, PASSED);
        assert_eq!(run.state(), "Unknown");
        assert!(run.machine.state.may_write(), "its next write looks first");
        assert_eq!(run.machine.claim(false, wall(5)), None, "nothing to claim against: it has not decided");
        // The write's first look decides: pod-b publishes.
        assert_eq!(run.at(5, Event::Init(held_by("pod-b"))), [Action::StandBy("pod-b publishes".into())]);
        assert!(!run.machine.state.may_write());
    }

    #[test]
    fn a_deleted_configmap_releases_no_lock_and_a_claim_on_a_missing_one_creates_it_first() {
        // A standby that saw pod-b's lock: the ConfigMap deleted leaves it
        // standing by for pod-b's lease, as if the annotation were there.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(held_by("pod-b")));
        for t in (5..130).step_by(5) {
            run.at(t, Event::ConfigMapRead(missing()));
            assert_eq!(run.state(), "StandingBy", "at {t} s");
        }
        assert_eq!(run.machine.holder(), Some("pod-b"));
        // Unrenewed for its lease: free, but the claim has no version to go
        // against, so the write looks first, creating the ConfigMap.
        run.at(130, Event::ConfigMapRead(missing()));
        assert_eq!(run.state(), "Claiming");
        assert_eq!(run.machine.claim(false, wall(130)), None);
        assert!(run.at(130, Event::Init(configmap(Seen::Absent))).is_empty());
        let (record, version) = run.machine.claim(false, wall(130)).expect("a claim against the created one");
        assert_eq!((record.holder_identity.as_str(), version), ("pod-a", "7"));
        // Another standby claimed it first: its lock decides.
        let mut run = Run::new();
        run.at(0, Event::ConfigMapRead(missing()));
        assert_eq!(run.state(), "Claiming", "nobody ever wrote it");
        assert_eq!(run.at(0, Event::Init(held_by("pod-c"))), [Action::StandBy("pod-c publishes".into())]);
        // The holder's own write after a 409 finds it gone: it claims it
        // again the same way.
        let mut run = Run::holding(0);
        run.at(60, Event::Conflict { lease: None });
        assert!(run.at(60, Event::ConfigMapRead(missing())).is_empty());
        assert_eq!((run.state(), run.machine.claim(false, wall(60))), ("Claiming", None));
        run.at(60, Event::Init(configmap(Seen::Absent)));
        assert!(run.machine.claim(false, wall(60)).is_some());
    }

    #[test]
    fn a_stopping_holder_leaves_the_status_to_another_writer_that_takes_it_while_it_hands_over() {
        let mut run = Run::holding(0);
        run.at(10, Event::HandOver);
        let replaced = replaced_by_kube9(Some(wall(11)), wall(11));
        let actions = run.at(12, Event::ConfigMapRead(replaced));
        assert!(matches!(&actions[..], [Action::Yield { .. }]), "{actions:?}");
        assert_eq!(run.state(), "Yielding");
        assert!(!run.machine.state.publishing() && !run.machine.state.may_write(), "no final status over it");
        assert!(run.at(16, Event::HandoverEnded).is_empty());
        assert_eq!(run.state(), "Yielding", "the wait's end takes nothing back");
    }

    #[test]
    fn a_leader_whose_sidecar_does_not_publish_is_stood_in_for_after_a_lease_until_its_sidecar_takes_the_lock() {
        // pod-c renews the operator's Lease; its pod has no sidecar, and
        // nobody ever wrote the status.
        let mut run = Run::new();
        let c_leads = Action::StandBy("pod-c publishes (the operator's leader)".into());
        assert_eq!(run.at(0, renewed("pod-c_1", 0)), std::slice::from_ref(&c_leads));
        let mut t = 0;
        while run.state() == "StandingBy" {
            assert!(run.machine.wants_look(wall(t)), "a follower looks at the lock on every check");
            run.at(t, renewed("pod-c_1", t));
            run.at(t, Event::ConfigMapRead(missing()));
            t += 5;
        }
        assert_eq!((t - 5, run.state()), (130, "Claiming"), "a lease (130 s) with no lock written");
        assert_eq!(run.machine.memory.silent_leader.as_deref(), Some("pod-c"));
        run.at(130, Event::Init(configmap(Seen::Absent)));
        let news = run.at(130, Event::Written(held_by("pod-a")));
        assert_eq!(news, [Action::Publish { took_over: Some(None) }]);
        // It keeps the lock while pod-c leads and its sidecar is silent.
        for t in (135..400).step_by(5) {
            assert!(run.at(t, renewed("pod-c_1", t)).is_empty());
            assert_eq!(run.state(), "Holding", "at {t} s");
            assert!(run.machine.wants_look(wall(t)), "it looks for the leader's sidecar on every check");
            run.at(t, Event::ConfigMapRead(held_by("pod-a")));
        }
        // pod-c's sidecar takes the lock: handed back at once.
        assert_eq!(run.at(400, Event::ConfigMapRead(held_by("pod-c"))), [c_leads]);
        assert_eq!((run.state(), run.machine.memory.silent_leader.as_deref()), ("StandingBy", None));

        // A leader's sidecar that renews the lock is never stood in for.
        let mut run = Run::new();
        for t in (0..400).step_by(5) {
            run.at(t, renewed("pod-c_1", t));
            let renewal = Record::claim("pod-c", None, S(130), wall(t / 60 * 60));
            run.at(t, Event::ConfigMapRead(configmap(Seen::Record(renewal))));
            assert_eq!(run.state(), "StandingBy", "at {t} s");
        }
        // A Lease nobody renews is no silent sidecar: past its duration and
        // 10 s it names no leader, and the lock decides (saying so).
        let mut run = Run::new();
        for t in (0..=130).step_by(5) {
            run.at(t, lease("pod-c_1"));
            run.at(t, Event::ConfigMapRead(missing()));
            assert_eq!(run.machine.memory.silent_leader, None, "at {t} s");
        }
        // Nor one whose lock is live (held by another follower that stood
        // in, renewing it).
        let mut run = Run::new();
        for t in (0..400).step_by(5) {
            run.at(t, renewed("pod-c_1", t));
            let renewal = Record::claim("pod-b", None, S(130), wall(t / 60 * 60));
            run.at(t, Event::ConfigMapRead(configmap(Seen::Record(renewal))));
            assert_eq!(run.state(), "StandingBy", "at {t} s");
        }
    }
}
