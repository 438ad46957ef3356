//! An object's address (resource, namespace, name): its URL path, and
//! the words an RBAC rule must allow for a verb on it.

/// A namespaced (or cluster-scoped) object addressed by resource and name.
#[derive(Clone, Copy, Debug)]
pub struct ObjectRef<'a> {
    /// The API path prefix: `/api/v1` or `/apis/GROUP/VERSION`.
    pub api: &'a str,
    /// The plural resource name, e.g. `configmaps`.
    pub resource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

impl ObjectRef<'_> {
    pub fn path(&self) -> String {
        let (api, resource, name) = (self.api, self.resource, self.name);
        match self.namespace {
            Some(ns) => format!("{api}/namespaces/{ns}/{resource}/{name}"),
            None => format!("{api}/{resource}/{name}"),
        }
    }

    /// `patch configmaps "x" in namespace "y"`: what an RBAC rule must allow.
    pub(super) fn action(&self, verb: &str) -> String {
        match self.namespace {
            Some(ns) => format!("{verb} {} {:?} in namespace {ns:?}", self.resource, self.name),
            None => format!("{verb} {} {:?}", self.resource, self.name),
        }
    }
}
