//! Whether this instance publishes, at run time: the shell around the
//! publisher's state machine ([`machine`]). It does the I/O the machine
//! does not: reads the status ConfigMap and the operator's Lease, writes
//! the status with the lock's record, logs (each problem once per change),
//! and feeds what it saw in as events.
//!
//! The holder's heartbeat is its renewal: no request of its own, and a 409
//! on a heartbeat means someone else changed the ConfigMap (perhaps took
//! the lock), so the holder reads and decides again. A standby reads the
//! ConfigMap once per check; with `--follow-leader-lease` everyone reads
//! the operator's Lease once per check. A holder that stops hands the lock
//! over ([`Publisher::hand_over`]): it writes the lock released and reads
//! until a standby took it, or the wait is over.

mod machine;

use super::leader::Leader;
use super::lease::read_leader;
use super::startup::Startup;
use crate::kube::{Client, KubeError};
use crate::lock::Seen;
use crate::signals::OperatorAnswer;
use crate::sinks::configmap::{Current, StatusConfigMap};
use crate::status::{Problem, Rule, StatusDocument};
use crate::util::reported::Reported;
use crate::util::time::format_rfc3339;
use crate::writers::Writer;
pub(super) use machine::Action;
use machine::{Clock, Event, Machine, Rules, State};
use std::time::{Duration, Instant, SystemTime};

/// How often a stopping holder looks whether a standby took over.
const HANDOVER_POLL: Duration = Duration::from_secs(1);

/// The shell around the publisher's state machine ([`Machine`]): it reads
/// and writes, feeds what it saw in as events, and says what the machine's
/// actions tell (each problem once per change).
pub(super) struct Publisher {
    /// The operator's own leader-election Lease (name), when followed.
    follow: Option<String>,
    machine: Machine,
    /// A failed Lease read, logged once per change.
    lease_error: Reported,
    /// A Lease that names no live leader, logged once per change.
    lease_unheld: Reported,
    /// Why this instance stands by, as last logged.
    standing_by: Reported,
    /// Why the lock could not be read, logged once.
    read_error: Reported,
    /// What the cluster hears of, nobody asked yet ([`Publisher::take_news`]).
    news: Vec<Action>,
}

impl Publisher {
    /// `me` in the lock, in the pod `pod` (what the operator's Lease names).
    pub(super) fn new(
        me: String,
        pod: String,
        follow: Option<String>,
        interval: Duration,
        check_interval: Duration,
        allowance: Duration,
    ) -> Publisher {
        Publisher {
            follow,
            machine: Machine::new(Rules::new(me, pod, interval, check_interval, allowance), Instant::now()),
            lease_error: Reported::default(),
            lease_unheld: Reported::default(),
            standing_by: Reported::default(),
            read_error: Reported::default(),
            news: Vec::new(),
        }
    }

    /// The lease this instance announces, and the other writer's patience,
    /// follow the heartbeat interval as it is now ([`Rules::follow_interval`]).
    pub(super) fn follow_interval(&mut self, interval: Duration) {
        self.machine.rules.follow_interval(interval);
    }

    /// After each check of a running instance that watches its operator:
    /// what its health checks said. Once they have passed, the operator has
    /// answered; a standby that was waiting for that decides again at once,
    /// not a check later.
    pub(super) fn note_operator(&mut self, answer: &OperatorAnswer, now: Instant) {
        let clock = Clock { now, wall: SystemTime::now() };
        self.feed(Event::OperatorChecked { passed: answered(answer) }, clock);
    }

    /// Where this instance stands with its operator's first answer: while
    /// it waits, it publishes nothing.
    pub(super) fn startup(&self) -> Startup {
        self.machine.memory.startup
    }

    /// kubelet's preStop hook came: this instance takes no free lock for
    /// a while ([`crate::lock::decide`]).
    pub(super) fn pod_stopping(&mut self, now: Instant) {
        self.feed(Event::PodStopping, Clock { now, wall: SystemTime::now() });
    }

    /// The longest the lock's part of one tick can take, every call timing
    /// out: a check (the Lease, the ConfigMap) and a write (the first
    /// look's read and apply, the write, and after a 409 the Lease, a read
    /// and the write again).
    pub(super) fn worst_case(&self) -> Duration {
        let calls = if self.follow.is_some() { 8 } else { 6 };
        crate::kube::call_bound().saturating_mul(calls)
    }

    /// Whether this instance publishes now (never while the status is
    /// another writer's).
    pub(super) fn publishing(&self) -> bool {
        self.machine.state.publishing()
    }

    /// Whether this instance should try to write: it publishes, or it has
    /// not been able to read the lock yet (the write reads it first, and
    /// its failures are the status write's, with their backoff); never
    /// while it waits for its operator's first answer.
    pub(super) fn may_write(&self) -> bool {
        self.machine.state.may_write()
    }

    /// The other writer the ConfigMap is left to, if any.
    pub(super) fn yielding_to(&self) -> Option<&Writer> {
        match &self.machine.state {
            State::Yielding { to, .. } => Some(to),
            _ => None,
        }
    }

    /// Once each, what the cluster hears of since the last call: a yield
    /// to another writer that began ([`Action::Yield`]), another writer of
    /// a stale status written over, once per episode and said by the
    /// instance that writes ([`Action::Overwrite`]), and a takeover from
    /// another instance (named when known) or after standing by, not a
    /// start on a free lock or on its own (a restarted container)
    /// ([`Action::Publish`] with `took_over`).
    pub(super) fn take_news(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.news)
    }

    /// The other writer this instance writes over, while that lasts.
    pub(super) fn overwriting(&self) -> Option<&Writer> {
        self.machine.memory.yielding.overwriting(&self.machine.rules.patience)
    }

    /// The status ConfigMap's uid, once read or written.
    pub(super) fn configmap_uid(&self) -> Option<&str> {
        self.machine.memory.current.as_ref().map(|c| c.uid.as_str()).filter(|u| !u.is_empty())
    }

    /// Who holds the lock, as last seen (`None`: nobody, or not read yet).
    pub(super) fn holder(&self) -> Option<&str> {
        self.machine.holder()
    }

    /// Why the followed Lease does not decide, once its reads have failed
    /// for longer than the grace or it names no live leader; or, while
    /// this instance publishes for a leader whose sidecar does not, that
    /// leader: a problem of the status, not silence.
    pub(super) fn problem(&self, now: Instant) -> Option<Problem> {
        let (leader, lease) = (&self.machine.memory.leader, self.machine.rules.lease);
        let why = self.standing_in().or_else(|| leader.problem(now, lease, SystemTime::now()))?;
        Some(Problem::degraded(Rule::Publishing, why))
    }

    /// Who leads the operator, as its Lease answered on this check (when
    /// followed): the leader's Service reads it here rather than again.
    pub(super) fn leader(&self) -> &Leader {
        &self.machine.memory.leader
    }

    /// On each check: with a followed Lease everyone reads it and decides
    /// again; standbys (and yielding instances, when due) read the
    /// ConfigMap. The holder otherwise relies on its own writes; before the
    /// first read the first write reads it.
    pub(super) fn check(&mut self, client: &mut Client, target: &StatusConfigMap, now: Instant) {
        if let Some(name) = &self.follow {
            let read = read_leader(client, &target.namespace, name);
            self.feed(Event::LeaseRead(read), Clock { now, wall: SystemTime::now() });
        }
        let wall = SystemTime::now();
        if !self.machine.wants_look(wall) {
            return;
        }
        match target.read(client) {
            Ok(current) => {
                self.read_error.update(None, log::Level::Warn, "");
                let current = current.unwrap_or_else(missing);
                self.feed(Event::ConfigMapRead(current), Clock { now, wall });
            }
            Err(e) => {
                let why = format!("Cannot read the status ConfigMap to see who publishes: {e}");
                self.read_error.update(Some(why), log::Level::Warn, "");
            }
        }
    }

    /// Writes `doc` if this instance publishes: `Ok(false)` when it does
    /// not (or lost the lock on the way). `release` leaves the lock free
    /// (`opstatus once`, and a holder that stops). A claim always carries
    /// the `resourceVersion` it was decided on: when the lock is unknown,
    /// or the ConfigMap missing, the write looks first (creating a missing
    /// ConfigMap holding no lock), so two claims on a missing ConfigMap
    /// cannot both win. One 409 is read and decided on (a ConfigMap it
    /// finds missing then is left to the next write); a second is the
    /// write's failure.
    pub(super) fn write(
        &mut self,
        client: &mut Client,
        target: &StatusConfigMap,
        doc: &StatusDocument,
        release: bool,
    ) -> Result<bool, KubeError> {
        let mut conflicts = 0;
        for _ in 0..3 {
            if !self.may_write() {
                return Ok(false);
            }
            let Some((record, version)) = self.machine.claim(release, SystemTime::now()) else {
                if conflicts > 0 {
                    return Ok(false);
                }
                let current = target.init(client)?;
                self.feed(Event::Init(current), Clock::read());
                continue;
            };
            match target.publish(client, doc, &record, version) {
                Ok(written) => {
                    self.feed(Event::Written(written), Clock::read());
                    return Ok(true);
                }
                Err(e) if e.code() == Some(409) && conflicts == 0 => {
                    conflicts += 1;
                    log::debug!("The status ConfigMap changed under us ({e}); reading it again");
                    let lease = self.follow.as_ref().map(|name| read_leader(client, &target.namespace, name));
                    self.feed(Event::Conflict { lease }, Clock::read());
                    let current = target.read(client)?.unwrap_or_else(missing);
                    self.feed(Event::ConfigMapRead(current), Clock::read());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// A holder that stops: leaves `last` (the status it last published)
    /// with the lock released, then waits up to `window` for a standby to
    /// take it. True when the status is now someone else's to publish (a
    /// standby took over, or this instance did not hold the lock): nothing
    /// more is to be written.
    pub(super) fn hand_over(
        &mut self,
        client: &mut Client,
        target: &StatusConfigMap,
        last: &StatusDocument,
        window: Duration,
        written: impl FnOnce(),
    ) -> Result<bool, KubeError> {
        if !self.write(client, target, last, true)? {
            return Ok(true);
        }
        // The API server answers: the wait may begin.
        written();
        self.feed(Event::HandOver, Clock::read());
        let deadline = Instant::now() + window;
        while Instant::now() < deadline {
            std::thread::sleep(HANDOVER_POLL.min(deadline.saturating_duration_since(Instant::now())));
            let current = match target.read(client) {
                Ok(current) => current.unwrap_or_else(missing),
                Err(e) => {
                    self.feed(Event::HandoverEnded, Clock::read());
                    return Err(e);
                }
            };
            self.feed(Event::ConfigMapRead(current), Clock::read());
            if !self.publishing() {
                return Ok(true);
            }
        }
        self.feed(Event::HandoverEnded, Clock::read());
        Ok(false)
    }

    /// Feeds `event` to the machine and does what it says: the Lease's
    /// problems first (a Lease read is what the machine decided on), then
    /// each action's line and news.
    fn feed(&mut self, event: Event, clock: Clock) {
        let lease_read = matches!(event, Event::LeaseRead(_) | Event::Conflict { lease: Some(_) });
        let actions = self.machine.on(event, clock);
        if lease_read {
            self.report_lease();
        }
        for action in actions {
            self.act(action);
        }
    }

    /// A failed Lease read or a Lease that names no live leader, logged
    /// once per change, with what the instance does meanwhile.
    fn report_lease(&mut self) {
        let (leader, lease) = (&self.machine.memory.leader, self.machine.rules.lease);
        let failure = leader.failure().map(|why| {
            format!(
                "{why}; the last known leader stands for up to {}s, then the publisher lock decides",
                lease.as_secs()
            )
        });
        self.lease_error.update(failure, log::Level::Warn, "The operator's Lease can be read again");
        let unheld = leader.not_leading(lease).map(|why| format!("{why}: the publisher lock decides"));
        self.lease_unheld.update(unheld, log::Level::Warn, "The operator's Lease names a leader again");
    }

    fn act(&mut self, action: Action) {
        let allowance = self.machine.rules.allowance.as_secs();
        let quiet = self.machine.rules.patience.quiet.as_secs();
        match &action {
            Action::Startup(Startup::Waiting { .. }) => log::info!(
                "Waiting for the operator's first answer before publishing anything (a start-up allowance of \
                 {allowance}s)"
            ),
            Action::Startup(Startup::Answered) => log::info!("The operator answers: publishing may begin"),
            Action::Startup(Startup::Spent) => {
                log::warn!("The operator has not answered in the {allowance}s since opstatus started: publishing that")
            }
            Action::LockUnreadable(why) => log::warn!("{why}: treating the lock as expired"),
            Action::StandBy(why) => {
                self.standing_by.update(Some(format!("Standing by: {why}")), log::Level::Info, "");
            }
            Action::Yield { writer, until } => {
                log::warn!(
                    "Another writer replaces the status: field manager {writer} owns its status key. Not fighting \
                     it: opstatus writes nothing (status, OperatorCondition, ClusterOperator) until {writer} has \
                     left the status alone for {quiet}s, or its status is about to be stale to readers: not before \
                     {}",
                    format_rfc3339(*until)
                );
            }
            Action::Overwrite { writer, why } => {
                log::warn!(
                    "Another writer keeps writing a stale status: field manager {writer} owns its status key, but {why}. \
                     opstatus writes its own status over it on every heartbeat, as readers would otherwise see a \
                     stale status: stop {writer} writing the status key to end this"
                );
            }
            Action::Resume { writer, quiet_for } => log::info!(
                "{writer} last wrote the status {}s ago (a quiet period of {quiet}s, or its status about to be \
                 stale to readers): taking it back",
                quiet_for.as_secs()
            ),
            Action::Publish { .. } => {
                log::info!("Publishing as {}", self.machine.rules.me);
                if let Some(why) = self.standing_in() {
                    log::warn!("{why}");
                }
                self.standing_by = Reported::default();
            }
            Action::HandedOver(holder) => log::info!("Handed over to {holder}"),
        }
        if matches!(action, Action::Yield { .. } | Action::Overwrite { .. } | Action::Publish { took_over: Some(_) }) {
            self.news.push(action);
        }
    }

    /// Why this instance publishes though the operator's leader is another
    /// pod: its sidecar does not (fixed words: one status while it lasts).
    pub(super) fn standing_in(&self) -> Option<String> {
        let (memory, rules) = (&self.machine.memory, &self.machine.rules);
        let (pod, leader) = (memory.silent_leader.as_deref()?, &memory.leader);
        let named =
            leader.held().map_or_else(String::new, |held| format!(": Lease {} names {}", held.lease, held.holder));
        Some(format!(
            "The operator's leader {pod} publishes no status{named}, but nobody renewed the publisher lock for its lease \
             ({}s); {} publishes what it sees until {pod}'s sidecar takes the lock",
            rules.lease.as_secs(),
            rules.me
        ))
    }
}

/// Whether the operator's health checks count as its answer: a check not
/// answered in time (pending) is none.
fn answered(answer: &OperatorAnswer) -> bool {
    *answer == OperatorAnswer::Answered
}

/// A ConfigMap that does not exist (any more): its first look creates it.
fn missing() -> Current {
    Current { resource_version: String::new(), lock: Seen::Absent, uid: String::new(), foreign: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_that_is_pending_is_no_answer() {
        assert!(answered(&OperatorAnswer::Answered));
        assert!(!answered(&OperatorAnswer::Pending));
        assert!(!answered(&OperatorAnswer::Down("connection refused".into())));
    }
}
