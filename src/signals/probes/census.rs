//! The per-condition counts of the probed resources, pure: for each
//! resource type and each of its condition types (at most
//! `--condition-metrics-max-types`, in the order first seen), how many
//! resources carry it `True`, `False`, `Unknown` or not at all, and the
//! oldest `lastTransitionTime` of each status; resources carrying a type
//! past the cap are counted apart. Each resource keeps only a [`Row`] (2
//! bits of status and 4 bytes of time per counted type, in its store's
//! table); the counts are taken from the rows once per check, so they cost
//! nothing per object beyond the row and O(types) once taken.

use super::table::{ABSENT, FALSE, ROW_TYPES, Row, TRUE, UNKNOWN};
use super::tally::ItemCondition;
use crate::util::time::parse_rfc3339;
use std::time::UNIX_EPOCH;

/// `--condition-metrics-max-types`'s default and its most: a row holds 8.
pub(crate) const DEFAULT_TYPES: usize = ROW_TYPES;

/// The status label values, indexed by a row's 2-bit status.
pub(crate) const STATUSES: [&str; 4] = ["Absent", "True", "False", "Unknown"];

/// Longer condition types are not counted (Kubernetes allows 316
/// characters; real ones are a word or two): they become label values.
const MAX_TYPE_LEN: usize = 64;

/// How many of the types past the cap the log names.
const NAMED_UNTRACKED: usize = 3;

/// One condition type of one resource type: resources per status (indexed
/// as [`STATUSES`]) and the oldest `lastTransitionTime` per status, in
/// Unix seconds (0: none known; never for `Absent`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TypeCounts {
    pub name: Box<str>,
    pub resources: [u64; 4],
    pub oldest: [u32; 4],
}

/// One resource type's counts, its collections (one per namespace probed)
/// merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResourceConditions {
    /// The API group (`""` for the core group) and the kind.
    pub group: String,
    pub kind: String,
    /// At most the cap, sorted by name.
    pub types: Vec<TypeCounts>,
    /// Resources carrying a condition of a type not counted (past the cap,
    /// or not fit for a label value: too long, or other characters than
    /// letters, digits and `-_./`). Collections merged may count one
    /// resource once per type dropped in the merge.
    pub untracked: u64,
    /// A few of those types, for the log line.
    pub untracked_names: Vec<Box<str>>,
}

/// Whether a condition type can be counted: a label value as Kubernetes
/// spells condition types (letters, digits, `-_./`), bounded.
fn countable(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TYPE_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
}

/// A `lastTransitionTime` as Unix seconds within a `u32` (0: missing,
/// unreadable or before 1970; past 2106 clamped).
fn transition_seconds(text: Option<&str>) -> u32 {
    let Some(at) = text.and_then(parse_rfc3339) else { return 0 };
    let secs = at.duration_since(UNIX_EPOCH).map_or(1, |d| d.as_secs());
    u32::try_from(secs).unwrap_or(u32::MAX).max(1)
}

/// A resource's row over `tracked` (its store's counted types), which a
/// type first seen joins while fewer than `cap` are counted. The first
/// condition of a type counts (as the expressions read it).
pub(super) fn row_of(conditions: &[ItemCondition], tracked: &mut Vec<Box<str>>, cap: usize) -> Row {
    let mut row = Row::default();
    let mut seen: u16 = 0;
    for condition in conditions {
        let name = condition.kind.as_str();
        let index = match tracked.iter().position(|t| **t == *name) {
            Some(i) => i,
            None if tracked.len() < cap.min(ROW_TYPES) && countable(name) => {
                tracked.push(name.into());
                tracked.len() - 1
            }
            None => {
                row.untracked = true;
                continue;
            }
        };
        if seen & (1 << index) != 0 {
            continue;
        }
        seen |= 1 << index;
        let status = match condition.status.as_str() {
            "True" => TRUE,
            "False" => FALSE,
            _ => UNKNOWN,
        };
        row.set(index, status, transition_seconds(condition.last_transition.as_deref()));
    }
    row
}

/// The counts over a store's rows (each with whether it was readable: an
/// unreadable resource is not counted) for its `tracked` types, and how
/// many rows carry an untracked type.
pub(super) fn count(rows: impl Iterator<Item = (Row, bool)>, tracked: &[Box<str>]) -> (Vec<TypeCounts>, u64) {
    let mut types: Vec<TypeCounts> =
        tracked.iter().map(|name| TypeCounts { name: name.clone(), ..TypeCounts::default() }).collect();
    let mut untracked = 0;
    for (row, _) in rows.filter(|(_, readable)| *readable) {
        untracked += u64::from(row.untracked);
        for (index, counts) in types.iter_mut().enumerate() {
            let status = usize::from(row.status(index));
            counts.resources[status] += 1;
            if status != usize::from(ABSENT) {
                counts.oldest[status] = older(counts.oldest[status], row.times[index]);
            }
        }
    }
    // A type no resource carries any more is no longer counted.
    types.retain(|t| t.resources[1..].iter().any(|n| *n > 0));
    (types, untracked)
}

/// The older of two transition times (0: none known).
fn older(a: u32, b: u32) -> u32 {
    if a == 0 || (b != 0 && b < a) { b } else { a }
}

/// Adds one collection's counts to its resource type's in `all` (one
/// entry per group and kind): counts summed, the oldest kept, at most
/// `cap` types (a type past it in the merge counts its resources that
/// carry it as untracked); nothing when `cap` is 0.
pub(crate) fn merge(
    all: &mut Vec<ResourceConditions>,
    (group, kind): (&str, &str),
    (types, untracked, untracked_names): (Vec<TypeCounts>, u64, Vec<Box<str>>),
    cap: usize,
) {
    if cap == 0 {
        return;
    }
    let at = match all.iter().position(|r| r.group == group && r.kind == kind) {
        Some(at) => at,
        None => {
            all.push(ResourceConditions { group: group.into(), kind: kind.into(), ..ResourceConditions::default() });
            all.len() - 1
        }
    };
    let into = &mut all[at];
    into.untracked += untracked;
    for name in untracked_names {
        if into.untracked_names.len() < NAMED_UNTRACKED && !into.untracked_names.contains(&name) {
            into.untracked_names.push(name);
        }
    }
    for counts in types {
        let room = into.types.len() < cap;
        match into.types.iter_mut().find(|t| t.name == counts.name) {
            Some(kept) => {
                for status in 0..STATUSES.len() {
                    kept.resources[status] += counts.resources[status];
                    kept.oldest[status] = older(kept.oldest[status], counts.oldest[status]);
                }
            }
            None if room => {
                let at = into.types.partition_point(|t| t.name < counts.name);
                into.types.insert(at, counts);
            }
            None => {
                into.untracked += counts.resources[1..].iter().sum::<u64>();
                if into.untracked_names.len() < NAMED_UNTRACKED {
                    into.untracked_names.push(counts.name);
                }
            }
        }
    }
}

/// The resource types whose untracked condition types were said in the
/// log: once each for the process's life (at most one per collection).
#[derive(Debug, Default)]
pub(crate) struct OverflowLog {
    said: Vec<(String, String)>,
}

impl OverflowLog {
    /// Logs [`overflow_notice`] for each resource type not said before.
    pub(crate) fn say(&mut self, conditions: &[ResourceConditions], cap: usize) {
        for said in self.news(conditions, cap) {
            log::info!("{said}");
        }
    }

    /// The notices not said before (pure: what [`OverflowLog::say`] logs).
    fn news(&mut self, conditions: &[ResourceConditions], cap: usize) -> Vec<String> {
        let mut news = Vec::new();
        for r in conditions {
            let key = (r.group.clone(), r.kind.clone());
            if self.said.contains(&key) {
                continue;
            }
            if let Some(said) = overflow_notice(r, cap) {
                news.push(crate::util::text::sanitize(&said, 1024));
                self.said.push(key);
            }
        }
        news
    }
}

/// The log line for a resource type with untracked condition types.
pub(crate) fn overflow_notice(r: &ResourceConditions, cap: usize) -> Option<String> {
    (r.untracked > 0).then(|| {
        let counted: Vec<&str> = r.types.iter().map(|t| &*t.name).collect();
        let names: Vec<&str> = r.untracked_names.iter().map(|t| &**t).collect();
        let which = if names.is_empty() { String::new() } else { format!(" (such as {})", names.join(", ")) };
        format!(
            "{} resources carry condition types past the {cap} counted{which}: metrics per condition for {} only; \
             the resources with others are counted in opstatus_resource_condition_untracked_resources \
             (--condition-metrics-max-types)",
            r.kind,
            if counted.is_empty() { "none".to_string() } else { counted.join(", ") }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(list: &[(&str, &str, Option<&str>)]) -> Vec<ItemCondition> {
        list.iter()
            .map(|(k, s, t)| ItemCondition {
                kind: k.to_string(),
                status: s.to_string(),
                last_transition: t.map(String::from),
            })
            .collect()
    }

    #[test]
    fn a_row_holds_each_counted_types_status_and_transition_time() {
        let mut tracked = Vec::new();
        let row = row_of(
            &conditions(&[
                ("Ready", "True", Some("2026-01-01T00:00:00Z")),
                ("Migrating", "weird", Some("not a time")),
                ("Ready", "False", Some("2020-01-01T00:00:00Z")),
                ("Bad\"Type", "True", None),
            ]),
            &mut tracked,
            8,
        );
        assert_eq!(tracked, [Box::from("Ready"), Box::from("Migrating")]);
        assert_eq!((row.status(0), row.times[0]), (TRUE, 1_767_225_600), "the first of a type counts");
        assert_eq!((row.status(1), row.times[1]), (UNKNOWN, 0));
        assert_eq!(row.status(2), ABSENT);
        assert!(row.untracked, "a type that is no label value is counted apart");
        let old = row_of(&conditions(&[("Ready", "False", Some("1969-12-31T00:00:00Z"))]), &mut tracked, 8);
        assert_eq!((old.status(0), old.times[0]), (FALSE, 0), "before 1970: no time known, the status still counts");
    }

    #[test]
    fn types_past_the_cap_are_counted_apart_and_the_cap_is_at_most_a_rows() {
        let mut tracked = Vec::new();
        let many: Vec<(String, &str, Option<&str>)> = (0..12).map(|i| (format!("T{i:02}"), "True", None)).collect();
        let many: Vec<(&str, &str, Option<&str>)> = many.iter().map(|(k, s, t)| (k.as_str(), *s, *t)).collect();
        let row = row_of(&conditions(&many[..2]), &mut tracked, 2);
        assert!(!row.untracked);
        let row = row_of(&conditions(&many), &mut tracked, 2);
        assert!(row.untracked && tracked.len() == 2);
        let mut wide = Vec::new();
        assert!(row_of(&conditions(&many), &mut wide, 100).untracked);
        assert_eq!(wide.len(), ROW_TYPES);
        let mut off = Vec::new();
        assert!(row_of(&conditions(&many), &mut off, 0).untracked && off.is_empty());
    }

    #[test]
    fn counts_and_the_oldest_per_status_come_from_the_rows() {
        let mut tracked = Vec::new();
        let rows: Vec<Row> = [
            vec![("Migrating", "True", Some("2026-01-01T03:00:00Z")), ("Ready", "True", None)],
            vec![("Migrating", "True", Some("2026-01-01T01:00:00Z"))],
            vec![("Migrating", "False", Some("2026-01-01T02:00:00Z")), ("Other", "True", None)],
            vec![],
        ]
        .iter()
        .map(|c| row_of(&conditions(c), &mut tracked, 2))
        .collect();
        let unreadable = (Row::default(), false);
        let (types, untracked) = count(rows.into_iter().map(|r| (r, true)).chain([unreadable]), &tracked);
        assert_eq!(untracked, 1, "Other is past the cap of 2");
        assert_eq!(&*types[0].name, "Migrating");
        assert_eq!(types[0].resources, [1, 2, 1, 0], "Absent, True, False, Unknown; the unreadable not counted");
        assert_eq!(types[0].oldest, [0, 1_767_229_200, 1_767_232_800, 0]);
        assert_eq!((types[1].resources, types[1].oldest), ([3, 1, 0, 0], [0; 4]), "Ready: no time given");
    }

    #[test]
    fn collections_of_one_type_merge_and_the_notice_names_what_is_not_counted() {
        let counts =
            |name: &str, resources: [u64; 4], oldest: [u32; 4]| TypeCounts { name: name.into(), resources, oldest };
        let mut all = Vec::new();
        let a = vec![counts("Ready", [0, 2, 0, 0], [0, 50, 0, 0]), counts("Migrating", [1, 1, 0, 0], [0, 70, 0, 0])];
        merge(&mut all, ("example.com", "Foo"), (a, 0, vec![]), 2);
        let b = vec![counts("Ready", [0, 1, 1, 0], [0, 40, 60, 0]), counts("Zeta", [0, 3, 0, 0], [0; 4])];
        merge(&mut all, ("example.com", "Foo"), (b, 1, vec!["Extra".into()]), 2);
        merge(&mut all, ("example.com", "Bar"), (vec![], 0, vec![]), 2);
        assert_eq!(all.len(), 2);
        let foo = &all[0];
        assert_eq!(foo.types.iter().map(|t| &*t.name).collect::<Vec<_>>(), ["Migrating", "Ready"]);
        assert_eq!((foo.types[1].resources, foo.types[1].oldest), ([0, 3, 1, 0], [0, 40, 60, 0]));
        assert_eq!(foo.untracked, 4, "1 with Extra, 3 with Zeta dropped in the merge");
        assert_eq!(
            overflow_notice(foo, 2).unwrap(),
            "Foo resources carry condition types past the 2 counted (such as Extra, Zeta): metrics per condition \
             for Migrating, Ready only; the resources with others are counted in \
             opstatus_resource_condition_untracked_resources (--condition-metrics-max-types)"
        );
        assert_eq!(overflow_notice(&all[1], 2), None);
        let mut log = OverflowLog::default();
        assert_eq!(log.news(&all, 2).len(), 1, "Foo's notice");
        all[0].untracked += 5;
        assert_eq!(log.news(&all, 2), Vec::<String>::new(), "said once per resource type");
    }
}
