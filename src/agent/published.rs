//! What the agent publishes in the status ConfigMap: the [`Content`] of
//! the document (the verdict and the pro tier's fields), the document
//! stamped with the time, and the health held ([`HeldHealth`],
//! [`crate::inertia`]): a recovery is published only once
//! [`RECOVERY_CHECKS`] checks in a row found better health, so a flapping
//! operator is shown `degraded` once and held there while it flaps; with
//! `--health-inertia` a change of health is published only once it has
//! held for its window. Meanwhile the health last published, with its
//! reason, stands. Holding changes what the heartbeat says, never how
//! often it writes: a held-back change is no change of the content, so it
//! sends nothing before the next heartbeat.

use super::Agent;
use crate::inertia::{HeldValue, PendingChange, Windows, since_note};
use crate::status::{Health, ProFields, StatusDocument, Verdict, evaluate_health};
use crate::util::time::format_rfc3339;
use std::time::{Duration, Instant, SystemTime};

/// How many checks in a row must find health better before it is
/// published: the hysteresis that keeps an operator flapping between up
/// and down shown as down, once, until it stays up. Counted in time, as
/// every window is: better for the checks' interval times one less than
/// this, less half an interval (a check a little early still counts).
pub(crate) const RECOVERY_CHECKS: u32 = 3;

/// How long better health must hold at the check interval `check`.
fn recovery_hold(check: Duration) -> Duration {
    check.saturating_mul(RECOVERY_CHECKS - 1).saturating_sub(check / 2)
}

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

/// The published health held: worse is `degraded` or `unhealthy` (ranked
/// as [`Health`] is), better is back towards `healthy`, and each must hold
/// for its window: `--health-inertia`'s, better health at least
/// [`RECOVERY_CHECKS`] checks. Under `--health-inertia` the
/// reason of a health that is not `healthy` ends with since when it has
/// held.
#[derive(Clone, Debug)]
pub(crate) struct HeldHealth {
    held: HeldValue<Verdict, Health>,
    since_note: bool,
}

impl HeldHealth {
    /// `inertia`: `--health-inertia`; `check`: the check interval.
    pub(crate) fn new(inertia: Windows, check: Duration) -> HeldHealth {
        let windows = Windows { better: inertia.better.max(recovery_hold(check)), ..inertia };
        HeldHealth { held: HeldValue::new(windows), since_note: inertia.is_on() }
    }

    /// Takes the health the signals and sinks make now.
    pub(crate) fn observe(&mut self, verdict: &Verdict, now: Instant, wall: SystemTime) {
        self.held.observe(verdict, verdict.health, now, wall);
    }

    /// What to publish of `verdict` as of the last observation.
    pub(crate) fn held(&self, verdict: Verdict) -> Verdict {
        let health = verdict.health;
        let (mut held, since) = self.held.held(verdict, health);
        if let (Some(since), Some(error), true) = (since, held.error.as_mut(), self.since_note) {
            error.push_str(&since_note(since));
        }
        held
    }

    pub(crate) fn pending(&self, output: String) -> Option<PendingChange> {
        self.held.pending().map(|p| PendingChange::new(output, &format!("health={}", p.state), p))
    }
}

impl Agent {
    /// The health the signals and sinks make now, the status write's own
    /// failure left out: if this write succeeds, writing works.
    fn seen(&self) -> Verdict {
        evaluate_health(self.observation.problems.iter().chain(self.sinks.problems()))
    }

    /// The health to publish: of what is [`Self::seen`], what holds.
    pub(super) fn publishable(&self) -> Verdict {
        self.health.held(self.seen())
    }

    /// Once per check: the health seen goes to the inertia. Not while the
    /// start-up allowance holds everything back ([`super::startup`]): an
    /// operator that is only starting has no health to hold on to.
    pub(super) fn hold_health(&mut self, now: Instant) {
        if self.publisher.startup().waiting() {
            return;
        }
        let seen = self.seen();
        self.health.observe(&seen, now, SystemTime::now());
    }

    /// The changes held back, the health's first, then each sink's: what
    /// `/status` shows with when each would be published.
    pub(super) fn pending(&self) -> Vec<PendingChange> {
        let target = &self.config.target;
        let output = || format!("ConfigMap {}/{}", target.namespace, target.name);
        self.health.pending(output()).into_iter().chain(self.sinks.pending()).collect()
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

    #[test]
    fn a_held_health_keeps_the_published_reason_and_says_since_when() {
        let windows = Windows { worse: Duration::from_secs(5), better: Duration::ZERO };
        let mut held = HeldHealth::new(windows, Duration::from_millis(100));
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

    #[test]
    fn a_recovery_is_published_at_the_third_passing_check_in_a_row_and_says_nothing_more() {
        let mut held = HeldHealth::new(Windows::default(), Duration::from_secs(5));
        let t0 = Instant::now();
        let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_849_262);
        let mut observe = |s: u64, verdict: &Verdict| {
            held.observe(verdict, t0 + Duration::from_secs(s), wall0 + Duration::from_secs(s));
            held.held(verdict.clone())
        };
        let healthy = Verdict { health: Health::Healthy, error: None };
        let sick = Verdict { health: Health::Degraded, error: Some("Operator health check failed: HTTP 503".into()) };
        assert_eq!(observe(0, &healthy), healthy);
        assert_eq!(observe(5, &sick), sick, "worse at once, its reason word for word");
        assert_eq!(observe(10, &healthy), sick, "held");
        assert_eq!(observe(15, &sick), sick);
        assert_eq!(observe(20, &healthy), sick);
        assert_eq!(observe(25, &healthy), sick, "two checks in a row");
        assert_eq!(observe(30, &healthy), healthy, "three");
        assert_eq!(recovery_hold(Duration::from_secs(1)), Duration::from_millis(1500));
    }
}
