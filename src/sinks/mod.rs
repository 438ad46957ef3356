//! The sinks: where the tick's verdict is published.
//!
//! The status ConfigMap ([`configmap`]) is the primary, special sink: its
//! write is the heartbeat, and its failure is health rule 1, so the agent
//! drives it itself. Every other published resource is a [`Sink`]: one
//! value in the [`Sinks`] list, given the tick's one [`Observation`] and
//! verdict, written only when what it would say changed or a drift check
//! is due. A sink's failure is a `degraded` [`Problem`] for the next
//! verdict (and for the other sinks); what a sink says about health leaves
//! its own failure out, as library-go's status syncer does. Adding a sink
//! is one file implementing [`Sink`], its flag, and one line where the
//! agent is composed (`app.rs`).
//!
//! Kubernetes Events ([`events`]) are published too, but not as a [`Sink`]:
//! they follow what the status write published, and their failure is no
//! problem for health.
//!
//! The OperatorCondition and the ClusterOperator hold lists that other
//! writers share (conditions), so they are written as the APIs ask: read,
//! change only what opstatus owns, write back with the `resourceVersion`
//! that was read, and on a conflict (409) start over from a fresh read:
//! [`read_modify_write`], which parses only the lists a sink owns
//! ([`rewrite`]).

pub(crate) mod cluster_operator;
pub(crate) mod configmap;
pub(crate) mod events;
pub(crate) mod leader_endpoints;
pub(crate) mod operator_condition;
pub(crate) mod rewrite;
pub(crate) mod upgradeable;

use crate::kube::{Client, KubeError};
use crate::signals::Observation;
use crate::status::{Problem, Rule, Verdict, evaluate_health};
use crate::util::reported::Reported;
use std::time::{Duration, Instant, SystemTime};

/// Attempts per write when others keep changing the object (409 Conflict).
pub(crate) const CONFLICT_ATTEMPTS: u32 = 3;

/// The longest a [`read_modify_write`] can take: a read and a write per
/// attempt.
pub(crate) fn read_modify_write_bound() -> Duration {
    crate::kube::call_bound().saturating_mul(2 * CONFLICT_ATTEMPTS)
}

/// Given an object's body as read, the body to write back (`None`: nothing
/// changed) or why it cannot be.
pub(crate) type RawModify<'a> = dyn FnMut(&[u8]) -> Result<Option<Vec<u8>>, String> + 'a;

/// GETs `path`, lets `modify` change the object as read ([`rewrite`]
/// parses only what it changes), and PUTs it to `path` + `write_suffix`
/// (`""` or `"/status"`) carrying the `resourceVersion` it read; `true`
/// when it wrote (`false`: the object already said it, nothing was sent).
/// A 409 starts over from a fresh read, at most [`CONFLICT_ATTEMPTS`]
/// times; any other error is returned, a 403 naming `grant` as where the
/// permission comes from. The body read is dropped before the write, and
/// the server's answer to it is not kept.
pub(crate) fn read_modify_write(
    client: &mut Client,
    path: &str,
    write_suffix: &str,
    action: &str,
    grant: &'static str,
    modify: &mut RawModify<'_>,
) -> Result<bool, KubeError> {
    let mut attempt = 1;
    loop {
        let read = client.get_required(path, &format!("get {action}")).map_err(|e| e.granted_by(grant))?;
        let Some(body) = modify(&read).map_err(|message| KubeError::Response { message })? else { return Ok(false) };
        drop(read);
        match client.put(&format!("{path}{write_suffix}"), &body, &format!("update {action}")) {
            Ok(()) => return Ok(true),
            Err(e) if e.code() == Some(409) && attempt < CONFLICT_ATTEMPTS => {
                log::debug!("{action}: conflict on attempt {attempt}, reading again");
                attempt += 1;
            }
            Err(e) => return Err(e.granted_by(grant)),
        }
    }
}

/// The conditions in the `key` (`spec`, `status`) of the `kind` at `path`,
/// for a read back after a start or a takeover: only they are parsed. A
/// missing object has none.
pub(crate) fn read_conditions(
    client: &mut Client,
    (kind, path, action): (&str, &str, &str),
    key: &'static str,
    grant: &'static str,
) -> Result<Vec<crate::conditions::Condition>, KubeError> {
    let Some(body) = client.get_path(path, action).map_err(|e| e.granted_by(grant))? else { return Ok(Vec::new()) };
    let read = rewrite::Rewrite::parse(&body, key, kind).and_then(|o| o.field("conditions"));
    Ok(read.map_err(|message| KubeError::Response { message })?.unwrap_or_default())
}

/// What a sink is given on each check: the tick's one observation and
/// verdict.
pub(crate) struct Tick<'a> {
    pub observation: &'a Observation,
    /// The health as it would be published, this sink's own failure left
    /// out.
    pub verdict: &'a Verdict,
    pub now: Instant,
    /// For timestamps written into objects.
    pub wall: SystemTime,
    /// Read and repair even when nothing changed (someone else may have
    /// changed what opstatus owns): once per heartbeat interval.
    pub drift_check: bool,
}

/// What one sync did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Synced {
    /// Nothing to say, or what it would say was last written and no drift
    /// check is due: no request.
    Skipped,
    /// The object already said it: read, nothing written.
    Unchanged,
    /// Written; the summary (`Upgradeable=False, ...`) is logged.
    Updated(String),
}

/// A published resource other than the status ConfigMap.
pub(crate) trait Sink {
    /// The `sink` label in metrics: `operator_condition`.
    fn name(&self) -> &'static str;
    /// `OperatorCondition ns/name`, for messages.
    fn describe(&self) -> String;
    /// Brings the resource up to date with the tick; an error is the
    /// sentence a cluster admin reads as the status's reason.
    fn sync(&mut self, client: &mut Client, tick: &Tick<'_>) -> Result<Synced, String>;
    /// The longest one `sync` can take, every call timing out: what the
    /// liveness window allows for.
    fn worst_case(&self) -> Duration;
    /// The changes it holds back under inertia ([`crate::inertia`]), for
    /// `/status`.
    fn pending(&self) -> Vec<crate::inertia::PendingChange> {
        Vec::new()
    }
    /// Another instance publishes now: what this one saw, wrote or read
    /// back is not its own to keep (its next sync starts afresh).
    fn stand_by(&mut self) {}
    /// The `Upgradeable` it last published, if it publishes one.
    fn upgradeable(&self) -> Option<&crate::conditions::Desired> {
        None
    }
}

/// Syncs by result, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SyncCounts {
    pub updated: u64,
    pub unchanged: u64,
    pub failed: u64,
}

struct Entry {
    sink: Box<dyn Sink>,
    problem: Reported,
    /// `problem` as the health rules take it.
    as_problem: Option<Problem>,
    counts: SyncCounts,
}

/// Every [`Sink`], synced in order on each check.
#[derive(Default)]
pub(crate) struct Sinks {
    entries: Vec<Entry>,
    next_drift_check: Option<Instant>,
}

impl Sinks {
    pub(crate) fn add(&mut self, sink: Box<dyn Sink>) {
        self.entries.push(Entry {
            sink,
            problem: Reported::default(),
            as_problem: None,
            counts: SyncCounts::default(),
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The longest syncing them all can take.
    pub(crate) fn worst_case(&self) -> Duration {
        self.entries.iter().map(|e| e.sink.worst_case()).fold(Duration::ZERO, Duration::saturating_add)
    }

    /// Why sinks cannot be written, as health problems.
    pub(crate) fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.entries.iter().filter_map(|e| e.as_problem.as_ref())
    }

    /// Counters per sink, in order, for `/metrics`.
    pub(crate) fn counts(&self) -> Vec<(&'static str, SyncCounts)> {
        self.entries.iter().map(|e| (e.sink.name(), e.counts)).collect()
    }

    /// Another instance publishes now ([`Sink::stand_by`]).
    pub(crate) fn stand_by(&mut self) {
        self.entries.iter_mut().for_each(|e| e.sink.stand_by());
        self.next_drift_check = None;
    }

    /// The `Upgradeable` the first sink that publishes one last published.
    pub(crate) fn upgradeable(&self) -> Option<&crate::conditions::Desired> {
        self.entries.iter().find_map(|e| e.sink.upgradeable())
    }

    /// Every sink's changes held back under inertia, in order.
    pub(crate) fn pending(&self) -> Vec<crate::inertia::PendingChange> {
        self.entries.iter().flat_map(|e| e.sink.pending()).collect()
    }

    /// Syncs every sink with `observation`. Each sink's verdict is the
    /// health rules over `problems` (the signals' and the status write's)
    /// and the other sinks' problems, its own left out. A drift check is
    /// due once per `interval`.
    pub(crate) fn sync_all(
        &mut self,
        client: &mut Client,
        observation: &Observation,
        problems: &[Problem],
        now: Instant,
        interval: Duration,
    ) {
        let drift_check = self.next_drift_check.is_none_or(|at| now >= at);
        let wall = SystemTime::now();
        for i in 0..self.entries.len() {
            let others = self.entries.iter().enumerate().filter(|(j, _)| *j != i);
            let verdict = evaluate_health(problems.iter().chain(others.filter_map(|(_, e)| e.as_problem.as_ref())));
            let tick = Tick { observation, verdict: &verdict, now, wall, drift_check };
            let entry = &mut self.entries[i];
            let result = entry.sink.sync(client, &tick);
            entry.record(result);
        }
        if drift_check {
            self.next_drift_check = Some(now + interval);
        }
    }
}

impl Entry {
    /// Logs a sync's outcome in one line, keeps its problem, counts it.
    fn record(&mut self, result: Result<Synced, String>) {
        let what = self.sink.describe();
        let failure = match &result {
            Ok(Synced::Skipped) => return,
            Ok(Synced::Unchanged) => {
                self.counts.unchanged += 1;
                None
            }
            Ok(Synced::Updated(_)) => {
                self.counts.updated += 1;
                None
            }
            Err(why) => {
                self.counts.failed += 1;
                Some(why.clone())
            }
        };
        self.problem.update(failure, log::Level::Warn, &format!("{what} is writable again"));
        if let Ok(Synced::Updated(summary)) = &result {
            log::info!("{what} updated: {summary}");
        }
        self.as_problem = self.problem.get().map(|why| Problem::degraded(Rule::Publishing, why));
    }
}
