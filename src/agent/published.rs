//! What the agent publishes in the status ConfigMap: the [`Content`] of
//! the document (the verdict and the pro tier's fields), the document
//! stamped with the time, and the health under `--health-inertia`
//! ([`HeldHealth`], [`crate::inertia`]): a change of health is published
//! only once it has held for its window, and meanwhile the health last
//! published, with its reason, stands. Inertia changes what the heartbeat
//! says, never how often it writes: a held-back change is no change of the
//! content, so it sends nothing before the next heartbeat.

use super::Agent;
use crate::inertia::{HeldValue, PendingChange, Windows, since_note};
use crate::status::{Health, ProFields, StatusDocument, Verdict, evaluate_health};
use crate::util::time::format_rfc3339;
use std::time::{Instant, SystemTime};

/// What of the status can change while the agent runs: the verdict and
/// the pro tier's fields. The version and namespace are fixed at start and
/// the timestamp moves on every write, so a change of this is a change of
/// what the status says (health, reason, mode, tier, registration,
/// clusterId).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Content {
    pub verdict: Verdict,
    pub pro: ProFields,
}

/// The published health under inertia: worse is `degraded` or
/// `unhealthy` (ranked as [`Health`] is), better is back towards
/// `healthy`. The reason of a health that is not `healthy` ends with since
/// when it has held.
#[derive(Clone, Debug)]
pub(crate) struct HeldHealth(HeldValue<Verdict, Health>);

impl HeldHealth {
    pub(crate) fn new(windows: Windows) -> HeldHealth {
        HeldHealth(HeldValue::new(windows))
    }

    /// Takes the health the signals and sinks make now.
    pub(crate) fn observe(&mut self, verdict: &Verdict, now: Instant, wall: SystemTime) {
        self.0.observe(verdict, verdict.health, now, wall);
    }

    /// What to publish of `verdict` as of the last observation.
    pub(crate) fn held(&self, verdict: Verdict) -> Verdict {
        let health = verdict.health;
        let (mut held, since) = self.0.held(verdict, health);
        if let (Some(since), Some(error)) = (since, held.error.as_mut()) {
            error.push_str(&since_note(since));
        }
        held
    }

    pub(crate) fn pending(&self, output: String) -> Option<PendingChange> {
        self.0.pending().map(|p| PendingChange::new(output, &format!("health={}", p.state), p))
    }
}

impl Agent {
    /// The health the signals and sinks make now, the status write's own
    /// failure left out: if this write succeeds, writing works.
    fn seen(&self) -> Verdict {
        evaluate_health(self.observation.problems.iter().chain(self.sinks.problems()))
    }

    /// The health to publish: what is [`Self::seen`], or, under
    /// `--health-inertia`, what holds.
    pub(super) fn publishable(&self) -> Verdict {
        let seen = self.seen();
        match &self.health {
            Some(held) => held.held(seen),
            None => seen,
        }
    }

    /// Once per check: the health seen goes to the inertia. Not while the
    /// start-up allowance holds everything back ([`super::startup`]): an
    /// operator that is only starting has no health to hold on to.
    pub(super) fn hold_health(&mut self, now: Instant) {
        if self.health.is_none() || self.publisher.startup().waiting() {
            return;
        }
        let seen = self.seen();
        if let Some(held) = &mut self.health {
            held.observe(&seen, now, SystemTime::now());
        }
    }

    /// The changes held back, the health's first, then each sink's: what
    /// `/status` shows with when each would be published.
    pub(super) fn pending(&self) -> Vec<PendingChange> {
        let target = &self.config.target;
        let output = || format!("ConfigMap {}/{}", target.namespace, target.name);
        let health = self.health.as_ref().and_then(|held| held.pending(output()));
        health.into_iter().chain(self.sinks.pending()).collect()
    }

    /// The document of `content`, stamped `now`: the version and namespace
    /// fixed at start, the rest from the content.
    pub(super) fn document(&self, content: &Content, now: SystemTime) -> StatusDocument {
        let Content { verdict, pro } = content;
        StatusDocument {
            mode: pro.mode,
            tier: pro.tier,
            version: self.config.settings.operator_version.clone(),
            health: verdict.health,
            last_update: format_rfc3339(now),
            registered: pro.registered,
            error: verdict.error.clone(),
            namespace: self.config.operator_namespace.clone(),
            cluster_id: pro.cluster_id.clone(),
        }
    }

    /// The status as it would be written now, its fixed parts and its
    /// timestamp aside: what a change is measured against.
    pub(super) fn content(&self) -> Content {
        self.content_with(self.publishable())
    }

    pub(super) fn content_with(&self, verdict: Verdict) -> Content {
        Content { verdict, pro: self.observation.pro.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_held_health_keeps_the_published_reason_and_says_since_when() {
        let windows = Windows { worse: Duration::from_secs(5), better: Duration::ZERO };
        let mut held = HeldHealth::new(windows);
        let (t0, wall0) = (Instant::now(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_849_262));
        let at = |s: u64| (t0 + Duration::from_secs(s), wall0 + Duration::from_secs(s));
        let healthy = Verdict { health: Health::Healthy, error: None };
        let sick = Verdict { health: Health::Degraded, error: Some("Operator health check failed: HTTP 503".into()) };
        let (now, wall) = at(0);
        held.observe(&healthy, now, wall);
        let (now, wall) = at(1);
        held.observe(&sick, now, wall);
        assert_eq!(held.held(sick.clone()), healthy, "held back: healthy, and null stays null");
        let pending = held.pending("ConfigMap ops/kube9-operator-status".into()).expect("pending");
        assert_eq!((pending.state.as_str(), pending.due), ("health=degraded", wall0 + Duration::from_secs(6)));
        let (now, wall) = at(6);
        held.observe(&sick, now, wall);
        let published = held.held(sick.clone());
        assert_eq!(published.health, Health::Degraded);
        assert_eq!(
            published.error.as_deref(),
            Some("Operator health check failed: HTTP 503 (since 2026-11-28T07:01:03Z)")
        );
        assert_eq!(held.pending("x".into()), None);
    }
}
