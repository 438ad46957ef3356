//! The start-up allowance: what an instance may say while its operator
//! has not answered its health checks since opstatus started (pure; the
//! clock is an argument).
//!
//! opstatus usually starts before its operator (a native sidecar does by
//! design, a plain sidecar often does too), so its first checks find the
//! operator's health endpoint refusing connections. Publishing that would
//! say `degraded` of an operator that is only starting, record a Warning
//! Event and, a moment later, "healthy again" though nothing had failed.
//! So until the operator has answered once, or the allowance has passed,
//! the instance publishes nothing: on a fresh install no status at all,
//! in a rollout the previous publisher's status stays as it is (the
//! instance does not even read the lock). Like kubelet's startup probe,
//! the allowance is generous for a slow operator and bounded, so that an
//! operator that never answers is still shown `degraded` (saying it has
//! not answered since opstatus started) within the allowance and one
//! check.

use crate::status::{Problem, Rule};
use std::time::Duration;

/// The longest allowance: in a rollout the previous publisher's status
/// stands meanwhile, and it must not turn stale to readers (5 minutes)
/// before the new pod says anything.
pub(crate) const MAX_ALLOWANCE: Duration = Duration::from_secs(240);

/// Where an instance stands with its operator's first answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Startup {
    /// The operator has answered once since opstatus started, or nothing
    /// is watched (nothing to wait for): publishing goes as usual.
    Answered,
    /// No answer yet, `left` of the allowance remaining: publish nothing.
    Waiting { left: Duration },
    /// The allowance passed with no answer: publish, saying so.
    Spent,
}

impl Startup {
    /// `unanswered_for`: how long the health checks have gone without
    /// passing once since opstatus started (`None`: they passed once, or
    /// nothing is watched).
    pub(crate) fn at(unanswered_for: Option<Duration>, allowance: Duration) -> Startup {
        match unanswered_for {
            None => Startup::Answered,
            Some(waited) if waited < allowance => Startup::Waiting { left: allowance - waited },
            Some(_) => Startup::Spent,
        }
    }

    /// Whether the instance must publish nothing now.
    pub(crate) fn waiting(self) -> bool {
        matches!(self, Startup::Waiting { .. })
    }
}

/// The operator's problems once the allowance is spent with no answer:
/// the health check's own reason, saying it has never passed, in fixed
/// words (no growing age): one status, not one per check.
pub(crate) fn never_answered(problems: &mut [Problem], allowance: Duration) {
    let allowance = allowance.as_secs();
    for problem in problems.iter_mut().filter(|p| p.rule == Rule::Operator) {
        problem.reason = format!(
            "The operator has not answered since opstatus started (a start-up allowance of {allowance}s): {}",
            problem.reason
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn nothing_is_published_until_the_first_answer_or_the_end_of_the_allowance() {
        let allowance = S(60);
        assert_eq!(Startup::at(None, allowance), Startup::Answered, "answered, or nothing watched");
        assert_eq!(Startup::at(Some(S(0)), allowance), Startup::Waiting { left: S(60) });
        assert_eq!(Startup::at(Some(S(59)), allowance), Startup::Waiting { left: S(1) });
        assert!(Startup::at(Some(S(59)), allowance).waiting());
        assert_eq!(Startup::at(Some(S(60)), allowance), Startup::Spent, "the allowance is spent");
        assert!(!Startup::at(Some(S(3600)), allowance).waiting(), "never silent for longer than the allowance");
        // No allowance: the first check's verdict is published, as `once` does.
        assert_eq!(Startup::at(Some(S(0)), Duration::ZERO), Startup::Spent);
    }

    #[test]
    fn a_spent_allowance_says_the_operator_never_answered_in_the_same_words_on_every_check() {
        let why = "Operator health check http://127.0.0.1:8081/healthz failed: connection refused";
        let mut problems = vec![Problem::degraded(Rule::Operator, why), Problem::degraded(Rule::Publishing, "lease")];
        never_answered(&mut problems, S(60));
        let said = problems[0].reason.clone();
        assert_eq!(problems[1].reason, "lease", "only the operator's own problems");
        assert_eq!(
            said,
            "The operator has not answered since opstatus started (a start-up allowance of 60s): Operator health \
             check http://127.0.0.1:8081/healthz failed: connection refused"
        );
    }

    #[test]
    fn the_longest_allowance_is_below_what_readers_tolerate() {
        assert!(MAX_ALLOWANCE + S(30) < crate::reader::STALE_AFTER, "a check and a write to spare");
    }
}
