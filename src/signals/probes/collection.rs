//! One probed collection: a resource type in one scope (a namespace, or
//! all), where it is listed and watched, how its resources are judged, and
//! how its problems are said. Shared by the list ([`super::list`]), the
//! answer reader ([`super::answer`]) and the watch thread
//! ([`super::watcher`]).

use super::grammar::ProbeSpec;
use super::store::Store;

/// One collection: where it is listed and watched, and how its resources
/// are judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Collection {
    /// `/apis/GROUP/VERSION[/namespaces/NS]/RESOURCE`.
    pub path: String,
    /// `foos.example.com`: for messages.
    pub name: String,
    /// ` in namespace "ops"`, ` in all namespaces` or nothing: for the
    /// action an RBAC rule must allow.
    pub scope: String,
    pub spec: ProbeSpec,
    pub kind: String,
}

impl Collection {
    /// The problem of what its store holds (too many resources, some that
    /// could not be read).
    pub(crate) fn store_problem(&self, store: &Store) -> Option<String> {
        store.problem(&self.kind).map(|u| format!("Probing {}{}: {u}", self.name, self.scope))
    }
}
