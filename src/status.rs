//! The kube9 operator-status document and the health rules that fill it.
//!
//! [`StatusDocument`] serialises to exactly the JSON of the kube9 spec (field
//! names, order, enum spellings, `error: null` when healthy, `clusterId`
//! omitted when unset). [`evaluate_health`] is the spec's ordered rule list as
//! a pure function of the [`Problem`]s the signals and sinks report: no I/O,
//! no clock.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// The version published when nobody said which version the operator is:
/// a valid semantic version that no release carries, so readers see it is
/// unknown (and `opstatus get` says so) rather than opstatus's own version
/// passed off as the operator's.
pub(crate) const UNKNOWN_VERSION: &str = "0.0.0-unknown";

/// Readers call a status older than 5 minutes stale: a longer interval would
/// make every healthy status look stale between writes.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(240);
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// `mode`: whether an API key is configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    /// No API key: the free, self-contained mode.
    #[default]
    Operated,
    /// An API key is configured.
    Enabled,
}

/// `tier`: `pro` only when an API key is set and the operator is registered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Tier {
    #[default]
    Free,
    Pro,
}

/// `health`, ordered from best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Health {
    Healthy,
    Degraded,
    Unhealthy,
}

impl Health {
    pub(crate) const ALL: [Health; 3] = [Health::Healthy, Health::Degraded, Health::Unhealthy];

    pub(crate) fn as_str(self) -> &'static str {
        ["healthy", "degraded", "unhealthy"][self as usize]
    }
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        ["operated", "enabled"][self as usize]
    }
}

impl Tier {
    pub(crate) fn as_str(self) -> &'static str {
        ["free", "pro"][self as usize]
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON stored under the `status` key of the status ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusDocument {
    pub mode: Mode,
    pub tier: Tier,
    pub version: String,
    pub health: Health,
    pub last_update: String,
    pub registered: bool,
    /// Always present: `null` when healthy.
    pub error: Option<String>,
    pub namespace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
}

impl StatusDocument {
    /// The document as the status key holds it.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a struct of strings and enums always serialises")
    }

    /// The kube9 spec's own example (free tier), for tests.
    #[cfg(test)]
    pub(crate) fn example() -> StatusDocument {
        StatusDocument {
            mode: Mode::Operated,
            tier: Tier::Free,
            version: "1.0.0".into(),
            health: Health::Healthy,
            last_update: "2025-11-10T15:30:00Z".into(),
            registered: false,
            error: None,
            namespace: "kube9-system".into(),
            cluster_id: None,
        }
    }
}

/// The document's `mode`, `tier`, `registered` and `clusterId`: what the
/// pro tier decides. Without an API key: `operated`, `free`, not
/// registered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProFields {
    pub mode: Mode,
    pub tier: Tier,
    pub registered: bool,
    pub cluster_id: Option<String>,
}

/// Where a problem stands in the health rules: the earlier rule wins.
/// A new signal picks the rule it belongs to; it adds no field anywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rule {
    /// kube9 rule 1: the status ConfigMap cannot be written.
    StatusWrite,
    /// kube9 rule 2: the configuration, as re-read at run time, is invalid.
    Configuration,
    /// opstatus: the operator itself is not well (a watched health URL
    /// fails, its heartbeat file is stale).
    Operator,
    /// opstatus: the operator's container restarted recently or cannot
    /// start (`--watch-container`): `degraded`. Not a readiness matter:
    /// kubelet already restarts and unreadies the container.
    Container,
    /// opstatus: another published resource (the OperatorCondition, the
    /// ClusterOperator) cannot be written: `degraded`, since the status
    /// ConfigMap, the primary contract, still is.
    Publishing,
    /// opstatus: the operator's own resources cannot be probed, or an
    /// `Important` expression holds.
    Resources,
    /// kube9 rules 3 and 4: an API key without registration, or more than
    /// [`REGISTRATION_FAILURES_TOLERATED`] failures in a row.
    Registration,
}

/// One thing that is wrong, as a signal or sink reports it: where it
/// stands in the rules, what it makes the health, and the reason that goes
/// into `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub rule: Rule,
    pub health: Health,
    pub reason: String,
}

impl Problem {
    pub(crate) fn degraded(rule: Rule, reason: impl Into<String>) -> Problem {
        Problem { rule, health: Health::Degraded, reason: reason.into() }
    }

    pub(crate) fn unhealthy(rule: Rule, reason: impl Into<String>) -> Problem {
        Problem { rule, health: Health::Unhealthy, reason: reason.into() }
    }

    /// Rule 1, in the spec's words.
    pub(crate) fn status_write(error: &str) -> Problem {
        Problem::unhealthy(Rule::StatusWrite, format!("Failed to write status ConfigMap: {error}"))
    }

    /// Rule 2, in the spec's words.
    pub(crate) fn configuration(error: &str) -> Problem {
        Problem::unhealthy(Rule::Configuration, format!("Invalid configuration: {error}"))
    }
}

/// More than this many consecutive registration failures degrade health.
pub(crate) const REGISTRATION_FAILURES_TOLERATED: u32 = 3;

/// The health verdict and the reason that goes into `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub health: Health,
    pub error: Option<String>,
}

/// The health rules, first match wins:
/// 1. the status cannot be written → `unhealthy`;
/// 2. the configuration is invalid → `unhealthy`;
///
/// then opstatus's own rules: the operator's watched health fails →
/// `degraded` (`unhealthy` when the watch is critical); another sink cannot
/// be written, a probe fails or an `Important` expression holds →
/// `degraded`; then
///
/// 3. an API key is set but the operator is not registered → `degraded`;
/// 4. more than 3 consecutive registration failures → `degraded`;
/// 5. otherwise `healthy`.
///
/// The problems come in any order; among equal rules the first given wins.
///
/// One cause is said first: an operator whose container crash-loops or was
/// just killed also fails its health checks, and the check's "connection
/// refused" alone hides why. When both the operator's health and its
/// container are problems, the reason gives kubelet's words about the
/// container, then the failing check; the health stays the check's.
pub(crate) fn evaluate_health<'a>(problems: impl IntoIterator<Item = &'a Problem>) -> Verdict {
    let mut first: Option<&Problem> = None;
    let mut container: Option<&Problem> = None;
    for p in problems {
        if first.is_none_or(|f| p.rule < f.rule) {
            first = Some(p);
        }
        if p.rule == Rule::Container && container.is_none() {
            container = Some(p);
        }
    }
    match (first, container) {
        (Some(p), Some(c)) if p.rule == Rule::Operator => {
            Verdict { health: p.health, error: Some(format!("{}; {}", c.reason, p.reason)) }
        }
        (Some(p), _) => Verdict { health: p.health, error: Some(p.reason.clone()) },
        (None, _) => Verdict { health: Health::Healthy, error: None },
    }
}

/// Whether a string is a semantic version (`MAJOR.MINOR.PATCH`, optional
/// `-prerelease` and `+build`), as the spec's `version` field requires.
pub(crate) fn is_semver(v: &str) -> bool {
    let (core, rest) = match v.find(['-', '+']) {
        Some(i) => (&v[..i], &v[i..]),
        None => (v, ""),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    let numeric =
        |n: &&str| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) && (n.len() == 1 || !n.starts_with('0'));
    if numbers.len() != 3 || !numbers.iter().all(numeric) {
        return false;
    }
    let (pre, build) = match rest.find('+') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let identifiers_ok =
        |s: &str| s.split('.').all(|id| !id.is_empty() && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
    let pre_ok = match pre.strip_prefix('-') {
        Some(p) => identifiers_ok(p),
        None => pre.is_empty(),
    };
    pre_ok && build.is_none_or(identifiers_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_spec_example_exactly() {
        assert_eq!(
            StatusDocument::example().to_json(),
            r#"{"mode":"operated","tier":"free","version":"1.0.0","health":"healthy","lastUpdate":"2025-11-10T15:30:00Z","registered":false,"error":null,"namespace":"kube9-system"}"#
        );
    }

    #[test]
    fn renders_pro_tier_with_cluster_id_and_error() {
        let d = StatusDocument {
            mode: Mode::Enabled,
            tier: Tier::Pro,
            health: Health::Degraded,
            registered: true,
            error: Some("x \"quoted\"".into()),
            cluster_id: Some("cls_abc".into()),
            ..StatusDocument::example()
        };
        assert_eq!(
            d.to_json(),
            r#"{"mode":"enabled","tier":"pro","version":"1.0.0","health":"degraded","lastUpdate":"2025-11-10T15:30:00Z","registered":true,"error":"x \"quoted\"","namespace":"kube9-system","clusterId":"cls_abc"}"#
        );
    }

    #[test]
    fn healthy_when_nothing_is_wrong() {
        let v = evaluate_health(&[]);
        assert_eq!(v, Verdict { health: Health::Healthy, error: None });
    }

    #[test]
    fn rule_1_failed_status_write_is_unhealthy_and_wins() {
        let v = evaluate_health(&[
            Problem::configuration("bad"),
            Problem::degraded(Rule::Registration, "9 consecutive registration failures: x"),
            Problem::status_write("connection refused"),
        ]);
        assert_eq!(v.health, Health::Unhealthy);
        assert_eq!(v.error.as_deref(), Some("Failed to write status ConfigMap: connection refused"));
    }

    #[test]
    fn other_sinks_and_the_operators_resources_degrade_with_their_reason() {
        let sink = "Failed to update OperatorCondition ops/op.v1: 403 Forbidden";
        let resources = "Attention needed for 1 resource: Foo ops/a: BadConnectivity";
        let v = evaluate_health(&[
            Problem::degraded(Rule::Resources, resources),
            Problem::degraded(Rule::Publishing, sink),
        ]);
        assert_eq!(v, Verdict { health: Health::Degraded, error: Some(sink.into()) });
        let v = evaluate_health(&[
            Problem::degraded(Rule::Registration, "API key configured but the operator is not registered yet"),
            Problem::degraded(Rule::Resources, resources),
        ]);
        assert_eq!(v, Verdict { health: Health::Degraded, error: Some(resources.into()) });
        // The operator being down says more.
        let v = evaluate_health(&[
            Problem::degraded(Rule::Publishing, sink),
            Problem::degraded(Rule::Operator, "Operator down"),
        ]);
        assert_eq!(v.error.as_deref(), Some("Operator down"));
    }

    #[test]
    fn rule_2_invalid_configuration_is_unhealthy() {
        let v = evaluate_health(&[
            Problem::degraded(Rule::Registration, "not registered"),
            Problem::configuration("API key file is empty"),
        ]);
        assert_eq!(v.health, Health::Unhealthy);
        assert_eq!(v.error.as_deref(), Some("Invalid configuration: API key file is empty"));
    }

    #[test]
    fn a_failing_operator_watch_degrades_or_with_critical_makes_unhealthy() {
        let problem = "Operator health check http://127.0.0.1:8081/healthz failed: connection refused";
        let registration = Problem::degraded(Rule::Registration, "not registered");
        let watch = Problem::degraded(Rule::Operator, problem);
        let v = evaluate_health(&[registration.clone(), watch]);
        assert_eq!(v, Verdict { health: Health::Degraded, error: Some(problem.into()) });
        let critical = Problem::unhealthy(Rule::Operator, problem);
        let v = evaluate_health(&[registration.clone(), critical.clone()]);
        assert_eq!(v, Verdict { health: Health::Unhealthy, error: Some(problem.into()) });
        // A failing write still wins: it is what is wrong with the status itself.
        let v = evaluate_health(&[registration, critical, Problem::status_write("timed out")]);
        assert_eq!(v.error.as_deref(), Some("Failed to write status ConfigMap: timed out"));
    }

    #[test]
    fn a_failing_check_of_a_crash_looping_operator_says_the_container_first() {
        let check = "Operator health check http://127.0.0.1:8081/healthz failed: connection refused";
        let container =
            "Container manager is CrashLoopBackOff: back-off 10s (1 restart; last terminated Error, exit code 1)";
        let v =
            evaluate_health(&[Problem::degraded(Rule::Operator, check), Problem::degraded(Rule::Container, container)]);
        assert_eq!(v, Verdict { health: Health::Degraded, error: Some(format!("{container}; {check}")) });
        // A critical check keeps its health; the container alone is degraded.
        let v = evaluate_health(&[
            Problem::degraded(Rule::Container, container),
            Problem::unhealthy(Rule::Operator, check),
        ]);
        assert_eq!(v, Verdict { health: Health::Unhealthy, error: Some(format!("{container}; {check}")) });
        let v = evaluate_health(&[Problem::degraded(Rule::Container, container)]);
        assert_eq!(v.error.as_deref(), Some(container));
        // Rules 1 and 2 still say only themselves.
        let v = evaluate_health(&[Problem::degraded(Rule::Container, container), Problem::status_write("timed out")]);
        assert_eq!(v.error.as_deref(), Some("Failed to write status ConfigMap: timed out"));
    }

    #[test]
    fn among_equal_rules_the_first_given_wins() {
        let v = evaluate_health(&[Problem::degraded(Rule::Publishing, "a"), Problem::degraded(Rule::Publishing, "b")]);
        assert_eq!(v.error.as_deref(), Some("a"));
    }

    #[test]
    fn semver_accepts_the_spec_and_rejects_lookalikes() {
        for ok in ["1.0.0", "0.1.0", "10.20.30", "1.0.0-rc.1", "1.0.0+build.5", "1.0.0-alpha-1+x"] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in ["", "1", "1.0", "v1.0.0", "1.0.0.0", "01.0.0", "1.0.0-", "1.0.0+", "1.0.0-a..b", "1.0.x", " 1.0.0"]
        {
            assert!(!is_semver(bad), "{bad}");
        }
    }
}
