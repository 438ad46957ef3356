//! The kube9 status ConfigMap, the primary sink, written by server-side
//! apply.
//!
//! One `PATCH` with `application/apply-patch+yaml` updates only the fields
//! opstatus owns — the `status` key and the publisher lock's annotation
//! ([`crate::lock`]) — keeping every other manager's labels, annotations
//! and data keys. Each write carries the `resourceVersion` last seen, so a
//! write based on a stale view of the lock is a 409, never a silent
//! overwrite; the answer carries the new one. No GET is made before a
//! heartbeat.
//!
//! The labels (`app.kubernetes.io/name`, `app.kubernetes.io/managed-by`)
//! are set once, by [`StatusConfigMap::init`], under a field manager of
//! their own and without force: on a ConfigMap another tool labels (Helm's
//! `managed-by: Helm`), opstatus leaves them alone instead of seizing them
//! on every heartbeat. The same request creates the ConfigMap when it is
//! missing, holding no lock, so two instances starting at once cannot both
//! create it as theirs.

use crate::kube::{Client, KubeError, ObjectRef};
use crate::lock::{self, Record, Seen};
use crate::status::StatusDocument;
use crate::writers::{self, Foreign, ManagedEntry};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The field manager that owns the status and the lock.
pub(crate) const FIELD_MANAGER: &str = "opstatus";

/// The field manager that creates the ConfigMap and owns its labels.
pub(crate) const INIT_FIELD_MANAGER: &str = "opstatus-init";

/// The data key that holds the status JSON.
pub(crate) const STATUS_KEY: &str = "status";

/// The ConfigMap's name, from the kube9 spec.
pub(crate) const DEFAULT_CONFIGMAP: &str = "kube9-operator-status";

/// The spec's last resort when neither `--namespace` nor the credentials
/// name one.
pub(crate) const DEFAULT_NAMESPACE: &str = "kube9-system";

/// Where the permissions to read and write the status are granted: beside
/// the operator, and in another namespace (kube9-system) for an operator
/// that runs elsewhere.
const GRANT: &str = "see the Role opstatus-status-writer and its RoleBinding, manifests/base/role.yaml";
const GRANT_ELSEWHERE: &str = "see the Role kube9-operator-status-writer and its RoleBinding in the status's \
                               namespace, manifests/components/status-in-kube9-system/rbac.yaml";

/// Where the status is published.
#[derive(Clone, Debug)]
pub(crate) struct StatusConfigMap {
    pub namespace: String,
    pub name: String,
    /// The operator runs in another namespace: the permission is granted
    /// as `status-in-kube9-system` grants it.
    pub operator_elsewhere: bool,
}

/// What a read or a write of the ConfigMap saw: the version to write
/// against and the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Current {
    pub resource_version: String,
    pub lock: Seen,
    /// The object's uid (events about the ConfigMap name it).
    pub uid: String,
    /// Another manager that owns the status key ([`crate::writers`]), as
    /// a read saw it; `None` after a write (judged on reads only).
    pub foreign: Option<Foreign>,
}

/// The ConfigMap as a read or a write's answer shows it: the lock, and who
/// else writes the status (the field managers' names borrowed); of `data`
/// only the status key, left unparsed unless another manager owns it; of
/// the annotations only the lock's; of the labels only their names.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    metadata: HeadMeta<'a>,
    #[serde(default, borrow)]
    data: HeadData<'a>,
}

#[derive(Default, Deserialize)]
struct HeadData<'a> {
    #[serde(default, borrow)]
    status: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadMeta<'a> {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    uid: String,
    #[serde(default, borrow)]
    annotations: LockAnnotation<'a>,
    #[serde(default, borrow)]
    labels: BTreeMap<Cow<'a, str>, IgnoredAny>,
    #[serde(default, borrow)]
    managed_fields: Vec<ManagedEntry<'a>>,
}

/// The one annotation read, [`lock::ANNOTATION`] (serde needs the name
/// spelled out; a test holds the two together).
#[derive(Default, Deserialize)]
struct LockAnnotation<'a> {
    #[serde(rename = "opstatus.kube9.dev/publisher", borrow)]
    lock: Option<Cow<'a, str>>,
}

/// The labels opstatus gives a status ConfigMap nobody else labelled.
const LABELS: [(&str, &str); 2] =
    [("app.kubernetes.io/name", "opstatus"), ("app.kubernetes.io/managed-by", "opstatus")];

impl StatusConfigMap {
    fn grant(&self) -> &'static str {
        if self.operator_elsewhere { GRANT_ELSEWHERE } else { GRANT }
    }

    pub(crate) fn object(&self) -> ObjectRef<'_> {
        ObjectRef { api: "/api/v1", resource: "configmaps", namespace: Some(&self.namespace), name: &self.name }
    }

    /// The heartbeat's apply body: the whole intent of [`FIELD_MANAGER`]
    /// (apply removes what a manager stops sending).
    pub(crate) fn apply_body(&self, status: &StatusDocument, record: &Record, resource_version: &str) -> Vec<u8> {
        let annotations = json!({lock::ANNOTATION: record.to_json()});
        let mut metadata = json!({"name": self.name, "namespace": self.namespace, "annotations": annotations});
        if !resource_version.is_empty() {
            metadata["resourceVersion"] = json!(resource_version);
        }
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
                          "data": {STATUS_KEY: status.to_json()}});
        body.to_string().into_bytes()
    }

    /// The first look: reads the ConfigMap; creates it if it is missing
    /// (no status, no lock) and labels it if nobody did (an apply without
    /// force, so another manager's labels stay theirs). A GET, and an
    /// apply only the first time.
    pub(crate) fn init(&self, client: &mut Client) -> Result<Current, KubeError> {
        if let Some(body) = self.fetch(client)? {
            let head = parse::<Head>(&body);
            if head.is_ok_and(|h| LABELS.iter().any(|(k, _)| h.metadata.labels.contains_key(*k))) {
                return seen(&body);
            }
        }
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": LABELS.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            },
        });
        let applied = client.apply(&self.object(), INIT_FIELD_MANAGER, false, body.to_string().as_bytes());
        match applied {
            Ok(answer) => seen(&answer),
            // Another manager owns a label with another value: theirs.
            Err(e) if e.is_apply_conflict() => {
                log::debug!("The status ConfigMap's labels belong to another manager: {e}");
                self.read(client)?.ok_or(e)
            }
            Err(e) => Err(e.granted_by(self.grant())),
        }
    }

    /// Reads the ConfigMap's version and lock; `None` when it is missing.
    pub(crate) fn read(&self, client: &mut Client) -> Result<Option<Current>, KubeError> {
        self.fetch(client)?.map(|body| seen(&body)).transpose()
    }

    /// Writes `status` and the lock `record`, against `resource_version`:
    /// exactly one request. Returns what the write left.
    pub(crate) fn publish(
        &self,
        client: &mut Client,
        status: &StatusDocument,
        record: &Record,
        resource_version: &str,
    ) -> Result<Current, KubeError> {
        let body = self.apply_body(status, record, resource_version);
        let answer =
            client.apply(&self.object(), FIELD_MANAGER, true, &body).map_err(|e| e.granted_by(self.grant()))?;
        // Who else writes the status is judged on reads only (a holder's
        // refused write is followed by one).
        Ok(Current { foreign: None, ..seen(&answer)? })
    }

    /// Reads the whole ConfigMap: `Ok(None)` when it does not exist.
    pub(crate) fn fetch(&self, client: &mut Client) -> Result<Option<Vec<u8>>, KubeError> {
        client.get(&self.object()).map_err(|e| e.granted_by(self.grant()))
    }
}

/// The version, lock and other writer of a ConfigMap body (a read).
pub(crate) fn seen(body: &[u8]) -> Result<Current, KubeError> {
    let head: Head = parse(body)?;
    let lock = Seen::parse(head.metadata.annotations.lock.as_deref());
    let mut foreign = writers::foreign_writer(&head.metadata.managed_fields, &[FIELD_MANAGER, INIT_FIELD_MANAGER]);
    // The status itself is read only when another manager owns it.
    if let Some(f) = &mut foreign {
        let status = head.data.status.and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
        f.last_update = status.as_deref().and_then(writers::last_update);
        f.text = writers::digest(status.as_deref().unwrap_or_default());
    }
    Ok(Current { resource_version: head.metadata.resource_version, lock, uid: head.metadata.uid, foreign })
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, KubeError> {
    let message = |why| format!("the API server's answer is not a ConfigMap: {why}");
    serde_json::from_slice(body).map_err(|why| KubeError::Response { message: message(why) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn apply_body_carries_the_status_the_lock_and_the_version_read() {
        let cm = StatusConfigMap {
            namespace: "ops".into(),
            name: "kube9-operator-status".into(),
            operator_elsewhere: false,
        };
        let doc = StatusDocument { namespace: "ops".into(), ..StatusDocument::example() };
        let record = Record::claim("pod-a", None, Duration::from_secs(130), SystemTime::UNIX_EPOCH);
        let body: serde_json::Value = serde_json::from_slice(&cm.apply_body(&doc, &record, "42")).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube9-operator-status", "namespace": "ops", "resourceVersion": "42",
                             "annotations": {lock::ANNOTATION: record.to_json()}},
                "data": {"status": doc.to_json()}
            })
        );
        assert_eq!(cm.object().path(), "/api/v1/namespaces/ops/configmaps/kube9-operator-status");
        // No labels: they are set once by init, never forced.
        let unversioned: serde_json::Value = serde_json::from_slice(&cm.apply_body(&doc, &record, "")).unwrap();
        assert!(
            unversioned["metadata"].get("resourceVersion").is_none() && unversioned["metadata"].get("labels").is_none()
        );
    }

    #[test]
    fn the_status_and_the_lock_are_escaped_inside_the_body_exactly() {
        let odd = "a \"quoted\" \\ reason\non two lines, ünïcode, \u{1} and \u{7f}";
        let cm = StatusConfigMap { namespace: odd.into(), name: format!("name {odd}"), operator_elsewhere: false };
        let doc = StatusDocument { error: Some(odd.into()), ..StatusDocument::example() };
        let record = Record::claim(&format!("pod-{odd}"), None, Duration::from_secs(130), SystemTime::UNIX_EPOCH);
        let body: serde_json::Value = serde_json::from_slice(&cm.apply_body(&doc, &record, "4\"2")).unwrap();
        assert_eq!(body["data"]["status"].as_str(), Some(doc.to_json().as_str()));
        assert_eq!(body["metadata"]["annotations"][lock::ANNOTATION].as_str(), Some(record.to_json().as_str()));
        assert_eq!(body["metadata"]["resourceVersion"], "4\"2");
        assert_eq!(
            (body["metadata"]["namespace"].as_str(), body["metadata"]["name"].as_str()),
            (Some(odd), Some(&*cm.name))
        );
    }

    #[test]
    fn reads_the_version_the_lock_the_labels_and_another_writer() {
        let record = Record::claim("pod-a", None, Duration::from_secs(130), SystemTime::UNIX_EPOCH);
        let body = json!({"metadata": {"resourceVersion": "7", "uid": "u-1", "annotations": {lock::ANNOTATION: record.to_json(), "x": "y"}},
                          "data": {"status": "{}"}});
        let s = seen(body.to_string().as_bytes()).unwrap();
        let foreign = None;
        assert_eq!(
            s,
            Current { resource_version: "7".into(), lock: Seen::Record(record.clone()), uid: "u-1".into(), foreign }
        );
        // The same record escaped otherwise (`\u0022` for `"`) is still read.
        let spelled = record.to_json().replace('"', "\\u0022");
        let other_escapes =
            format!(r#"{{"metadata":{{"resourceVersion":"9","annotations":{{"{}":"{spelled}"}}}}}}"#, lock::ANNOTATION);
        let read_back = seen(other_escapes.as_bytes()).unwrap();
        assert_eq!((read_back.lock, read_back.resource_version), (Seen::Record(record.clone()), "9".to_string()));
        // Labels: only whether one of opstatus's is there is read.
        let labelled = json!({"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm", "n": 5}}}).to_string();
        let head: Head = parse(labelled.as_bytes()).unwrap();
        assert!(head.metadata.labels.contains_key("app.kubernetes.io/managed-by"));
        // Another manager of the status key.
        let mut answer = body.clone();
        answer["metadata"]["managedFields"] = json!([{"manager": "kube9-operator", "operation": "Update",
                                                      "fieldsV1": {"f:data": {"f:status": {}}}}]);
        let read = seen(answer.to_string().as_bytes()).unwrap();
        assert_eq!(read.foreign.map(|f| f.writer.manager), Some("kube9-operator".to_string()));
        // What the yield rule reads of the other writer's status: its
        // lastUpdate and its text, escapes and all.
        answer["metadata"]["managedFields"][0]["time"] = json!("2026-11-25T10:00:00Z");
        answer["data"]["status"] =
            json!(r#"{"mode":"operated","lastUpdate":"2026-11-25T09:59:58Z","error":"a \"b\""}"#);
        let foreign = seen(answer.to_string().as_bytes()).unwrap().foreign.unwrap();
        let time = crate::util::time::parse_rfc3339;
        assert_eq!(
            (foreign.written, foreign.last_update),
            (time("2026-11-25T10:00:00Z"), time("2026-11-25T09:59:58Z"))
        );
        let text = answer["data"]["status"].as_str().unwrap();
        assert_eq!(foreign.text, crate::writers::digest(text));
        assert!(seen(b"[]").is_err());
        assert!(seen(br#"{"data":{}}"#).is_err());
        let bare = seen(br#"{"metadata":{"resourceVersion":"8"}}"#).unwrap();
        assert_eq!(bare.lock, Seen::Absent);
    }
}
