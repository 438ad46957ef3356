//! The agent: the loop that keeps the status ConfigMap (and the readiness
//! file, probe endpoint, OperatorCondition and ClusterOperator) current.
//!
//! One tick is the pipeline: the signals make one [`Observation`], the
//! health rules make one verdict of it, and the sinks publish that verdict.
//! The agent owns the schedule and the primary sink, the status ConfigMap;
//! it knows the signals and the other sinks only as the values in its two
//! lists ([`Signal`], [`Sinks`]).
//!
//! Two cadences drive it. Every check interval (5 s by default) it checks
//! the watched signals (the operator's health URLs and heartbeat file),
//! refreshes the readiness file and what the endpoint serves. Every
//! heartbeat interval (60 s) it writes the status, and it writes at once
//! when the health it would publish changed. A failed write is retried with
//! exponential backoff and full jitter (base 1 s, cap = the interval,
//! `Retry-After` honoured); the agent never exits on an API error and never
//! spins. While writes fail its health is `unhealthy` with the failure as
//! the reason (spec rule 1): that is what its logs, `/status` and metrics
//! say (readiness answers for the operator: [`served`]), and readers of the
//! ConfigMap see it as a `lastUpdate` that stops moving. The first write that succeeds again publishes the state as it is
//! then, not the outage that just ended: the document describes the present.
//!
//! Only the holder of the publisher lock ([`publisher`], [`crate::lock`])
//! writes anything; the instances beside it stand by, and a stopping holder
//! hands the status over.

mod leader;
mod leader_service;
mod lease;
mod liveness;
mod published;
mod publisher;
mod schedule;
mod served;
mod startup;
mod write;
mod write_log;

use crate::endpoint::Shared;
use crate::kube::Client;
use crate::ready_file;
use crate::signals::{Observation, OperatorAnswer, Signal};
use crate::sinks::Sinks;
use crate::sinks::configmap::StatusConfigMap;
use crate::sinks::events::{Events, Recorder};
use crate::sinks::leader_endpoints::LeaderEndpoints;
use crate::status::{Health, MAX_INTERVAL, MIN_INTERVAL, Problem, StatusDocument, Verdict, evaluate_health};
use crate::util::backoff::{Backoff, Jitter};
use crate::util::reported::Reported;
use crate::util::shutdown::Shutdown;
use leader_service::LeaderService;
use published::Content;
use publisher::Publisher;
use schedule::{CheckTimes, Schedule, check_cadence, handover_wait};
pub(crate) use served::starting;
pub(crate) use startup::MAX_ALLOWANCE as MAX_STARTUP_ALLOWANCE;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};
use write_log::WriteLog;

/// The first retry after a failed write waits at least this long.
pub(crate) const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// The reason published when the agent stops.
pub(crate) const SHUTDOWN_REASON: &str = "Shutting down";

/// What the command line tells the agent: filled by the flags as they are
/// read ([`crate::cli::Settings::agent`]), so nothing is copied between
/// the two.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentSettings {
    /// The heartbeat (`--interval`) unless kube9-server asks for another.
    pub interval: Duration,
    /// How often signals are checked; never longer than `interval`.
    pub check_interval: Duration,
    pub operator_version: String,
    pub ready_file: Option<PathBuf>,
    /// Publish `unhealthy` / "Shutting down" when stopped by a signal
    /// (and no other instance takes over).
    pub final_status: bool,
    /// Readiness answers for opstatus's own publishing as well as for the
    /// operator (the default: for the operator only).
    pub strict_readiness: bool,
    /// The operator's leader-election Lease whose leader's sidecar
    /// publishes; off when `None`.
    pub follow_leader_lease: Option<String>,
    /// How long a starting instance publishes nothing while its watched
    /// operator has not answered ([`startup`]).
    pub startup_allowance: Duration,
    /// How long a change of the published health must hold ([`published`]).
    pub health_inertia: crate::inertia::Windows,
    /// How long a change of `Upgradeable` must hold, wherever it is published.
    pub upgradeable_inertia: crate::inertia::Windows,
}

/// What the agent needs to know, fixed at start: its settings and what
/// the composition root resolved (where to write, who it is).
#[derive(Clone, Debug)]
pub(crate) struct AgentConfig {
    pub target: StatusConfigMap,
    /// Where the operator runs: the document's `namespace` (the status may be written elsewhere, e.g. kube9-system).
    pub operator_namespace: String,
    /// This instance's name in the publisher lock (the pod's name).
    pub identity: String,
    /// The pod this instance runs in (`POD_NAME`, else `HOSTNAME`, else the identity): the leader Lease names pods.
    pub pod: String,
    /// Where the Kubernetes credentials came from, for `/status`.
    pub credentials: String,
    pub settings: AgentSettings,
    /// The leader's Service's EndpointSlice (`--leader-service`, with the
    /// followed Lease); off when `None`.
    pub leader_endpoints: Option<LeaderEndpoints>,
}

pub(crate) struct Agent {
    client: Client,
    config: AgentConfig,
    /// What is looked at on each check, in order.
    signals: Vec<Box<dyn Signal>>,
    /// What the signals saw on the last check.
    observation: Observation,
    /// Every published resource but the status ConfigMap.
    sinks: Sinks,
    backoff: Backoff,
    jitter: Jitter,
    /// Why the last status write failed (rule 1); `None` after a success.
    write_error: Option<Problem>,
    /// What the last status written said; `None` while another instance
    /// publishes.
    published: Option<Content>,
    /// The last status written, as written (what a stopping holder leaves
    /// for readers while it hands over).
    last_written: Option<StatusDocument>,
    /// Whether this instance publishes (the lock).
    publisher: Publisher,
    /// Whether kubelet's preStop hook was seen ([`Agent::note_pod_stopping`]).
    pod_stopping: bool,
    /// Whether the sinks were synced since this instance last became the
    /// holder (a new holder's first write is followed by its sinks').
    sinks_synced: bool,
    /// A broken readiness-file mount is reported once, not every tick.
    ready_file_error: Reported,
    /// A check is due at once (this instance just began to publish, and
    /// some signals waited for that).
    check_soon: bool,
    /// Kubernetes Events on published changes; `None`: `--events=false`.
    events: Option<Events>,
    shared: Shared,
    /// The longest a tick can take (for the liveness window).
    worst_tick: Duration,
    /// Status writes since the last hourly summary line.
    write_log: WriteLog,
    /// Whether `RUST_LOG` asked for a line on every heartbeat
    /// ([`write_log::HEARTBEAT_TARGET`]); read once, not on every write.
    heartbeat_lines: bool,
    /// The health held: recoveries, and changes under `--health-inertia`.
    health: published::HeldHealth,
    leader_service: Option<LeaderService>,
    /// How long the last checks took: what a standby's take-over costs.
    check_times: CheckTimes,
}

impl Agent {
    /// `shared` is what the endpoint serves ([`starting`]).
    pub(crate) fn new(
        client: Client,
        config: AgentConfig,
        signals: Vec<Box<dyn Signal>>,
        sinks: Sinks,
        events: Option<Recorder>,
        shared: Shared,
    ) -> Agent {
        let publisher = Publisher::new(
            config.identity.clone(),
            config.pod.clone(),
            config.settings.follow_leader_lease.clone(),
            config.settings.interval,
            config.settings.check_interval,
            config.settings.startup_allowance,
        );
        // Events go out on a thread of their own: no part of a tick.
        let status_write = publisher.worst_case();
        let events = events.and_then(|recorder| {
            let started = Events::start(recorder, client.sibling());
            started.map_err(|e| log::warn!("Kubernetes Events are off: cannot start their thread: {e}")).ok()
        });
        let worst_tick = liveness::worst_tick(&signals, &sinks, status_write);
        shared.lock().unwrap_or_else(|p| p.into_inner()).liveness_window =
            liveness::window(config.settings.interval, worst_tick);
        // The settings refuse a leader's Service without a followed Lease.
        let following = config.settings.follow_leader_lease.is_some();
        let leader_service = config
            .leader_endpoints
            .clone()
            .filter(|_| following)
            .map(|endpoints| LeaderService::new(config.pod.clone(), endpoints));
        Agent {
            leader_service,
            check_times: CheckTimes::default(),
            client,
            backoff: Backoff::new(BACKOFF_BASE, config.settings.interval),
            signals,
            observation: Observation::default(),
            sinks,
            jitter: Jitter::from_os(),
            write_error: None,
            published: None,
            last_written: None,
            publisher,
            health: published::HeldHealth::new(config.settings.health_inertia, config.settings.check_interval),
            config,
            sinks_synced: false,
            pod_stopping: false,
            ready_file_error: Reported::default(),
            check_soon: false,
            events,
            shared,
            worst_tick,
            write_log: WriteLog::new(Instant::now()),
            heartbeat_lines: log::log_enabled!(target: write_log::HEARTBEAT_TARGET, log::Level::Info),
        }
    }

    /// The heartbeat interval has one owner, [`Agent::interval`]: after each check (which may have
    /// learnt a new one from kube9-server) the publisher's lease, the backoff's cap and the liveness window follow it.
    fn follow_interval(&mut self) {
        let interval = self.interval();
        self.publisher.follow_interval(interval);
        self.backoff.set_cap(interval);
        let window = liveness::window(interval, self.worst_tick);
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).liveness_window = window;
    }

    /// The heartbeat: kube9-server's `statusUpdateIntervalSeconds` while
    /// registered (within the allowed range), else `--interval`.
    fn interval(&self) -> Duration {
        let asked = self.observation.asked_interval;
        asked.map_or(self.config.settings.interval, |d| d.clamp(MIN_INTERVAL, MAX_INTERVAL))
    }

    /// The health as the agent sees it now, write failures included.
    pub(crate) fn verdict(&self) -> Verdict {
        let problems = self.observation.problems.iter().chain(self.sinks.problems());
        evaluate_health(self.write_error.iter().chain(problems))
    }

    /// `opstatus once`: one check where every signal looks, the lock still
    /// unread (a one-shot write starts nothing that outlives it).
    pub(crate) fn check_once(&mut self) {
        self.check(true);
    }

    /// One check: who publishes; every signal looks again (one
    /// observation; a standby only at its own pod's cheap signals; those
    /// that wait for the lock, once it is known to be ours, unless
    /// `eager`); then, if this instance publishes, every sink is brought up
    /// to date.
    fn check(&mut self, eager: bool) {
        let now = Instant::now();
        let was_publishing = self.publisher.publishing();
        self.publisher.check(&mut self.client, &self.config.target, now);
        self.note_news();
        self.note_stepped_down(was_publishing);
        // Until the lock is read, the instance acts as a publisher would
        // (its first write reads it), so that write says all it knows.
        let active = self.publisher.may_write();
        let publishing = self.publisher.publishing();
        let mut observation = Observation::default();
        observation.problems.extend(self.publisher.problem(now));
        let interval = self.interval();
        if let Some(service) = self.leader_service.as_mut().filter(|_| !eager) {
            let leader = self.publisher.leader();
            observation.problems.extend(service.check(&mut self.client, leader, now, interval, &self.shared));
        }
        for signal in &mut self.signals {
            if publishing || (active && (eager || !signal.waits_for_the_lock())) || signal.when_standing_by() {
                signal.observe(&mut self.client, now, &mut observation);
            } else {
                signal.stand_by();
            }
        }
        // A starting instance publishes nothing until its operator answers
        // or the allowance is spent, then says it never answered ([`startup`]).
        if let Some(answer) = observation.operator.as_ref().filter(|_| !eager) {
            // Its operator exits with its pod: as kubelet's preStop hook says.
            if *answer == OperatorAnswer::PodDeleted {
                self.shared.lock().unwrap_or_else(|p| p.into_inner()).pod_stopping = true;
            }
            self.publisher.note_operator(answer, now);
            if self.publisher.startup() == startup::Startup::Spent {
                startup::never_answered(&mut observation.problems, self.config.settings.startup_allowance);
            }
        }
        self.observation = observation;
        self.follow_interval();
        self.sync_sinks(now);
        // After the sinks: their failures are this check's health too.
        self.hold_health(now);
        // Events say what the sinks published (under inertia, a flip once it
        // went out), else what the probes say.
        if let Some(events) = self.events.as_ref().filter(|_| self.publisher.publishing()) {
            let probes = self.observation.probes.as_ref().and_then(|p| p.upgradeable.as_ref());
            events.observe_upgradeable(self.sinks.upgradeable().or(probes), now, SystemTime::now());
        }
    }

    /// After the lock or another writer of the status made a publisher
    /// stand by (on a check or in a write): nothing it published is its
    /// own to keep any more.
    fn note_stepped_down(&mut self, was_publishing: bool) {
        if was_publishing && !self.publisher.publishing() {
            self.published = None;
            if let Some(events) = &self.events {
                events.stand_by();
            }
        }
    }

    /// Brings every other sink up to date with the observation, if this
    /// instance holds the lock: only the holder writes anything.
    fn sync_sinks(&mut self, now: Instant) {
        let synced = std::mem::replace(&mut self.sinks_synced, self.publisher.publishing());
        if synced && !self.sinks_synced {
            self.sinks.stand_by();
        }
        if self.sinks.is_empty() || !self.sinks_synced {
            return;
        }
        let mut problems = self.observation.problems.clone();
        problems.extend(self.write_error.clone());
        let interval = self.interval();
        self.sinks.sync_all(&mut self.client, &self.observation, &problems, now, interval);
    }

    /// How often to check: the check interval (at most the heartbeat)
    /// while anything changes between heartbeats — a signal, a sink, the
    /// readiness file, the publisher lock as a standby or a follower of
    /// the operator's leader sees it. A lone
    /// holder with none of them (basic mode) has nothing to look at between
    /// writes, so it sleeps from one heartbeat to the next: one wake-up, one
    /// request.
    fn check_cadence(&self) -> Duration {
        let looks_at_something = !self.signals.is_empty()
            || !self.sinks.is_empty()
            || self.config.settings.ready_file.is_some()
            || self.config.settings.follow_leader_lease.is_some()
            || !self.publisher.publishing();
        check_cadence(self.interval(), self.config.settings.check_interval, looks_at_something)
    }

    /// How long a stopping holder waits for a standby to take over: what a
    /// take-over costs a standby ([`handover_wait`]), whose checks come
    /// as a standby's do and cost what this instance's own cost.
    fn handover_wait(&self) -> Duration {
        let cadence = self.config.settings.check_interval.min(self.interval());
        handover_wait(cadence, self.check_times.slowest())
    }

    /// The loop, until SIGTERM or SIGINT; then the final status.
    pub(crate) fn run(&mut self, shutdown: &mut Shutdown) {
        log::info!(
            "Status ConfigMap {}/{} on {}: a heartbeat every {}s, checks every {}s; {} publishes while it holds the lock",
            self.config.target.namespace,
            self.config.target.name,
            self.client.server(),
            self.config.settings.interval.as_secs(),
            self.config.settings.check_interval.as_secs(),
            self.config.identity,
        );
        let mut schedule = Schedule::new(Instant::now());
        loop {
            // The cadence is recomputed on every turn: a holder that lost
            // the lock in a write checks (reads the lock) again on the
            // standby's cadence.
            if std::mem::take(&mut self.check_soon) {
                schedule.check_soon();
            }
            if shutdown.wait_until(schedule.next_wake(self.check_cadence(), self.publisher.may_write())) {
                break;
            }
            self.note_pod_stopping(shutdown);
            if shutdown.take_nudge() {
                schedule.nudge();
            }
            let now = Instant::now();
            if now >= schedule.next_check(self.check_cadence()) {
                self.check(false);
                schedule.checked(now);
                self.check_times.checked(now, Instant::now());
                // The check may have found the pod being deleted.
                self.note_pod_stopping(shutdown);
            }
            // A write never changes the content (its own failure is left
            // out of it), so this serves after_tick too.
            let content = self.content();
            let changed = self.published.as_ref() != Some(&content);
            if schedule.write_due(now, changed, self.write_error.is_some()) && self.publisher.may_write() {
                match self.heartbeat() {
                    Ok(()) => schedule.wrote(now, self.interval()),
                    Err(e) => {
                        let delay = self.backoff.next_delay(self.jitter.next_u64(), e.retry_after());
                        log::warn!(
                            "Failed to write status ConfigMap {}/{}: {e}; health={}; retrying in {:.1}s (attempt {})",
                            self.config.target.namespace,
                            self.config.target.name,
                            self.verdict().health,
                            delay.as_secs_f64(),
                            self.backoff.failures()
                        );
                        schedule.retry_at(Instant::now() + delay);
                    }
                }
            }
            self.after_tick(content);
        }
        self.stop(shutdown);
    }

    /// Once kubelet's preStop hook, or the Pod's own deletion seen after its
    /// operator's port refused ([`OperatorAnswer::PodDeleted`]), said the
    /// pod is stopping: a native
    /// sidecar's hook runs as the operator beside it is sent SIGTERM, while
    /// opstatus is stopped only after the operator exits. A holder hands
    /// the status over now, as it stands, rather than publish its
    /// operator's going away as a failure while a replica that stays could
    /// publish; this instance takes no free lock any more
    /// ([`crate::lock::decide`]). When nobody takes over it goes on
    /// publishing.
    fn note_pod_stopping(&mut self, shutdown: &Shutdown) {
        let stopping = self.shared.lock().unwrap_or_else(|p| p.into_inner()).pod_stopping;
        if !stopping || std::mem::replace(&mut self.pod_stopping, true) || shutdown.requested() {
            return;
        }
        log::info!("The pod is stopping: handing the status over");
        self.publisher.pod_stopping(Instant::now());
        let was_publishing = self.publisher.publishing();
        let Some(last) = self.last_written.clone().filter(|_| was_publishing) else { return };
        let wait = self.handover_wait();
        // A SIGTERM during the wait still leaves time for the stop's own
        // handover and final status.
        let grant = || shutdown.extend_until(Instant::now() + wait * 2 + Duration::from_secs(1));
        let handed = self.publisher.hand_over(&mut self.client, &self.config.target, &last, wait, grant);
        self.note_news();
        match handed {
            Ok(true) => self.note_stepped_down(was_publishing),
            Ok(false) => log::info!("Nobody took the status over: publishing on"),
            Err(e) => log::warn!("Could not hand over the status: {e}"),
        }
    }

    /// After a signal: no readiness file, and, if this instance publishes,
    /// the lock handed over. When no other instance takes over within the
    /// handover wait, the final status (unless disabled) says so; when one
    /// does, readers see the live instance's status, never "Shutting down".
    /// The shutdown watchdog bounds how long this may take.
    fn stop(&mut self, shutdown: &Shutdown) {
        log::info!("Shutting down");
        if let Some(path) = &self.config.settings.ready_file {
            let _ = ready_file::remove(path);
        }
        if !self.publisher.publishing() {
            return;
        }
        let last = self.last_written.clone().unwrap_or_else(|| self.document(&self.content(), SystemTime::now()));
        let wait = if self.config.settings.final_status { self.handover_wait() } else { Duration::ZERO };
        // The wait is granted only once the handover write went through: a
        // hung API server ends the process within the shutdown's grace.
        let grant = || shutdown.extend_until(Instant::now() + wait);
        let handed = self.publisher.hand_over(&mut self.client, &self.config.target, &last, wait, grant);
        // Another writer took the status meanwhile: it is theirs, said once.
        self.note_news();
        match handed {
            Ok(true) => return,
            Ok(false) if !self.config.settings.final_status => return,
            Ok(false) => {}
            Err(e) => log::warn!("Could not hand over the status: {e}"),
        }
        let last = Verdict { health: Health::Unhealthy, error: Some(SHUTDOWN_REASON.into()) };
        if let Err(e) = self.publish(last, true) {
            log::warn!("Could not publish the final status: {e}");
        }
    }
}
