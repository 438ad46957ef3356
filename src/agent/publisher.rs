//! Whether this instance publishes: the publisher lock ([`crate::lock`])
//! at run time, over the status ConfigMap.
//!
//! The holder's heartbeat is its renewal: no request of its own, and a 409
//! on a heartbeat means someone else changed the ConfigMap (perhaps took
//! the lock), so the holder reads and decides again. A standby reads the
//! ConfigMap once per check and takes the lock when it is free, released or
//! expired; with `--follow-leader-lease` everyone reads the operator's
//! Lease once per check and the sidecar beside the operator's leader
//! publishes. A holder that stops hands the lock over ([`Publisher::hand_over`]).
//! While another writer keeps the status key, no instance writes anything:
//! every read of the ConfigMap (a holder's after a refused write, a
//! standby's, the first look of one just started) applies the same rule
//! to what the object says ([`crate::writers`]). Before all that, one whose
//! operator has not answered yet writes nothing ([`super::startup`]).

use super::leader::Leader;
use super::lease::read_leader;
use super::startup::Startup;
use crate::kube::{Client, KubeError};
use crate::lock::{self, Decision, Observer, OwnState, Record, Seen};
use crate::sinks::configmap::{Current, StatusConfigMap};
use crate::status::{Problem, Rule, StatusDocument};
use crate::util::reported::Reported;
use crate::util::time::format_rfc3339;
use crate::writers::{Patience, Turn, Writer, Yielding};
use std::time::{Duration, Instant, SystemTime};

/// How often a stopping holder looks whether a standby took over.
const HANDOVER_POLL: Duration = Duration::from_secs(1);

/// Where this instance stands. It holds the lock only once a write of its
/// claim succeeded: two instances deciding at once may both claim, but the
/// `resourceVersion` lets one write win, so only one ever holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The lock was not read yet.
    Unknown,
    /// The lock is free, released, expired or its own: its next write
    /// claims it.
    Claiming,
    Holding,
    StandingBy,
}

pub(super) struct Publisher {
    me: String,
    /// The pod this instance runs in: what the operator's Lease names.
    pub(super) pod: String,
    /// The operator's own leader-election Lease (name), when followed.
    follow: Option<String>,
    /// The lease this instance announces when it holds the lock.
    lease: Duration,
    observer: Observer,
    /// The ConfigMap's version and lock as last read or written; `None`
    /// until the first read.
    current: Option<Current>,
    /// Who leads the operator, as its Lease last answered (when followed).
    leader: Leader,
    /// A failed Lease read, logged once per change.
    lease_error: Reported,
    /// A Lease that names no live leader, logged once per change.
    lease_unheld: Reported,
    role: Role,
    /// Why this instance stands by, as last logged.
    standing_by: Reported,
    /// Why the lock could not be read, logged once.
    read_error: Reported,
    /// Whether this instance stood by since it last held the lock.
    stood_by: bool,
    /// Another instance seen holding the lock, last.
    last_other: Option<String>,
    /// This instance took the lock over (from whom, when known) and nobody
    /// asked yet ([`Publisher::take_over_news`]).
    took_over: Option<Option<String>>,
    /// Whether the ConfigMap is left to another writer ([`crate::writers`]).
    yielding: Yielding,
    /// How long another writer keeps the status, and how often a yielding
    /// instance looks: they follow the heartbeat interval as it is now.
    patience: Patience,
    check_interval: Duration,
    /// A yield that began, nobody asked yet ([`Publisher::take_yield_news`]).
    yielded: Option<Writer>,
    /// Another writer of a stale status written over (said by the instance
    /// that writes): nobody asked yet ([`Publisher::take_overwrite_news`]).
    overwrote: Option<(Writer, String)>,
    /// What this instance knows of its operator and its pod.
    own: OwnState,
    /// How long a stopping instance leaves a free lock to others
    /// ([`lock::operator_wait`]).
    operator_wait: Duration,
    /// How long a starting instance publishes nothing while its operator
    /// has not answered, and where it stands with that ([`Startup`]).
    allowance: Duration,
    startup: Startup,
}

impl Publisher {
    /// The lease this instance announces follows the heartbeat interval as
    /// it is now (kube9-server may ask for a longer one): a holder that
    /// writes less often than its lease would lose the lock to a healthy
    /// standby between two heartbeats.
    pub(super) fn follow_interval(&mut self, interval: Duration) {
        self.lease = lock::lease_duration(interval);
        self.operator_wait = lock::operator_wait(interval);
        self.patience = Patience::new(interval, self.check_interval);
    }

    /// After each check of a running instance that watches its operator:
    /// whether the health checks passed. Once they have, the operator has
    /// answered ([`OwnOperator`]); a standby that was waiting for that
    /// decides again at once, not a check later.
    pub(super) fn note_operator(&mut self, passed: bool, now: Instant) {
        let first = self.own.checked(passed);
        let before = self.startup;
        self.startup = Startup::at(self.own.unanswered_for(now), self.allowance);
        let allowance = self.allowance.as_secs();
        match (before, self.startup) {
            (Startup::Answered, Startup::Waiting { .. }) => log::info!(
                "Waiting for the operator's first answer before publishing anything (a start-up allowance of \
                 {allowance}s)"
            ),
            (Startup::Waiting { .. }, Startup::Answered) => log::info!("The operator answers: publishing may begin"),
            (Startup::Waiting { .. }, Startup::Spent) => {
                log::warn!("The operator has not answered in the {allowance}s since opstatus started: publishing that")
            }
            _ => {}
        }
        if first && self.role == Role::StandingBy && self.current.is_some() {
            self.decide(now);
        }
    }

    /// Where this instance stands with its operator's first answer: while
    /// it waits, it publishes nothing.
    pub(super) fn startup(&self) -> Startup {
        self.startup
    }

    /// kubelet's preStop hook came: this instance takes no free lock for
    /// a while ([`lock::decide`]).
    pub(super) fn pod_stopping(&mut self, now: Instant) {
        self.own.stopping(now);
    }

    pub(super) fn new(
        me: String,
        follow: Option<String>,
        interval: Duration,
        check_interval: Duration,
        allowance: Duration,
    ) -> Publisher {
        Publisher {
            pod: me.clone(),
            me,
            follow,
            lease: lock::lease_duration(interval),
            observer: Observer::default(),
            current: None,
            leader: Leader::default(),
            lease_error: Reported::default(),
            lease_unheld: Reported::default(),
            role: Role::Unknown,
            standing_by: Reported::default(),
            read_error: Reported::default(),
            stood_by: false,
            last_other: None,
            took_over: None,
            yielding: Yielding::default(),
            patience: Patience::new(interval, check_interval),
            check_interval,
            yielded: None,
            overwrote: None,
            own: OwnState::new(Instant::now()),
            operator_wait: lock::operator_wait(interval),
            allowance,
            startup: Startup::Answered,
        }
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
        self.role == Role::Holding && self.yielding.to().is_none()
    }

    /// Whether this instance should try to write: it publishes, or it has
    /// not been able to read the lock yet (the write reads it first, and
    /// its failures are the status write's, with their backoff); never
    /// while it waits for its operator's first answer.
    pub(super) fn may_write(&self) -> bool {
        self.role != Role::StandingBy && self.yielding.to().is_none() && !self.startup.waiting()
    }

    /// The other writer the ConfigMap is left to, if any.
    pub(super) fn yielding_to(&self) -> Option<&Writer> {
        self.yielding.to()
    }

    /// Once, after this instance began to leave the ConfigMap to another
    /// writer.
    pub(super) fn take_yield_news(&mut self) -> Option<Writer> {
        self.yielded.take()
    }

    /// Once per episode, after this instance began writing over another
    /// writer whose status is stale to readers: who, and why.
    pub(super) fn take_overwrite_news(&mut self) -> Option<(Writer, String)> {
        self.overwrote.take()
    }

    /// The other writer this instance writes over, while that lasts.
    pub(super) fn overwriting(&self) -> Option<&Writer> {
        self.yielding.overwriting(SystemTime::now(), &self.patience)
    }

    pub(super) fn identity(&self) -> &str {
        &self.me
    }

    /// The status ConfigMap's uid, once read or written.
    pub(super) fn configmap_uid(&self) -> Option<&str> {
        self.current.as_ref().map(|c| c.uid.as_str()).filter(|u| !u.is_empty())
    }

    /// Once, after this instance took the lock over from another (named
    /// when known) or after standing by: not when it starts on a free lock
    /// or on its own (a restarted container).
    pub(super) fn take_over_news(&mut self) -> Option<Option<String>> {
        self.took_over.take()
    }

    /// Who holds the lock, as last seen (`None`: nobody, or not read yet).
    pub(super) fn holder(&self) -> Option<&str> {
        let record = self.current.as_ref()?.lock.record()?;
        Some(record.holder_identity.as_str()).filter(|h| !h.is_empty())
    }

    /// On each check: standbys look again; with a followed Lease everyone
    /// does. The holder otherwise relies on its own writes.
    pub(super) fn check(&mut self, client: &mut Client, target: &StatusConfigMap, now: Instant) {
        if self.follow.is_some() {
            self.read_leader(client, &target.namespace, now);
            self.decide(now);
        }
        // Not read yet: the first write reads it. The holder's writes tell
        // it all it needs. While another writer keeps the status, every
        // instance looks once per heartbeat and when the status is due back.
        if self.current.is_none() || self.publishing() {
            return;
        }
        let wall = SystemTime::now();
        if !self.yielding.due(wall, &self.patience) {
            return;
        }
        let read = target.read(client);
        match read {
            Ok(current) => {
                self.read_error.update(None, log::Level::Warn, "");
                self.current = Some(current.unwrap_or_else(missing));
                self.look(now, wall);
            }
            Err(e) => {
                let why = format!("Cannot read the status ConfigMap to see who publishes: {e}");
                self.read_error.update(Some(why), log::Level::Warn, "");
            }
        }
    }

    /// After a read of the ConfigMap: whose the status is, then (when it
    /// is opstatus's) who holds the lock.
    fn look(&mut self, now: Instant, wall: SystemTime) {
        if self.observe_writers(wall) {
            self.decide(now);
        }
    }

    /// Whether the status key is opstatus's to write, by the rule every
    /// instance reads from the object ([`crate::writers`]): logs when this
    /// instance starts or stops leaving the ConfigMap to another writer.
    /// While it does, it publishes nothing: it stands by.
    fn observe_writers(&mut self, wall: SystemTime) -> bool {
        let Some(current) = &self.current else { return true };
        let foreign = current.foreign.as_ref();
        let quiet = self.patience.quiet.as_secs();
        match self.yielding.observe(foreign, wall, &self.patience) {
            Turn::Ours => true,
            Turn::StillTheirs(_) => false,
            Turn::Yield(writer, until) => {
                log::warn!(
                    "Another writer replaces the status: field manager {writer} owns its status key. Not fighting \
                     it: opstatus writes nothing (status, OperatorCondition, ClusterOperator) until {writer} has \
                     left the status alone for {quiet}s, or its status is about to be stale to readers: not before \
                     {}",
                    format_rfc3339(until)
                );
                self.role = Role::StandingBy;
                self.stood_by = true;
                self.yielded = Some(writer);
                false
            }
            Turn::Overwrite(writer, why) if self.role != Role::StandingBy => {
                log::warn!(
                    "Another writer keeps writing a stale status: field manager {writer} owns its status key, but {why}. \
                     opstatus writes its own status over it on every heartbeat, as readers would otherwise see a \
                     stale status: stop {writer} writing the status key to end this"
                );
                self.overwrote = Some((writer, why));
                true
            }
            Turn::Overwrite(..) => true,
            Turn::Resume(writer, last_write) => {
                let quiet_for = last_write.and_then(|at| wall.duration_since(at).ok()).unwrap_or_default();
                log::info!(
                    "{writer} last wrote the status {}s ago (a quiet period of {quiet}s, or its status about to be \
                     stale to readers): taking it back",
                    quiet_for.as_secs()
                );
                true
            }
        }
    }

    fn decide(&mut self, now: Instant) {
        // The lock decides nothing while the status is another writer's.
        if self.yielding.to().is_some() {
            return;
        }
        let Some(current) = &self.current else {
            // Before the first read only the operator's leader can decide;
            // when its Lease cannot decide (unrenewed, unread), the first
            // write reads the lock.
            match self.leader(now) {
                Some(leader) => self.apply_decision(lock::follow(&self.pod, leader)),
                None if self.role == Role::StandingBy => self.role = Role::Unknown,
                None => {}
            }
            return;
        };
        if let Some(r) = current.lock.record().filter(|r| !r.holder_identity.is_empty() && r.holder_identity != self.me)
        {
            self.last_other = Some(r.holder_identity.clone());
        }
        let unchanged = self.observer.observe(&current.lock, now);
        if let Seen::Unreadable(why) = &current.lock
            && unchanged.is_zero()
        {
            log::warn!("{why}: treating the lock as expired");
        }
        let own = self.own.at(now);
        let decision =
            lock::decide(&self.me, &self.pod, &current.lock, unchanged, self.leader(now), own, self.operator_wait);
        self.apply_decision(decision);
    }

    /// The operator's leader as far as it decides now: the last answer
    /// through failed reads for one lease (what a holder may go without
    /// renewing), then nothing (the lock decides).
    fn leader(&self, now: Instant) -> Option<Result<&str, &str>> {
        self.leader.decides(now, self.lease).map(|l| l.map(lock::leader_pod))
    }

    /// Why the followed Lease does not decide, once its reads have failed
    /// for longer than the grace or it names no live leader: a problem of
    /// the status, not silence.
    pub(super) fn problem(&self, now: Instant) -> Option<Problem> {
        let why = self.leader.problem(now, self.lease, SystemTime::now())?;
        Some(Problem::degraded(Rule::Publishing, why))
    }

    /// Reads the followed Lease into [`Self::leader`]; a failure is logged
    /// once per change, with what the instance does meanwhile.
    fn read_leader(&mut self, client: &mut Client, namespace: &str, now: Instant) {
        let Some(name) = &self.follow else { return };
        let read = read_leader(client, namespace, name);
        self.leader.observe(read, now);
        let failure = self.leader.failure().map(|why| {
            format!(
                "{why}; the last known leader stands for up to {}s, then the publisher lock decides",
                self.lease.as_secs()
            )
        });
        self.lease_error.update(failure, log::Level::Warn, "The operator's Lease can be read again");
        let unheld = self.leader.not_leading(self.lease).map(|why| format!("{why}: the publisher lock decides"));
        self.lease_unheld.update(unheld, log::Level::Warn, "The operator's Lease names a leader again");
    }

    fn apply_decision(&mut self, decision: Decision) {
        match decision {
            Decision::Publish if self.role == Role::Holding => {}
            Decision::Publish => self.role = Role::Claiming,
            Decision::StandBy(why) => {
                self.role = Role::StandingBy;
                self.stood_by = true;
                self.standing_by.update(Some(format!("Standing by: {why}")), log::Level::Info, "");
            }
        }
    }

    /// Writes `doc` if this instance publishes: `Ok(false)` when it does
    /// not (or lost the lock on the way). `release` leaves the lock free
    /// (`opstatus once`, and a holder that stops).
    pub(super) fn write(
        &mut self,
        client: &mut Client,
        target: &StatusConfigMap,
        doc: &StatusDocument,
        release: bool,
    ) -> Result<bool, KubeError> {
        if self.current.is_none() {
            self.current = Some(target.init(client)?);
            self.look(Instant::now(), SystemTime::now());
        }
        for attempt in 1..=2 {
            if !self.may_write() {
                return Ok(false);
            }
            let current = self.current.as_ref().expect("read above");
            let previous = current.lock.record().map(|r| r.holder_identity.clone());
            let previous = previous.filter(|h| !h.is_empty() && *h != self.me);
            let wall = SystemTime::now();
            let mut record = Record::claim(&self.me, current.lock.record(), self.lease, wall);
            if release {
                record = record.released(wall);
            }
            match target.publish(client, doc, &record, &current.resource_version) {
                Ok(written) => {
                    self.current = Some(written);
                    if self.role != Role::Holding {
                        log::info!("Publishing as {}", self.me);
                        if self.stood_by || previous.is_some() {
                            self.took_over = Some(previous.or_else(|| self.last_other.clone()));
                        }
                        self.stood_by = false;
                        self.standing_by = Reported::default();
                        self.role = Role::Holding;
                    }
                    return Ok(true);
                }
                // Someone changed the ConfigMap since: look at the lock again.
                Err(e) if e.code() == Some(409) && attempt == 1 => {
                    log::debug!("The status ConfigMap changed under us ({e}); reading it again");
                    self.read_leader(client, &target.namespace, Instant::now());
                    self.current = Some(target.read(client)?.unwrap_or_else(missing));
                    self.look(Instant::now(), SystemTime::now());
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
        let deadline = Instant::now() + window;
        while Instant::now() < deadline {
            std::thread::sleep(HANDOVER_POLL.min(deadline.saturating_duration_since(Instant::now())));
            let Some(current) = target.read(client)? else { continue };
            let holder = current.lock.record().map(|r| r.holder_identity.clone()).unwrap_or_default();
            self.current = Some(current);
            if !holder.is_empty() && holder != self.me {
                log::info!("Handed over to {holder}");
                self.role = Role::StandingBy;
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// A ConfigMap that does not exist (any more): writing creates it.
fn missing() -> Current {
    Current { resource_version: String::new(), lock: Seen::Absent, uid: String::new(), foreign: None }
}
