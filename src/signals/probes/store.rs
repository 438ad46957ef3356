//! What a probed collection's watch keeps in memory, pure: per resource its
//! name (`namespace/name`) and only what its expressions decided about it
//! (why it blocks an upgrade, why it needs attention; nothing for the
//! usual resource that does neither), and how a list page or a watch event
//! changes that, with each resource's [`Row`] of condition statuses and
//! transition times for the per-condition counts ([`super::census`]).
//! Whole objects are never kept: 10,000 resources cost their names and
//! rows.

use super::MAX_RESOURCES;
use super::census::{TypeCounts, count, row_of};

/// What [`Store::census`] gives: the counts per counted type, the
/// resources with a type not counted, and a few of those types.
type Census = (Vec<TypeCounts>, u64, Vec<Box<str>>);
use super::grammar::ProbeSpec;
use super::table::{ABSENT, Marks, ROW_TYPES, Row, Table};
use super::tally::{ItemCondition, Tally, evaluate};
use crate::expr::{Expr, Truth};
use crate::util::text::{MAX_FOREIGN, sanitize};
use serde::Deserialize;

/// One collection's resources, sorted by `namespace/name` (a list
/// appends them as they come and sorts them once, at its end), and the
/// `resourceVersion` it is current to. A sorted [`Table`], not a map: 16 bytes a resource and its
/// key's, and no tree code in a binary with a size budget; an added or
/// deleted resource moves the tail (microseconds at 10,000).
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    objects: Table,
    pub resource_version: String,
    /// The condition types the resources carry, sorted, at most
    /// [`MAX_TYPES`] (each at most [`MAX_TYPE_LEN`] bytes): what an
    /// expression's names are checked against for a likely typo.
    types: Vec<Box<str>>,
    /// The condition types counted per status for the metrics, in the
    /// order first seen: at most the spec's `condition_types`; each
    /// resource's [`Row`] indexes them.
    tracked: Vec<Box<str>>,
    /// New resources not kept because the store holds [`MAX_RESOURCES`]:
    /// reported until a list that fits replaces the store.
    beyond: u64,
    /// Who carries the counted types ([`Store::types_stale`]).
    carriers: Carriers,
}

/// Per counted type, the resources that carry it; and the resources that
/// carry a type not counted.
#[derive(Clone, Debug, Default)]
struct Carriers {
    per_type: [u32; ROW_TYPES],
    untracked: u32,
}

impl Carriers {
    /// Counts `row` in (or, `false`, out).
    fn carry(&mut self, row: &Row, add: bool) {
        let step = |n: &mut u32| *n = if add { n.saturating_add(1) } else { n.saturating_sub(1) };
        (0..ROW_TYPES).filter(|i| row.status(*i) != ABSENT).for_each(|i| step(&mut self.per_type[i]));
        if row.untracked {
            step(&mut self.untracked);
        }
    }
}

/// How many distinct condition types a store remembers.
const MAX_TYPES: usize = 32;
/// Longer condition types are not remembered (Kubernetes allows 316
/// characters; real ones are a word or two).
const MAX_TYPE_LEN: usize = 64;
/// How many unknown condition names one collection reports.
const MAX_UNSEEN: usize = 3;
/// How much of the parser's reason for an unreadable resource is kept.
const MAX_REASON: usize = 160;
/// A resource name's limit (a namespace's is 63, and a `/` between).
const MAX_KEY: usize = 253 + 64;

/// A resource read leniently: its name always when it has one, and what
/// its expressions decided, or why its fields could not be read. One
/// resource with a field of an unexpected type (a CRD without a strict
/// schema, a boolean condition `status`) must not hide the others.
pub(crate) enum Parsed {
    Read(Item),
    /// Named, but the rest is not what a resource's status looks like.
    Unreadable {
        key: Box<str>,
        version: String,
        why: Box<str>,
    },
}

/// A resource as a list or an event carries it: the status is read on
/// its own, so a status that cannot be read still leaves the name.
#[derive(Deserialize)]
struct Raw<'a> {
    metadata: ItemMeta,
    #[serde(borrow, default)]
    status: Option<&'a serde_json::value::RawValue>,
}

/// Reads one resource's JSON; `Err` only when not even its name can be
/// read (then nothing can be said about which resource it was).
pub(crate) fn parse_item(json: &str) -> Result<Parsed, serde_json::Error> {
    let raw = serde_json::from_str::<Raw>(json)?;
    let status = raw.status.map(|s| serde_json::from_str::<ItemStatus>(s.get())).transpose();
    let item = Item { metadata: raw.metadata, conditions: Vec::new() };
    Ok(match status {
        Ok(status) => Parsed::Read(Item { conditions: status.and_then(|s| s.conditions).unwrap_or_default(), ..item }),
        Err(e) => Parsed::Unreadable {
            key: item.key(),
            version: item.metadata.resource_version,
            why: sanitize(&e.to_string(), MAX_REASON).into(),
        },
    })
}

/// A resource reduced to what the expressions read.
pub(crate) struct Item {
    pub metadata: ItemMeta,
    conditions: Vec<ItemCondition>,
}

#[derive(Deserialize)]
pub(crate) struct ItemMeta {
    #[serde(default)]
    name: String,
    namespace: Option<String>,
    #[serde(rename = "resourceVersion", default)]
    pub resource_version: String,
}

#[derive(Deserialize)]
#[serde(expecting = "a status object")]
struct ItemStatus {
    #[serde(default)]
    conditions: Option<Vec<ItemCondition>>,
}

/// A watch event (`{"type": ..., "object": ...}`, one per line). The
/// object is read once its type is known (an `ERROR` carries a `Status`).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

#[derive(Deserialize)]
struct ErrorStatus {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
}

/// What one watch event did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Nothing any expression reads changed (a new version, a bookmark, a
    /// resource added or removed that neither blocks nor needs attention).
    Quiet,
    /// A resource's verdict changed: the outcome may have.
    Changed,
    /// The version watched from is gone (410): list again.
    Gone,
    /// The stream cannot be trusted from here: an error event, or a line
    /// that is not an event.
    Failed(String),
}

impl Item {
    /// `namespace/name`, or `name` for a cluster-scoped resource.
    fn key(&self) -> Box<str> {
        let key = match &self.metadata.namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{}", self.metadata.name),
            _ => self.metadata.name.clone(),
        };
        // Names from the server end up in messages: sanitised and bounded.
        sanitize(&key, MAX_KEY).into()
    }

    /// What `spec`'s expressions say about this resource: the terms of an
    /// expression that came to `when`.
    pub(crate) fn marks(&self, spec: &ProbeSpec) -> Marks {
        let said = |expr: &Option<Expr>, when| {
            let (truth, terms) = evaluate(expr.as_ref()?, &self.conditions);
            (truth == when).then(|| terms.join(", ").into())
        };
        Marks {
            blocking: said(&spec.upgradeable, Truth::False),
            important: said(&spec.important, Truth::True),
            unreadable: None,
        }
    }
}

impl Store {
    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.objects.len() == 0
    }

    /// Sorts what a list appended and gives back the memory its growth
    /// left unused: a listed store is kept for the watch's life.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.objects.shrink_to_fit();
        self.carriers = Carriers::default();
        self.objects.rows().for_each(|(row, _)| self.carriers.carry(&row, true));
    }

    /// Whether the counted condition types no longer follow the types that
    /// exist: resources carry types not counted while a counted type is
    /// carried by none (the types were replaced). Listing again counts
    /// the types that exist.
    pub(crate) fn types_stale(&self) -> bool {
        self.carriers.untracked > 0 && self.carriers.per_type[..self.tracked.len()].contains(&0)
    }

    /// Records a listed resource, appended in the order the list brings
    /// them ([`Table::push`]); sorted by [`Store::shrink_to_fit`] or the
    /// first watch event. Past [`MAX_RESOURCES`] it is only counted.
    pub(crate) fn insert(&mut self, parsed: Parsed, spec: &ProbeSpec) {
        let (key, marks, row) = match parsed {
            Parsed::Read(item) => (item.key(), item.marks(spec), self.row_of(&item, spec)),
            Parsed::Unreadable { key, why, .. } => {
                (key, Marks { unreadable: Some(why), ..Marks::default() }, Row::default())
            }
        };
        if self.objects.len() >= MAX_RESOURCES {
            self.beyond += 1;
        } else {
            self.objects.push(&key, marks, &row);
        }
    }

    /// `item`'s row over the counted types, which its new types may join
    /// (widening every row); its condition types remembered.
    fn row_of(&mut self, item: &Item, spec: &ProbeSpec) -> Row {
        self.note_types(item);
        if spec.condition_types == 0 {
            return Row::default();
        }
        let row = row_of(&item.conditions, &mut self.tracked, spec.condition_types);
        self.objects.widen(self.tracked.len());
        row
    }

    /// The counts per counted condition type and status, the resources
    /// carrying a type not counted, and a few of those types (from the
    /// ones remembered for the typo check).
    pub(crate) fn census(&self) -> Census {
        let (types, untracked) = count(self.objects.rows(), &self.tracked);
        let names = if untracked == 0 {
            Vec::new()
        } else {
            self.types.iter().filter(|t| !self.tracked.contains(t)).take(3).cloned().collect()
        };
        (types, untracked, names)
    }

    /// What is wrong with what it holds: resources past [`MAX_RESOURCES`],
    /// and those that could not be read, named (at most
    /// [`super::tally::NAMED`]) with why. `None` when all is well.
    pub(crate) fn problem(&self, kind: &str) -> Option<String> {
        let mut named = super::tally::Named::default();
        for (key, marks) in self.objects.marked() {
            if let Some(why) = &marks.unreadable {
                named.add(|| format!("{kind} {key} ({why})"));
            }
        }
        let unreadable = (named.total > 0).then(|| {
            let are = if named.total == 1 { "resource is" } else { "resources are" };
            format!("{} {are} not readable and not evaluated: {}", named.total, named.list())
        });
        let beyond = (self.beyond > 0).then(|| {
            format!(
                "more than {MAX_RESOURCES} resources (the most probed per type and namespace): {} past that \
                 not evaluated",
                self.beyond
            )
        });
        match (beyond, unreadable) {
            (Some(b), Some(u)) => Some(format!("{b}; {u}")),
            (b, u) => b.or(u),
        }
    }

    /// Whether it holds every resource of its collection (none past
    /// [`MAX_RESOURCES`]): a resource not kept may block. One that could
    /// not be read is held, as unknown, which never blocks.
    pub(crate) fn holds_all(&self) -> bool {
        self.beyond == 0
    }

    /// Remembers the condition types `item` carries (bounded).
    fn note_types(&mut self, item: &Item) {
        for condition in &item.conditions {
            let kind = condition.kind.as_str();
            if kind.is_empty() || kind.len() > MAX_TYPE_LEN {
                continue;
            }
            if let Err(at) = self.types.binary_search_by(|t| (**t).cmp(kind))
                && self.types.len() < MAX_TYPES
            {
                self.types.insert(at, kind.into());
            }
        }
    }

    /// The condition names `spec`'s expressions use that none of the
    /// resources carries while they carry others: each a sentence with the
    /// types seen and, for a likely typo, the one meant. Absence still
    /// means `False` (OLM's rule); this only says it out loud. Nothing
    /// while no resource carries any condition (nothing to compare with).
    /// Each with whether the `Upgradeable` expression names it.
    pub(crate) fn unseen_conditions(&self, kind: &str, spec: &ProbeSpec) -> Vec<(bool, String)> {
        if self.types.is_empty() {
            return Vec::new();
        }
        let mut named: Vec<(&str, &str)> = Vec::new();
        for (which, expr) in [("Upgradeable", &spec.upgradeable), ("Important", &spec.important)] {
            for name in expr.iter().flat_map(|e| e.conditions()) {
                if !named.iter().any(|(n, _)| *n == name) {
                    named.push((name, which));
                }
            }
        }
        named
            .into_iter()
            .filter(|(name, _)| !self.types.iter().any(|t| **t == **name))
            .take(MAX_UNSEEN)
            .map(|(name, which)| {
                let upgradeable = which == "Upgradeable";
                let hint = match crate::util::spelling::nearest(name, self.types.iter().map(|t| &**t)) {
                    Some(meant) => format!(": did you mean {}?", sanitize(meant, MAX_TYPE_LEN)),
                    None => " (they carry others).".into(),
                };
                let said = format!("No {kind} carries the condition {name} that the {which} expression names{hint}");
                (upgradeable, said)
            })
            .collect()
    }

    /// Sets `key`'s marks; the ones it replaced. A new key past
    /// [`MAX_RESOURCES`] is not kept, only counted.
    fn put(&mut self, key: &str, marks: Marks, row: &Row) -> Option<Marks> {
        self.objects.settle();
        match self.objects.find(key) {
            Ok(at) => {
                self.carriers.carry(&self.objects.row_at(at), false);
                self.carriers.carry(row, true);
                Some(self.objects.replace(at, marks, row))
            }
            Err(_) if self.objects.len() >= MAX_RESOURCES => {
                self.beyond += 1;
                None
            }
            Err(at) => {
                self.carriers.carry(row, true);
                self.objects.insert(at, key, marks, row);
                None
            }
        }
    }

    fn remove(&mut self, key: &str) -> Option<Marks> {
        self.objects.settle();
        match self.objects.find(key) {
            Ok(at) => {
                self.carriers.carry(&self.objects.row_at(at), false);
                Some(self.objects.remove(at))
            }
            // One of those past the bound (or one never seen) is gone.
            Err(_) => {
                self.beyond = self.beyond.saturating_sub(1);
                None
            }
        }
    }

    /// Applies one watch event (a line of the stream) and moves the store
    /// to its `resourceVersion`.
    pub(crate) fn apply(&mut self, line: &[u8], spec: &ProbeSpec) -> Applied {
        // Everything below comes from the stream: a message is sanitised
        // and bounded before it reaches the status, /readyz or the log, and
        // a parse error says where, never quoting the line.
        let failed = |e: serde_json::Error| {
            Applied::Failed(format!(
                "unexpected watch event ({} at column {})",
                crate::lock::error_kind(&e),
                e.column()
            ))
        };
        let Ok(text) = std::str::from_utf8(line) else {
            return Applied::Failed("a watch event that is not UTF-8".into());
        };
        let event = match serde_json::from_str::<Event>(text) {
            Ok(event) => event,
            Err(e) => return failed(e),
        };
        if event.kind == "ERROR" {
            return match serde_json::from_str::<ErrorStatus>(event.object.get()) {
                Ok(status) if status.code == 410 => Applied::Gone,
                Ok(status) => Applied::Failed(format!(
                    "the watch failed: {} (code {})",
                    sanitize(&status.message, MAX_FOREIGN),
                    status.code
                )),
                Err(e) => failed(e),
            };
        }
        let deleted = match event.kind {
            "ADDED" | "MODIFIED" | "BOOKMARK" => false,
            "DELETED" => true,
            other => return Applied::Failed(format!("unexpected watch event type {:?}", sanitize(other, 64))),
        };
        let (key, after, row) = match parse_item(event.object.get()) {
            Err(e) => return failed(e),
            Ok(Parsed::Unreadable { version, .. }) if event.kind == "BOOKMARK" => {
                self.advance(&version);
                return Applied::Quiet;
            }
            Ok(Parsed::Unreadable { key, version, why }) => {
                self.advance(&version);
                (key, Marks { unreadable: Some(why), ..Marks::default() }, Row::default())
            }
            Ok(Parsed::Read(item)) => {
                self.advance(&item.metadata.resource_version);
                if event.kind == "BOOKMARK" {
                    return Applied::Quiet;
                }
                let row = if deleted { Row::default() } else { self.row_of(&item, spec) };
                (item.key(), item.marks(spec), row)
            }
        };
        let after = if deleted { Marks::default() } else { after };
        let beyond = self.beyond;
        let before = if deleted { self.remove(&key) } else { self.put(&key, after.clone(), &row) };
        // Past the bound, or back within it: the problem changed. A
        // resource not kept changes nothing else.
        let crossed = (beyond == 0) != (self.beyond == 0);
        let kept = self.beyond <= beyond;
        if crossed || (kept && before.unwrap_or_default() != after) { Applied::Changed } else { Applied::Quiet }
    }

    fn advance(&mut self, version: &str) {
        if !version.is_empty() {
            version.clone_into(&mut self.resource_version);
        }
    }

    /// Adds every resource to `tally`, as `kind namespace/name`.
    pub(crate) fn tally(&self, kind: &str, tally: &mut Tally) {
        // Each tick tallies every resource: the usual one is only counted.
        tally.evaluated += self.objects.unmarked();
        for (key, marks) in self.objects.marked().filter(|(_, m)| m.unreadable.is_none()) {
            tally.add(kind, key, marks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::Status;
    use crate::signals::probes::grammar::parse_probe;

    fn spec() -> ProbeSpec {
        parse_probe("example.com/v1/foos:Upgradeable=!Migrating;Important=Broken").unwrap()
    }

    fn event(kind: &str, name: &str, rv: u32, conditions: &[(&str, &str)]) -> Vec<u8> {
        let conditions: Vec<_> =
            conditions.iter().map(|(t, s)| serde_json::json!({"type": t, "status": s, "reason": "R"})).collect();
        serde_json::json!({"type": kind, "object": {"apiVersion": "example.com/v1", "kind": "Foo",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(), "uid": "u"},
            "spec": {"big": "x".repeat(100)}, "status": {"conditions": conditions}}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_hostile_error_event_is_sanitised_and_bounded() {
        let mut store = Store::default();
        let message = format!("\u{1b}[2Jforged\r\nHealth: healthy{}", "x".repeat(2 << 20));
        let line = serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": message}});
        let Applied::Failed(why) = store.apply(line.to_string().as_bytes(), &spec()) else { panic!("not failed") };
        assert!(why.len() <= MAX_FOREIGN + 64 && !why.chars().any(char::is_control), "{}", why.len());
        assert!(why.starts_with("the watch failed:  [2Jforged  Health: healthy"), "{why:.80}");
        let odd = format!(r#"{{"type": "{}", "object": {{}}}}"#, r"\u001b".repeat(10_000));
        let Applied::Failed(why) = store.apply(odd.as_bytes(), &spec()) else { panic!("not failed") };
        assert!(why.len() < 200 && !why.chars().any(char::is_control), "{why}");
        let garbage = format!(r#"{{"type": 5, "object": "{}"}}"#, "\u{1b}".repeat(10_000));
        let Applied::Failed(why) = store.apply(garbage.as_bytes(), &spec()) else { panic!("not failed") };
        assert!(why.len() < 200 && !why.chars().any(char::is_control), "{why}");
    }

    #[test]
    fn a_condition_no_resource_carries_is_named_with_the_one_meant() {
        let typo = parse_probe("example.com/v1/foos:Upgradeable=!Migratng;Important=Broken").unwrap();
        let mut store = Store::default();
        assert_eq!(store.unseen_conditions("Foo", &typo), [], "nothing seen, nothing said");
        store.apply(&event("ADDED", "a", 1, &[("Migrating", "True"), ("Ready", "True")]), &typo);
        assert_eq!(
            store.unseen_conditions("Foo", &typo),
            [
                (
                    true,
                    "No Foo carries the condition Migratng that the Upgradeable expression names: did you mean \
                     Migrating?"
                        .to_string()
                ),
                (
                    false,
                    "No Foo carries the condition Broken that the Important expression names (they carry others)."
                        .to_string()
                )
            ]
        );
        // Absence still means False: the typo does not block (OLM's rule).
        assert_eq!(upgradeable(&store).map(|u| u.0), Some(Status::True));
        store.apply(&event("MODIFIED", "a", 2, &[("Broken", "False")]), &spec());
        assert_eq!(store.unseen_conditions("Foo", &spec()), []);
    }

    #[test]
    fn remembered_condition_types_are_bounded_and_sanitised() {
        let spec = parse_probe("example.com/v1/foos:Upgradeable=!Migrating").unwrap();
        let mut store = Store::default();
        for i in 0..100 {
            let long = format!("T{i}{}", "x".repeat(if i % 2 == 0 { 0 } else { 100 }));
            store.apply(&event("ADDED", &format!("r{i:03}"), i, &[(&long, "True"), ("Bad\u{1b}[2J", "True")]), &spec);
        }
        assert_eq!(store.types.len(), MAX_TYPES);
        assert!(store.types.iter().all(|t| t.len() <= MAX_TYPE_LEN));
        let said: String = store.unseen_conditions("Foo", &spec).into_iter().map(|(_, s)| s).collect();
        assert!(!said.contains('\u{1b}'), "{said}");
        assert!(said.len() < 1024, "{said}");
    }

    fn upgradeable(store: &Store) -> Option<(Status, String)> {
        let mut tally = Tally::default();
        store.tally("Foo", &mut tally);
        tally.upgradeable(true).map(|c| (c.status, c.message))
    }

    #[test]
    fn events_change_only_what_the_expressions_read() {
        let (spec, mut store) = (spec(), Store::default());
        let calm = [("Migrating", "False")];
        assert_eq!(store.apply(&event("ADDED", "a", 5, &calm), &spec), Applied::Quiet, "a calm resource");
        assert_eq!(store.apply(&event("ADDED", "b", 6, &calm), &spec), Applied::Quiet);
        assert_eq!((store.len(), store.resource_version.as_str()), (2, "6"));
        assert_eq!(store.apply(&event("MODIFIED", "a", 7, &calm), &spec), Applied::Quiet, "a new version only");
        let busy = [("Migrating", "True")];
        assert_eq!(store.apply(&event("MODIFIED", "b", 8, &busy), &spec), Applied::Changed, "the flip");
        assert_eq!(
            upgradeable(&store),
            Some((Status::False, "Upgrade blocked by 1 resource: Foo ns/b: Migrating".into()))
        );
        assert_eq!(store.apply(&event("MODIFIED", "b", 9, &busy), &spec), Applied::Quiet, "still blocking");
        assert_eq!(store.apply(&event("DELETED", "b", 10, &busy), &spec), Applied::Changed, "a blocker gone");
        assert_eq!(upgradeable(&store), Some((Status::True, "No resource blocks an upgrade (1 checked)".into())));
        let broken = [("Migrating", "False"), ("Broken", "True")];
        assert_eq!(store.apply(&event("MODIFIED", "a", 11, &broken), &spec), Applied::Changed, "important");
        assert_eq!(store.apply(&event("DELETED", "a", 12, &calm), &spec), Applied::Changed);
        assert!(store.is_empty());
        assert_eq!(store.resource_version, "12");
    }

    #[test]
    fn bookmarks_move_the_version_and_errors_end_the_stream() {
        let (spec, mut store) = (spec(), Store::default());
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Foo","apiVersion":"example.com/v1","metadata":{"resourceVersion":"42","creationTimestamp":null}}}"#;
        assert_eq!(store.apply(bookmark, &spec), Applied::Quiet);
        assert_eq!((store.len(), store.resource_version.as_str()), (0, "42"));
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (42)","reason":"Expired","code":410}}"#;
        assert_eq!(store.apply(gone, &spec), Applied::Gone);
        let other =
            br#"{"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"internal error","code":500}}"#;
        assert_eq!(store.apply(other, &spec), Applied::Failed("the watch failed: internal error (code 500)".into()));
        assert!(matches!(store.apply(b"{\"type\":\"SURPRISE\",\"object\":{}}", &spec), Applied::Failed(_)));
        assert!(matches!(store.apply(b"not json", &spec), Applied::Failed(_)));
        assert_eq!(store.resource_version, "42", "a failed line moves nothing");
    }

    #[test]
    fn an_unreadable_resource_is_named_and_the_others_still_count() {
        let spec = spec();
        let mut store = Store::default();
        let bad = [
            r#"{"metadata":{"name":"b","namespace":"ns"},"status":{"conditions":[{"type":"Migrating","status":true}]}}"#,
            r#"{"metadata":{"name":"d","namespace":"ns"},"status":true}"#,
            r#"{"metadata":{"name":"c\u001b[2J","namespace":"ns"},"status":{"conditions":{"Migrating":"x"}}}"#,
        ];
        let good = r#"{"metadata":{"name":"a","namespace":"ns"},"status":{"conditions":[{"type":"Migrating","status":"True"}]}}"#;
        for json in [good, bad[0], bad[1], bad[2]] {
            store.insert(parse_item(json).unwrap(), &spec);
        }
        assert!(parse_item(r#"{"metadata":{"name":5}}"#).is_err(), "no name: nothing to say which");
        assert_eq!(
            upgradeable(&store),
            Some((Status::False, "Upgrade blocked by 1 resource: Foo ns/a: Migrating".into())),
            "the blocker is seen; the unreadable ones are not counted"
        );
        let said = store.problem("Foo").unwrap();
        assert!(
            said.starts_with("3 resources are not readable and not evaluated: Foo ns/b (invalid type: boolean"),
            "{said}"
        );
        assert!(said.contains("; Foo ns/c [2J (invalid type: map, expected a sequence"), "{said}");
        assert!(said.contains("; Foo ns/d (invalid type: boolean `true`, expected a status object"), "{said}");
        assert!(store.holds_all(), "an unreadable resource is held (as unknown): the tally is complete");
        // Through the watch: made readable, made unreadable, deleted.
        let fixed = r#"{"type":"MODIFIED","object":{"metadata":{"name":"b","namespace":"ns","resourceVersion":"7"},"status":{}}}"#;
        assert_eq!(store.apply(fixed.as_bytes(), &spec), Applied::Changed);
        let broken = r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","namespace":"ns","resourceVersion":"8"},"status":{"conditions":7}}}"#;
        assert_eq!(store.apply(broken.as_bytes(), &spec), Applied::Changed);
        assert_eq!(store.resource_version, "8");
        assert_eq!(upgradeable(&store).map(|u| u.0), Some(Status::True), "unread is never blocking");
        let gone = r#"{"type":"DELETED","object":{"metadata":{"name":"c\u001b[2J","namespace":"ns","resourceVersion":"9"},"status":7}}"#;
        assert_eq!(store.apply(gone.as_bytes(), &spec), Applied::Changed);
        let said = store.problem("Foo").unwrap();
        assert!(
            said.starts_with("2 resources are not readable and not evaluated: Foo ns/a (invalid type: integer `7`"),
            "{said}"
        );
        let nameless = r#"{"type":"ADDED","object":{"metadata":{"name":[]}}}"#;
        assert!(matches!(store.apply(nameless.as_bytes(), &spec), Applied::Failed(_)));
    }

    #[test]
    fn unreadable_resources_are_bounded_in_the_message() {
        let mut store = Store::default();
        for i in 0..50 {
            let json = format!(
                r#"{{"metadata":{{"name":"r{i:02}{}"}},"status":{{"conditions":"{}"}}}}"#,
                "n".repeat(300),
                r"\u001b".repeat(500)
            );
            store.insert(parse_item(&json).unwrap(), &spec());
        }
        let said = store.problem("Foo").unwrap();
        assert!(said.starts_with("50 resources are not readable") && said.ends_with("; and 45 more"), "{said}");
        assert!(
            said.len() < 5 * (MAX_KEY + MAX_REASON + 16) + 100 && !said.chars().any(char::is_control),
            "{}",
            said.len()
        );
    }

    #[test]
    fn the_store_keeps_at_most_max_resources_and_says_how_many_more() {
        let (spec, mut store) = (spec(), Store::default());
        for i in 0..MAX_RESOURCES {
            store.put(&format!("ns/r{i:06}"), Marks::default(), &Row::default());
        }
        assert_eq!((store.len(), store.problem("Foo")), (MAX_RESOURCES, None));
        assert_eq!(store.apply(&event("ADDED", "zz-1", 1, &[]), &spec), Applied::Changed, "past the bound: said");
        assert_eq!(store.apply(&event("ADDED", "zz-2", 2, &[("Migrating", "True")]), &spec), Applied::Quiet);
        assert_eq!(store.len(), MAX_RESOURCES);
        assert_eq!(
            store.problem("Foo").unwrap(),
            "more than 100000 resources (the most probed per type and namespace): 2 past that not evaluated"
        );
        assert!(!store.holds_all(), "one not kept may block: the tally is incomplete");
        assert_eq!(store.apply(&event("MODIFIED", "r000001", 3, &[("Migrating", "True")]), &spec), Applied::Changed);
        store.apply(&event("DELETED", "zz-1", 4, &[]), &spec);
        assert_eq!(store.apply(&event("DELETED", "zz-2", 5, &[]), &spec), Applied::Changed, "back within");
        assert_eq!(store.problem("Foo"), None);
    }

    #[test]
    fn only_the_verdicts_are_kept() {
        let spec = spec();
        let read = |json: &str| match parse_item(json) {
            Ok(Parsed::Read(item)) => item,
            _ => panic!("not read: {json}"),
        };
        let event: serde_json::Value =
            serde_json::from_slice(&event("ADDED", "a", 1, &[("Migrating", "True"), ("Other", "x")])).unwrap();
        let item = read(&event["object"].to_string());
        assert_eq!(item.marks(&spec), Marks { blocking: Some("Migrating".into()), ..Marks::default() });
        let unknown = read(r#"{"metadata":{"name":"c"},"status":null}"#);
        assert_eq!(unknown.marks(&spec), Marks::default(), "unknown never blocks");
        assert_eq!(&*unknown.key(), "c", "cluster-scoped");
    }

    fn timed(kind: &str, name: &str, rv: u32, conditions: &[(&str, &str, &str)]) -> Vec<u8> {
        let conditions: Vec<_> = conditions
            .iter()
            .map(|(t, s, at)| serde_json::json!({"type": t, "status": s, "lastTransitionTime": at}))
            .collect();
        serde_json::json!({"type": kind, "object": {"metadata": {"name": name, "namespace": "ns",
            "resourceVersion": rv.to_string()}, "status": {"conditions": conditions}}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn the_census_follows_lists_and_watch_events_with_the_oldest_transition() {
        let spec = ProbeSpec { condition_types: 2, ..spec() };
        let mut store = Store::default();
        let listed = r#"{"metadata":{"name":"a","namespace":"ns"},"status":{"conditions":[{"type":"Migrating","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
        store.insert(parse_item(listed).unwrap(), &spec);
        store.shrink_to_fit();
        let t = |h: u32| 1_767_225_600 + h * 3600;
        store.apply(&timed("ADDED", "b", 2, &[("Ready", "True", "2026-01-01T05:00:00Z")]), &spec);
        store.apply(&timed("ADDED", "c", 3, &[("Migrating", "True", "2026-01-01T02:00:00Z")]), &spec);
        let (types, untracked, _) = store.census();
        assert_eq!(types.iter().map(|t| &*t.name).collect::<Vec<_>>(), ["Migrating", "Ready"]);
        assert_eq!((types[0].resources, types[0].oldest), ([1, 2, 0, 0], [0, t(0), 0, 0]));
        assert_eq!((types[1].resources, types[1].oldest), ([2, 1, 0, 0], [0, t(5), 0, 0]), "a row widened later");
        assert_eq!(untracked, 0);
        // The oldest leaves True: the next oldest is known, from its row.
        store.apply(&timed("MODIFIED", "a", 4, &[("Migrating", "False", "2026-01-01T06:00:00Z")]), &spec);
        store.apply(
            &timed("MODIFIED", "b", 5, &[("Ready", "True", "2026-01-01T05:00:00Z"), ("Third", "True", "x")]),
            &spec,
        );
        let (types, untracked, names) = store.census();
        assert_eq!((types[0].resources, types[0].oldest), ([1, 1, 1, 0], [0, t(2), t(6), 0]));
        assert_eq!((untracked, names), (1, vec![Box::from("Third")]), "past the cap of 2");
        assert!(!store.types_stale(), "both counted types are carried");
        store.apply(&timed("DELETED", "c", 6, &[]), &spec);
        store.apply(&timed("MODIFIED", "a", 7, &[]), &spec);
        let (types, ..) = store.census();
        assert_eq!(types.iter().map(|t| &*t.name).collect::<Vec<_>>(), ["Ready"], "Migrating, carried by none, goes");
        assert!(store.types_stale(), "Third is not counted while Migrating holds a place: to be listed again");
        // Listed again: the types that exist.
        let mut relisted = Store::default();
        for (name, conditions) in
            [("a", "[]"), ("b", r#"[{"type":"Ready","status":"True"},{"type":"Third","status":"False"}]"#)]
        {
            let item = format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns"}},"status":{{"conditions":{conditions}}}}}"#
            );
            relisted.insert(parse_item(&item).unwrap(), &spec);
        }
        relisted.shrink_to_fit();
        let (types, untracked, _) = relisted.census();
        assert_eq!((types.iter().map(|t| &*t.name).collect::<Vec<_>>(), untracked), (vec!["Ready", "Third"], 0));
        assert!(!relisted.types_stale());
        let off = ProbeSpec { condition_types: 0, ..spec };
        let mut none = Store::default();
        none.apply(&timed("ADDED", "a", 1, &[("Migrating", "True", "2026-01-01T00:00:00Z")]), &off);
        assert_eq!(none.census(), (vec![], 0, vec![]), "0: nothing counted, no row kept");
    }
}
