//! The reader side: how kube9's clients (the VS Code extension) interpret a
//! published status, for `opstatus get`.
//!
//! Pure: [`interpret`] takes the `status` string (or its absence) and the
//! current time. Rules, from the kube9 spec:
//! - no ConfigMap → mode `basic` (no operator installed);
//! - `mode`, `tier` and `version` are required, else the status is invalid;
//! - unknown enum values fall back to the safe default (`operated`, `free`,
//!   and `degraded` for an unknown health: neither a false all-clear nor a
//!   false alarm); unknown fields are ignored;
//! - `lastUpdate` older than 5 minutes → stale → mode `degraded`. A missing
//!   or unparsable `lastUpdate` cannot prove freshness and counts as stale.

use crate::util::time::{format_rfc3339, parse_rfc3339};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::time::{Duration, SystemTime};

/// A status older than this is stale.
pub const STALE_AFTER: Duration = Duration::from_secs(300);

/// The mode a reader shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReaderMode {
    /// No operator status: no operator installed.
    Basic,
    Operated,
    Enabled,
    /// The status is stale: the operator has stopped reporting.
    Degraded,
}

impl ReaderMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReaderMode::Basic => "basic",
            ReaderMode::Operated => "operated",
            ReaderMode::Enabled => "enabled",
            ReaderMode::Degraded => "degraded",
        }
    }
}

/// The published status after normalisation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedStatus {
    pub mode: String,
    pub tier: String,
    pub version: String,
    pub health: String,
    pub last_update: Option<String>,
    pub registered: bool,
    pub error: Option<String>,
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
}

/// What a reader concludes: `opstatus get -o json` prints this.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading {
    pub mode: ReaderMode,
    pub stale: bool,
    /// Seconds since `lastUpdate`; `None` when there is no usable one.
    pub age_seconds: Option<u64>,
    pub status: Option<PublishedStatus>,
}

/// Why a published status cannot be interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReaderError {
    /// The ConfigMap exists but has no `status` key.
    NoStatusKey,
    /// The ConfigMap body itself is not a ConfigMap.
    NotAConfigMap(String),
    /// The `status` value is not a JSON object.
    NotJson(String),
    /// A required field is missing or not a string.
    MissingField(&'static str),
}

impl fmt::Display for ReaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReaderError::NoStatusKey => f.write_str("invalid status: the ConfigMap has no `status` key"),
            ReaderError::NotAConfigMap(e) => {
                write!(f, "the API server's answer is not a ConfigMap: {e}")
            }
            ReaderError::NotJson(e) => write!(f, "invalid status: the `status` key is not a JSON object ({e})"),
            ReaderError::MissingField(name) => {
                write!(f, "invalid status: the required field `{name}` is missing or not a string")
            }
        }
    }
}

impl std::error::Error for ReaderError {}

/// Extracts `data.status` from a ConfigMap's JSON.
pub fn status_of_configmap(body: &[u8]) -> Result<String, ReaderError> {
    let cm: Value = serde_json::from_slice(body).map_err(|e| ReaderError::NotAConfigMap(e.to_string()))?;
    if cm.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
        return Err(ReaderError::NotAConfigMap("its kind is not ConfigMap".into()));
    }
    cm.get("data")
        .and_then(|d| d.get("status"))
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or(ReaderError::NoStatusKey)
}

/// Interprets the `status` value; `None` means the ConfigMap does not exist.
pub fn interpret(status: Option<&str>, now: SystemTime) -> Result<Reading, ReaderError> {
    let Some(raw) = status else {
        return Ok(Reading { mode: ReaderMode::Basic, stale: false, age_seconds: None, status: None });
    };
    let v: Value = serde_json::from_str(raw).map_err(|e| ReaderError::NotJson(e.to_string()))?;
    if !v.is_object() {
        return Err(ReaderError::NotJson("it is not an object".into()));
    }
    let required = |name: &'static str| {
        v.get(name).and_then(Value::as_str).map(String::from).ok_or(ReaderError::MissingField(name))
    };
    let optional = |name: &str| v.get(name).and_then(Value::as_str).map(String::from);
    let (mode, tier, version) = (required("mode")?, required("tier")?, required("version")?);
    let mode = if mode == "enabled" { "enabled" } else { "operated" };
    let tier = if tier == "pro" { "pro" } else { "free" };
    let health = match optional("health").as_deref() {
        Some(h @ ("healthy" | "degraded" | "unhealthy")) => h.to_string(),
        _ => "degraded".to_string(),
    };
    let last_update = optional("lastUpdate");
    let age = last_update.as_deref().and_then(parse_rfc3339).map(|t| now.duration_since(t).unwrap_or(Duration::ZERO));
    let stale = age.is_none_or(|a| a > STALE_AFTER);
    let status = PublishedStatus {
        mode: mode.into(),
        tier: tier.into(),
        version,
        health,
        last_update,
        registered: v.get("registered").and_then(Value::as_bool).unwrap_or(false),
        error: optional("error"),
        namespace: optional("namespace"),
        cluster_id: optional("clusterId"),
    };
    let reader_mode = match (stale, mode) {
        (true, _) => ReaderMode::Degraded,
        (false, "enabled") => ReaderMode::Enabled,
        _ => ReaderMode::Operated,
    };
    Ok(Reading { mode: reader_mode, stale, age_seconds: age.map(|a| a.as_secs()), status: Some(status) })
}

/// The reading for people, one fact a line.
pub fn render_text(r: &Reading, configmap: &str, namespace: &str, now: SystemTime) -> String {
    let Some(s) = &r.status else {
        return format!(
            "Mode:        basic\n             (no ConfigMap {configmap} in namespace {namespace}: no kube9 operator reports here)\n"
        );
    };
    let mut out = format!("Mode:        {}\n", r.mode.as_str());
    out += &format!("Health:      {}\n", s.health);
    if let Some(e) = &s.error {
        out += &format!("Error:       {e}\n");
    }
    out += &format!("Tier:        {}\nVersion:     {}\nRegistered:  {}\n", s.tier, s.version, s.registered);
    if let Some(id) = &s.cluster_id {
        out += &format!("Cluster ID:  {id}\n");
    }
    if let Some(ns) = &s.namespace {
        out += &format!("Namespace:   {ns}\n");
    }
    match (&s.last_update, r.age_seconds) {
        (Some(t), Some(age)) => out += &format!("Last update: {t} ({} ago)\n", human_age(age)),
        (Some(t), None) => out += &format!("Last update: {t:?} (not a valid RFC 3339 time)\n"),
        (None, _) => out += "Last update: none\n",
    }
    if r.stale {
        let since = r.age_seconds.map_or("an unknown time".to_string(), human_age);
        out += &format!(
            "Warning:     the operator has not reported for {since}: the status is stale (checked {})\n",
            format_rfc3339(now)
        );
    }
    out
}

fn human_age(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ => format!("{} h", secs / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> SystemTime {
        parse_rfc3339("2025-11-10T15:35:00Z").unwrap()
    }

    const FRESH: &str = r#"{"mode":"operated","tier":"free","version":"1.0.0","health":"healthy","lastUpdate":"2025-11-10T15:34:00Z","registered":false,"error":null,"namespace":"kube9-system"}"#;

    #[test]
    fn missing_configmap_is_basic() {
        let r = interpret(None, now()).unwrap();
        assert_eq!(r, Reading { mode: ReaderMode::Basic, stale: false, age_seconds: None, status: None });
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"mode": "basic", "stale": false, "ageSeconds": null, "status": null})
        );
    }

    #[test]
    fn fresh_operated_status() {
        let r = interpret(Some(FRESH), now()).unwrap();
        assert_eq!((r.mode, r.stale, r.age_seconds), (ReaderMode::Operated, false, Some(60)));
        assert_eq!(
            serde_json::to_value(&r).unwrap()["status"],
            json!({"mode":"operated","tier":"free","version":"1.0.0","health":"healthy","lastUpdate":"2025-11-10T15:34:00Z","registered":false,"error":null,"namespace":"kube9-system"})
        );
    }

    #[test]
    fn enabled_mode_when_fresh() {
        let s = FRESH.replace(r#""mode":"operated""#, r#""mode":"enabled""#);
        assert_eq!(interpret(Some(&s), now()).unwrap().mode, ReaderMode::Enabled);
    }

    #[test]
    fn older_than_five_minutes_is_stale_and_degraded() {
        let at = |t: &str| FRESH.replace("2025-11-10T15:34:00Z", t);
        let exactly_five = interpret(Some(&at("2025-11-10T15:30:00Z")), now()).unwrap();
        assert_eq!((exactly_five.mode, exactly_five.stale), (ReaderMode::Operated, false));
        let r = interpret(Some(&at("2025-11-10T15:29:59Z")), now()).unwrap();
        assert_eq!((r.mode, r.stale, r.age_seconds), (ReaderMode::Degraded, true, Some(301)));
        let text = render_text(&r, "cm", "ns", now());
        assert!(text.contains("has not reported for 5 min: the status is stale"), "{text}");
    }

    #[test]
    fn future_timestamps_are_fresh_with_zero_age() {
        let s = FRESH.replace("2025-11-10T15:34:00Z", "2025-11-10T15:40:00Z");
        let r = interpret(Some(&s), now()).unwrap();
        assert_eq!((r.mode, r.age_seconds), (ReaderMode::Operated, Some(0)));
    }

    #[test]
    fn missing_or_bad_last_update_counts_as_stale() {
        for s in [
            FRESH.replace(r#""lastUpdate":"2025-11-10T15:34:00Z","#, ""),
            FRESH.replace("2025-11-10T15:34:00Z", "yesterday"),
        ] {
            let r = interpret(Some(&s), now()).unwrap();
            assert_eq!((r.mode, r.stale, r.age_seconds), (ReaderMode::Degraded, true, None));
        }
    }

    #[test]
    fn unknown_enum_values_fall_back_and_unknown_fields_are_ignored() {
        let s = r#"{"mode":"turbo","tier":"platinum","version":"2.0.0","health":"sparkling","lastUpdate":"2025-11-10T15:34:00Z","futureField":{"x":1}}"#;
        let r = interpret(Some(s), now()).unwrap();
        let st = r.status.unwrap();
        assert_eq!(
            (r.mode, st.mode.as_str(), st.tier.as_str(), st.health.as_str()),
            (ReaderMode::Operated, "operated", "free", "degraded")
        );
        assert!(!st.registered);
    }

    #[test]
    fn missing_required_fields_are_errors() {
        for field in ["mode", "tier", "version"] {
            let mut v: Value = serde_json::from_str(FRESH).unwrap();
            v.as_object_mut().unwrap().remove(field);
            let e = interpret(Some(&v.to_string()), now()).unwrap_err();
            assert_eq!(e, ReaderError::MissingField(field));
            assert_eq!(
                e.to_string(),
                format!("invalid status: the required field `{field}` is missing or not a string")
            );
        }
        let e = interpret(Some(r#"{"mode":1,"tier":"free","version":"1.0.0"}"#), now()).unwrap_err();
        assert_eq!(e, ReaderError::MissingField("mode"));
    }

    #[test]
    fn garbage_is_a_clear_error() {
        for garbage in ["", "not json", "[1,2]", "\"str\"", "{\"mode\":", "\u{0}\u{1}"] {
            let e = interpret(Some(garbage), now()).unwrap_err();
            assert!(matches!(e, ReaderError::NotJson(_)), "{garbage:?}: {e}");
            assert!(e.to_string().starts_with("invalid status: the `status` key is not a JSON object"));
        }
    }

    #[test]
    fn extracts_the_status_key_from_a_configmap() {
        let cm = json!({"kind": "ConfigMap", "data": {"status": FRESH, "other": "x"}}).to_string();
        assert_eq!(status_of_configmap(cm.as_bytes()).unwrap(), FRESH);
        let no_key = json!({"kind": "ConfigMap", "data": {"other": "x"}}).to_string();
        assert_eq!(status_of_configmap(no_key.as_bytes()), Err(ReaderError::NoStatusKey));
        let no_data = json!({"kind": "ConfigMap"}).to_string();
        assert_eq!(status_of_configmap(no_data.as_bytes()), Err(ReaderError::NoStatusKey));
        assert!(matches!(status_of_configmap(b"<html>"), Err(ReaderError::NotAConfigMap(_))));
        assert!(matches!(status_of_configmap(br#"{"kind":"Secret"}"#), Err(ReaderError::NotAConfigMap(_))));
    }

    #[test]
    fn text_output_shows_the_facts() {
        let r = interpret(Some(FRESH), now()).unwrap();
        assert_eq!(
            render_text(&r, "kube9-operator-status", "kube9-system", now()),
            "Mode:        operated\nHealth:      healthy\nTier:        free\nVersion:     1.0.0\nRegistered:  false\n\
             Namespace:   kube9-system\nLast update: 2025-11-10T15:34:00Z (60 s ago)\n"
        );
        let basic = render_text(&interpret(None, now()).unwrap(), "kube9-operator-status", "ops", now());
        assert!(basic.starts_with("Mode:        basic\n") && basic.contains("namespace ops"), "{basic}");
    }
}
