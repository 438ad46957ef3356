//! A problem that is logged when it appears, when its wording changes and
//! when it clears — not on every tick that still sees it.
//!
//! Every signal and sink that re-checks something each tick needs this; one
//! type keeps the rule ("say it once") in one place.

/// The current problem, if any, and the memory of having said it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reported(Option<String>);

impl Reported {
    /// Records `problem`: logs it at `level` when it is new or different,
    /// and `recovered` at INFO when it clears. Returns whether it changed.
    pub(crate) fn update(&mut self, problem: Option<String>, level: log::Level, recovered: &str) -> bool {
        if problem == self.0 {
            return false;
        }
        match &problem {
            Some(why) => log::log!(level, "{why}"),
            None if !recovered.is_empty() => log::info!("{recovered}"),
            None => {}
        }
        self.0 = problem;
        true
    }

    /// The problem as last recorded.
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_reported_and_repeats_are_not() {
        let mut r = Reported::default();
        assert!(!r.update(None, log::Level::Warn, "fine again"));
        assert!(r.update(Some("broken".into()), log::Level::Warn, "fine again"));
        assert!(!r.update(Some("broken".into()), log::Level::Warn, "fine again"));
        assert_eq!(r.get(), Some("broken"));
        assert!(r.update(Some("broken differently".into()), log::Level::Warn, "fine again"));
        assert!(r.update(None, log::Level::Warn, "fine again"));
        assert_eq!(r.get(), None);
    }
}
