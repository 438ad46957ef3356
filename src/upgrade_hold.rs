//! `Upgradeable` as the upgrade's gatekeepers read it, for `opstatus get`:
//! from an OLM `OperatorCondition` (`spec.conditions`, where opstatus
//! writes it and OLM reads it; an admin's `spec.overrides` wins) or an
//! OpenShift `ClusterOperator` (`status.conditions`). Answers "is my
//! upgrade held, by what, and since when" without a jsonpath.
//!
//! The parsing is pure (the object as read, and the clock); [`read`] does
//! the reads. Everything taken from an object is foreign text, sanitised
//! and bounded here before it reaches a terminal or JSON.

use crate::kube::Client;
use crate::kube::names::{check_dns_label, check_dns_subdomain};
use crate::sinks::{cluster_operator, operator_condition};
use crate::util::text::{MAX_FOREIGN, sanitize};
use crate::util::time::parse_rfc3339;
use serde::Serialize;
use serde_json::Value;
use std::time::SystemTime;

/// The longest object name kept (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The most OperatorConditions of one namespace shown (OLM makes one per
/// installed CSV: one or two during an upgrade).
pub(crate) const MAX_SHOWN: usize = 5;

/// One `Upgradeable` condition and where it was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hold {
    /// `OperatorCondition` or `ClusterOperator`.
    pub source: &'static str,
    /// `None` for the cluster-scoped ClusterOperator.
    pub namespace: Option<String>,
    pub name: String,
    /// The field the condition sits in.
    pub field: &'static str,
    pub status: String,
    pub reason: String,
    /// Who blocks and why: the resources, as the probes named them.
    pub message: String,
    /// `lastTransitionTime`: since when it has held.
    pub since: Option<String>,
    /// Seconds since `since`, at the read.
    pub held_seconds: Option<u64>,
    /// OLM's `spec.overrides` entry for `Upgradeable`, which OLM obeys
    /// instead of the condition.
    #[serde(rename = "override")]
    pub override_status: Option<String>,
}

/// The `Upgradeable` of an OperatorCondition, if it carries one.
pub(crate) fn from_operator_condition(object: &Value, now: SystemTime) -> Option<Hold> {
    let condition = upgradeable(&object["spec"]["conditions"])?;
    let overridden = upgradeable(&object["spec"]["overrides"]).map(|o| text(&o["status"], 16));
    let mut hold = hold("OperatorCondition", object, "spec.conditions", condition, now);
    hold.override_status = overridden;
    Some(hold)
}

/// The `Upgradeable` of a ClusterOperator, if it carries one.
pub(crate) fn from_cluster_operator(object: &Value, now: SystemTime) -> Option<Hold> {
    let condition = upgradeable(&object["status"]["conditions"])?;
    Some(hold("ClusterOperator", object, "status.conditions", condition, now))
}

fn upgradeable(conditions: &Value) -> Option<&Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == "Upgradeable")
}

fn text(value: &Value, max: usize) -> String {
    sanitize(value.as_str().unwrap_or(""), max)
}

fn hold(source: &'static str, object: &Value, field: &'static str, condition: &Value, now: SystemTime) -> Hold {
    let since = condition["lastTransitionTime"].as_str().and_then(|t| parse_rfc3339(t).map(|at| (t, at)));
    let held_seconds = since.map(|(_, at)| now.duration_since(at).map(|d| d.as_secs()).unwrap_or(0));
    let namespace = object["metadata"]["namespace"].as_str().map(|n| sanitize(n, MAX_NAME));
    Hold {
        source,
        namespace,
        name: text(&object["metadata"]["name"], MAX_NAME),
        field,
        status: text(&condition["status"], 16),
        reason: text(&condition["reason"], MAX_NAME),
        message: text(&condition["message"], MAX_FOREIGN),
        since: since.map(|(t, _)| sanitize(t, 64)),
        held_seconds,
        override_status: None,
    }
}

/// The `Upgradeable` conditions of an OperatorCondition list, at most
/// [`MAX_SHOWN`].
pub(crate) fn from_operator_condition_list(list: &Value, now: SystemTime) -> Vec<Hold> {
    let items = list["items"].as_array().map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|o| from_operator_condition(o, now)).take(MAX_SHOWN).collect()
}

/// Where `get` looks: the OperatorCondition `condition` names in
/// `namespace` (the operator's), else every OperatorCondition there; and
/// the ClusterOperator `cluster_operator` names. What was found, and one
/// sentence for each read that failed; an API that is not served (no OLM,
/// not OpenShift) is no failure.
pub(crate) fn read(
    client: &mut Client,
    namespace: Option<&str>,
    condition: Option<&str>,
    cluster_operator: Option<&str>,
    now: SystemTime,
) -> (Vec<Hold>, Vec<String>) {
    let (mut holds, mut not_read) = (Vec::new(), Vec::new());
    let parse = |body: Vec<u8>| serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    // The namespace may come from the published status: checked before it
    // reaches a URL.
    match namespace.filter(|ns| check_dns_label(ns).is_ok()) {
        Some(ns) => {
            let base = format!("{}/namespaces/{ns}/operatorconditions", operator_condition::API);
            let (path, what) = match condition.filter(|n| check_dns_subdomain(n).is_ok()) {
                Some(name) => (format!("{base}/{name}"), format!("OperatorCondition {ns}/{name}")),
                None => (format!("{base}?limit=50"), format!("the OperatorConditions in {ns}")),
            };
            match client.get_path(&path, &format!("get {what}")) {
                Ok(Some(body)) if condition.is_some() => holds.extend(from_operator_condition(&parse(body), now)),
                Ok(Some(body)) => holds.extend(from_operator_condition_list(&parse(body), now)),
                Ok(None) if condition.is_some() => not_read.push(format!("{what}: not found")),
                Ok(None) => {}
                // Refused before the server looks for the resource: said
                // only where OLM's API is served (discovery is open to all).
                Err(e) if condition.is_none() && e.code() == Some(403) && !served(client) => {}
                Err(e) => not_read.push(format!("{what}: {}", sanitize(&e.to_string(), MAX_FOREIGN))),
            }
        }
        None if condition.is_some() => not_read.push("the OperatorCondition: no operator namespace known".into()),
        None => {}
    }
    if let Some(name) = cluster_operator.filter(|n| check_dns_subdomain(n).is_ok()) {
        let path = format!("{}/clusteroperators/{name}", cluster_operator::API);
        match client.get_path(&path, &format!("get ClusterOperator {name}")) {
            Ok(Some(body)) => holds.extend(from_cluster_operator(&parse(body), now)),
            Ok(None) => not_read.push(format!("ClusterOperator {name}: not found")),
            Err(e) => not_read.push(format!("ClusterOperator {name}: {}", sanitize(&e.to_string(), MAX_FOREIGN))),
        }
    }
    (holds, not_read)
}

/// Whether OLM's OperatorCondition API is served here.
fn served(client: &mut Client) -> bool {
    matches!(client.get_path(operator_condition::API, "discover the OperatorCondition API"), Ok(Some(_)))
}

/// The text lines `get` prints: what holds (or lets) the upgrade, why,
/// how long, and where it was read.
pub(crate) fn render_text(holds: &[Hold], not_read: &[String]) -> String {
    let mut out = String::new();
    for why in not_read {
        out += &format!("Upgradeable: not read: {why}\n");
    }
    for h in holds {
        out += &format!("Upgradeable: {}", h.status);
        if let Some(secs) = h.held_seconds {
            out += &format!(" for {}", crate::util::time::spoken(std::time::Duration::from_secs(secs)));
        }
        if let Some(since) = &h.since {
            out += &format!(" (since {since})");
        }
        match (h.reason.is_empty(), h.message.is_empty()) {
            (_, false) => out += &format!(": {}", h.message),
            (false, true) => out += &format!(": {}", h.reason),
            (true, true) => {}
        }
        out.push('\n');
        let at = match &h.namespace {
            Some(ns) => format!("{ns}/{}", h.name),
            None => h.name.clone(),
        };
        let reader =
            if h.source == "OperatorCondition" { "read by OLM" } else { "read by the cluster-version operator" };
        out += &format!("             from {} {at} ({}, {reader})\n", h.source, h.field);
        if let Some(o) = &h.override_status {
            out += &format!("             overridden: spec.overrides sets Upgradeable={o}, which OLM obeys instead\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn at(t: &str) -> SystemTime {
        parse_rfc3339(t).unwrap()
    }

    fn operator_condition(conditions: Value, overrides: Value) -> Value {
        json!({"metadata": {"name": "my-operator.v1.4.2", "namespace": "my-operator-system"},
               "spec": {"conditions": conditions, "overrides": overrides}})
    }

    #[test]
    fn a_held_upgrade_says_why_where_and_since_when() {
        let object = operator_condition(
            json!([{"type": "Upgradeable", "status": "False", "reason": "NotUpgradeable",
                    "message": "Upgrade blocked by 1 resource: Widget my-operator-system/w1: Migrating",
                    "lastTransitionTime": "2026-11-22T07:32:10Z"}]),
            Value::Null,
        );
        let now = at("2026-11-22T07:44:30Z");
        let hold = from_operator_condition(&object, now).unwrap();
        assert_eq!(hold.held_seconds, Some(740));
        assert_eq!(
            render_text(std::slice::from_ref(&hold), &[]),
            "Upgradeable: False for 12 min (since 2026-11-22T07:32:10Z): Upgrade blocked by 1 resource: Widget \
             my-operator-system/w1: Migrating\n             from OperatorCondition \
             my-operator-system/my-operator.v1.4.2 (spec.conditions, read by OLM)\n"
        );
        let json = serde_json::to_value(&hold).unwrap();
        assert_eq!(json["source"], "OperatorCondition");
        assert_eq!(json["heldSeconds"], 740);
        assert_eq!(json["override"], Value::Null);
        assert_eq!(json["message"], "Upgrade blocked by 1 resource: Widget my-operator-system/w1: Migrating");
    }

    #[test]
    fn an_override_is_said_because_olm_obeys_it() {
        let object = operator_condition(
            json!([{"type": "Upgradeable", "status": "False", "reason": "NotUpgradeable", "message": "m"}]),
            json!([{"type": "Upgradeable", "status": "True", "reason": "Admin", "message": "go"}]),
        );
        let hold = from_operator_condition(&object, SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(hold.override_status.as_deref(), Some("True"));
        assert!(render_text(&[hold], &[]).contains("overridden: spec.overrides sets Upgradeable=True"));
    }

    #[test]
    fn without_the_condition_there_is_nothing_to_show() {
        let object = operator_condition(json!([{"type": "Important", "status": "True"}]), Value::Null);
        assert_eq!(from_operator_condition(&object, SystemTime::UNIX_EPOCH), None);
        assert_eq!(from_operator_condition(&json!({"spec": "odd"}), SystemTime::UNIX_EPOCH), None);
        assert_eq!(from_operator_condition_list(&json!({"items": 3}), SystemTime::UNIX_EPOCH), vec![]);
    }

    #[test]
    fn a_cluster_operator_is_read_from_its_status() {
        let object = json!({"metadata": {"name": "demo"}, "status": {"conditions": [
            {"type": "Upgradeable", "status": "True", "reason": "AsExpected", "lastTransitionTime": "2026-11-22T07:00:00Z"}]}});
        let hold = from_cluster_operator(&object, at("2026-11-22T10:30:00Z")).unwrap();
        assert_eq!(
            render_text(&[hold], &[]),
            "Upgradeable: True for 3 h 30 min (since 2026-11-22T07:00:00Z): AsExpected\n             from \
             ClusterOperator demo (status.conditions, read by the cluster-version operator)\n"
        );
    }

    #[test]
    fn foreign_text_is_printable_and_bounded() {
        let long = "x".repeat(5000);
        let object = operator_condition(
            json!([{"type": "Upgradeable", "status": "False\u{1b}[2J", "message": format!("a\u{1b}[31mb\r\n{long}"),
                    "lastTransitionTime": "2099-01-01T00:00:00Z"}]),
            Value::Null,
        );
        let hold = from_operator_condition(&object, SystemTime::UNIX_EPOCH + Duration::from_secs(1)).unwrap();
        assert_eq!(hold.held_seconds, Some(0), "a future time is no negative age");
        let text = render_text(std::slice::from_ref(&hold), &[]);
        assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text}");
        assert!(hold.message.len() <= MAX_FOREIGN, "{}", hold.message.len());
    }
}
