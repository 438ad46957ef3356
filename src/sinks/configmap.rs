//! The kube9 status ConfigMap, written by server-side apply.
//!
//! One `PATCH` with `application/apply-patch+yaml` creates the ConfigMap when
//! it is missing and otherwise updates only the fields opstatus owns (its
//! labels and the `status` key), keeping every other manager's labels,
//! annotations and data keys. It needs only `patch` (and `get`) on the one
//! name: `create` cannot be restricted by `resourceNames`, apply does not
//! need it. No GET is made before writing.

use crate::kube::{Client, KubeError, ObjectRef};
use crate::status::StatusDocument;
use serde_json::json;

/// The status ConfigMap's name unless `--configmap` says otherwise.
pub const DEFAULT_CONFIGMAP: &str = "kube9-operator-status";

/// The namespace when neither `--namespace` nor the credentials name one.
pub const DEFAULT_NAMESPACE: &str = "kube9-system";

/// The field manager that owns what opstatus writes.
pub const FIELD_MANAGER: &str = "opstatus";

/// Where the permissions to read and write the status are granted.
const GRANT: &str = "see manifests/base/role.yaml";

/// The data key that holds the status JSON.
pub const STATUS_KEY: &str = "status";

/// Where the status is published.
#[derive(Clone, Debug)]
pub struct StatusConfigMap {
    pub namespace: String,
    pub name: String,
}

impl StatusConfigMap {
    pub fn object(&self) -> ObjectRef<'_> {
        ObjectRef { api: "/api/v1", resource: "configmaps", namespace: Some(&self.namespace), name: &self.name }
    }

    /// The apply body: the whole intent of this field manager.
    pub fn apply_body(&self, status: &StatusDocument) -> Vec<u8> {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {
                    "app.kubernetes.io/name": "opstatus",
                    "app.kubernetes.io/managed-by": "opstatus",
                },
            },
            "data": { STATUS_KEY: status.to_json() },
        })
        .to_string()
        .into_bytes()
    }

    /// Writes `status`: exactly one request.
    pub fn publish(&self, client: &mut Client, status: &StatusDocument) -> Result<(), KubeError> {
        client.apply(&self.object(), FIELD_MANAGER, &self.apply_body(status)).map_err(|e| e.granted_by(GRANT))
    }

    /// Reads the published `status` value: `Ok(None)` when the ConfigMap
    /// does not exist.
    pub fn fetch(&self, client: &mut Client) -> Result<Option<Vec<u8>>, KubeError> {
        client.get(&self.object()).map_err(|e| e.granted_by(GRANT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_body_carries_labels_and_only_the_status_key() {
        let cm = StatusConfigMap { namespace: "ops".into(), name: "kube9-operator-status".into() };
        let doc = StatusDocument { namespace: "ops".into(), ..StatusDocument::example() };
        let body: serde_json::Value = serde_json::from_slice(&cm.apply_body(&doc)).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube9-operator-status", "namespace": "ops",
                             "labels": {"app.kubernetes.io/name": "opstatus", "app.kubernetes.io/managed-by": "opstatus"}},
                "data": {"status": doc.to_json()}
            })
        );
        assert_eq!(cm.object().path(), "/api/v1/namespaces/ops/configmaps/kube9-operator-status");
    }
}
