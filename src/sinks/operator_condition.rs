//! OLM's `OperatorCondition` (`operators.coreos.com/v2`): the conditions
//! opstatus computes (`Upgradeable`, `Important`) in `spec.conditions`.
//!
//! OLM creates the object (named after the CSV, in the operator's
//! namespace) and grants the operator's service accounts `get, update,
//! patch` on that one name, nothing more; so the write is a read, a change
//! of only the condition types opstatus owns (with metav1.Condition
//! semantics, [`crate::conditions`]), and a `PUT` carrying the
//! `resourceVersion` read. Conditions the operator sets itself, and the
//! admin's `spec.overrides`, are left as they are, and so is the rest of
//! the object, carried as read ([`super::rewrite`]). Nothing is sent when
//! nothing changed. Under `--upgradeable-inertia` the first sync after a
//! start or a takeover reads the object first: the `Upgradeable` it says
//! holds as published, since when it says ([`super::upgradeable`]).

use super::rewrite::{Rewrite, raw};
use super::upgradeable::HeldUpgradeable;
use super::{Sink, Synced, Tick, read_modify_write};
use crate::conditions::{self, Condition, Desired};
use crate::inertia::{PendingChange, Windows};
use crate::kube::{Client, KubeError};
use crate::util::time::format_rfc3339;

pub(crate) const API: &str = "/apis/operators.coreos.com/v2";

/// Who grants the permission: OLM, to the operator's ServiceAccounts.
const GRANT: &str = "OLM grants get, update, patch on it to the operator's ServiceAccounts";

/// The OperatorCondition to write, and what was last written to it.
pub(crate) struct OperatorConditionSink {
    pub namespace: String,
    pub name: String,
    /// The conditions last written (or found already set): the same again
    /// needs no request until the next drift check. Forgotten on a failure.
    written: Option<Vec<Desired>>,
    /// Whether this cluster runs OLM v1 and not OLM's OperatorCondition
    /// API, asked once (two discovery reads) when a write is refused as
    /// not found or forbidden (the API server says 403 before it looks for
    /// the resource): `None` until then.
    olm_v1: Option<bool>,
    /// `Upgradeable` under inertia (`--upgradeable-inertia`).
    upgradeable: HeldUpgradeable,
}

impl OperatorConditionSink {
    pub(crate) fn new(namespace: String, name: String, upgradeable: Windows) -> OperatorConditionSink {
        let upgradeable = HeldUpgradeable::new(upgradeable);
        OperatorConditionSink { namespace, name, written: None, olm_v1: None, upgradeable }
    }

    fn path(&self) -> String {
        format!("{API}/namespaces/{}/operatorconditions/{}", self.namespace, self.name)
    }

    /// Brings the owned conditions to `desired` at `now` (RFC 3339); an
    /// update says what changed (for the log line). Errors are sentences
    /// for the status's reason.
    fn write(&mut self, client: &mut Client, desired: Vec<Desired>, now: &str) -> Result<Synced, String> {
        let action = format!("operatorconditions {:?} in namespace {:?}", self.name, self.namespace);
        let mut said = String::new();
        let result = read_modify_write(client, &self.path(), "", &action, GRANT, &mut |body| {
            Ok(set_conditions(body, &desired, now)?.map(|(body, what)| {
                said = what;
                body
            }))
        });
        let describe = self.describe();
        if let Err(e) = &result
            && matches!(e.code(), Some(403 | 404))
            && !e.is_missing_object()
            && self.olm_v1.is_none()
        {
            let served =
                |client: &mut Client, path| matches!(client.get_path(path, "discover an API group"), Ok(Some(_)));
            self.olm_v1 = Some(served(client, OLM_V1) && !served(client, API));
        }
        let olm_v1 = self.olm_v1 == Some(true);
        self.written = result.is_ok().then_some(desired);
        let written = result.map_err(|e| explain(&e, &describe, olm_v1))?;
        Ok(if written { Synced::Updated(said) } else { Synced::Unchanged })
    }
}

impl Sink for OperatorConditionSink {
    fn name(&self) -> &'static str {
        "operator_condition"
    }

    fn describe(&self) -> String {
        format!("OperatorCondition {}/{}", self.namespace, self.name)
    }

    /// The probes' `Upgradeable` and `Important`, when they can be said.
    fn sync(&mut self, client: &mut Client, tick: &Tick<'_>) -> Result<Synced, String> {
        let Some(outcome) = &tick.observation.probes else { return Ok(Synced::Skipped) };
        if self.upgradeable.needs_reading_back() {
            let (path, action) =
                (self.path(), format!("get operatorconditions {:?} in namespace {:?}", self.name, self.namespace));
            let conditions = super::read_conditions(client, ("OperatorCondition", &path, &action), "spec", GRANT)
                .map_err(|e| explain(&e, &self.describe(), false))?;
            self.upgradeable.read_back(&conditions, tick.now);
        }
        let upgradeable =
            outcome.upgradeable.as_ref().map(|u| self.upgradeable.publish(u, tick.now, tick.wall).clone());
        let desired: Vec<Desired> = upgradeable.into_iter().chain(outcome.important.clone()).collect();
        if desired.is_empty() || (self.written.as_ref() == Some(&desired) && !tick.drift_check) {
            return Ok(Synced::Skipped);
        }
        self.write(client, desired, &format_rfc3339(tick.wall))
    }

    fn worst_case(&self) -> std::time::Duration {
        super::read_modify_write_bound()
    }

    fn pending(&self) -> Vec<PendingChange> {
        self.upgradeable.pending(self.describe()).into_iter().collect()
    }

    fn stand_by(&mut self) {
        self.written = None;
        self.upgradeable.forget();
    }

    fn upgradeable(&self) -> Option<&Desired> {
        self.upgradeable.last()
    }
}

/// OLM v1's API group (ClusterExtension): served where OLM v1 runs.
const OLM_V1: &str = "/apis/olm.operatorframework.io";

/// An error as the status's reason says it.
fn explain(e: &KubeError, what: &str, olm_v1: bool) -> String {
    match e.code() {
        Some(404) if e.is_missing_object() => format!(
            "{what} does not exist: OLM creates it with the operator's CSV \
             (is OPERATOR_CONDITION_NAME right?)"
        ),
        Some(403 | 404) if olm_v1 => "The OperatorCondition API (operators.coreos.com/v2) is not served, but OLM v1's \
                                (olm.operatorframework.io) is: OLM v1 has no OperatorCondition; there, readiness is \
                                what holds an upgrade back (leave out --operator-condition)"
            .into(),
        Some(404) => "The OperatorCondition API (operators.coreos.com/v2) is not served: is OLM installed?".into(),
        _ => format!("Failed to update {what}: {e}"),
    }
}

/// Sets `desired` in the object's `spec.conditions` (`body` as read); when
/// that changed them, the object to write and what changed ([`changes`]).
pub(crate) fn set_conditions(body: &[u8], desired: &[Desired], now: &str) -> Result<Option<(Vec<u8>, String)>, String> {
    let object = Rewrite::parse(body, "spec", "OperatorCondition")?;
    let mut list: Vec<Condition> = object.field("conditions")?.unwrap_or_default();
    let said = changes(&list, desired);
    // OLM stamps observedGeneration when it copies spec.conditions into
    // status; writing one here would only be our own write's stale number.
    if !conditions::set_all(&mut list, desired, None, now) {
        return Ok(None);
    }
    Ok(Some((object.with(&[("conditions", raw(&list))]), said)))
}

/// What writing `desired` over `before` changes, for the log line: each
/// condition that changes, with its status and what was different
/// (`Upgradeable=False (was True)`, `Upgradeable=False, new message:
/// "..."`), so a line that repeats says why.
fn changes(before: &[Condition], desired: &[Desired]) -> String {
    let text = |s: &str| crate::util::text::sanitize(s, 256);
    let said: Vec<String> = desired
        .iter()
        .filter_map(|d| {
            let now = format!("{}={}", d.kind, d.status.as_str());
            let Some(was) = before.iter().find(|c| c.kind == d.kind) else { return Some(format!("{now} (new)")) };
            Some(if was.status != d.status {
                format!("{now} (was {})", was.status.as_str())
            } else if was.reason != d.reason {
                format!("{now}, reason {} (was {})", text(&d.reason), text(&was.reason))
            } else if was.message != d.message {
                format!("{now}, new message: {:?}", text(&d.message))
            } else {
                return None;
            })
        })
        .collect();
    said.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_api_is_said_plainly_and_olm_v1_by_name() {
        let not_served = crate::kube::from_response(404, b"404 page not found", "get operatorconditions", None);
        assert_eq!(
            explain(&not_served, "OperatorCondition ops/demo", false),
            "The OperatorCondition API (operators.coreos.com/v2) is not served: is OLM installed?"
        );
        let forbidden = crate::kube::from_response(403, b"{}", "get operatorconditions", None);
        assert!(explain(&forbidden, "OperatorCondition ops/demo", true).contains("OLM v1 has no OperatorCondition"));
        let said = explain(&not_served, "OperatorCondition ops/demo", true);
        assert!(said.contains("but OLM v1's (olm.operatorframework.io) is: OLM v1 has no OperatorCondition"), "{said}");
        assert!(said.contains("readiness is what holds an upgrade back"), "{said}");
    }
    use crate::conditions::Status;
    use serde_json::{Value, json};

    const NOW: &str = "2026-11-22T10:00:00Z";

    /// [`set_conditions`] on a parsed object, updated when it changed.
    fn set_conditions_on(object: &mut Value, desired: &[Desired], now: &str) -> Result<Option<String>, String> {
        let written = set_conditions(&serde_json::to_vec(object).unwrap(), desired, now)?;
        Ok(written.map(|(body, said)| {
            *object = serde_json::from_slice(&body).unwrap();
            said
        }))
    }

    fn upgradeable(status: Status) -> Desired {
        Desired::new("Upgradeable", status, "AsExpected", "No resource blocks an upgrade (1 checked)")
    }

    #[test]
    fn keeps_the_operators_conditions_and_the_overrides() {
        let theirs = json!({"type": "Ready", "status": "True", "reason": "Up", "message": "Mine.",
                            "lastTransitionTime": "2020-01-01T00:00:00Z", "observedGeneration": 4});
        let overrides = json!([{"type": "Upgradeable", "status": "True", "reason": "Admin", "message": "Go.",
                                "lastTransitionTime": "2020-01-01T00:00:00Z"}]);
        let mut object = json!({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "op.v1", "namespace": "ops", "resourceVersion": "42"},
            "spec": {"deployments": ["op"], "conditions": [theirs.clone()], "overrides": overrides.clone()},
        });
        let said = set_conditions_on(&mut object, &[upgradeable(Status::False)], NOW);
        assert_eq!(said, Ok(Some("Upgradeable=False (new)".into())));
        assert_eq!(object["spec"]["conditions"][0], theirs);
        assert_eq!(object["spec"]["conditions"][1]["type"], "Upgradeable");
        assert_eq!(object["spec"]["conditions"][1]["lastTransitionTime"], NOW);
        assert_eq!(object["spec"]["overrides"], overrides);
        assert_eq!(object["metadata"]["resourceVersion"], "42", "the write carries what was read");
        // The same again: nothing to send.
        assert_eq!(set_conditions_on(&mut object, &[upgradeable(Status::False)], "2026-11-22T11:00:00Z"), Ok(None));
    }

    /// A write that changes only the message says so: the same line three
    /// times ("updated: Upgradeable=False") told nothing.
    #[test]
    fn each_update_says_what_changed() {
        let mut object = json!({"spec": {}});
        let blocked = |message: &str| Desired::new("Upgradeable", Status::False, "Migrating", message);
        let mut write = |d: Desired| set_conditions_on(&mut object, &[d], NOW).unwrap();
        assert_eq!(write(upgradeable(Status::True)).as_deref(), Some("Upgradeable=True (new)"));
        assert_eq!(write(blocked("1 Foo is migrating")).as_deref(), Some("Upgradeable=False (was True)"));
        assert_eq!(
            write(blocked("2 Foos are migrating")).as_deref(),
            Some("Upgradeable=False, new message: \"2 Foos are migrating\"")
        );
        let other_reason = Desired::new("Upgradeable", Status::False, "Blocked", "2 Foos are migrating");
        assert_eq!(write(other_reason).as_deref(), Some("Upgradeable=False, reason Blocked (was Migrating)"));
        assert_eq!(write(Desired::new("Upgradeable", Status::False, "Blocked", "2 Foos are migrating")), None);
    }

    #[test]
    fn an_object_without_spec_gets_one() {
        let mut object = json!({"metadata": {"name": "op.v1"}});
        assert!(set_conditions_on(&mut object, &[upgradeable(Status::True)], NOW).unwrap().is_some());
        assert_eq!(object["spec"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn malformed_objects_are_errors_not_overwrites() {
        let mut object = json!({"spec": {"conditions": "garbage"}});
        let err = set_conditions_on(&mut object, &[upgradeable(Status::True)], NOW).unwrap_err();
        assert!(err.starts_with("spec.conditions are not as expected"), "{err}");
        assert_eq!(object["spec"]["conditions"], "garbage");
        assert!(set_conditions_on(&mut json!({"spec": 3}), &[], NOW).is_err());
    }
}
