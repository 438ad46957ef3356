//! The signals: what opstatus looks at on each check tick, before it
//! decides anything.
//!
//! A signal is one value in the agent's list ([`Signal`]): on each check it
//! looks again (every call bounded) and records what it saw in the tick's
//! [`Observation`]: the [`Problem`]s that bear on health, and the facts the
//! sinks publish. Adding one is a file implementing [`Signal`] and one line
//! where the agent is composed (`app.rs`); health needs no new field.
//!
//! - [`watch`]: the operator's own health URLs and heartbeat file (and
//!   [`own_pod`], whether a refusal is the pod being deleted).
//! - [`container`]: the operator container's restarts and crash loops.
//! - [`probes`]: conditions computed from the operator's own resources.
//! - the pro tier ([`crate::pro`]): the API key and kube9-server registration.

pub(crate) mod container;
pub(crate) mod own_pod;
pub(crate) mod probes;
pub(crate) mod watch;

use crate::kube::Client;
use crate::status::{ProFields, Problem};
use std::time::{Duration, Instant};

/// Everything the signals saw on one check: what the verdict and the sinks
/// read until the next check.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observation {
    /// Every problem seen, in no order (the health rules order them).
    pub problems: Vec<Problem>,
    /// What the operator's own health checks said; `None` when nothing is
    /// watched (then "up" means "its pod runs").
    pub operator: Option<OperatorAnswer>,
    /// What the probes concluded; `None` without probes.
    pub probes: Option<probes::Outcome>,
    /// Mode, tier and registration, for the status document.
    pub pro: ProFields,
    /// The heartbeat kube9-server asked for, while registered.
    pub asked_interval: Option<Duration>,
}

/// What the operator's own health checks ([`watch`]) said on one check:
/// what the agent's start-up rule and the ClusterOperator read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OperatorAnswer {
    /// Every check passed.
    Answered,
    /// A health check got no answer in time, the first time in a row: not
    /// a failure yet ([`watch::Lateness`]), not the operator answering either.
    Pending,
    /// The operator is down (its checks fail): why.
    Down(String),
    /// A health check's connection was refused or reset right after it
    /// passed, and this instance's own Pod is being deleted (its
    /// `deletionTimestamp` is set): the operator is exiting with its pod,
    /// as kubelet's preStop hook would say ([`own_pod`]).
    PodDeleted,
}

impl Observation {
    /// Why the operator itself is down, when it is.
    pub(crate) fn operator_down(&self) -> Option<&str> {
        match &self.operator {
            Some(OperatorAnswer::Down(why)) => Some(why),
            _ => None,
        }
    }
}

/// Something opstatus checks on every check tick.
pub(crate) trait Signal {
    /// Looks again (each call bounded) and records what it sees in `into`.
    fn observe(&mut self, client: &mut Client, now: Instant, into: &mut Observation);

    /// Whether a standby (an instance that does not publish) looks too:
    /// only for cheap, local signals that keep its own readiness true to
    /// its pod. Standbys make no writes and no lists.
    fn when_standing_by(&self) -> bool {
        false
    }

    /// Whether this signal waits until the instance knows it publishes,
    /// rather than looking while the lock is still unread (as a starting
    /// instance does, so its first write says all it knows): for signals
    /// whose work outlives a check (a probe's watches), which a starting
    /// standby must not begin.
    fn waits_for_the_lock(&self) -> bool {
        false
    }

    /// Called on each check this instance stands by, for a signal that does
    /// not look then: work it keeps going on its own (a probe's watches)
    /// stops.
    fn stand_by(&mut self) {}

    /// The longest one `observe` can take, every call timing out: what the
    /// liveness window allows for.
    fn worst_case(&self) -> Duration;
}
