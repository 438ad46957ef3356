//! Conditions computed from the operator's own custom resources (OLM's
//! Probe design): per resource type, an `Upgradeable` expression and an
//! `Important` expression over the condition types in each resource's
//! `status.conditions`.
//!
//! - [`grammar`]: one `--probe GROUP/VERSION/RESOURCE:Upgradeable=EXPR;Important=EXPR`,
//!   or the same read from a CRD's `olm.operatorframework.io/condition.*`
//!   annotations (pure).
//! - [`tally`]: the aggregation (pure).
//! - [`Prober`] (here): a [`Signal`]; on each check, lists every probed type page by page
//!   (`limit` + `continue`), so memory is bounded by one page however many
//!   resources exist, and turns the tally into conditions.
//!
//! A failed list never turns into "upgradeable": the last published value
//! stands (only a resource seen blocking is reason enough to say `False`),
//! and the failure is reported as a problem (the status turns `degraded`).
//!
//! Paging is bounded ([`Pager`]): a server that keeps answering with a
//! `continue` token (a buggy aggregated API) must not hold the agent's loop,
//! so a collection gets at most [`MAX_PAGES`] pages, a check at most
//! [`LIST_BUDGET`] (or one heartbeat interval, if shorter) of listing, and a
//! token that comes back ends the list.

pub mod grammar;
pub mod tally;

use super::{Observation, Signal};
use crate::conditions::{Desired, Status};
use crate::kube::{Client, KubeError};
use crate::status::{Problem, Rule};
use crate::util::reported::Reported;
use grammar::{IMPORTANT_ANNOTATION, ProbeSpec, ResourceType, UPGRADEABLE_ANNOTATION, spec_from_crd};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use std::time::{Duration, Instant};
use tally::{ItemCondition, Tally, Verdicts, evaluate};

/// Where the permissions to read the CRDs and list the resources are
/// granted.
const GRANT: &str = "see manifests/olm";

/// Resources per list page: a page of typical CRs is well under the client's
/// 4 MiB body limit, and the parsed page keeps only names and conditions.
pub const PAGE_SIZE: usize = 250;

/// The most resources of one type (in one scope) a check evaluates: far
/// above what an operator manages, far below what would stall the loop.
pub const MAX_RESOURCES: usize = 100_000;

/// Pages per collection per check: [`MAX_RESOURCES`] in full pages.
pub const MAX_PAGES: usize = MAX_RESOURCES.div_ceil(PAGE_SIZE);

/// Wall-clock time all the lists of one check may take at most (the real
/// API server lists 2,000 resources in under a second); never more than one
/// heartbeat interval, so a check cannot hold the heartbeat past the
/// liveness window. Past it, the check stops listing and reports the probe
/// as failed, and the heartbeat goes on.
pub const LIST_BUDGET: Duration = Duration::from_secs(10);

/// CRD annotations are re-read this often (an operator upgrade may change
/// them); in between, the parsed expressions are reused.
pub const CRD_REFRESH: Duration = Duration::from_secs(300);

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
    /// Resources evaluated and resources blocking, as of the last complete
    /// evaluation.
    pub counts: Option<(u64, u64)>,
}

/// The time one check may spend listing: its length, and when it ends.
#[derive(Clone, Copy)]
struct Budget {
    length: Duration,
    until: Instant,
}

/// The bounds on one collection's paging: pages, the check's [`Budget`],
/// and tokens already followed (as hashes: a token can be long; at most
/// [`MAX_PAGES`], so a scan is cheap and no hash table is linked in). Pure:
/// the clock is an argument.
struct Pager {
    pages: usize,
    budget: Budget,
    seen: Vec<u64>,
}

impl Pager {
    fn new(budget: Budget) -> Pager {
        Pager { pages: 0, budget, seen: Vec::new() }
    }

    /// Whether to fetch the page `token` points at; why not, when not.
    fn follow(&mut self, token: &str, now: Instant) -> Result<(), String> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        self.pages += 1;
        if self.pages >= MAX_PAGES {
            return Err(format!(
                "the API server still had more after {MAX_PAGES} pages of {PAGE_SIZE} (at most {MAX_RESOURCES} \
                 resources are probed per type): stopped listing"
            ));
        }
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(token);
        if self.seen.contains(&hash) {
            return Err(format!(
                "the API server returned a continue token it had already given, after {} pages: stopped listing",
                self.pages
            ));
        }
        self.seen.push(hash);
        if now >= self.budget.until {
            return Err(format!(
                "listing took longer than {}s ({} pages): stopped; the next check tries again",
                self.budget.length.as_secs(),
                self.pages
            ));
        }
        Ok(())
    }

    /// Restarts the collection (its continue token expired).
    fn restart(&mut self) {
        self.seen.clear();
    }
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
    problem: Reported,
    /// Resources evaluated and blocking, from the last complete evaluation.
    counts: Option<(u64, u64)>,
    /// How long one check may spend listing.
    list_budget: Duration,
}

impl Prober {
    pub fn new(specs: Vec<ProbeSpec>, crd_names: Vec<String>, namespaces: Vec<String>) -> Prober {
        Prober {
            flags: specs.into_iter().map(|spec| Source { spec, resolved: None }).collect(),
            crd_names,
            from_crds: Vec::new(),
            crds_read_at: None,
            namespaces,
            problem: Reported::default(),
            counts: None,
            list_budget: LIST_BUDGET,
        }
    }

    /// Lists no longer than `interval` (the heartbeat) per check, if that is
    /// shorter than [`LIST_BUDGET`].
    pub fn within(mut self, interval: Duration) -> Prober {
        self.list_budget = LIST_BUDGET.min(interval);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.flags.is_empty() && self.crd_names.is_empty()
    }

    /// Why the operator's resources need attention: a probe failed, or an
    /// `Important` expression holds.
    fn resources_problem(outcome: &Outcome) -> Option<&str> {
        outcome
            .problem
            .as_deref()
            .or_else(|| outcome.important.as_ref().filter(|c| c.status == Status::True).map(|c| c.message.as_str()))
    }

    /// Lists every probed type and aggregates. Makes
    /// `ceil(resources / PAGE_SIZE)` list requests per type and scope, plus
    /// one discovery request per type until it succeeds and a CRD read
    /// every [`CRD_REFRESH`].
    fn evaluate(&mut self, client: &mut Client, now: Instant) -> Outcome {
        let mut problems = Vec::new();
        if let Err(e) = self.refresh_crds(client, now) {
            problems.push(e);
        }
        let mut tally = Tally::default();
        // An Instant that cannot hold 10 s more does not occur; if it did,
        // each list would stop after its first page rather than abort.
        let until = Instant::now().checked_add(self.list_budget).unwrap_or(now);
        let budget = Budget { length: self.list_budget, until };
        for source in self.flags.iter_mut().chain(self.from_crds.iter_mut()) {
            if let Err(e) = tally_source(client, source, &self.namespaces, budget, &mut tally) {
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
            counts: if complete { Some((tally.evaluated as u64, tally.blocking.total as u64)) } else { self.counts },
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
            let body = client
                .get_path(&path, &action)
                .map_err(|e| format!("Cannot read CRD {name}: {}", e.granted_by(GRANT)))?;
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

impl Signal for Prober {
    fn observe(&mut self, client: &mut Client, now: Instant, into: &mut Observation) {
        let outcome = self.evaluate(client, now);
        self.problem.update(outcome.problem.clone(), log::Level::Warn, "Probing the operator's resources works again");
        self.counts = outcome.counts;
        if let Some(why) = Prober::resources_problem(&outcome) {
            into.problems.push(Problem::degraded(Rule::Resources, why));
        }
        into.probes = Some(outcome);
    }

    /// Reading the CRDs (one call each, when due), then per source its
    /// discovery (once) and one list per scope. Sources a CRD declares are
    /// counted one per CRD, and a list as one page: pagination has no
    /// bound of its own here yet (issue #16 item 7 gives it one, which
    /// multiplies this).
    fn worst_case(&self) -> Duration {
        let scopes = self.namespaces.len().max(1);
        let sources = self.flags.len() + self.crd_names.len();
        // CRD reads, one discovery per type, and one page per collection
        // in flight, plus the time the lists of one check may take
        // ([`Pager`]: the budget, then at most the page in flight).
        let calls = self.crd_names.len() + sources * (1 + scopes);
        let per_call = crate::kube::call_bound().saturating_mul(u32::try_from(calls).unwrap_or(u32::MAX));
        per_call.saturating_add(self.list_budget)
    }
}

/// Resolves `source` (discovery, once) and tallies all its resources.
fn tally_source(
    client: &mut Client,
    source: &mut Source,
    namespaces: &[String],
    budget: Budget,
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
        list_all(client, &collection, &action, spec, &resolved.kind, budget, tally)
            .map_err(|e| format!("Cannot list {name}: {}", e.granted_by(GRANT)))?;
    }
    Ok(())
}

fn discover(client: &mut Client, spec: &ProbeSpec) -> Result<ResourceType, String> {
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

/// Every page of one collection, evaluated as it arrives, within the
/// [`Pager`]'s bounds.
fn list_all(
    client: &mut Client,
    collection: &str,
    action: &str,
    spec: &ProbeSpec,
    kind: &str,
    budget: Budget,
    tally: &mut Tally,
) -> Result<(), KubeError> {
    // A continue token expires (410 Gone) when the list is older than etcd's
    // compaction window; start over once, then give up until the next check.
    let mut restarts_left = 1;
    let mut next = String::new();
    let mut partial = Tally::default();
    let mut pager = Pager::new(budget);
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
                pager.restart();
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
        pager.follow(&page.metadata.next, Instant::now()).map_err(|message| KubeError::Response { message })?;
        next = page.metadata.next;
    }
    tally.merge(partial);
    Ok(())
}

fn not_served(collection: &str) -> KubeError {
    KubeError::Response { message: format!("{collection} is not served (was the CRD removed?)") }
}

/// What a query value may hold unencoded: RFC 3986's unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// Percent-encodes a continue token for a query string (it is base64 and
/// may hold `+`, `/`, `=`).
fn percent_encode(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_stops_at_the_page_bound() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        let followed = (1..).take_while(|n| pager.follow(&format!("token-{n}"), now).is_ok()).count();
        assert_eq!(followed, MAX_PAGES - 1, "the first page and MAX_PAGES - 1 followed tokens");
        assert_eq!(MAX_PAGES * PAGE_SIZE, MAX_RESOURCES);
        let e = pager.follow("one-more", now).unwrap_err();
        assert!(e.starts_with("the API server still had more after 400 pages of 250"), "{e}");
    }

    #[test]
    fn paging_stops_on_a_token_seen_before() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        for token in ["a", "b", "c"] {
            assert_eq!(pager.follow(token, now), Ok(()));
        }
        let e = pager.follow("b", now).unwrap_err();
        assert!(e.contains("a continue token it had already given, after 4 pages"), "{e}");
        pager.restart();
        assert_eq!(pager.follow("b", now), Ok(()), "a restarted list may see its tokens again");
    }

    #[test]
    fn paging_stops_at_the_deadline() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        assert_eq!(pager.follow("a", now + LIST_BUDGET - Duration::from_millis(1)), Ok(()));
        let e = pager.follow("b", now + LIST_BUDGET).unwrap_err();
        assert_eq!(e, "listing took longer than 10s (2 pages): stopped; the next check tries again");
    }

    #[test]
    fn continue_tokens_are_encoded() {
        assert_eq!(percent_encode("eyJ2Ijo+/="), "eyJ2Ijo%2B%2F%3D");
        assert_eq!(percent_encode("a-b_c.d~e f&g%h"), "a-b_c.d~e%20f%26g%25h");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }
}
