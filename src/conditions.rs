//! Condition semantics shared by the OperatorCondition and ClusterOperator
//! sinks: apimachinery's `meta.SetStatusCondition`, as a pure function.
//!
//! - `lastTransitionTime` changes only when `status` changes;
//! - `reason`, `message` and `observedGeneration` are updated in place;
//! - a condition type opstatus does not set is never touched;
//! - [`set`] says whether anything changed, so a write that would change
//!   nothing is not sent.
//!
//! The clock comes in as an argument (an RFC 3339 string, whole seconds, as
//! `metav1.Time` serialises).

use serde::{Deserialize, Serialize};

/// `metav1.Condition` and OpenShift's `ClusterOperatorStatusCondition`
/// (which lacks `observedGeneration`). Unknown fields are not kept: both
/// schemas are structural, so the API server prunes them anyway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// A condition's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        ["True", "False", "Unknown"][self as usize]
    }
}

/// What opstatus wants one condition to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Desired {
    pub kind: &'static str,
    pub status: Status,
    /// CamelCase, as the API conventions require (see [`is_reason`]).
    pub reason: String,
    /// A sentence: a capital letter first.
    pub message: String,
}

impl Desired {
    pub(crate) fn new(kind: &'static str, status: Status, reason: &str, message: impl Into<String>) -> Desired {
        Desired { kind, status, reason: reason.to_string(), message: message.into() }
    }
}

/// Sets `desired` in `conditions` at `now` (RFC 3339); true when anything
/// changed. `observed_generation` is recorded when given.
pub(crate) fn set(
    conditions: &mut Vec<Condition>,
    desired: &Desired,
    observed_generation: Option<i64>,
    now: &str,
) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.kind == desired.kind) else {
        conditions.push(Condition {
            kind: desired.kind.to_string(),
            status: desired.status,
            observed_generation,
            last_transition_time: now.to_string(),
            reason: desired.reason.clone(),
            message: desired.message.clone(),
        });
        return true;
    };
    let mut changed = false;
    if existing.status != desired.status {
        existing.status = desired.status;
        existing.last_transition_time = now.to_string();
        changed = true;
    }
    // A condition someone wrote without a time (invalid for metav1, allowed
    // by loose schemas) gets one, or the API server would reject our write.
    if existing.last_transition_time.is_empty() {
        existing.last_transition_time = now.to_string();
        changed = true;
    }
    if existing.reason != desired.reason {
        existing.reason.clone_from(&desired.reason);
        changed = true;
    }
    if existing.message != desired.message {
        existing.message.clone_from(&desired.message);
        changed = true;
    }
    if observed_generation.is_some() && existing.observed_generation != observed_generation {
        existing.observed_generation = observed_generation;
        changed = true;
    }
    changed
}

/// Sets every desired condition; true when any changed.
pub(crate) fn set_all(
    conditions: &mut Vec<Condition>,
    desired: &[Desired],
    generation: Option<i64>,
    now: &str,
) -> bool {
    desired.iter().fold(false, |changed, d| set(conditions, d, generation, now) | changed)
}

#[cfg(test)]
/// Whether `reason` matches metav1.Condition's pattern
/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$` (CamelCase in practice).
pub(crate) fn is_reason(reason: &str) -> bool {
    let b = reason.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphabetic() && b.iter().all(inner) && (last.is_ascii_alphanumeric() || *last == b'_')
        }
        _ => false,
    }
}

#[cfg(test)]
/// Whether `message` follows the conventions: non-empty and starting with a
/// capital letter.
pub(crate) fn is_sentence(message: &str) -> bool {
    message.chars().next().is_some_and(|c| c.is_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-11-22T10:00:00Z";
    const T1: &str = "2026-11-22T10:05:00Z";

    fn upgradeable(status: Status, reason: &str, message: &str) -> Desired {
        Desired::new("Upgradeable", status, reason, message)
    }

    #[test]
    fn a_new_condition_is_added_with_the_time_now() {
        let mut list = Vec::new();
        assert!(set(&mut list, &upgradeable(Status::True, "AsExpected", "Nothing blocks."), Some(3), T0));
        assert_eq!(
            list,
            [Condition {
                kind: "Upgradeable".into(),
                status: Status::True,
                observed_generation: Some(3),
                last_transition_time: T0.into(),
                reason: "AsExpected".into(),
                message: "Nothing blocks.".into(),
            }]
        );
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let mut list = Vec::new();
        set(&mut list, &upgradeable(Status::False, "Migrating", "Foo a/b is migrating."), None, T0);
        // Same status, new words: updated in place, time kept.
        assert!(set(&mut list, &upgradeable(Status::False, "Migrating", "Foo a/c is migrating."), None, T1));
        assert_eq!((list[0].last_transition_time.as_str(), list[0].message.as_str()), (T0, "Foo a/c is migrating."));
        // Status flips: the time moves.
        assert!(set(&mut list, &upgradeable(Status::True, "AsExpected", "Nothing blocks."), None, T1));
        assert_eq!(list[0].last_transition_time, T1);
    }

    #[test]
    fn nothing_changed_means_nothing_to_send() {
        let mut list = Vec::new();
        let d = upgradeable(Status::True, "AsExpected", "Nothing blocks.");
        set(&mut list, &d, Some(1), T0);
        let before = list.clone();
        assert!(!set(&mut list, &d, Some(1), T1));
        // No generation given: the recorded one is left alone.
        assert!(!set(&mut list, &d, None, T1));
        assert_eq!(list, before);
        assert!(set(&mut list, &d, Some(2), T1), "a newer generation is recorded");
        assert_eq!((list[0].observed_generation, list[0].last_transition_time.as_str()), (Some(2), T0));
    }

    #[test]
    fn other_types_are_never_touched() {
        let theirs = Condition {
            kind: "OperatorReady".into(),
            status: Status::False,
            observed_generation: Some(7),
            last_transition_time: "2020-01-01T00:00:00Z".into(),
            reason: "Booting".into(),
            message: "Set by the operator.".into(),
        };
        let mut list = vec![theirs.clone()];
        let desired = [
            upgradeable(Status::True, "AsExpected", "Nothing blocks."),
            Desired::new("Important", Status::False, "NothingImportant", "No resource needs attention."),
        ];
        assert!(set_all(&mut list, &desired, None, T0));
        assert_eq!(list[0], theirs);
        assert_eq!(list.len(), 3);
        assert!(!set_all(&mut list, &desired, None, T1));
    }

    #[test]
    fn a_condition_without_a_time_gets_one() {
        let mut list: Vec<Condition> =
            serde_json::from_str(r#"[{"type":"Upgradeable","status":"True","reason":"AsExpected","message":"M."}]"#)
                .unwrap();
        assert!(set(&mut list, &upgradeable(Status::True, "AsExpected", "M."), None, T0));
        assert_eq!(list[0].last_transition_time, T0);
    }

    #[test]
    fn serialises_as_the_api_expects() {
        let mut list = Vec::new();
        set(&mut list, &upgradeable(Status::Unknown, "NotEvaluated", "Not evaluated yet."), None, T0);
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            r#"[{"type":"Upgradeable","status":"Unknown","lastTransitionTime":"2026-11-22T10:00:00Z","reason":"NotEvaluated","message":"Not evaluated yet."}]"#
        );
    }

    #[test]
    fn reasons_and_messages_follow_the_conventions() {
        for ok in ["AsExpected", "NotUpgradeable", "A", "Foo_Bar", "a1:b,c_"] {
            assert!(is_reason(ok), "{ok}");
        }
        for bad in ["", "1Bad", "Has space", "Trailing,", "Dash-ed", "Ünicode"] {
            assert!(!is_reason(bad), "{bad}");
        }
        assert!(is_sentence("Working towards 1.0.1"));
        assert!(!is_sentence("working towards 1.0.1"));
        assert!(!is_sentence(""));
    }
}
