//! The custom resources the OLM and OpenShift end-to-end tests drive: the
//! test CRD's `Foo`s, OLM's OperatorCondition (and the RBAC OLM creates for
//! it), OpenShift's ClusterOperator. Written as their owners would: the
//! admin through kubectl, thousands of Foos through one kept-alive client.

use super::control_plane::ControlPlane;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};

pub const FOOS: &str = "/apis/example.com/v1";
pub const OPERATOR_CONDITIONS: &str = "/apis/operators.coreos.com/v2";

/// A metav1.Condition as an operator writes it.
pub fn condition(kind: &str, status: &str) -> Value {
    json!({"type": kind, "status": status, "reason": "SetByTest", "message": "Set by the test.",
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// The condition of type `kind` in a list, if any.
pub fn find<'a>(conditions: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == kind)
}

impl ControlPlane {
    /// When the API server received the admin's (kubectl's) last `verb`
    /// on a URI containing `uri_part`: the moment a change really happened,
    /// without kubectl's start-up time.
    pub fn admin_request_time(&self, verb: &str, uri_part: &str) -> SystemTime {
        // The ResponseComplete event may land just after kubectl returns.
        let found = super::wait_for(Duration::from_secs(2), Duration::from_millis(20), || {
            let events = self.audit_events("admin");
            events.iter().rev().find(|e| e.verb == verb && e.uri.contains(uri_part)).map(|e| e.received)
        });
        found.unwrap_or_else(|| panic!("no admin {verb} of {uri_part} in the audit log"))
    }

    /// How long after `since` `user` first updated an object whose URI
    /// contains `uri_part`: timed on the API server's clock (the audit
    /// log), so the test's polling does not add to it.
    pub fn update_latency(&self, user: &str, uri_part: &str, since: SystemTime) -> Duration {
        // The update's audit record may land a moment after the object
        // shows it (the caller has seen the change).
        let found = super::wait_for(Duration::from_secs(5), Duration::from_millis(50), || {
            self.update_times(user, uri_part, since).first().copied()
        });
        let received =
            found.unwrap_or_else(|| panic!("no update of {uri_part} after the change: {:?}", self.audit_events(user)));
        received.duration_since(since).unwrap()
    }

    /// When the API server received each update by `user` of an object
    /// whose URI contains `uri_part`, from `since` on (the audit log).
    pub fn update_times(&self, user: &str, uri_part: &str, since: SystemTime) -> Vec<SystemTime> {
        self.audit_events(user)
            .into_iter()
            .filter(|e| e.verb == "update" && e.uri.contains(uri_part) && e.received >= since)
            .map(|e| e.received)
            .collect()
    }

    /// Creates Foo `ns/name` and sets its status conditions.
    pub fn create_foo(&self, ns: &str, name: &str, conditions: &[(&str, &str)]) {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name, "namespace": ns}, "spec": {}});
        self.kubectl_stdin_ok(&["create", "-f", "-"], Some(&object.to_string()));
        if !conditions.is_empty() {
            self.set_foo_conditions(ns, name, conditions);
        }
    }

    /// Creates `count` Foos `foo-00000`… in `ns` (no status: the smallest
    /// a Foo can be), over `threads` kept-alive admin connections at once:
    /// 20,000 in well under a minute where kubectl would take many.
    pub fn create_foos_in_bulk(&self, ns: &str, count: usize, threads: usize) {
        self.create_foos_with_spec(ns, count, threads, &json!({}));
    }

    /// As [`Self::create_foos_in_bulk`], each Foo with this `spec`.
    pub fn create_foos_with_spec(&self, ns: &str, count: usize, threads: usize, spec: &Value) {
        let collection = format!("{FOOS}/namespaces/{ns}/foos");
        std::thread::scope(|scope| {
            for first in 0..threads {
                let collection = collection.as_str();
                scope.spawn(move || {
                    let mut admin = self.admin_client();
                    for i in (first..count).step_by(threads) {
                        let object = json!({"apiVersion": "example.com/v1", "kind": "Foo",
                            "metadata": {"name": format!("foo-{i:05}"), "namespace": ns}, "spec": spec});
                        create_retrying_timeouts(&mut admin, collection, &object);
                    }
                });
            }
        });
    }

    /// Replaces Foo `ns/name`'s status conditions (the status subresource).
    pub fn set_foo_conditions(&self, ns: &str, name: &str, conditions: &[(&str, &str)]) {
        let list: Vec<Value> = conditions.iter().map(|(k, s)| condition(k, s)).collect();
        let patch = json!({"status": {"conditions": list}}).to_string();
        self.kubectl_ok(&["-n", ns, "patch", "foo", name, "--subresource=status", "--type=merge", "-p", &patch]);
    }

    /// Creates the OperatorCondition `ns/name` the way OLM does, with the
    /// operator's own `spec.conditions`, and the Role OLM grants the
    /// operator's ServiceAccount (`opstatus` here) on that one name.
    pub fn create_operator_condition(&self, ns: &str, name: &str, operator_conditions: &[Value]) {
        let object = json!({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"deployments": ["demo-operator"], "serviceAccounts": ["opstatus"], "conditions": operator_conditions},
        });
        self.kubectl_stdin_ok(&["create", "-f", "-"], Some(&object.to_string()));
    }

    /// The Role and RoleBinding OLM creates for the operator's
    /// ServiceAccounts: `get, update, patch` on the one OperatorCondition.
    pub fn grant_operator_condition_as_olm(&self, ns: &str, name: &str) {
        let rbac = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             rules:\n- apiGroups: [operators.coreos.com]\n  resources: [operatorconditions]\n  \
             resourceNames: [{name}]\n  verbs: [get, update, patch]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\n\
             subjects:\n- {{kind: ServiceAccount, name: opstatus, namespace: {ns}}}\n"
        );
        self.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&rbac));
    }

    /// The OperatorCondition's JSON.
    pub fn operator_condition(&self, ns: &str, name: &str) -> Value {
        let path = format!("/apis/operators.coreos.com/v2/namespaces/{ns}/operatorconditions/{name}");
        self.get_json(&path).unwrap_or_else(|| panic!("no OperatorCondition {ns}/{name}"))
    }

    /// The ClusterOperator's JSON, or `None` when it does not exist.
    pub fn cluster_operator(&self, name: &str) -> Option<Value> {
        self.get_json(&format!("/apis/config.openshift.io/v1/clusteroperators/{name}"))
    }
}

/// Creates `object` in `collection`, again (at most five times in all) when
/// no answer came: on a loaded machine a create can outlast the client's
/// deadline and still be stored, so a second try's `AlreadyExists` (409)
/// means it was. Any other error fails the test.
fn create_retrying_timeouts(admin: &mut opstatus::testing::Client, collection: &str, object: &Value) {
    let body = object.to_string();
    for attempt in 1..=5 {
        let err = match admin.create(collection, body.as_bytes(), "create foos") {
            Ok(_) => return,
            Err(err) => format!("{err:?}"),
        };
        let conflict = err.contains("code: 409");
        if attempt > 1 && conflict {
            return;
        }
        assert!(err.starts_with("Transport") && attempt < 5, "create {}: {err}", object["metadata"]["name"]);
    }
}
