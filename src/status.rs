//! The kube9 operator-status document and the health rules that fill it.
//!
//! [`StatusDocument`] serialises to exactly the JSON of the kube9 spec (field
//! names, order, enum spellings, `error: null` when healthy, `clusterId`
//! omitted when unset). [`evaluate_health`] is the spec's ordered rule list as
//! a pure function of [`HealthInputs`]: no I/O, no clock.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Readers call a status older than 5 minutes stale: a longer interval would
/// make every healthy status look stale between writes.
pub const MAX_INTERVAL: Duration = Duration::from_secs(240);
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// `mode`: whether an API key is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No API key: the free, self-contained mode.
    Operated,
    /// An API key is configured.
    Enabled,
}

/// `tier`: `pro` only when an API key is set and the operator is registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Free,
    Pro,
}

/// `health`, ordered from best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    Healthy,
    Degraded,
    Unhealthy,
}

impl Health {
    pub const ALL: [Health; 3] = [Health::Healthy, Health::Degraded, Health::Unhealthy];

    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Unhealthy => "unhealthy",
        }
    }
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Operated => "operated",
            Mode::Enabled => "enabled",
        }
    }
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Pro => "pro",
        }
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
pub struct StatusDocument {
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
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a struct of strings and enums always serialises")
    }

    /// The kube9 spec's own example (free tier), for tests.
    #[cfg(test)]
    pub fn example() -> StatusDocument {
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

/// Everything the health rules look at. Each `Option<&str>` is the reason
/// text of a problem, `None` when there is none.
#[derive(Clone, Copy, Debug, Default)]
pub struct HealthInputs<'a> {
    /// The last write of the status ConfigMap failed (rule 1).
    pub status_write_error: Option<&'a str>,
    /// Another published resource (the OperatorCondition, the
    /// ClusterOperator) cannot be written: `degraded`, since the status
    /// ConfigMap, the primary contract, still is.
    pub sink_problem: Option<&'a str>,
    /// The operator's own resources cannot be probed, or an `Important`
    /// expression holds: `degraded`, with the reason.
    pub resources_problem: Option<&'a str>,
    /// The configuration, as re-read at run time, is invalid (rule 2).
    pub config_error: Option<&'a str>,
    /// The operator itself is not well: a watched health URL fails or its
    /// heartbeat file is stale.
    pub operator_problem: Option<&'a str>,
    /// Whether that makes the status `unhealthy` (else `degraded`).
    pub operator_problem_critical: bool,
    /// An API key is configured (rule 3 applies only then).
    pub api_key_configured: bool,
    pub registered: bool,
    /// Consecutive failed registration attempts (rule 4).
    pub registration_failures: u32,
    /// Why registration last failed, when it did.
    pub registration_error: Option<&'a str>,
}

/// More than this many consecutive registration failures degrade health.
pub const REGISTRATION_FAILURES_TOLERATED: u32 = 3;

/// The health verdict and the reason that goes into `error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub health: Health,
    pub error: Option<String>,
}

/// The kube9 health rules, first match wins:
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
pub fn evaluate_health(inputs: &HealthInputs<'_>) -> Verdict {
    let unhealthy = |reason: String| Verdict { health: Health::Unhealthy, error: Some(reason) };
    let degraded = |reason: String| Verdict { health: Health::Degraded, error: Some(reason) };
    if let Some(e) = inputs.status_write_error {
        return unhealthy(format!("Failed to write status ConfigMap: {e}"));
    }
    if let Some(e) = inputs.config_error {
        return unhealthy(format!("Invalid configuration: {e}"));
    }
    if let Some(problem) = inputs.operator_problem {
        return match inputs.operator_problem_critical {
            true => unhealthy(problem.to_string()),
            false => degraded(problem.to_string()),
        };
    }
    if let Some(problem) = inputs.sink_problem.or(inputs.resources_problem) {
        return degraded(problem.to_string());
    }
    if inputs.api_key_configured && !inputs.registered {
        let reason = inputs.registration_error.unwrap_or("API key configured but the operator is not registered yet");
        return degraded(reason.to_string());
    }
    if inputs.registration_failures > REGISTRATION_FAILURES_TOLERATED {
        let reason = inputs.registration_error.unwrap_or("registration keeps failing");
        return degraded(format!("{} consecutive registration failures: {reason}", inputs.registration_failures));
    }
    Verdict { health: Health::Healthy, error: None }
}

/// Whether a string is a semantic version (`MAJOR.MINOR.PATCH`, optional
/// `-prerelease` and `+build`), as the spec's `version` field requires.
pub fn is_semver(v: &str) -> bool {
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
        let v = evaluate_health(&HealthInputs::default());
        assert_eq!(v, Verdict { health: Health::Healthy, error: None });
    }

    #[test]
    fn rule_1_failed_status_write_is_unhealthy_and_wins() {
        let v = evaluate_health(&HealthInputs {
            status_write_error: Some("connection refused"),
            config_error: Some("bad"),
            api_key_configured: true,
            registration_failures: 9,
            ..Default::default()
        });
        assert_eq!(v.health, Health::Unhealthy);
        assert_eq!(v.error.as_deref(), Some("Failed to write status ConfigMap: connection refused"));
    }

    #[test]
    fn other_sinks_and_the_operators_resources_degrade_with_their_reason() {
        let sink = "Failed to update OperatorCondition ops/op.v1: 403 Forbidden";
        let resources = "Attention needed for 1 resource: Foo ops/a: BadConnectivity";
        let v = evaluate_health(&HealthInputs {
            sink_problem: Some(sink),
            resources_problem: Some(resources),
            ..Default::default()
        });
        assert_eq!(v, Verdict { health: Health::Degraded, error: Some(sink.into()) });
        let v = evaluate_health(&HealthInputs {
            resources_problem: Some(resources),
            api_key_configured: true,
            ..Default::default()
        });
        assert_eq!(v, Verdict { health: Health::Degraded, error: Some(resources.into()) });
        // The operator being down says more.
        let v = evaluate_health(&HealthInputs {
            sink_problem: Some(sink),
            operator_problem: Some("Operator down"),
            ..Default::default()
        });
        assert_eq!(v.error.as_deref(), Some("Operator down"));
    }

    #[test]
    fn rule_2_invalid_configuration_is_unhealthy() {
        let v = evaluate_health(&HealthInputs {
            config_error: Some("API key file is empty"),
            api_key_configured: true,
            ..Default::default()
        });
        assert_eq!(v.health, Health::Unhealthy);
        assert_eq!(v.error.as_deref(), Some("Invalid configuration: API key file is empty"));
    }

    #[test]
    fn a_failing_operator_watch_degrades_or_with_critical_makes_unhealthy() {
        let problem = "Operator health check http://127.0.0.1:8081/healthz failed: connection refused";
        let inputs = HealthInputs { operator_problem: Some(problem), api_key_configured: true, ..Default::default() };
        assert_eq!(evaluate_health(&inputs), Verdict { health: Health::Degraded, error: Some(problem.into()) });
        let critical = HealthInputs { operator_problem_critical: true, ..inputs };
        assert_eq!(evaluate_health(&critical), Verdict { health: Health::Unhealthy, error: Some(problem.into()) });
        // A failing write still wins: it is what is wrong with the status itself.
        let writing = HealthInputs { status_write_error: Some("timed out"), ..critical };
        assert_eq!(evaluate_health(&writing).error.as_deref(), Some("Failed to write status ConfigMap: timed out"));
    }

    #[test]
    fn rule_3_key_without_registration_is_degraded() {
        let v = evaluate_health(&HealthInputs {
            api_key_configured: true,
            registration_error: Some("Failed to connect to kube9-server: connection refused"),
            registration_failures: 1,
            ..Default::default()
        });
        assert_eq!(v.health, Health::Degraded);
        assert_eq!(v.error.as_deref(), Some("Failed to connect to kube9-server: connection refused"));
    }

    #[test]
    fn rule_4_more_than_three_registration_failures_is_degraded() {
        let registered_but_failing = |n| {
            evaluate_health(&HealthInputs {
                api_key_configured: true,
                registered: true,
                registration_failures: n,
                registration_error: Some("HTTP 503"),
                ..Default::default()
            })
        };
        assert_eq!(registered_but_failing(3).health, Health::Healthy);
        let v = registered_but_failing(4);
        assert_eq!(v.health, Health::Degraded);
        assert_eq!(v.error.as_deref(), Some("4 consecutive registration failures: HTTP 503"));
    }

    #[test]
    fn no_key_means_registration_does_not_matter() {
        let v = evaluate_health(&HealthInputs { registered: false, ..Default::default() });
        assert_eq!(v.health, Health::Healthy);
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
