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
//!
//! And what the kube9 VS Code extension (1.34.1 and 1.38.0) shows, read from
//! its source: it looks for the ConfigMap in [`extension_namespaces`]; a
//! `health` of `degraded` or `unhealthy` is mode `degraded` too; 1.38.0
//! shows the legacy `enabled` as `operated`, 1.34.1 shows `enabled` only for
//! `mode: enabled, tier: pro, registered: true` and rejects a status without
//! `tier` or a boolean `registered`. [`Reading::mode`] is the most specific
//! of the two (1.34.1's when it accepts the status); [`Reading::extension`]
//! has each, [`Reading::reason`] says why.
//!
//! Whoever can write the ConfigMap chose its text: every string read from
//! it is sanitised (no control characters, at most 1 KiB) before it reaches
//! a terminal.

use crate::util::text::{MAX_FOREIGN, sanitize};
use crate::util::time::{format_rfc3339, parse_rfc3339, spoken};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::time::{Duration, SystemTime};

/// A status older than this is stale.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(300);

/// Where the extension looks for the status ConfigMap (by this name only)
/// when its `kube9.operatorNamespace` setting is unset, in this order.
pub(crate) const EXTENSION_NAMESPACES: [&str; 2] = ["kube9-system", "default"];

/// The ConfigMap name the extension reads.
pub(crate) const EXTENSION_CONFIGMAP: &str = "kube9-operator-status";

/// The namespaces the extension searches, in order: only the one its
/// `kube9.operatorNamespace` setting names when set (mirrored by
/// `--extension-namespace`), else [`EXTENSION_NAMESPACES`].
pub(crate) fn extension_namespaces(setting: Option<&str>) -> Vec<String> {
    match setting {
        Some(ns) => vec![ns.to_string()],
        None => EXTENSION_NAMESPACES.iter().map(|ns| ns.to_string()).collect(),
    }
}

/// The start-up warning for a status the extension will not find unless
/// each user sets `kube9.operatorNamespace`; `None` where it looks anyway,
/// or for another ConfigMap name (which it never reads: a deliberate choice).
pub(crate) fn placement_warning(namespace: &str, configmap: &str) -> Option<String> {
    if configmap != EXTENSION_CONFIGMAP || EXTENSION_NAMESPACES.contains(&namespace) {
        return None;
    }
    Some(format!(
        "The status ConfigMap {namespace}/{configmap} is outside kube9-system and default, where the kube9 \
         VS Code extension looks: it will show \"basic\" (no operator) unless each user sets \
         kube9.operatorNamespace to {namespace}. To be seen by everyone, write it into kube9-system \
         (--namespace kube9-system, with a Role there): see \"Where the ConfigMap must live\" in docs/install.md"
    ))
}

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
        ["basic", "operated", "enabled", "degraded"][self as usize]
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
    /// Why the mode is what it is, one line starting with the mode.
    pub reason: String,
    /// What each extension version shows.
    pub extension: ExtensionModes,
}

/// The mode each version of the kube9 VS Code extension shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExtensionModes {
    #[serde(rename = "1.38.0")]
    pub v1_38: ReaderMode,
    /// `None`: 1.34.1 rejects the status (no `tier`, or no boolean
    /// `registered`).
    #[serde(rename = "1.34.1")]
    pub v1_34: Option<ReaderMode>,
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
        return Ok(Reading {
            mode: ReaderMode::Basic,
            stale: false,
            age_seconds: None,
            status: None,
            reason: "basic: no status ConfigMap where the extension looks: no kube9 operator reports here".into(),
            extension: ExtensionModes { v1_38: ReaderMode::Basic, v1_34: Some(ReaderMode::Basic) },
        });
    };
    let v: Value = serde_json::from_str(raw).map_err(|e| ReaderError::NotJson(e.to_string()))?;
    if !v.is_object() {
        return Err(ReaderError::NotJson("it is not an object".into()));
    }
    let optional = |name: &str| v.get(name).and_then(Value::as_str).map(|s| sanitize(s, MAX_FOREIGN));
    let required = |name: &'static str| optional(name).ok_or(ReaderError::MissingField(name));
    let (mode, tier, version) = (required("mode")?, required("tier")?, required("version")?);
    let mode = if mode == "enabled" { "enabled" } else { "operated" };
    let tier = if tier == "pro" { "pro" } else { "free" };
    // The extension reads `health` as written; an unknown one is `degraded`.
    let raw_health = optional("health");
    let health = match raw_health.as_deref() {
        Some(h @ ("healthy" | "degraded" | "unhealthy")) => h.to_string(),
        _ => "degraded".to_string(),
    };
    let last_update = optional("lastUpdate");
    let age = last_update.as_deref().and_then(parse_rfc3339).map(|t| now.duration_since(t).unwrap_or(Duration::ZERO));
    let stale = age.is_none_or(|a| a > STALE_AFTER);
    let registered = v.get("registered").and_then(Value::as_bool);
    let status = PublishedStatus {
        mode: mode.into(),
        tier: tier.into(),
        version,
        health,
        last_update,
        registered: registered.unwrap_or(false),
        error: optional("error"),
        namespace: optional("namespace"),
        cluster_id: optional("clusterId"),
    };
    // Only these two degrade what the extension shows.
    let bad_health = matches!(raw_health.as_deref(), Some("degraded" | "unhealthy"));
    let v1_38 = if stale || bad_health { ReaderMode::Degraded } else { ReaderMode::Operated };
    let v1_34 = registered.map(|registered| match v1_38 {
        ReaderMode::Operated if mode == "enabled" && tier == "pro" && registered => ReaderMode::Enabled,
        m => m,
    });
    let extension = ExtensionModes { v1_38, v1_34 };
    let age_seconds = age.map(|a| a.as_secs());
    let reason = match v1_34.unwrap_or(v1_38) {
        ReaderMode::Degraded if stale => match age_seconds {
            Some(a) => format!(
                "degraded: the status is stale: last updated {} ago (more than 5 min)",
                spoken(Duration::from_secs(a))
            ),
            None => "degraded: the status has no valid lastUpdate, so it cannot be fresh".into(),
        },
        ReaderMode::Degraded => {
            let h = raw_health.as_deref().unwrap_or_default();
            match &status.error {
                Some(e) => format!("degraded: health is {h}: {e}"),
                None => format!("degraded: health is {h} (no error given)"),
            }
        }
        ReaderMode::Enabled => {
            "enabled: mode enabled, tier pro, registered (extension 1.34.1; 1.38.0 shows operated)".into()
        }
        _ => match raw_health.as_deref() {
            Some(h) => format!("operated: the status is fresh and health is {h}"),
            None => "operated: the status is fresh and gives no health".into(),
        },
    };
    Ok(Reading { mode: v1_34.unwrap_or(v1_38), stale, age_seconds, status: Some(status), reason, extension })
}

/// Where `get` found the ConfigMap (`None`: nowhere) among the namespaces
/// it searched, why the mode is what it is, and what each extension shows:
/// lines for the end of [`render_text`]'s output.
pub(crate) fn render_explanation(r: &Reading, searched: &[String], found: Option<&str>, why_there: &str) -> String {
    let mut out = match found {
        Some(ns) => format!("Found in:    {ns} ({why_there})\n"),
        None => format!("Found in:    nowhere (searched {}: {why_there})\n", searched.join(", ")),
    };
    out += &format!("Why:         {}\n", r.reason);
    let v1_34 = match r.extension.v1_34 {
        Some(m) => format!("1.34.1 shows {}", m.as_str()),
        None => "1.34.1 rejects the status (it requires tier and a boolean registered)".into(),
    };
    out += &format!("Extension:   1.38.0 shows {}; {v1_34}\n", r.extension.v1_38.as_str());
    out
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
    let version = if s.version == crate::status::UNKNOWN_VERSION {
        format!("unknown ({}: the operator's version was not given to opstatus)", s.version)
    } else {
        s.version.clone()
    };
    out += &format!("Tier:        {}\nVersion:     {version}\nRegistered:  {}\n", s.tier, s.registered);
    if let Some(id) = &s.cluster_id {
        out += &format!("Cluster ID:  {id}\n");
    }
    if let Some(ns) = &s.namespace {
        out += &format!("Namespace:   {ns}\n");
    }
    match (&s.last_update, r.age_seconds) {
        (Some(t), Some(age)) => out += &format!("Last update: {t} ({} ago)\n", spoken(Duration::from_secs(age))),
        (Some(t), None) => out += &format!("Last update: {t:?} (not a valid RFC 3339 time)\n"),
        (None, _) => out += "Last update: none\n",
    }
    if r.stale {
        let since = r.age_seconds.map_or("an unknown time".to_string(), |a| spoken(Duration::from_secs(a)));
        out += &format!(
            "Warning:     the operator has not reported for {since}: the status is stale (checked {})\n",
            format_rfc3339(now)
        );
    }
    out
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
    fn modes_read_as_serde_writes_them() {
        for m in [ReaderMode::Basic, ReaderMode::Operated, ReaderMode::Enabled, ReaderMode::Degraded] {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
    }

    #[test]
    fn missing_configmap_is_basic() {
        let r = interpret(None, now()).unwrap();
        assert_eq!((r.mode, r.stale, r.age_seconds, &r.status), (ReaderMode::Basic, false, None, &None));
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"mode": "basic", "stale": false, "ageSeconds": null, "status": null,
                   "reason": "basic: no status ConfigMap where the extension looks: no kube9 operator reports here",
                   "extension": {"1.38.0": "basic", "1.34.1": "basic"}})
        );
    }

    fn modes(r: &Reading) -> (ReaderMode, ReaderMode, Option<ReaderMode>) {
        (r.mode, r.extension.v1_38, r.extension.v1_34)
    }

    #[test]
    fn bad_health_is_degraded_as_the_extension_shows_it() {
        use ReaderMode::*;
        for (health, error, why) in [
            ("degraded", r#""watch failed: 503""#, "degraded: health is degraded: watch failed: 503"),
            ("unhealthy", r#""cannot write""#, "degraded: health is unhealthy: cannot write"),
            ("degraded", "null", "degraded: health is degraded (no error given)"),
        ] {
            let s = FRESH
                .replace(r#""health":"healthy""#, &format!(r#""health":"{health}""#))
                .replace(r#""error":null"#, &format!(r#""error":{error}"#));
            let r = interpret(Some(&s), now()).unwrap();
            assert_eq!((modes(&r), r.stale), ((Degraded, Degraded, Some(Degraded)), false), "{health}");
            assert_eq!(r.reason, why);
        }
        // Healthy, or a health the extension does not know: operated.
        let r = interpret(Some(FRESH), now()).unwrap();
        assert_eq!(
            (modes(&r), r.reason.as_str()),
            ((Operated, Operated, Some(Operated)), "operated: the status is fresh and health is healthy")
        );
        let odd = FRESH.replace(r#""health":"healthy""#, r#""health":"sparkling""#);
        assert_eq!(modes(&interpret(Some(&odd), now()).unwrap()), (Operated, Operated, Some(Operated)));
    }

    #[test]
    fn stale_wins_over_health_in_the_reason() {
        let s = FRESH.replace("2025-11-10T15:34:00Z", "2025-11-10T15:28:20Z").replace("healthy", "unhealthy");
        let r = interpret(Some(&s), now()).unwrap();
        assert_eq!(r.mode, ReaderMode::Degraded);
        assert_eq!(r.reason, "degraded: the status is stale: last updated 6 min ago (more than 5 min)");
        let none = FRESH.replace(r#""lastUpdate":"2025-11-10T15:34:00Z","#, "");
        assert_eq!(
            interpret(Some(&none), now()).unwrap().reason,
            "degraded: the status has no valid lastUpdate, so it cannot be fresh"
        );
    }

    #[test]
    fn enabled_only_for_pro_and_registered_and_only_in_1_34_1() {
        use ReaderMode::*;
        let pro = |tier: &str, registered: &str| {
            FRESH
                .replace(r#""mode":"operated","tier":"free""#, &format!(r#""mode":"enabled","tier":"{tier}""#))
                .replace(r#""registered":false"#, registered)
        };
        let r = interpret(Some(&pro("pro", r#""registered":true"#)), now()).unwrap();
        assert_eq!(modes(&r), (Enabled, Operated, Some(Enabled)));
        assert_eq!(r.reason, "enabled: mode enabled, tier pro, registered (extension 1.34.1; 1.38.0 shows operated)");
        assert_eq!(serde_json::to_value(r.extension).unwrap(), json!({"1.38.0": "operated", "1.34.1": "enabled"}));
        for (tier, registered) in [("free", r#""registered":true"#), ("pro", r#""registered":false"#)] {
            let r = interpret(Some(&pro(tier, registered)), now()).unwrap();
            assert_eq!(modes(&r), (Operated, Operated, Some(Operated)), "{tier} {registered}");
        }
        // 1.34.1 rejects a status without a boolean `registered`.
        for registered in [r#""registered":"yes""#, r#""x":1"#] {
            let r = interpret(Some(&pro("pro", registered)), now()).unwrap();
            assert_eq!(modes(&r), (Operated, Operated, None), "{registered}");
        }
        let stale = pro("pro", r#""registered":true"#).replace("2025-11-10T15:34:00Z", "2025-11-10T15:00:00Z");
        assert_eq!(modes(&interpret(Some(&stale), now()).unwrap()), (Degraded, Degraded, Some(Degraded)));
    }

    #[test]
    fn the_extension_searches_its_setting_else_kube9_system_then_default() {
        assert_eq!(extension_namespaces(None), ["kube9-system", "default"]);
        assert_eq!(extension_namespaces(Some("ops")), ["ops"]);
    }

    #[test]
    fn warns_only_for_the_extension_s_configmap_outside_where_it_looks() {
        let w = placement_warning("my-operator-system", "kube9-operator-status").unwrap();
        assert!(w.contains("my-operator-system/kube9-operator-status is outside kube9-system and default"), "{w}");
        assert!(w.contains("unless each user sets kube9.operatorNamespace to my-operator-system"), "{w}");
        assert!(w.contains("docs/install.md"), "{w}");
        assert_eq!(placement_warning("kube9-system", "kube9-operator-status"), None);
        assert_eq!(placement_warning("default", "kube9-operator-status"), None);
        assert_eq!(placement_warning("my-operator-system", "my-status"), None);
    }

    #[test]
    fn the_explanation_says_where_and_why() {
        let r = interpret(Some(FRESH), now()).unwrap();
        let searched = extension_namespaces(None);
        assert_eq!(
            render_explanation(&r, &searched, Some("default"), "where the extension looks"),
            "Found in:    default (where the extension looks)\n\
             Why:         operated: the status is fresh and health is healthy\n\
             Extension:   1.38.0 shows operated; 1.34.1 shows operated\n"
        );
        let basic = render_explanation(&interpret(None, now()).unwrap(), &searched, None, "the default");
        assert!(basic.starts_with("Found in:    nowhere (searched kube9-system, default: the default)\n"), "{basic}");
        let no_registered = FRESH.replace(r#""registered":false,"#, "");
        let r = interpret(Some(&no_registered), now()).unwrap();
        assert!(render_explanation(&r, &searched, Some("default"), "x").contains("1.34.1 rejects the status"));
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
        // As 1.34.1 shows it: only with tier pro and registered.
        let s = FRESH
            .replace(r#""mode":"operated","tier":"free""#, r#""mode":"enabled","tier":"pro""#)
            .replace(r#""registered":false"#, r#""registered":true"#);
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

    #[test]
    fn foreign_text_reaches_the_terminal_printable_and_bounded() {
        let hostile = json!({"mode": "operated", "tier": "free", "version": "1.0.0\u{1b}[8m", "health": "degraded",
            "lastUpdate": "2025-11-10T15:34:00Z", "error": format!("\u{1b}[2J\u{1b}[H\rall good {}", "x".repeat(4000)),
            "namespace": "ops\u{9b}31m"});
        let r = interpret(Some(&hostile.to_string()), now()).unwrap();
        let text = render_text(&r, "kube9-operator-status", "ops", now());
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        assert_eq!(text.lines().count(), 8, "{text}");
        assert!(text.contains("Error:        [2J [H all good xxx") && text.len() < 1300, "{}", text.len());
        assert!(text.contains("Version:     1.0.0 [8m\n") && text.contains("Namespace:   ops 31m\n"), "{text}");
    }
}
