//! Registration with kube9-server (the pro tier), as a state machine.
//!
//! Pure: the clock and the random source are arguments, so every rule of
//! the spec is unit-tested without a network:
//! - 200 → registered: `clusterId` published, tier `pro`, the server's
//!   `statusUpdateIntervalSeconds` and `reregistrationIntervalHours` adopted;
//!   registered again every `reregistrationIntervalHours`;
//! - 401 → free tier, registration cleared, no retry until the key changes
//!   or 24 h pass;
//! - 429 → wait for `Retry-After`;
//! - 5xx, timeouts, refused connections → exponential backoff with jitter
//!   from 5 minutes (5, 10, 20 … capped at an hour);
//! - 400 → no retry until the configuration changes.
//!
//! A failed re-registration keeps the registration it had (more than three
//! failures in a row degrade the health: spec rule 4).
//!
//! Every duration the server sends is clamped here, where it enters the
//! state machine ([`Outcome::bounded`]): a retry to at most [`MAX_RETRY`], a
//! re-registration period to [`MIN_REREGISTRATION`]..=[`MAX_REREGISTRATION`],
//! the heartbeat to the status interval's range; and deadlines are
//! `checked_add`ed, so no answer can overflow an `Instant`.

use crate::status::{MAX_INTERVAL, MIN_INTERVAL};
use crate::util::backoff::Backoff;
use std::time::{Duration, Instant};

/// After a 401, the key is not tried again for this long (or until it
/// changes).
pub(crate) const REJECTED_RETRY: Duration = Duration::from_secs(24 * 3600);
/// The first retry after a server or network failure (the spec's guidance).
pub(crate) const FAILURE_BASE: Duration = Duration::from_secs(5 * 60);
pub(crate) const FAILURE_CAP: Duration = Duration::from_secs(3600);
/// The longest a server's `Retry-After` can hold registration off.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(3600);
/// Re-registration period when the server does not say.
pub(crate) const DEFAULT_REREGISTRATION: Duration = Duration::from_secs(24 * 3600);
/// The range a server's `reregistrationIntervalHours` is held to: at least
/// hourly would be a request storm, and beyond a week a revoked key would
/// go unnoticed.
pub(crate) const MIN_REREGISTRATION: Duration = Duration::from_secs(3600);
pub(crate) const MAX_REREGISTRATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What one registration attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Registered {
        cluster_id: String,
        status_interval: Option<Duration>,
        reregistration: Option<Duration>,
    },
    /// 401: the key is invalid or expired.
    Unauthorized,
    /// 429, with the server's `Retry-After` when it gave one.
    RateLimited {
        retry_after: Option<Duration>,
    },
    /// 400: the request itself is wrong; `details` as the server put it.
    BadRequest {
        details: String,
    },
    /// 5xx, a network failure, or an answer that makes no sense.
    Failed {
        reason: String,
    },
}

impl Outcome {
    /// The outcome with every duration the server chose held to its range.
    pub fn bounded(self) -> Outcome {
        match self {
            Outcome::Registered { cluster_id, status_interval, reregistration } => Outcome::Registered {
                cluster_id,
                status_interval: status_interval.map(|d| d.clamp(MIN_INTERVAL, MAX_INTERVAL)),
                reregistration: reregistration.map(|d| d.clamp(MIN_REREGISTRATION, MAX_REREGISTRATION)),
            },
            Outcome::RateLimited { retry_after } => {
                Outcome::RateLimited { retry_after: retry_after.map(|d| d.min(MAX_RETRY)) }
            }
            other => other,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// No key, or a key that has not registered yet.
    Unregistered,
    Registered {
        cluster_id: String,
    },
    /// The server rejected the key (401).
    Rejected,
}

#[derive(Clone, Debug)]
pub(crate) struct Registration {
    state: State,
    /// Consecutive failed attempts.
    pub failures: u32,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// When to try next; `None` when not to try (no key, or a 400).
    pub next_attempt: Option<Instant>,
    backoff: Backoff,
    /// The heartbeat interval the server asked for, while registered.
    pub status_interval: Option<Duration>,
}

impl Default for Registration {
    fn default() -> Self {
        Registration {
            state: State::Unregistered,
            failures: 0,
            error: None,
            next_attempt: None,
            backoff: Backoff::new(FAILURE_BASE, FAILURE_CAP),
            status_interval: None,
        }
    }
}

impl Registration {
    /// The key appeared, changed or went away: start over.
    pub(crate) fn key_changed(&mut self, key_present: bool, now: Instant) {
        *self = Registration { next_attempt: key_present.then_some(now), ..Registration::default() };
    }

    /// Whether an attempt is due.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.next_attempt.is_some_and(|t| t <= now)
    }

    /// Applies an attempt's outcome. `random` spreads the backoff.
    pub(crate) fn record(&mut self, outcome: Outcome, now: Instant, random: u64) {
        match outcome.bounded() {
            Outcome::Registered { cluster_id, status_interval, reregistration } => {
                self.state = State::Registered { cluster_id };
                self.failures = 0;
                self.error = None;
                self.backoff.reset();
                self.status_interval = status_interval;
                self.next_attempt = now.checked_add(reregistration.unwrap_or(DEFAULT_REREGISTRATION));
            }
            Outcome::Unauthorized => {
                self.state = State::Rejected;
                self.status_interval = None;
                self.fail("API key validation failed: 401 Unauthorized".into(), now.checked_add(REJECTED_RETRY));
            }
            Outcome::RateLimited { retry_after } => {
                let wait = match retry_after {
                    Some(d) => d,
                    None => self.backoff.next_delay(random, None),
                };
                let reason = format!("kube9-server is rate limiting registration; retrying in {}s", wait.as_secs());
                self.fail(reason, now.checked_add(wait));
            }
            Outcome::BadRequest { details } => {
                self.fail(format!("kube9-server rejected the registration request: {details}"), None);
            }
            Outcome::Failed { reason } => {
                let wait = self.backoff.next_delay(random, None);
                self.fail(reason, now.checked_add(wait));
            }
        }
    }

    fn fail(&mut self, reason: String, next: Option<Instant>) {
        self.failures = self.failures.saturating_add(1);
        self.error = Some(reason);
        self.next_attempt = next;
    }

    pub(crate) fn registered(&self) -> bool {
        matches!(self.state, State::Registered { .. })
    }

    /// The server rejected the key: run as `operated` / `free`.
    pub(crate) fn rejected(&self) -> bool {
        self.state == State::Rejected
    }

    pub(crate) fn cluster_id(&self) -> Option<&str> {
        match &self.state {
            State::Registered { cluster_id } => Some(cluster_id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn registered(id: &str) -> Outcome {
        Outcome::Registered {
            cluster_id: id.into(),
            status_interval: Some(Duration::from_secs(30)),
            reregistration: Some(Duration::from_secs(2 * 3600)),
        }
    }

    fn failed() -> Outcome {
        Outcome::Failed { reason: "Failed to connect to kube9-server: connection refused".into() }
    }

    #[test]
    fn nothing_is_due_without_a_key() {
        let now = Instant::now();
        let mut r = Registration::default();
        assert!(!r.due(now));
        r.key_changed(false, now);
        assert!(!r.due(now + REJECTED_RETRY));
    }

    #[test]
    fn a_new_key_registers_at_once_and_success_schedules_reregistration() {
        let now = Instant::now();
        let mut r = Registration::default();
        r.key_changed(true, now);
        assert!(r.due(now));
        r.record(registered("cls_1"), now, 0);
        assert!(r.registered() && !r.rejected());
        assert_eq!((r.cluster_id(), r.failures, r.error.as_deref()), (Some("cls_1"), 0, None));
        assert_eq!(r.status_interval, Some(Duration::from_secs(30)));
        assert!(!r.due(now + 119 * MIN));
        assert!(r.due(now + 120 * MIN), "re-registers after reregistrationIntervalHours");
    }

    #[test]
    fn unauthorized_falls_back_and_waits_a_day_or_a_new_key() {
        let now = Instant::now();
        let mut r = Registration::default();
        r.key_changed(true, now);
        r.record(registered("cls_1"), now, 0);
        r.record(Outcome::Unauthorized, now, 0);
        assert!(r.rejected() && !r.registered());
        assert_eq!((r.cluster_id(), r.status_interval), (None, None));
        assert_eq!(r.error.as_deref(), Some("API key validation failed: 401 Unauthorized"));
        assert!(!r.due(now + REJECTED_RETRY - MIN));
        assert!(r.due(now + REJECTED_RETRY));
        r.key_changed(true, now + MIN);
        assert!(r.due(now + MIN) && !r.rejected() && r.error.as_deref().is_none() && r.failures == 0);
    }

    #[test]
    fn rate_limits_honour_retry_after() {
        let now = Instant::now();
        let mut r = Registration::default();
        r.key_changed(true, now);
        r.record(Outcome::RateLimited { retry_after: Some(Duration::from_secs(90)) }, now, 0);
        assert!(!r.due(now + Duration::from_secs(89)) && r.due(now + Duration::from_secs(90)));
        assert_eq!(r.error.as_deref(), Some("kube9-server is rate limiting registration; retrying in 90s"));
        r.record(Outcome::RateLimited { retry_after: None }, now, 0);
        assert_eq!(r.next_attempt, Some(now + FAILURE_BASE), "no Retry-After: the backoff");
    }

    #[test]
    fn server_durations_are_held_to_their_ranges() {
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        let registered_for = |reregistration: Duration, status: Duration| {
            let mut r = Registration::default();
            r.key_changed(true, now);
            let outcome = Outcome::Registered {
                cluster_id: "cls_1".into(),
                status_interval: Some(status),
                reregistration: Some(reregistration),
            };
            r.record(outcome, now, 0);
            (r.next_attempt.map(|t| t - now), r.status_interval)
        };
        // 3e15 hours, as a server could send it: a week, no overflow.
        let absurd = Duration::from_secs(3_000_000_000_000_000u64.saturating_mul(3600));
        assert_eq!(registered_for(absurd, Duration::MAX), (Some(MAX_REREGISTRATION), Some(MAX_INTERVAL)));
        assert_eq!(registered_for(Duration::MAX, Duration::ZERO), (Some(MAX_REREGISTRATION), Some(MIN_INTERVAL)));
        assert_eq!(registered_for(Duration::from_secs(60), MIN), (Some(hour), Some(MIN)), "at most hourly");
        assert_eq!(registered_for(2 * hour, MIN), (Some(2 * hour), Some(MIN)), "in range: as asked");

        let mut r = Registration::default();
        r.key_changed(true, now);
        for asked in [Duration::MAX, Duration::from_secs(u64::MAX), 2 * hour] {
            r.record(Outcome::RateLimited { retry_after: Some(asked) }, now, 0);
            assert_eq!(r.next_attempt, Some(now + MAX_RETRY), "{asked:?}");
            assert_eq!(r.error.as_deref(), Some("kube9-server is rate limiting registration; retrying in 3600s"));
        }
    }

    #[test]
    fn failures_back_off_from_five_minutes_and_count() {
        let now = Instant::now();
        let mut r = Registration::default();
        r.key_changed(true, now);
        // Each wait is jittered between 5 minutes and 5, 10, 20, 40, 60, 60.
        for (n, ceiling_minutes) in [5, 10, 20, 40, 60, 60].into_iter().enumerate() {
            r.record(failed(), now, 0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(n as u64 + 1));
            let wait = r.next_attempt.unwrap() - now;
            assert!(wait >= FAILURE_BASE && wait <= MIN * ceiling_minutes, "failure {n}: {wait:?}");
        }
        assert_eq!(r.failures, 6);
        assert_eq!(r.error.as_deref(), Some("Failed to connect to kube9-server: connection refused"));
        r.record(registered("cls_2"), now, 0);
        assert_eq!((r.failures, r.error.as_deref()), (0, None));
    }

    #[test]
    fn a_failed_reregistration_keeps_the_registration() {
        let now = Instant::now();
        let mut r = Registration::default();
        r.key_changed(true, now);
        r.record(registered("cls_1"), now, 0);
        r.record(failed(), now, 0);
        assert!(r.registered());
        assert_eq!((r.cluster_id(), r.failures), (Some("cls_1"), 1));
    }

    #[test]
    fn bad_requests_wait_for_a_configuration_change() {
        let now = Instant::now();
        let mut r = Registration::default();
        r.key_changed(true, now);
        r.record(Outcome::BadRequest { details: "approximateNodeCount must be a number".into() }, now, 0);
        assert_eq!(r.next_attempt, None);
        assert!(!r.due(now + REJECTED_RETRY * 10));
        assert_eq!(
            r.error.as_deref(),
            Some("kube9-server rejected the registration request: approximateNodeCount must be a number")
        );
        r.key_changed(true, now);
        assert!(r.due(now));
    }
}
