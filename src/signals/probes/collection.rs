//! One probed collection: a resource type in one scope (a namespace, or
//! all), where it is listed and watched and how its resources are judged;
//! and discovery, which finds a probed type's
//! kind and scope. Shared by the list ([`super::list`]), the
//! answer reader ([`super::answer`]) and the watch thread
//! ([`super::watcher`]).

use super::GRANT;
use super::grammar::{ProbeSpec, ResourceType};
use crate::kube::Client;
use serde::Deserialize;

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

/// Discovery's answer for one group-version.
#[derive(Deserialize)]
struct ApiResourceList {
    resources: Vec<ApiResource>,
}

#[derive(Deserialize)]
struct ApiResource {
    name: String,
    namespaced: bool,
    kind: String,
}

/// The kind and scope of `spec`'s resource, from discovery.
pub(super) fn discover(client: &mut Client, spec: &ProbeSpec) -> Result<ResourceType, String> {
    let gv = spec.api_path();
    let body = client
        .get_path(&gv, &format!("get {gv}"))
        .map_err(|e| e.granted_by(GRANT).to_string())?
        .ok_or_else(|| format!("the API server does not serve {gv} (is the CRD installed?)"))?;
    let list: ApiResourceList =
        serde_json::from_slice(&body).map_err(|e| format!("unexpected discovery answer for {gv}: {e}"))?;
    list.resources
        .into_iter()
        .find(|r| r.name == spec.resource)
        .map(|r| ResourceType { kind: r.kind, namespaced: r.namespaced })
        .ok_or_else(|| format!("{gv} has no resource {:?}", spec.resource))
}
