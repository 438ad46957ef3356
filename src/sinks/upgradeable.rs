//! `Upgradeable` under inertia (`--upgradeable-inertia`), as both the
//! OperatorCondition and the ClusterOperator publish it: blocked (`False`
//! or `Unknown`) is the worse state, `True` the better one
//! ([`crate::inertia`]). While a change is held back the condition last
//! published in the state that holds stands, and its message ends with
//! since when that state has held. Off (both windows zero), the probes'
//! condition goes out as it is, word for word.

use crate::conditions::{Desired, Status};
use crate::inertia::{HeldValue, Pending, Windows, since_note};
use std::borrow::Cow;
use std::time::{Instant, SystemTime};

/// One output's `Upgradeable`, held.
#[derive(Clone, Debug)]
pub(crate) struct HeldUpgradeable {
    /// `None`: no inertia.
    held: Option<HeldValue<Desired, bool>>,
}

impl HeldUpgradeable {
    pub(crate) fn new(windows: Windows) -> HeldUpgradeable {
        HeldUpgradeable { held: windows.is_on().then(|| HeldValue::new(windows)) }
    }

    /// What to publish of the probes' `desired` at `now` (`wall` the same
    /// instant on the wall clock): `desired` itself, borrowed, when off.
    pub(crate) fn publish<'a>(&mut self, desired: &'a Desired, now: Instant, wall: SystemTime) -> Cow<'a, Desired> {
        let Some(held) = &mut self.held else { return Cow::Borrowed(desired) };
        let blocked = desired.status != Status::True;
        held.observe(desired, blocked, now, wall);
        let (mut published, since) = held.held(desired.clone(), blocked);
        if let Some(since) = since {
            published.message.push_str(&since_note(since));
        }
        Cow::Owned(published)
    }

    /// The change held back: `true` a block, `false` a clearance.
    pub(crate) fn pending(&self) -> Option<Pending<bool>> {
        self.held.as_ref()?.pending()
    }
}

/// How `/status` names a pending `Upgradeable`.
pub(crate) fn state_name(blocked: bool) -> &'static str {
    if blocked { "Upgradeable=False" } else { "Upgradeable=True" }
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
        let published = held.publish(&blocked, Instant::now(), SystemTime::now());
        assert!(matches!(published, Cow::Borrowed(b) if *b == blocked), "{published:?}");
        assert_eq!(held.pending(), None);
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
        let first = held.publish(&blocked, now, wall).into_owned();
        assert_eq!(
            first.message, "Upgrade blocked by 1 resource: Foo a/b: Migrating (since 2026-11-28T07:01:02Z)",
            "the first state at once, saying since when"
        );
        let (now, wall) = at(10);
        assert_eq!(*held.publish(&clear, now, wall), first, "clear for 0 s of 60: still blocked, as published");
        let pending = held.pending().expect("a pending clearance");
        assert_eq!((pending.state, pending.due), (false, wall0 + Duration::from_secs(70)));
        let (now, wall) = at(70);
        let published = held.publish(&clear, now, wall);
        assert_eq!(published.status, Status::True);
        assert_eq!(published.message, "No resource blocks an upgrade (1 checked) (since 2026-11-28T07:01:12Z)");
        let (now, wall) = at(71);
        assert_eq!(held.publish(&blocked, now, wall).status, Status::False, "a block at once");
    }
}
