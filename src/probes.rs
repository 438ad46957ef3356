//! Conditions computed from the operator's own custom resources (OLM's
//! Probe design): per resource type, an `Upgradeable` expression and an
//! `Important` expression over the condition types in each resource's
//! `status.conditions`.
//!
//! - [`ProbeSpec`]: one `--probe GROUP/VERSION/RESOURCE:Upgradeable=EXPR;Important=EXPR`,
//!   or the same read from a CRD's `olm.operatorframework.io/condition.*`
//!   annotations ([`spec_from_crd`]).
//! - [`Tally`]: the aggregation, pure: the operator is upgradeable unless
//!   some resource's expression is false; unknown never blocks; no
//!   resources, nothing blocks. It keeps at most [`NAMED`] names per list,
//!   so its size does not grow with the number of resources.
//! - [`Prober`]: on each check, lists every probed type page by page
//!   (`limit` + `continue`), so memory is bounded by one page however many
//!   resources exist, and turns the tally into conditions.
//!
//! A failed list never turns into "upgradeable": the last published value
//! stands (only a resource seen blocking is reason enough to say `False`),
//! and the failure is reported as a problem (the status turns `degraded`).

use crate::conditions::{Desired, Status};
use crate::expr::{Expr, Grammar, Truth};
use crate::kube::{Client, KubeError};
use serde::Deserialize;
use std::time::{Duration, Instant};

/// The condition types the probes publish.
pub const UPGRADEABLE: &str = "Upgradeable";
pub const IMPORTANT: &str = "Important";

/// The CRD annotations that carry the expressions (OLM's Probe design).
pub const UPGRADEABLE_ANNOTATION: &str = "olm.operatorframework.io/condition.Upgradeable";
pub const IMPORTANT_ANNOTATION: &str = "olm.operatorframework.io/condition.Important";

/// Resources per list page: a page of typical CRs is well under the client's
/// 4 MiB body limit, and the parsed page keeps only names and conditions.
pub const PAGE_SIZE: usize = 250;

/// How many resources a message names before "and N more".
pub const NAMED: usize = 5;

/// CRD annotations are re-read this often (an operator upgrade may change
/// them); in between, the parsed expressions are reused.
pub const CRD_REFRESH: Duration = Duration::from_secs(300);

/// One probed resource type and its expressions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    /// The plural resource name, e.g. `foos`.
    pub resource: String,
    pub upgradeable: Option<Expr>,
    pub important: Option<Expr>,
}

impl ProbeSpec {
    /// `foos.example.com/v1`-style name for messages: `foos.example.com`.
    pub fn display_name(&self) -> String {
        match self.group.as_str() {
            "" => self.resource.clone(),
            g => format!("{}.{g}", self.resource),
        }
    }

    /// `/apis/GROUP/VERSION` or `/api/v1`.
    fn api_path(&self) -> String {
        match self.group.as_str() {
            "" => format!("/api/{}", self.version),
            g => format!("/apis/{g}/{}", self.version),
        }
    }
}

/// Parses `GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]`
/// (`VERSION/RESOURCE` for the core group). The error says which part is
/// wrong and, for an expression, the column.
pub fn parse_probe(text: &str) -> Result<ProbeSpec, String> {
    let (target, exprs) =
        text.split_once(':').ok_or("is not GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]")?;
    let parts: Vec<&str> = target.split('/').collect();
    let (group, version, resource) = match parts.as_slice() {
        [g, v, r] => (*g, *v, *r),
        [v, r] => ("", *v, *r),
        _ => return Err(format!("{target:?} is not GROUP/VERSION/RESOURCE (or VERSION/RESOURCE for the core group)")),
    };
    if !group.is_empty() {
        crate::kube::names::check_dns_subdomain(group).map_err(|why| format!("group {group:?}: {why}"))?;
    }
    crate::kube::names::check_dns_label(version).map_err(|why| format!("version {version:?}: {why}"))?;
    crate::kube::names::check_dns_label(resource).map_err(|why| format!("resource {resource:?}: {why}"))?;
    let mut spec = ProbeSpec {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        upgradeable: None,
        important: None,
    };
    for part in exprs.split(';') {
        let (key, expr) =
            part.split_once('=').ok_or_else(|| format!("{part:?} is not Upgradeable=EXPR or Important=EXPR"))?;
        let (slot, grammar) = match key.trim() {
            UPGRADEABLE => (&mut spec.upgradeable, Grammar::Full),
            IMPORTANT => (&mut spec.important, Grammar::OrOnly),
            other => return Err(format!("unknown condition {other:?} (Upgradeable or Important)")),
        };
        if slot.is_some() {
            return Err(format!("{} is given twice", key.trim()));
        }
        *slot = Some(Expr::parse(expr, grammar).map_err(|e| format!("{} expression {expr:?}: {e}", key.trim()))?);
    }
    Ok(spec)
}

/// What a CRD says about probing its resources.
#[derive(Deserialize)]
struct Crd {
    metadata: CrdMeta,
    spec: CrdSpec,
}

#[derive(Deserialize)]
struct CrdMeta {
    name: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CrdSpec {
    group: String,
    names: CrdNames,
    scope: String,
    versions: Vec<CrdVersion>,
}

#[derive(Deserialize)]
struct CrdNames {
    plural: String,
    kind: String,
}

#[derive(Deserialize)]
struct CrdVersion {
    name: String,
    served: bool,
    storage: bool,
}

/// The probe a CRD declares in its annotations, with the resource type
/// resolved; `Ok(None)` when it declares none.
pub fn spec_from_crd(body: &[u8]) -> Result<Option<(ProbeSpec, ResourceType)>, String> {
    let crd: Crd = serde_json::from_slice(body).map_err(|e| format!("is not a CustomResourceDefinition: {e}"))?;
    let annotation = |key: &str, grammar| {
        crd.metadata
            .annotations
            .get(key)
            .map(|text| Expr::parse(text, grammar).map_err(|e| format!("annotation {key} {text:?}: {e}")))
            .transpose()
    };
    let upgradeable = annotation(UPGRADEABLE_ANNOTATION, Grammar::Full)?;
    let important = annotation(IMPORTANT_ANNOTATION, Grammar::OrOnly)?;
    if upgradeable.is_none() && important.is_none() {
        return Ok(None);
    }
    // The storage version is served in every valid CRD; fall back to any
    // served one.
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.served && v.storage)
        .or_else(|| crd.spec.versions.iter().find(|v| v.served))
        .ok_or_else(|| format!("{} serves no version", crd.metadata.name))?;
    let spec = ProbeSpec {
        group: crd.spec.group,
        version: version.name.clone(),
        resource: crd.spec.names.plural,
        upgradeable,
        important,
    };
    let kind = ResourceType { kind: crd.spec.names.kind, namespaced: crd.spec.scope == "Namespaced" };
    Ok(Some((spec, kind)))
}

/// What discovery says about a resource: its kind (for messages) and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    pub kind: String,
    pub namespaced: bool,
}

/// One resource's verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdicts<'a> {
    /// The `Upgradeable` expression's value and the terms that decided it.
    pub upgradeable: Option<&'a (Truth, Vec<String>)>,
    pub important: Option<&'a (Truth, Vec<String>)>,
}

/// Resources named in a message, capped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Named {
    pub first: Vec<String>,
    pub total: usize,
}

impl Named {
    fn add(&mut self, entry: impl FnOnce() -> String) {
        self.total += 1;
        if self.first.len() < NAMED {
            self.first.push(entry());
        }
    }

    /// `2 resources: Foo ns/a: Migrating; Foo ns/b: Migrating`.
    fn counted(&self) -> String {
        let resources = if self.total == 1 { "resource" } else { "resources" };
        format!("{} {resources}: {}", self.total, self.list())
    }

    /// `Foo ns/a: Migrating; Foo ns/b: Migrating; and 3 more`.
    pub fn list(&self) -> String {
        let mut s = self.first.join("; ");
        if self.total > self.first.len() {
            s.push_str(&format!("; and {} more", self.total - self.first.len()));
        }
        s
    }
}

/// The aggregation over every resource of every probed type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub evaluated: usize,
    /// Resources whose `Upgradeable` expression is false.
    pub blocking: Named,
    /// Resources whose `Important` expression is true.
    pub important: Named,
}

impl Tally {
    /// Adds another tally (another collection's) to this one, still naming
    /// at most [`NAMED`] resources per list.
    fn merge(&mut self, other: Tally) {
        self.evaluated += other.evaluated;
        for (into, from) in [(&mut self.blocking, other.blocking), (&mut self.important, other.important)] {
            into.total += from.total;
            into.first.extend(from.first.into_iter().take(NAMED.saturating_sub(into.first.len())));
        }
    }

    /// Counts one resource: `kind`, `namespace/name` (or `name`), verdicts.
    pub fn add(&mut self, kind: &str, namespace: Option<&str>, name: &str, verdicts: Verdicts<'_>) {
        self.evaluated += 1;
        let entry = |terms: &[String]| {
            let who = match namespace {
                Some(ns) => format!("{kind} {ns}/{name}"),
                None => format!("{kind} {name}"),
            };
            format!("{who}: {}", terms.join(", "))
        };
        if let Some((Truth::False, terms)) = verdicts.upgradeable {
            self.blocking.add(|| entry(terms));
        }
        if let Some((Truth::True, terms)) = verdicts.important {
            self.important.add(|| entry(terms));
        }
    }

    /// The `Upgradeable` condition, when it can be stated: a resource seen
    /// blocking is enough for `False`; `True` needs every list to have
    /// succeeded (`complete`).
    pub fn upgradeable(&self, complete: bool) -> Option<Desired> {
        if self.blocking.total > 0 {
            let message = format!("Upgrade blocked by {}", self.blocking.counted());
            return Some(Desired::new(UPGRADEABLE, Status::False, "NotUpgradeable", message));
        }
        complete.then(|| {
            let message = format!("No resource blocks an upgrade ({} checked)", self.evaluated);
            Desired::new(UPGRADEABLE, Status::True, "AsExpected", message)
        })
    }

    /// The `Important` condition, with the same rule: `True` is certain,
    /// `False` needs a complete tally.
    pub fn important(&self, complete: bool) -> Option<Desired> {
        if self.important.total > 0 {
            let message = format!("Attention needed for {}", self.important.counted());
            return Some(Desired::new(IMPORTANT, Status::True, "ResourcesNeedAttention", message));
        }
        complete.then(|| Desired::new(IMPORTANT, Status::False, "AsExpected", "No resource needs attention"))
    }
}

/// Evaluates `expr` against a resource's conditions: `True`/`False` as
/// given, anything else (missing, `Unknown`, garbage) unknown.
pub fn evaluate(expr: &Expr, conditions: &[ItemCondition]) -> (Truth, Vec<String>) {
    let lookup = |name: &str| match conditions.iter().find(|c| c.kind == name).map(|c| c.status.as_str()) {
        Some("True") => Truth::True,
        Some("False") => Truth::False,
        _ => Truth::Unknown,
    };
    expr.evaluate(&lookup)
}

/// A list page, reduced to what the expressions read.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    kind: String,
    metadata: PageMeta,
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    next: String,
}

#[derive(Deserialize)]
struct Item {
    metadata: ItemMeta,
    #[serde(default)]
    status: Option<ItemStatus>,
}

#[derive(Deserialize)]
struct ItemMeta {
    name: String,
    namespace: Option<String>,
}

#[derive(Deserialize)]
struct ItemStatus {
    #[serde(default)]
    conditions: Option<Vec<ItemCondition>>,
}

/// A condition as read from a resource: only its type and status matter.
#[derive(Deserialize)]
pub struct ItemCondition {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub status: String,
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

/// The result of one evaluation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Whether any probe has an `Upgradeable` expression.
    pub declares_upgradeable: bool,
    /// `Upgradeable` when any probe has that expression and it can be said.
    pub upgradeable: Option<Desired>,
    pub important: Option<Desired>,
    /// Why the evaluation is incomplete (a list failed, a CRD is unreadable).
    pub problem: Option<String>,
    /// Resources evaluated and resources blocking, when the evaluation is
    /// complete.
    pub counts: Option<(u64, u64)>,
}

/// Where probes come from.
struct Source {
    spec: ProbeSpec,
    /// Resolved by discovery (flags) or read from the CRD (annotations).
    resolved: Option<ResourceType>,
}

/// Lists and evaluates the probed resources on each check.
pub struct Prober {
    flags: Vec<Source>,
    crd_names: Vec<String>,
    /// The probes the CRDs declared, as last read.
    from_crds: Vec<Source>,
    crds_read_at: Option<Instant>,
    /// Namespaces to list namespaced resources in; empty: all at once.
    namespaces: Vec<String>,
}

impl Prober {
    pub fn new(specs: Vec<ProbeSpec>, crd_names: Vec<String>, namespaces: Vec<String>) -> Prober {
        Prober {
            flags: specs.into_iter().map(|spec| Source { spec, resolved: None }).collect(),
            crd_names,
            from_crds: Vec::new(),
            crds_read_at: None,
            namespaces,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.flags.is_empty() && self.crd_names.is_empty()
    }

    /// Lists every probed type and aggregates. Makes
    /// `ceil(resources / PAGE_SIZE)` list requests per type and scope, plus
    /// one discovery request per type until it succeeds and a CRD read
    /// every [`CRD_REFRESH`].
    pub fn evaluate(&mut self, client: &mut Client, now: Instant) -> Outcome {
        let mut problems = Vec::new();
        if let Err(e) = self.refresh_crds(client, now) {
            problems.push(e);
        }
        let mut tally = Tally::default();
        for source in self.flags.iter_mut().chain(self.from_crds.iter_mut()) {
            if let Err(e) = tally_source(client, source, &self.namespaces, &mut tally) {
                problems.push(e);
            }
        }
        let complete = problems.is_empty();
        // Only the condition types some probe declares are published: an
        // operator that sets Upgradeable itself keeps it unless asked.
        let declares = |f: fn(&ProbeSpec) -> bool| self.flags.iter().chain(&self.from_crds).any(|s| f(&s.spec));
        // CRDs not read yet may declare one: until they are, nothing is said.
        let crds_unread = !self.crd_names.is_empty() && self.crds_read_at.is_none();
        let declares_upgradeable = crds_unread || declares(|s| s.upgradeable.is_some());
        Outcome {
            declares_upgradeable,
            upgradeable: declares_upgradeable.then(|| tally.upgradeable(complete)).flatten(),
            important: declares(|s| s.important.is_some()).then(|| tally.important(complete)).flatten(),
            problem: (!complete).then(|| problems.join("; ")),
            counts: complete.then_some((tally.evaluated as u64, tally.blocking.total as u64)),
        }
    }

    fn refresh_crds(&mut self, client: &mut Client, now: Instant) -> Result<(), String> {
        if self.crd_names.is_empty() || self.crds_read_at.is_some_and(|at| now.duration_since(at) < CRD_REFRESH) {
            return Ok(());
        }
        let mut fresh = Vec::new();
        for name in &self.crd_names {
            let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
            let action = format!("get customresourcedefinitions {name:?}");
            let body = client.get_path(&path, &action).map_err(|e| format!("Cannot read CRD {name}: {e}"))?;
            let body = body.ok_or_else(|| format!("CRD {name} does not exist (--probe-from-crd-annotations)"))?;
            match spec_from_crd(&body).map_err(|e| format!("CRD {name}: {e}"))? {
                Some((spec, kind)) => fresh.push(Source { spec, resolved: Some(kind) }),
                None => log::warn!(
                    "CRD {name} has neither {UPGRADEABLE_ANNOTATION} nor {IMPORTANT_ANNOTATION}: nothing to probe"
                ),
            }
        }
        self.from_crds = fresh;
        self.crds_read_at = Some(now);
        Ok(())
    }
}

/// Resolves `source` (discovery, once) and tallies all its resources.
fn tally_source(
    client: &mut Client,
    source: &mut Source,
    namespaces: &[String],
    tally: &mut Tally,
) -> Result<(), String> {
    let spec = &source.spec;
    let name = spec.display_name();
    if source.resolved.is_none() {
        source.resolved = Some(discover(client, spec).map_err(|e| format!("Cannot probe {name}: {e}"))?);
    }
    let resolved = source.resolved.as_ref().expect("resolved above");
    let scopes: Vec<Option<&str>> = match (resolved.namespaced, namespaces.is_empty()) {
        (true, false) => namespaces.iter().map(|ns| Some(ns.as_str())).collect(),
        _ => vec![None],
    };
    for scope in scopes {
        let collection = match scope {
            Some(ns) => format!("{}/namespaces/{ns}/{}", spec.api_path(), spec.resource),
            None => format!("{}/{}", spec.api_path(), spec.resource),
        };
        let action = match scope {
            Some(ns) => format!("list {name} in namespace {ns:?}"),
            None if resolved.namespaced => format!("list {name} in all namespaces"),
            None => format!("list {name}"),
        };
        list_all(client, &collection, &action, spec, &resolved.kind, tally)
            .map_err(|e| format!("Cannot list {name}: {e}"))?;
    }
    Ok(())
}

fn discover(client: &mut Client, spec: &ProbeSpec) -> Result<ResourceType, String> {
    let gv = spec.api_path();
    let body = client
        .get_path(&gv, &format!("get {gv}"))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the API server does not serve {gv} (is the CRD installed?)"))?;
    let list: ApiResourceList =
        serde_json::from_slice(&body).map_err(|e| format!("unexpected discovery answer for {gv}: {e}"))?;
    list.resources
        .into_iter()
        .find(|r| r.name == spec.resource)
        .map(|r| ResourceType { kind: r.kind, namespaced: r.namespaced })
        .ok_or_else(|| format!("{gv} has no resource {:?}", spec.resource))
}

/// Every page of one collection, evaluated as it arrives.
fn list_all(
    client: &mut Client,
    collection: &str,
    action: &str,
    spec: &ProbeSpec,
    kind: &str,
    tally: &mut Tally,
) -> Result<(), KubeError> {
    // A continue token expires (410 Gone) when the list is older than etcd's
    // compaction window; start over once, then give up until the next check.
    let mut restarts_left = 1;
    let mut next = String::new();
    let mut partial = Tally::default();
    loop {
        let mut path = format!("{collection}?limit={PAGE_SIZE}");
        if !next.is_empty() {
            path.push_str("&continue=");
            path.push_str(&percent_encode(&next));
        }
        let body = match client.get_path(&path, action) {
            Ok(Some(body)) => body,
            Ok(None) => return Err(not_served(collection)),
            Err(e) if e.code() == Some(410) && restarts_left > 0 => {
                restarts_left -= 1;
                next.clear();
                partial = Tally::default();
                continue;
            }
            Err(e) => return Err(e),
        };
        let page: Page = serde_json::from_slice(&body)
            .map_err(|e| KubeError::Response { message: format!("unexpected list answer for {collection}: {e}") })?;
        drop(body);
        // Built-in lists name their kind `FooList`; items do not carry it.
        let kind = page.kind.strip_suffix("List").filter(|k| !k.is_empty()).unwrap_or(kind);
        for item in &page.items {
            let conditions = item.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
            let up = spec.upgradeable.as_ref().map(|e| evaluate(e, conditions));
            let imp = spec.important.as_ref().map(|e| evaluate(e, conditions));
            let verdicts = Verdicts { upgradeable: up.as_ref(), important: imp.as_ref() };
            partial.add(kind, item.metadata.namespace.as_deref(), &item.metadata.name, verdicts);
        }
        if page.metadata.next.is_empty() {
            break;
        }
        next = page.metadata.next;
    }
    tally.merge(partial);
    Ok(())
}

fn not_served(collection: &str) -> KubeError {
    KubeError::Response { message: format!("{collection} is not served (was the CRD removed?)") }
}

/// Percent-encodes a continue token for a query string (it is base64 and
/// may hold `+`, `/`, `=`).
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(text: &str) -> ProbeSpec {
        parse_probe(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn conditions(list: &[(&str, &str)]) -> Vec<ItemCondition> {
        list.iter().map(|(k, s)| ItemCondition { kind: k.to_string(), status: s.to_string() }).collect()
    }

    fn tally_of(spec: &ProbeSpec, resources: &[(&str, &[(&str, &str)])]) -> Tally {
        let mut tally = Tally::default();
        for (name, conds) in resources {
            let conds = conditions(conds);
            let up = spec.upgradeable.as_ref().map(|e| evaluate(e, &conds));
            let imp = spec.important.as_ref().map(|e| evaluate(e, &conds));
            tally.add("Foo", Some("apps"), name, Verdicts { upgradeable: up.as_ref(), important: imp.as_ref() });
        }
        tally
    }

    #[test]
    fn parses_the_probe_flag() {
        let p = probe("example.com/v1/foos:Upgradeable=!Migrating;Important=BadConnectivity || UnhealthyDatabase");
        assert_eq!((p.group.as_str(), p.version.as_str(), p.resource.as_str()), ("example.com", "v1", "foos"));
        assert_eq!(p.upgradeable.unwrap().to_string(), "!Migrating");
        assert_eq!(p.important.unwrap().to_string(), "BadConnectivity || UnhealthyDatabase");
        let core = probe("v1/configmaps:Important=Broken");
        assert_eq!((core.group.as_str(), core.api_path()), ("", "/api/v1".to_string()));
        assert_eq!(core.display_name(), "configmaps");
        assert_eq!(probe("example.com/v1/foos:Upgradeable=A").display_name(), "foos.example.com");
    }

    #[test]
    fn probe_flag_errors_say_what_and_where() {
        let cases = [
            ("example.com/v1/foos", "is not GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]"),
            ("foos:Upgradeable=A", "\"foos\" is not GROUP/VERSION/RESOURCE (or VERSION/RESOURCE for the core group)"),
            ("Example.com/v1/foos:Upgradeable=A", "group \"Example.com\": only lowercase letters"),
            ("example.com/v1/foos:Ready=A", "unknown condition \"Ready\" (Upgradeable or Important)"),
            ("example.com/v1/foos:Upgradeable", "\"Upgradeable\" is not Upgradeable=EXPR or Important=EXPR"),
            ("example.com/v1/foos:Upgradeable=A;Upgradeable=B", "Upgradeable is given twice"),
            (
                "example.com/v1/foos:Upgradeable=!Migrating &&",
                "Upgradeable expression \"!Migrating &&\": column 14: expected a condition name, '!' or '(', found the end",
            ),
            (
                "example.com/v1/foos:Important=A && B",
                "Important expression \"A && B\": column 3: only '||' is allowed in an Important expression",
            ),
        ];
        for (text, want) in cases {
            let got = parse_probe(text).unwrap_err();
            assert!(got.starts_with(want), "{text}: {got}");
        }
    }

    #[test]
    fn no_resources_and_unknowns_do_not_block() {
        let spec = probe("example.com/v1/foos:Upgradeable=!Migrating");
        let none = tally_of(&spec, &[]);
        assert_eq!(none.upgradeable(true).unwrap().status, Status::True);
        let unknown = tally_of(&spec, &[("a", &[]), ("b", &[("Migrating", "Unknown")]), ("c", &[("Migrating", "x")])]);
        let c = unknown.upgradeable(true).unwrap();
        assert_eq!((c.status, c.reason.as_str()), (Status::True, "AsExpected"));
        assert_eq!(c.message, "No resource blocks an upgrade (3 checked)");
    }

    #[test]
    fn one_blocking_resource_among_many_blocks_and_is_named() {
        let spec = probe("example.com/v1/foos:Upgradeable=!Migrating");
        let mut resources: Vec<(String, &[(&str, &str)])> = Vec::new();
        for i in 0..1000 {
            resources.push((format!("foo-{i}"), &[("Migrating", "False")]));
        }
        resources[617].1 = &[("Migrating", "True")];
        let refs: Vec<(&str, &[(&str, &str)])> = resources.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        let c = tally_of(&spec, &refs).upgradeable(true).unwrap();
        assert_eq!((c.status, c.reason.as_str()), (Status::False, "NotUpgradeable"));
        assert_eq!(c.message, "Upgrade blocked by 1 resource: Foo apps/foo-617: Migrating");
        assert!(crate::conditions::is_sentence(&c.message) && crate::conditions::is_reason(&c.reason));
    }

    #[test]
    fn many_blockers_are_capped_with_a_count() {
        let spec = probe("example.com/v1/foos:Upgradeable=FinishedMigrating && ReadyToGo");
        let blocked: &[(&str, &str)] = &[("FinishedMigrating", "True"), ("ReadyToGo", "False")];
        let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
        let refs: Vec<(&str, &[(&str, &str)])> = names.iter().map(|n| (n.as_str(), blocked)).collect();
        let c = tally_of(&spec, &refs).upgradeable(true).unwrap();
        assert_eq!(
            c.message,
            "Upgrade blocked by 8 resources: Foo apps/f0: ReadyToGo=False; Foo apps/f1: ReadyToGo=False; \
             Foo apps/f2: ReadyToGo=False; Foo apps/f3: ReadyToGo=False; Foo apps/f4: ReadyToGo=False; and 3 more"
        );
    }

    #[test]
    fn an_incomplete_tally_says_false_but_never_true() {
        let spec = probe("example.com/v1/foos:Upgradeable=!Migrating;Important=Broken");
        let calm = tally_of(&spec, &[("a", &[("Migrating", "False"), ("Broken", "False")])]);
        assert_eq!(calm.upgradeable(false), None);
        assert_eq!(calm.important(false), None);
        let busy = tally_of(&spec, &[("a", &[("Migrating", "True"), ("Broken", "True")])]);
        assert_eq!(busy.upgradeable(false).unwrap().status, Status::False);
        let important = busy.important(false).unwrap();
        assert_eq!((important.status, important.reason.as_str()), (Status::True, "ResourcesNeedAttention"));
        assert_eq!(important.message, "Attention needed for 1 resource: Foo apps/a: Broken");
        assert_eq!(calm.important(true).unwrap().status, Status::False);
    }

    #[test]
    fn reads_the_probe_from_crd_annotations() {
        let crd = serde_json::json!({
            "metadata": {"name": "foos.example.com", "annotations": {
                UPGRADEABLE_ANNOTATION: "!Migrating", IMPORTANT_ANNOTATION: "Broken || Lost"}},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "foos", "kind": "Foo"},
                     "versions": [{"name": "v1alpha1", "served": true, "storage": false},
                                  {"name": "v1", "served": true, "storage": true}]}
        });
        let (spec, kind) = spec_from_crd(crd.to_string().as_bytes()).unwrap().unwrap();
        assert_eq!((spec.version.as_str(), spec.resource.as_str()), ("v1", "foos"));
        assert_eq!(kind, ResourceType { kind: "Foo".into(), namespaced: true });
        assert_eq!(spec.important.unwrap().to_string(), "Broken || Lost");

        let mut plain = crd.clone();
        plain["metadata"]["annotations"] = serde_json::json!({"other": "x"});
        assert_eq!(spec_from_crd(plain.to_string().as_bytes()).unwrap(), None);

        let mut bad = crd;
        bad["metadata"]["annotations"][UPGRADEABLE_ANNOTATION] = "!(Migrating".into();
        assert_eq!(
            spec_from_crd(bad.to_string().as_bytes()).unwrap_err(),
            "annotation olm.operatorframework.io/condition.Upgradeable \"!(Migrating\": \
             column 12: expected ')' to close the '(' at column 2, found the end"
        );
        assert!(spec_from_crd(b"{}").unwrap_err().starts_with("is not a CustomResourceDefinition"));
    }

    #[test]
    fn continue_tokens_are_encoded() {
        assert_eq!(percent_encode("eyJ2Ijo+/="), "eyJ2Ijo%2B%2F%3D");
    }
}
