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
        let mut path = String::new();
        self.push_path(&mut path);
        path
    }

    /// Appends the object's path to `out` (no formatting machinery: the
    /// heartbeat's URL is built this way).
    pub(super) fn push_path(&self, out: &mut String) {
        out.push_str(self.api);
        if let Some(ns) = self.namespace {
            out.push_str("/namespaces/");
            out.push_str(ns);
        }
        out.push('/');
        out.push_str(self.resource);
        out.push('/');
        out.push_str(self.name);
    }

    /// `patch configmaps "x" in namespace "y"`: what an RBAC rule must allow.
    pub(super) fn action(&self, verb: &str) -> String {
        match self.namespace {
            Some(ns) => format!("{verb} {} {:?} in namespace {ns:?}", self.resource, self.name),
            None => format!("{verb} {} {:?}", self.resource, self.name),
        }
    }
}
