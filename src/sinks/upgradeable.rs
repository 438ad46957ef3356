//! `Upgradeable` under inertia (`--upgradeable-inertia`), as both the
//! OperatorCondition and the ClusterOperator publish it: blocked (`False`
//! or `Unknown`) is the worse state, `True` the better one
//! ([`crate::inertia`]). While a change is held back the condition last
//! published in the state that holds stands, and its message ends with
//! since when that state has held. Off (both windows zero), the probes'
//! condition goes out as it is, word for word. The window outlives the
//! process that counts it: after a start or a takeover the object is read
//! back first, and what it says holds as published ([`HeldUpgradeable::read_back`]).

use crate::conditions::{Condition, Desired, Status};
use crate::inertia::{HeldValue, PendingChange, Windows, since_note, split_since};
use std::time::{Instant, SystemTime};

/// One output's `Upgradeable`, held.
#[derive(Clone, Debug)]
pub(crate) struct HeldUpgradeable {
    windows: Windows,
    /// `None`: no inertia.
    held: Option<HeldValue<Desired, bool>>,
    /// Whether the object was read back since the start or takeover.
    read_back: bool,
    /// What the last [`HeldUpgradeable::publish`] said.
    last: Option<Desired>,
}

impl HeldUpgradeable {
    pub(crate) fn new(windows: Windows) -> HeldUpgradeable {
        HeldUpgradeable {
            windows,
            held: windows.is_on().then(|| HeldValue::new(windows)),
            read_back: false,
            last: None,
        }
    }

    /// Whether the object must be read before the first publication: under
    /// inertia, after a start or a takeover, so that a window under way
    /// holds across them ([`HeldUpgradeable::read_back`]).
    pub(crate) fn needs_reading_back(&self) -> bool {
        self.held.is_some() && !self.read_back
    }

    /// The object's conditions as read: its `Upgradeable` holds as
    /// published, since the `(since …)` its message ends with (else its
    /// `lastTransitionTime`). Without one, the first state seen is
    /// published at once.
    pub(crate) fn read_back(&mut self, conditions: &[Condition], now: Instant) {
        self.read_back = true;
        let found = conditions.iter().find(|c| c.kind == "Upgradeable");
        let (Some(held), Some((condition, since))) = (&mut self.held, found.and_then(|c| Some((c, since(c)?)))) else {
            return;
        };
        let message = split_since(&condition.message).0.to_string();
        let value = Desired::new("Upgradeable", condition.status, &condition.reason, message);
        held.seed(value, condition.status != Status::True, since, now);
    }

    /// Another instance publishes: nothing seen or read is ours any more.
    pub(crate) fn forget(&mut self) {
        *self = HeldUpgradeable::new(self.windows);
    }

    /// What to publish of the probes' `desired` at `now` (`wall` the same
    /// instant on the wall clock): `desired` itself when off.
    pub(crate) fn publish(&mut self, desired: &Desired, now: Instant, wall: SystemTime) -> &Desired {
        let published = match &mut self.held {
            None => desired.clone(),
            Some(held) => {
                let blocked = desired.status != Status::True;
                held.observe(desired, blocked, now, wall);
                let (mut published, since) = held.held(desired.clone(), blocked);
                if let Some(since) = since {
                    published.message.push_str(&since_note(since));
                }
                published
            }
        };
        self.last.insert(published)
    }

    /// What was published last.
    pub(crate) fn last(&self) -> Option<&Desired> {
        self.last.as_ref()
    }

    /// The change held back, as `/status` shows it for `output`.
    pub(crate) fn pending(&self, output: String) -> Option<PendingChange> {
        let p = self.held.as_ref()?.pending()?;
        Some(PendingChange::new(output, if p.state { "Upgradeable=False" } else { "Upgradeable=True" }, p))
    }
}

/// Since when a condition as read has held: the `(since …)` its message
/// ends with, else its `lastTransitionTime`.
pub(crate) fn since(condition: &Condition) -> Option<SystemTime> {
    split_since(&condition.message).1.or_else(|| crate::util::time::parse_rfc3339(&condition.last_transition_time))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn condition(status: Status, message: &str) -> Desired {
        Desired::new("Upgradeable", status, if status == Status::True { "AsExpected" } else { "Migrating" }, message)
    }

    #[test]
    fn without_inertia_the_condition_goes_out_word_for_word() {
        let mut held = HeldUpgradeable::new(Windows::default());
        let blocked = condition(Status::False, "Upgrade blocked by 1 resource: Foo a/b: Migrating");
        assert_eq!(*held.publish(&blocked, Instant::now(), SystemTime::now()), blocked);
        assert!(!held.needs_reading_back());
        assert_eq!(held.pending("x".into()), None);
    }

    #[test]
    fn true_only_once_the_blocking_resources_have_been_clear_for_the_window() {
        let windows = Windows { worse: Duration::ZERO, better: Duration::from_secs(60) };
        let mut held = HeldUpgradeable::new(windows);
        let (t0, wall0) = (Instant::now(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_849_262));
        let at = |s: u64| (t0 + Duration::from_secs(s), wall0 + Duration::from_secs(s));
        let blocked = condition(Status::False, "Upgrade blocked by 1 resource: Foo a/b: Migrating");
        let clear = condition(Status::True, "No resource blocks an upgrade (1 checked)");
        let (now, wall) = at(0);
        let first = held.publish(&blocked, now, wall).clone();
        assert_eq!(
            first.message, "Upgrade blocked by 1 resource: Foo a/b: Migrating (since 2026-11-28T07:01:02Z)",
            "the first state at once, saying since when"
        );
        let (now, wall) = at(10);
        assert_eq!(*held.publish(&clear, now, wall), first, "clear for 0 s of 60: still blocked, as published");
        let pending = held.pending("OperatorCondition ops/op".into()).expect("a pending clearance");
        assert_eq!((pending.state.as_str(), pending.due), ("Upgradeable=True", wall0 + Duration::from_secs(70)));
        let (now, wall) = at(70);
        let published = held.publish(&clear, now, wall).clone();
        assert_eq!(published.status, Status::True);
        assert_eq!(published.message, "No resource blocks an upgrade (1 checked) (since 2026-11-28T07:01:12Z)");
        let (now, wall) = at(71);
        assert_eq!(held.publish(&blocked, now, wall).status, Status::False, "a block at once");
    }

    #[test]
    fn a_window_under_way_holds_across_a_restart_read_back_from_the_object() {
        let windows = Windows { worse: Duration::ZERO, better: Duration::from_secs(20) };
        let mut held = HeldUpgradeable::new(windows);
        assert!(held.needs_reading_back());
        let (t0, wall0) = (Instant::now(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_849_262));
        let at = |s: u64| (t0 + Duration::from_secs(s), wall0 + Duration::from_secs(s));
        let read: Vec<Condition> = serde_json::from_str(
            r#"[{"type":"Upgradeable","status":"False","reason":"Migrating","lastTransitionTime":"2026-11-28T07:01:09Z",
                 "message":"Upgrade blocked by 1 resource: Foo a/b: Migrating (since 2026-11-28T07:01:02Z)"}]"#,
        )
        .unwrap();
        held.read_back(&read, t0);
        assert!(!held.needs_reading_back());
        let clear = condition(Status::True, "No resource blocks an upgrade (1 checked)");
        let (now, wall) = at(3);
        let published = held.publish(&clear, now, wall).clone();
        assert_eq!(
            (published.status, published.message.as_str()),
            (Status::False, "Upgrade blocked by 1 resource: Foo a/b: Migrating (since 2026-11-28T07:01:02Z)"),
            "blocked, as read back, with its own since"
        );
        let (now, wall) = at(22);
        assert_eq!(held.publish(&clear, now, wall).status, Status::False, "clear for 19 s of 20 since the restart");
        let (now, wall) = at(23);
        assert_eq!(held.publish(&clear, now, wall).status, Status::True);
        // A takeover forgets what this instance saw: read back again.
        held.forget();
        assert!(held.needs_reading_back() && held.last().is_none());
        // No message note: since its lastTransitionTime.
        let plain: Vec<Condition> = serde_json::from_str(
            r#"[{"type":"Upgradeable","status":"False","reason":"R","message":"M","lastTransitionTime":"2026-11-28T07:01:09Z"}]"#,
        )
        .unwrap();
        assert_eq!(since(&plain[0]), crate::util::time::parse_rfc3339("2026-11-28T07:01:09Z"));
    }
}
