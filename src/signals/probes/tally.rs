//! The aggregation over every probed resource, pure: the operator is
//! upgradeable unless some resource's expression is false; unknown never
//! blocks; no resources, nothing blocks. A [`Tally`] names at most
//! [`NAMED`] resources per list, so its size does not grow with the number
//! of resources.

use super::grammar::{IMPORTANT, UPGRADEABLE};
use super::table::Marks;
use crate::conditions::{Desired, Status};
use crate::expr::{Expr, Truth};
use serde::Deserialize;

/// How many resources a message names before "and N more".
pub(crate) const NAMED: usize = 5;

/// Resources named in a message, capped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Named {
    pub first: Vec<String>,
    pub total: usize,
}

impl Named {
    pub(crate) fn add(&mut self, entry: impl FnOnce() -> String) {
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
    pub(crate) fn list(&self) -> String {
        let mut s = self.first.join("; ");
        if self.total > self.first.len() {
            s.push_str(&format!("; and {} more", self.total - self.first.len()));
        }
        s
    }
}

/// The aggregation over every resource of every probed type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub evaluated: usize,
    /// Resources whose `Upgradeable` expression is false.
    pub blocking: Named,
    /// Resources whose `Important` expression is true.
    pub important: Named,
}

impl Tally {
    /// Counts one resource, `kind key` (`Foo ns/name`), with the terms
    /// that made it block an upgrade or need attention ([`Marks`]).
    pub(crate) fn add(&mut self, kind: &str, key: &str, marks: &Marks) {
        self.evaluated += 1;
        if let Some(terms) = &marks.blocking {
            self.blocking.add(|| format!("{kind} {key}: {terms}"));
        }
        if let Some(terms) = &marks.important {
            self.important.add(|| format!("{kind} {key}: {terms}"));
        }
    }

    /// The `Upgradeable` condition, when it can be stated: a resource seen
    /// blocking is enough for `False`; `True` needs every list to have
    /// succeeded (`complete`).
    pub(crate) fn upgradeable(&self, complete: bool) -> Option<Desired> {
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
    pub(crate) fn important(&self, complete: bool) -> Option<Desired> {
        if self.important.total > 0 {
            let message = format!("Attention needed for {}", self.important.counted());
            return Some(Desired::new(IMPORTANT, Status::True, "ResourcesNeedAttention", message));
        }
        complete.then(|| Desired::new(IMPORTANT, Status::False, "AsExpected", "No resource needs attention"))
    }
}

/// Evaluates `expr` against a resource's conditions: `True`/`False` as
/// given, anything else (missing, `Unknown`, garbage) unknown.
pub(crate) fn evaluate(expr: &Expr, conditions: &[ItemCondition]) -> (Truth, Vec<String>) {
    let lookup = |name: &str| match conditions.iter().find(|c| c.kind == name).map(|c| c.status.as_str()) {
        Some("True") => Truth::True,
        Some("False") => Truth::False,
        _ => Truth::Unknown,
    };
    expr.evaluate(&lookup)
}

/// A condition as read from a resource: its type and status for the
/// expressions, and when it last changed for the counts ([`super::census`]).
#[derive(Deserialize)]
pub(crate) struct ItemCondition {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub status: String,
    #[serde(rename = "lastTransitionTime", default)]
    pub last_transition: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::probes::grammar::{ProbeSpec, parse_probe};

    fn probe(text: &str) -> ProbeSpec {
        parse_probe(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn conditions(list: &[(&str, &str)]) -> Vec<ItemCondition> {
        list.iter()
            .map(|(k, s)| ItemCondition { kind: k.to_string(), status: s.to_string(), last_transition: None })
            .collect()
    }

    fn tally_of(spec: &ProbeSpec, resources: &[(&str, &[(&str, &str)])]) -> Tally {
        let mut tally = Tally::default();
        for (name, conds) in resources {
            let conds = conditions(conds);
            let said = |expr: &Option<Expr>, when| {
                let (truth, terms) = evaluate(expr.as_ref()?, &conds);
                (truth == when).then(|| terms.join(", ").into())
            };
            let marks = Marks {
                blocking: said(&spec.upgradeable, Truth::False),
                important: said(&spec.important, Truth::True),
                unreadable: None,
            };
            tally.add("Foo", &format!("apps/{name}"), &marks);
        }
        tally
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
}
