//! Conditions computed from the operator's own custom resources (OLM's
//! Probe design): per resource type, an `Upgradeable` expression and an
//! `Important` expression over the condition types in each resource's
//! `status.conditions`.
//!
//! - [`grammar`]: one `--probe GROUP/VERSION/RESOURCE:Upgradeable=EXPR;Important=EXPR`,
//!   or the same read from a CRD's `olm.operatorframework.io/condition.*`
//!   annotations (pure).
//! - [`tally`]: the aggregation (pure).
//! - [`census`]: the per-condition counts for `/metrics` and `/status`
//!   (pure), taken from each store once per check.
//! - [`collection`]: one probed type in one scope, and how it is judged.
//! - [`list`]: a collection's list into a fresh store, from the watch
//!   cache or the latest; `answer`: one answer read as it arrives;
//!   `pager`: the list's bounds (pure).
//! - [`store`]: per collection, each resource's name and what its
//!   expressions decided, and how a watch event changes that (pure);
//!   `table`: the sorted table it keeps them in, with their marks.
//! - [`watcher`]: list-then-watch of one collection on a thread of its own
//!   (the state machine is pure), nudging the agent when a verdict changed.
//! - [`Prober`] (here): a [`Signal`]; resolves the probed types (discovery,
//!   CRD annotations), keeps one [`Watcher`] per collection while this
//!   instance publishes, and on each check turns their stores into
//!   conditions without a request. `opstatus once` lists instead (one
//!   check has nothing to watch for).
//!
//! A failed list or watch never turns into "upgradeable": the last
//! published value stands (only a resource seen blocking is reason enough
//! to say `False`), and the failure is reported as a problem (the status
//! turns `degraded`). Until a collection's first list completed, nothing is
//! said about it but how far that list got (`/status`'s `listing`): a
//! first list that makes progress is no problem, however long it takes.
//!
//! A list is bounded ([`pager::Pager`]): each resource in an answer by the
//! client's 4 MiB, not the answer (read as it arrives, it may be 100 MB);
//! a server that keeps answering with a `continue` token (a buggy
//! aggregated API) must not list forever, so a collection gets at most
//! [`MAX_RESOURCES`] resources and [`MAX_PAGES`] pages, and time ends the
//! list (a token that comes back lists nothing new): [`LIST_BUDGET`] (or
//! one heartbeat interval, if shorter) without a resource not listed
//! before, and [`LIST_ANSWER`] for one answer. A watch thread's first list reads the API server's watch cache
//! (`resourceVersion=0`), as client-go's reflector does; a paged list that
//! fails keeps what it listed and its `continue` token, and the next try
//! goes on from there ([`list::Listing`]).

mod answer;
pub(crate) mod census;
pub(crate) mod collection;
pub(crate) mod grammar;
pub(crate) mod list;
mod pager;
pub(crate) mod store;
mod table;
pub(crate) mod tally;
pub(crate) mod watcher;

use super::{Observation, Signal};
use crate::conditions::{Desired, Status};
use crate::kube::{Client, KubeError};
use crate::status::{Problem, Rule};
use crate::util::reported::Reported;
use crate::util::shutdown::Nudge;
use collection::Collection;
use grammar::{IMPORTANT_ANNOTATION, ProbeSpec, ResourceType, UPGRADEABLE_ANNOTATION, spec_from_crd};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use std::time::{Duration, Instant};
use tally::Tally;
use watcher::Watcher;

/// Where the permissions to read the CRDs and list the resources are
/// granted, for each way opstatus runs (the 403's message names the
/// account it ran as).
const GRANT: &str = "as the operator's own ServiceAccount (the sidecar component), which usually may list its \
                     resources already, see manifests/components/opstatus-olm; as manifests/base's `opstatus`, \
                     see manifests/olm (docs/olm.md, Steps)";

/// Resources per list page, where the API server pages (a quorum read
/// from etcd; a watch cache that pages): what client-go and kube-rs ask
/// for. Each resource is read on its own as the answer arrives, bounded by
/// the client's 4 MiB ([`list`]), so a page's size is no bound of its own.
pub(crate) const PAGE_SIZE: usize = 500;

/// The longest one list answer may take to begin and, again, to arrive:
/// the API server writes a list only once it encoded
/// the whole of it (100 MB for 50,000 typical CRs) and cuts one that takes
/// longer than its request timeout (60 s by default); past this, an answer
/// that stalled is given up and the list tried again.
pub(crate) const LIST_ANSWER: Duration = Duration::from_secs(120);

/// The most resources of one type (in one scope) a check evaluates: far
/// above what an operator manages, far below what would stall the loop.
pub(crate) const MAX_RESOURCES: usize = 100_000;

/// The most collections probed (a type in one namespace, or across all):
/// each is watched by a thread of its own on a connection of its own. A
/// configuration over it is refused at start ([`crate::cli`]); should
/// discovery ever find more, the first are probed and the rest reported.
pub(crate) const MAX_COLLECTIONS: usize = 32;

/// Pages per collection per list: [`MAX_RESOURCES`] pages of one (a
/// server may answer fewer than the `limit` asked for), so a server whose
/// pages never end (a token that comes back among them) is stopped by
/// this or by the [`LIST_BUDGET`].
pub(crate) const MAX_PAGES: usize = MAX_RESOURCES;

/// How long a list may go without progress (a resource not listed
/// before). Never more than one heartbeat interval. Past it, the list
/// stops and the probe is reported failed.
pub(crate) const LIST_BUDGET: Duration = Duration::from_secs(10);

/// CRD annotations are re-read this often (an operator upgrade may change
/// them); in between, the parsed expressions are reused.
pub(crate) const CRD_REFRESH: Duration = Duration::from_secs(300);

/// The result of one evaluation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
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
    /// The collections whose first list is still under way, with how far
    /// it got (`listing foos.example.com in namespace "ops": 31500 so
    /// far`): not a problem while it makes progress.
    pub listing: Vec<String>,
    /// Condition names an expression uses that no resource of its type
    /// carries while they carry others: a likely typo, said out loud
    /// (absence still means `False`).
    pub unseen: Vec<String>,
    /// Per resource type with a store, its resources per condition type
    /// and status ([`census`]): for `/metrics` and `/status`.
    pub conditions: Vec<census::ResourceConditions>,
}

/// Where probes come from.
struct Source {
    spec: ProbeSpec,
    /// Resolved by discovery (flags) or read from the CRD (annotations).
    resolved: Option<ResourceType>,
}

/// Evaluates the probed resources on each check.
pub(crate) struct Prober {
    flags: Vec<Source>,
    crd_names: Vec<String>,
    /// The probes the CRDs declared, as last read.
    from_crds: Vec<Source>,
    crds_read_at: Option<Instant>,
    /// Namespaces to list namespaced resources in; empty: all at once.
    namespaces: Vec<String>,
    problem: Reported,
    /// The unseen condition names, said once per change.
    unseen: Reported,
    /// Resources evaluated and blocking, from the last complete evaluation.
    counts: Option<(u64, u64)>,
    /// How long one list may take.
    list_budget: Duration,
    /// Set in `run`: collections are watched, and a watch nudges the loop.
    nudge: Option<Nudge>,
    /// One per collection, while this instance publishes.
    watchers: Vec<Watcher>,
    /// `--condition-metrics-max-types`.
    condition_types: usize,
    /// Says untracked condition types once per resource type.
    overflow: census::OverflowLog,
}

impl Prober {
    pub(crate) fn new(specs: Vec<ProbeSpec>, crd_names: Vec<String>, namespaces: Vec<String>) -> Prober {
        Prober {
            flags: specs.into_iter().map(|spec| Source { spec, resolved: None }).collect(),
            crd_names,
            from_crds: Vec::new(),
            crds_read_at: None,
            namespaces,
            problem: Reported::default(),
            unseen: Reported::default(),
            counts: None,
            list_budget: LIST_BUDGET,
            nudge: None,
            watchers: Vec::new(),
            condition_types: census::DEFAULT_TYPES,
            overflow: census::OverflowLog::default(),
        }
    }

    /// Counts at most `max` condition types per resource type for the
    /// metrics (0: none).
    pub(crate) fn condition_metrics(mut self, max: usize) -> Prober {
        self.condition_types = max;
        for source in &mut self.flags {
            source.spec.condition_types = max;
        }
        self
    }

    /// Watches the collections (a thread each, started at the first check)
    /// instead of listing them on every check; `nudge` wakes the agent when
    /// a verdict changed.
    pub(crate) fn watching(mut self, nudge: Nudge) -> Prober {
        self.nudge = Some(nudge);
        self
    }

    /// Lets a list go without progress no longer than `interval` (the
    /// heartbeat), if that is shorter than [`LIST_BUDGET`].
    pub(crate) fn within(mut self, interval: Duration) -> Prober {
        self.list_budget = LIST_BUDGET.min(interval);
        self
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.flags.is_empty() && self.crd_names.is_empty()
    }

    /// Aggregates every probed collection: from the watchers' stores, or
    /// (without watches) by listing each. Requests: a CRD read every
    /// [`CRD_REFRESH`], one discovery per type until it succeeds, and
    /// without watches `ceil(resources / PAGE_SIZE)` lists per collection
    /// (one, from a server that does not page).
    fn evaluate(&mut self, client: &mut Client, now: Instant) -> Outcome {
        let mut problems = Vec::new();
        if let Err(e) = self.refresh_crds(client, now) {
            problems.push(e);
        }
        let mut collections = Vec::new();
        for source in self.flags.iter_mut().chain(self.from_crds.iter_mut()) {
            match collections_of(client, source, &self.namespaces) {
                Ok(found) => collections.extend(found),
                Err(e) => problems.push(e),
            }
        }
        problems.extend(capped(&mut collections));
        let mut tally = Tally::default();
        let mut unseen: Vec<(bool, String)> = Vec::new();
        let mut pending = false;
        let mut listing = Vec::new();
        // What the stores hold that is wrong (resources that cannot be
        // read, too many): reported, but only too many leaves the tally
        // incomplete (`partial`); one that cannot be read is unknown, which
        // never blocks, and every other resource still counts.
        let mut noted = Vec::new();
        let mut partial = false;
        let (mut conditions, cap) = (Vec::new(), self.condition_types);
        let mut read = |c: &Collection, s: &mut store::Store| {
            partial |= !s.holds_all();
            noted.extend(s.problem(&c.kind).map(|u| format!("Probing {}{}: {u}", c.name, c.scope)));
            s.tally(&c.kind, &mut tally);
            unseen.extend(s.unseen_conditions(&c.kind, &c.spec));
            census::merge(&mut conditions, (&c.spec.group, &c.kind), s.census(), cap)
        };
        match self.nudge.clone() {
            None => {
                for c in &collections {
                    match list::Listing::latest(self.list_budget).run(client, c, "", &mut |_| {}) {
                        Ok(mut store) => read(c, &mut store),
                        Err(e) => problems.push(format!("Cannot list {}: {}", c.name, e.granted_by(GRANT))),
                    }
                }
            }
            Some(nudge) => {
                self.keep_watching(client, collections, &nudge, &mut problems);
                for w in &self.watchers {
                    let mut shared = w.shared.lock().unwrap_or_else(|p| p.into_inner());
                    problems.extend(shared.health.problem_at(now).cloned());
                    match &mut shared.store {
                        Some(store) => read(&w.collection, store),
                        None => {
                            pending = true;
                            let so_far = shared.listing.unwrap_or(0);
                            listing
                                .push(format!("listing {}{}: {so_far} so far", w.collection.name, w.collection.scope));
                        }
                    }
                }
            }
        }
        let complete = problems.is_empty() && !pending && !partial;
        problems.extend(noted);
        // Only the condition types some probe declares are published: an
        // operator that sets Upgradeable itself keeps it unless asked.
        let declares = |f: fn(&ProbeSpec) -> bool| self.flags.iter().chain(&self.from_crds).any(|s| f(&s.spec));
        // CRDs not read yet may declare one: until they are, nothing is said.
        let crds_unread = !self.crd_names.is_empty() && self.crds_read_at.is_none();
        let declares_upgradeable = crds_unread || declares(|s| s.upgradeable.is_some());
        // Several collections of one type (one per namespace) see the same.
        unseen.dedup();
        let mut upgradeable = declares_upgradeable.then(|| tally.upgradeable(complete)).flatten();
        // "No resource blocks an upgrade" is only as good as the names the
        // expression reads: where one is carried by none, say so beside it.
        let upgradeable_unseen = unseen.iter().find(|(upgradeable, _)| *upgradeable);
        if let (Some(up), Some((_, said))) = (upgradeable.as_mut(), upgradeable_unseen)
            && up.status == Status::True
        {
            up.message = format!("{}. {said}", up.message);
        }
        Outcome {
            declares_upgradeable,
            upgradeable,
            important: declares(|s| s.important.is_some()).then(|| tally.important(complete)).flatten(),
            problem: joined(&problems),
            listing,
            counts: if complete { Some((tally.evaluated as u64, tally.blocking.total as u64)) } else { self.counts },
            unseen: unseen.into_iter().map(|(_, said)| said).collect(),
            conditions,
        }
    }

    /// One watcher per collection: new collections (a new probe, a CRD
    /// whose version or expressions changed in an upgrade) start one, and
    /// the watchers of collections no longer probed stop.
    fn keep_watching(&mut self, client: &Client, wanted: Vec<Collection>, nudge: &Nudge, problems: &mut Vec<String>) {
        self.watchers.retain(|w| wanted.contains(&w.collection));
        for c in wanted {
            if self.watchers.iter().any(|w| w.collection == c) {
                continue;
            }
            let name = c.name.clone();
            match Watcher::start(client.sibling(), c, nudge.clone(), self.list_budget) {
                Ok(w) => self.watchers.push(w),
                Err(e) => problems.push(format!("Cannot watch {name}: cannot start a thread: {e}")),
            }
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
                Some((spec, kind)) => fresh.push(Source {
                    spec: ProbeSpec { condition_types: self.condition_types, ..spec },
                    resolved: Some(kind),
                }),
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
    /// A standby does not watch: its watches stop at once (their
    /// connections are shut down) and nothing they saw is used; a new
    /// holder starts them again with a list.
    fn waits_for_the_lock(&self) -> bool {
        true
    }

    fn stand_by(&mut self) {
        if !self.watchers.is_empty() {
            log::debug!("Standing by: the probes' watches stop");
            self.watchers.clear();
        }
    }

    fn observe(&mut self, client: &mut Client, now: Instant, into: &mut Observation) {
        let outcome = self.evaluate(client, now);
        self.overflow.say(&outcome.conditions, self.condition_types);
        self.problem.update(outcome.problem.clone(), log::Level::Warn, "Probing the operator's resources works again");
        self.counts = outcome.counts;
        let unseen = joined(&outcome.unseen);
        self.unseen.update(unseen, log::Level::Warn, "Every condition the probes' expressions name is carried again");
        // The operator's resources need attention: a probe failed, or an
        // `Important` expression holds.
        let important = outcome.important.as_ref().filter(|c| c.status == Status::True).map(|c| c.message.as_str());
        if let Some(why) = outcome.problem.as_deref().or(important) {
            into.problems.push(Problem::degraded(Rule::Resources, why));
        }
        into.probes = Some(outcome);
    }

    /// Reading the CRDs (one call each, when due) and one discovery per
    /// source until it succeeded (sources a CRD declares counted one per
    /// CRD). The lists and watches run on their own threads; `once`, which
    /// lists on its loop, has no liveness to keep.
    fn worst_case(&self) -> Duration {
        let calls = 2 * self.crd_names.len() + self.flags.len();
        crate::kube::call_bound().saturating_mul(u32::try_from(calls).unwrap_or(u32::MAX))
    }
}

/// The longest problem text the probes report: many failing collections
/// (one per namespace, each with a server's message) must not grow the
/// status, `/readyz` and the log line without end.
const MAX_PROBLEM: usize = 2048;

/// Every problem in one line, sanitised and bounded by [`MAX_PROBLEM`].
fn joined(problems: &[String]) -> Option<String> {
    (!problems.is_empty()).then(|| crate::util::text::sanitize(&problems.join("; "), MAX_PROBLEM))
}

/// Keeps the first [`MAX_COLLECTIONS`] collections; the problem of the
/// ones dropped.
fn capped(collections: &mut Vec<Collection>) -> Option<String> {
    let found = collections.len();
    collections.truncate(MAX_COLLECTIONS);
    (found > MAX_COLLECTIONS)
        .then(|| format!("{found} collections to probe, more than {MAX_COLLECTIONS}: only the first are probed"))
}

/// Resolves `source` (discovery, once) into its collections: one per
/// namespace probed, or one across all namespaces.
fn collections_of(client: &mut Client, source: &mut Source, namespaces: &[String]) -> Result<Vec<Collection>, String> {
    let spec = &source.spec;
    let name = spec.display_name();
    if source.resolved.is_none() {
        source.resolved = Some(collection::discover(client, spec).map_err(|e| format!("Cannot probe {name}: {e}"))?);
    }
    let resolved = source.resolved.as_ref().expect("resolved above");
    let scopes: Vec<Option<&str>> = match (resolved.namespaced, namespaces.is_empty()) {
        (true, false) => namespaces.iter().map(|ns| Some(ns.as_str())).collect(),
        _ => vec![None],
    };
    Ok(scopes
        .into_iter()
        .map(|scope| Collection {
            path: match scope {
                Some(ns) => format!("{}/namespaces/{ns}/{}", spec.api_path(), spec.resource),
                None => format!("{}/{}", spec.api_path(), spec.resource),
            },
            name: name.clone(),
            scope: match scope {
                Some(ns) => format!(" in namespace {ns:?}"),
                None if resolved.namespaced => " in all namespaces".into(),
                None => String::new(),
            },
            spec: spec.clone(),
            kind: resolved.kind.clone(),
        })
        .collect())
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
    fn the_joined_problem_text_is_bounded() {
        assert_eq!(joined(&[]), None);
        let one = "Cannot list foos.example.com in namespace \"a\": 403 Forbidden".to_string();
        assert_eq!(joined(std::slice::from_ref(&one)).as_deref(), Some(one.as_str()));
        let many: Vec<String> = (0..200).map(|i| format!("Cannot watch foos in ns-{i}: {}", "y".repeat(900))).collect();
        let text = joined(&many).unwrap();
        assert!(text.len() <= MAX_PROBLEM && text.ends_with('…'), "{}", text.len());
    }

    #[test]
    fn at_most_max_collections_are_probed_and_the_rest_reported() {
        let spec = grammar::parse_probe("example.com/v1/foos:Upgradeable=!Migrating").unwrap();
        let one = |i: usize| Collection {
            path: format!("/apis/example.com/v1/namespaces/ns-{i}/foos"),
            name: "foos.example.com".into(),
            scope: format!(" in namespace \"ns-{i}\""),
            spec: spec.clone(),
            kind: "Foo".into(),
        };
        let mut fits: Vec<Collection> = (0..MAX_COLLECTIONS).map(one).collect();
        assert_eq!((capped(&mut fits), fits.len()), (None, MAX_COLLECTIONS));
        let mut over: Vec<Collection> = (0..200).map(one).collect();
        let said = capped(&mut over);
        assert_eq!(said.as_deref(), Some("200 collections to probe, more than 32: only the first are probed"));
        assert_eq!(over, (0..MAX_COLLECTIONS).map(one).collect::<Vec<_>>());
    }

    #[test]
    fn continue_tokens_are_encoded() {
        assert_eq!(percent_encode("eyJ2Ijo+/="), "eyJ2Ijo%2B%2F%3D");
        assert_eq!(percent_encode("a-b_c.d~e f&g%h"), "a-b_c.d~e%20f%26g%25h");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }
}
