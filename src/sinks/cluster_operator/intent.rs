//! What the ClusterOperator says, as pure functions of the tick: the
//! mapping table ([`Intent::new`]), the versions to report, the write onto
//! the object ([`apply`]), and the flag and version-file
//! grammars.

use crate::conditions::{self, Condition, Desired, Status};
use crate::sinks::rewrite::{Rewrite, raw};
use crate::status::{Health, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The name every ClusterOperator reports its own version under.
pub(crate) const OPERATOR: &str = "operator";

/// One entry of `status.versions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub name: String,
    pub version: String,
}

impl Version {
    pub fn new(name: &str, version: &str) -> Version {
        Version { name: name.into(), version: version.into() }
    }
}

/// One entry of `status.relatedObjects` (what `oc adm inspect` follows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelatedObject {
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl RelatedObject {
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> RelatedObject {
        RelatedObject { group: group.into(), resource: resource.into(), namespace: namespace.into(), name: name.into() }
    }
}

/// Parses `GROUP/RESOURCE/NAMESPACE/NAME` (`--related-object`); the group
/// is empty for the core group, the namespace for cluster-scoped objects,
/// the name for every object of the type (as library-go allows; `oc adm
/// inspect` collects them all): `/configmaps/ops/settings`,
/// `config.openshift.io/clusterversions//version`, `example.com/foos/ops/`.
pub(crate) fn parse_related_object(text: &str) -> Result<RelatedObject, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let [group, resource, namespace, name] = parts.as_slice() else {
        return Err("is not GROUP/RESOURCE/NAMESPACE/NAME (empty GROUP for the core group, \
                    empty NAMESPACE for cluster-scoped objects)"
            .into());
    };
    if !group.is_empty() {
        crate::kube::names::check_dns_subdomain(group).map_err(|why| format!("group {group:?}: {why}"))?;
    }
    crate::kube::names::check_dns_label(resource).map_err(|why| format!("resource {resource:?}: {why}"))?;
    if !namespace.is_empty() {
        crate::kube::names::check_dns_label(namespace).map_err(|why| format!("namespace {namespace:?}: {why}"))?;
    }
    if !name.is_empty() {
        crate::kube::names::check_dns_subdomain(name).map_err(|why| format!("name {name:?}: {why}"))?;
    }
    Ok(RelatedObject::new(group, resource, namespace, name))
}

/// Parses `NAME=VERSION` (`--operand-version`).
pub(crate) fn parse_operand_version(text: &str) -> Result<Version, String> {
    match text.split_once('=') {
        Some((name, version)) if !name.trim().is_empty() && !version.trim().is_empty() => {
            if name.trim() == OPERATOR {
                return Err("\"operator\" is set by --operator-version".into());
            }
            Ok(Version::new(name.trim(), version.trim()))
        }
        _ => Err("is not NAME=VERSION".into()),
    }
}

/// Parses the version file the operator writes once its new code runs:
/// one `NAME=VERSION` per line, or a bare version meaning `operator`;
/// blank lines and `#` comments are ignored.
pub(crate) fn parse_version_file(text: &str) -> Result<Vec<Version>, String> {
    let mut versions = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let version = match line.split_once('=') {
            Some((name, version)) => Version::new(name.trim(), version.trim()),
            None => Version::new(OPERATOR, line),
        };
        if version.name.is_empty() || version.version.is_empty() || version.version.contains(char::is_whitespace) {
            return Err(format!("line {}: {line:?} is not VERSION or NAME=VERSION", n + 1));
        }
        versions.push(version);
    }
    Ok(versions)
}

/// What feeds the conditions, from the agent's state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Signals<'a> {
    /// Why the operator is down (a watched URL fails, the heartbeat file is
    /// stale); `None` when it is up.
    pub operator_down: Option<&'a str>,
    /// Whether any watch is configured (otherwise "up" means "its pod runs").
    pub watched: bool,
    /// The health to publish, this sink's own failures left out.
    pub verdict: &'a Verdict,
    /// Whether the bad health has held for the inertia's window
    /// ([`crate::inertia`]).
    pub degraded: bool,
    /// The probes' `Upgradeable`, when probes are configured and could say;
    /// `Err(())` when they are configured but could not (keep what is there).
    pub upgradeable: Result<Option<&'a Desired>, ()>,
}

/// Everything a write depends on; equal intents need no write between
/// drift checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Intent {
    pub conditions: Vec<Desired>,
    /// The versions the flags name (`operator` first).
    pub targets: Vec<Version>,
    /// What the version file says runs; `None` without a version file
    /// (everything targeted runs).
    pub running: Option<Vec<Version>>,
    pub related: Vec<RelatedObject>,
}

impl Intent {
    pub(crate) fn new(
        signals: &Signals<'_>,
        targets: Vec<Version>,
        running: Option<Vec<Version>>,
        related: Vec<RelatedObject>,
    ) -> Intent {
        let mut conditions = Vec::with_capacity(4);
        conditions.push(match signals.operator_down {
            Some(why) => Desired::new("Available", Status::False, "OperatorDown", why),
            None if signals.watched => {
                Desired::new("Available", Status::True, "AsExpected", "The operator's health checks pass")
            }
            None => Desired::new("Available", Status::True, "AsExpected", "The operator's pod is running"),
        });
        let verdict = signals.verdict;
        conditions.push(match (signals.degraded, verdict.health, verdict.error.as_deref()) {
            (true, Health::Unhealthy, why) => {
                Desired::new("Degraded", Status::True, "OperatorUnhealthy", why.unwrap_or("The operator is unhealthy"))
            }
            (true, _, why) => {
                Desired::new("Degraded", Status::True, "OperatorDegraded", why.unwrap_or("The operator is degraded"))
            }
            (false, ..) => Desired::new("Degraded", Status::False, "AsExpected", "Nothing needs attention"),
        });
        let operator_target = targets.first().map_or("", |v| v.version.as_str());
        let rolling_out = running.as_ref().is_some_and(|running| targets.iter().any(|t| !running.contains(t)));
        conditions.push(if rolling_out {
            Desired::new("Progressing", Status::True, "RollingOut", format!("Working towards {operator_target}"))
        } else {
            Desired::new(
                "Progressing",
                Status::False,
                "AsExpected",
                format!("Version {operator_target} is deployed and running"),
            )
        });
        match signals.upgradeable {
            Ok(Some(from_probes)) => conditions.push(from_probes.clone()),
            Ok(None) => {
                conditions.push(Desired::new("Upgradeable", Status::True, "AsExpected", "Nothing blocks an upgrade"))
            }
            Err(()) => {}
        }
        Intent { conditions, targets, running, related }
    }

    /// The versions to report, given what the object reports now: a target
    /// once it runs, else the version reported before (if any).
    pub(crate) fn versions(&self, previous: &[Version]) -> Vec<Version> {
        self.targets
            .iter()
            .filter_map(|target| match &self.running {
                None => Some(target.clone()),
                Some(running) if running.contains(target) => Some(target.clone()),
                Some(_) => previous.iter().find(|p| p.name == target.name).cloned(),
            })
            .collect()
    }
}

/// Applies `intent` to a ClusterOperator as read (`body`, JSON) at `now`:
/// the object to write back, or `None` when nothing changed.
///
/// Only what opstatus reads is parsed: the conditions, versions and related
/// objects. Everything else (metadata, spec, `status.extension`, which an
/// operator may fill with megabytes) is carried through as the raw text it
/// was read as, so memory is the body twice, not a parsed tree of it.
///
/// Ownership: the conditions of the types opstatus sets, the versions it
/// names (by name) and the related objects it names (by group, resource,
/// namespace and name) are its own, listed first; every other entry, set
/// by the cluster-version operator or an admin, is kept as it was, after
/// them. An entry opstatus no longer names is not told from a foreign one:
/// it stays until removed by hand.
pub(crate) fn apply(body: &[u8], intent: &Intent, now: &str) -> Result<Option<Vec<u8>>, String> {
    let object = Rewrite::parse(body, "status", "ClusterOperator")?;
    let mut conditions: Vec<Condition> = object.field("conditions")?.unwrap_or_default();
    let versions: Vec<Value> = object.field("versions")?.unwrap_or_default();
    let related: Vec<Value> = object.field("relatedObjects")?.unwrap_or_default();
    let mut changed = conditions::set_all(&mut conditions, &intent.conditions, None, now);
    let mut set = Vec::new();
    // Versions by name (in the flags' order), related objects by all they say.
    let previous: Vec<Version> = versions.iter().filter_map(|v| serde_json::from_value(v.clone()).ok()).collect();
    let new_versions = merge(&intent.versions(&previous), &versions, |v| {
        intent.targets.iter().any(|t| v.get("name").and_then(Value::as_str) == Some(&t.name))
    });
    let new_related = merge(&intent.related, &related, |v| {
        serde_json::from_value::<RelatedObject>(v.clone()).is_ok_and(|r| intent.related.contains(&r))
    });
    for (key, old, new) in [("versions", versions, new_versions), ("relatedObjects", related, new_related)] {
        if old != new || !object.has(key) {
            set.push((key, raw(&new)));
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    set.push(("conditions", raw(&conditions)));
    Ok(Some(object.with(&set)))
}

/// The entries opstatus reports (`ours`), then every entry not `owned` by
/// it as it was.
fn merge<T: Serialize>(ours: &[T], existing: &[Value], owned: impl Fn(&Value) -> bool) -> Vec<Value> {
    let ours = ours.iter().map(|v| serde_json::to_value(v).expect("plain data serialises"));
    ours.chain(existing.iter().filter(|v| !owned(v)).cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// [`apply`] on a parsed object: whether it changed, the object updated.
    fn apply_to(object: &mut Value, intent: &Intent, now: &str) -> Result<bool, String> {
        let written = apply(&serde_json::to_vec(object).unwrap(), intent, now)?;
        if let Some(body) = &written {
            *object = serde_json::from_slice(body).unwrap();
        }
        Ok(written.is_some())
    }

    const T0: &str = "2026-11-22T10:00:00Z";
    const T1: &str = "2026-11-22T10:05:00Z";

    fn healthy() -> Verdict {
        Verdict { health: Health::Healthy, error: None }
    }

    fn signals(verdict: &Verdict) -> Signals<'_> {
        Signals { operator_down: None, watched: true, verdict, degraded: false, upgradeable: Ok(None) }
    }

    fn intent(s: &Signals<'_>, running: Option<Vec<Version>>) -> Intent {
        let targets = vec![Version::new(OPERATOR, "1.1.0"), Version::new("engine", "2.0.0")];
        Intent::new(s, targets, running, vec![RelatedObject::new("", "namespaces", "", "ops")])
    }

    fn condition<'a>(intent: &'a Intent, kind: &str) -> &'a Desired {
        intent.conditions.iter().find(|c| c.kind == kind).unwrap()
    }

    #[test]
    fn the_mapping_table() {
        let ok = healthy();
        let i = intent(&signals(&ok), None);
        let row = |kind| {
            let c = condition(&i, kind);
            (c.status, c.reason.as_str(), c.message.as_str())
        };
        assert_eq!(row("Available"), (Status::True, "AsExpected", "The operator's health checks pass"));
        assert_eq!(row("Degraded"), (Status::False, "AsExpected", "Nothing needs attention"));
        assert_eq!(row("Progressing"), (Status::False, "AsExpected", "Version 1.1.0 is deployed and running"));
        assert_eq!(row("Upgradeable"), (Status::True, "AsExpected", "Nothing blocks an upgrade"));

        let down_why = "Operator health check http://127.0.0.1:8081/healthz failed: connection refused";
        let sick = Verdict { health: Health::Degraded, error: Some(down_why.into()) };
        let down = Signals { operator_down: Some(down_why), degraded: true, ..signals(&sick) };
        let i = intent(&down, None);
        let available = condition(&i, "Available");
        assert_eq!(
            (available.status, available.reason.as_str(), available.message.as_str()),
            (Status::False, "OperatorDown", down_why)
        );
        let degraded = condition(&i, "Degraded");
        assert_eq!(
            (degraded.status, degraded.reason.as_str(), degraded.message.as_str()),
            (Status::True, "OperatorDegraded", down_why)
        );

        let dead = Verdict { health: Health::Unhealthy, error: Some("Invalid configuration: x".into()) };
        let i = intent(&Signals { degraded: true, ..signals(&dead) }, None);
        assert_eq!(condition(&i, "Degraded").reason, "OperatorUnhealthy");
        // Degraded health within the inertia: not Degraded yet, still Available.
        let i = intent(&Signals { degraded: false, ..signals(&dead) }, None);
        assert_eq!(
            (condition(&i, "Degraded").status, condition(&i, "Available").status),
            (Status::False, Status::True)
        );
        // No watches: "up" means the pod runs.
        let i = intent(&Signals { watched: false, ..signals(&ok) }, None);
        assert_eq!(condition(&i, "Available").message, "The operator's pod is running");
    }

    #[test]
    fn upgradeable_comes_from_the_probes_or_is_left_alone() {
        let ok = healthy();
        let blocked = Desired::new(
            "Upgradeable",
            Status::False,
            "NotUpgradeable",
            "Upgrade blocked by 1 resource: Foo a/b: Migrating",
        );
        let i = intent(&Signals { upgradeable: Ok(Some(&blocked)), ..signals(&ok) }, None);
        assert_eq!(condition(&i, "Upgradeable"), &blocked);
        let i = intent(&Signals { upgradeable: Err(()), ..signals(&ok) }, None);
        assert!(i.conditions.iter().all(|c| c.kind != "Upgradeable"));
    }

    #[test]
    fn messages_follow_the_conventions() {
        let ok = healthy();
        for running in [None, Some(vec![])] {
            for c in intent(&signals(&ok), running).conditions {
                assert!(conditions::is_sentence(&c.message) && conditions::is_reason(&c.reason), "{c:?}");
                if c.kind == "Progressing" {
                    let words = c.message.split_whitespace().count();
                    assert!((3..=10).contains(&words), "{}", c.message);
                }
            }
        }
    }

    #[test]
    fn inertia_holds_a_blip_back_and_recovers_at_once() {
        use crate::inertia::Inertia;
        use std::time::{Duration, Instant, SystemTime};
        let windows = crate::inertia::Windows { worse: Duration::from_secs(120), better: Duration::ZERO };
        let (mut inertia, t0) = (Inertia::new(windows), Instant::now());
        inertia.seed(false, SystemTime::UNIX_EPOCH, t0);
        let mut observe = |bad, s| inertia.observe(bad, t0 + Duration::from_secs(s), SystemTime::UNIX_EPOCH);
        assert!(!observe(true, 0));
        assert!(!observe(true, 119));
        assert!(!observe(false, 120), "the blip ended");
        assert!(!observe(true, 130), "a new blip starts over");
        assert!(observe(true, 250));
        assert!(!observe(false, 251));
        let mut at_once = Inertia::new(crate::inertia::Windows::default());
        at_once.seed(false, SystemTime::UNIX_EPOCH, t0);
        assert!(at_once.observe(true, t0, SystemTime::UNIX_EPOCH), "zero inertia reports at once");
    }

    #[test]
    fn versions_are_reported_only_once_they_run() {
        let ok = healthy();
        let old = vec![Version::new(OPERATOR, "1.0.0"), Version::new("engine", "1.9.0")];
        // No version file: what the flags say runs.
        let i = intent(&signals(&ok), None);
        assert_eq!(i.versions(&old), [Version::new(OPERATOR, "1.1.0"), Version::new("engine", "2.0.0")]);
        // The file says only the operator runs the new code: the operand
        // keeps its old version, and the rollout is in progress.
        let i = intent(&signals(&ok), Some(vec![Version::new(OPERATOR, "1.1.0")]));
        assert_eq!(i.versions(&old), [Version::new(OPERATOR, "1.1.0"), Version::new("engine", "1.9.0")]);
        let progressing = condition(&i, "Progressing");
        assert_eq!((progressing.status, progressing.message.as_str()), (Status::True, "Working towards 1.1.0"));
        // A first install reports nothing until it runs.
        let i = intent(&signals(&ok), Some(vec![]));
        assert_eq!(i.versions(&[]), []);
        // Everything runs: all new, not progressing.
        let all = Some(vec![Version::new("engine", "2.0.0"), Version::new(OPERATOR, "1.1.0")]);
        let i = intent(&signals(&ok), all);
        assert_eq!(i.versions(&old).len(), 2);
        assert_eq!(condition(&i, "Progressing").status, Status::False);
    }

    #[test]
    fn apply_keeps_foreign_conditions_and_moves_times_only_on_change() {
        let ok = healthy();
        let foreign = json!({"type": "EvaluationConditionsDetected", "status": "False",
                             "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "AsExpected", "message": "Set by CVO."});
        let mut object = json!({"metadata": {"name": "x", "resourceVersion": "7"}, "spec": {},
                                "status": {"conditions": [foreign.clone()], "extension": null}});
        let i = intent(&signals(&ok), None);
        assert_eq!(apply_to(&mut object, &i, T0), Ok(true));
        let status = &object["status"];
        assert_eq!(status["conditions"][0], foreign);
        assert_eq!(status["conditions"].as_array().unwrap().len(), 5);
        assert_eq!(
            status["versions"],
            json!([{"name": "operator", "version": "1.1.0"}, {"name": "engine", "version": "2.0.0"}])
        );
        assert_eq!(status["relatedObjects"], json!([{"group": "", "resource": "namespaces", "name": "ops"}]));
        assert_eq!(apply_to(&mut object, &i, T1), Ok(false), "nothing changed, nothing to send");
        let sick = Verdict { health: Health::Degraded, error: Some("Cannot list foos.example.com: 403".into()) };
        let i = intent(&Signals { degraded: true, ..signals(&sick) }, None);
        assert_eq!(apply_to(&mut object, &i, T1), Ok(true));
        let conditions: Vec<Condition> = serde_json::from_value(object["status"]["conditions"].clone()).unwrap();
        let times: Vec<(&str, &str)> =
            conditions.iter().map(|c| (c.kind.as_str(), c.last_transition_time.as_str())).collect();
        assert_eq!(
            times,
            [
                ("EvaluationConditionsDetected", "2020-01-01T00:00:00Z"),
                ("Available", T0),
                ("Degraded", T1),
                ("Progressing", T0),
                ("Upgradeable", T0)
            ]
        );
    }

    #[test]
    fn apply_keeps_foreign_versions_related_objects_and_the_rest_as_read() {
        let ok = healthy();
        let foreign_version = json!({"name": "kube-apiserver", "version": "1.20.2"});
        let foreign_related =
            json!({"group": "operator.openshift.io", "resource": "kubeapiservers", "name": "cluster"});
        let body = br#"{"metadata":{"name":"x","resourceVersion":"7"},"spec":{},
            "status":{"versions":[{"name":"kube-apiserver","version":"1.20.2"},{"name":"engine","version":"1.9.0"}],
                      "relatedObjects":[{"group":"operator.openshift.io","resource":"kubeapiservers","name":"cluster"},
                                        {"group":"","resource":"namespaces","name":"ops"}],
                      "extension":{"kept":[1.50, "as\u0020read"]}}}"#;
        let i = intent(&signals(&ok), None);
        let written = apply(body, &i, T0).unwrap().expect("a change");
        let text = String::from_utf8(written.clone()).unwrap();
        assert!(text.contains(r#""extension":{"kept":[1.50, "as\u0020read"]}"#), "not carried as read: {text}");
        let object: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(
            object["status"]["versions"],
            json!([{"name": "operator", "version": "1.1.0"}, {"name": "engine", "version": "2.0.0"}, foreign_version])
        );
        assert_eq!(
            object["status"]["relatedObjects"],
            json!([{"group": "", "resource": "namespaces", "name": "ops"}, foreign_related])
        );
        assert_eq!(object["metadata"], json!({"name": "x", "resourceVersion": "7"}));
        assert_eq!(apply(&written, &i, T1), Ok(None), "nothing changed, nothing to send");

        assert_eq!(apply(b"[1]", &i, T0), Err("the ClusterOperator is not a JSON object".into()));
        assert_eq!(apply(br#"{"status":[]}"#, &i, T0), Err("the ClusterOperator's status is not an object".into()));
        let bad = apply(br#"{"status":{"versions":{}}}"#, &i, T0).unwrap_err();
        assert!(bad.starts_with("status.versions are not as expected: "), "{bad}");
        assert!(apply(br#"{"status":null}"#, &i, T0).unwrap().is_some());
    }

    #[test]
    fn flag_and_file_formats() {
        assert_eq!(
            parse_related_object("/configmaps/ops/settings"),
            Ok(RelatedObject::new("", "configmaps", "ops", "settings"))
        );
        assert_eq!(
            parse_related_object("config.openshift.io/clusterversions//version"),
            Ok(RelatedObject::new("config.openshift.io", "clusterversions", "", "version"))
        );
        assert_eq!(
            parse_related_object("example.com/foos/ops/"),
            Ok(RelatedObject::new("example.com", "foos", "ops", "")),
            "every Foo in ops"
        );
        assert!(
            parse_related_object("configmaps/ops/settings")
                .unwrap_err()
                .starts_with("is not GROUP/RESOURCE/NAMESPACE/NAME")
        );
        assert_eq!(
            parse_related_object("/ConfigMaps/ops/x").unwrap_err(),
            "resource \"ConfigMaps\": only lowercase letters, digits and '-' are allowed"
        );
        assert_eq!(parse_operand_version("engine=2.0.0"), Ok(Version::new("engine", "2.0.0")));
        assert_eq!(parse_operand_version("engine"), Err("is not NAME=VERSION".into()));
        assert_eq!(parse_operand_version("operator=1.0.0"), Err("\"operator\" is set by --operator-version".into()));
        assert_eq!(
            parse_version_file("# written by the operator\n1.1.0\nengine = 2.0.0\n\n"),
            Ok(vec![Version::new(OPERATOR, "1.1.0"), Version::new("engine", "2.0.0")])
        );
        assert_eq!(
            parse_version_file("1.1.0 beta"),
            Err("line 1: \"1.1.0 beta\" is not VERSION or NAME=VERSION".into())
        );
        assert_eq!(parse_version_file("=1.0"), Err("line 1: \"=1.0\" is not VERSION or NAME=VERSION".into()));
    }
}
