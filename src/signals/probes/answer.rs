//! One list answer read as it arrives into a [`Store`]: the seed that
//! [`WatchStream::read_parts`](crate::kube::WatchStream::read_parts) runs
//! over `{"metadata": …, "items": […]}` (in either order), each item's
//! text bounded on its own and parsed as a watch event's object is
//! ([`parse_item`]), then dropped, so the answer is never held whole.

use super::MAX_RESOURCES;
use super::collection::Collection;
use super::pager::Pager;
use super::store::{Parsed, Store, parse_item};
use crate::kube::{ListKey, PartBound};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::time::Instant;

/// A list answer's `metadata`: the next page's token, and the version the
/// list is current to.
#[derive(Debug, Deserialize, Default)]
pub(super) struct PageMeta {
    #[serde(rename = "continue", default)]
    pub next: String,
    #[serde(rename = "resourceVersion", default)]
    pub resource_version: String,
}

/// A first list says how far it got every this many resources.
const PROGRESS_EVERY: usize = 500;

/// A list answer, `{"metadata": …, "items": […]}` in any order, its items
/// read into the store as they come ([`Items`]).
pub(super) struct AnswerSeed<'a, 'p>(pub Items<'a, 'p>);

impl<'de> DeserializeSeed<'de> for AnswerSeed<'_, '_> {
    type Value = PageMeta;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<PageMeta, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AnswerSeed<'_, '_> {
    type Value = PageMeta;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<PageMeta, A::Error> {
        let mut meta = None;
        while let Some(key) = map.next_key()? {
            self.0.bound.start();
            match key {
                ListKey::Metadata => meta = Some(map.next_value::<PageMeta>()?),
                ListKey::Items => map.next_value_seed(&mut self.0)?,
                ListKey::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        meta.ok_or_else(|| de::Error::missing_field("metadata"))
    }
}

/// A list's `items`, each read on its own (at most [`MAX_BODY`]) into the
/// store: one that cannot be read is reported and the others still count.
/// Each extends (or checks) the budget; past [`MAX_RESOURCES`], or out of
/// time, the answer is not read further (`stopped` says why).
pub(super) struct Items<'a, 'p> {
    pub store: &'a mut Store,
    pub collection: &'a Collection,
    pub pager: &'a mut Pager,
    pub bound: &'a PartBound,
    pub progress: &'p mut dyn FnMut(usize),
    /// Why the answer was not read further, when it was not.
    pub stopped: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for &mut Items<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for &mut Items<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of resources")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            self.bound.start();
            // One resource's text (at most MAX_BODY), parsed as the events
            // are, then dropped.
            let Some(item) = seq.next_element::<Box<serde_json::value::RawValue>>()? else { return Ok(()) };
            let parsed = parse_item(item.get()).unwrap_or_else(|e| Parsed::Unreadable {
                // Not even a name: said by its place in the list.
                key: format!("#{} (no name)", self.store.len() + 1).into(),
                version: String::new(),
                why: crate::lock::error_kind(&e).into(),
            });
            drop(item);
            let listed = self.store.len();
            if listed >= MAX_RESOURCES {
                let message = format!(
                    "the API server had more than {MAX_RESOURCES} resources (the most probed per type and \
                     namespace): stopped listing"
                );
                return Err(self.stop(message));
            }
            self.store.insert(parsed, &self.collection.spec);
            let listed = self.store.len();
            if let Err(message) = self.pager.progress(listed, Instant::now()) {
                return Err(self.stop(message));
            }
            if listed.is_multiple_of(PROGRESS_EVERY) {
                (self.progress)(listed);
            }
        }
    }
}

impl Items<'_, '_> {
    /// Stops reading the answer, for `why`.
    fn stop<E: de::Error>(&mut self, why: String) -> E {
        *self.stopped = Some(why);
        E::custom("stopped")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::probes::grammar::parse_probe;
    use std::time::Duration;

    fn collection() -> Collection {
        Collection {
            path: "/apis/example.com/v1/namespaces/ns/foos".into(),
            name: "foos.example.com".into(),
            scope: String::new(),
            spec: parse_probe("example.com/v1/foos:Upgradeable=!Migrating").unwrap(),
            kind: "Foo".into(),
        }
    }

    /// Reads `json` as a list answer: its metadata, the store, the progress
    /// said, and why it stopped.
    fn read(json: &str) -> (serde_json::Result<PageMeta>, Store, Vec<usize>, Option<String>) {
        let (mut store, collection, bound) = (Store::default(), collection(), PartBound::default());
        let mut pager = Pager::new(Duration::from_secs(10), Instant::now());
        let (mut said, mut stopped) = (Vec::new(), None);
        let mut progress = |n| said.push(n);
        let items = Items {
            store: &mut store,
            collection: &collection,
            pager: &mut pager,
            bound: &bound,
            progress: &mut progress,
            stopped: &mut stopped,
        };
        let meta = AnswerSeed(items).deserialize(&mut serde_json::Deserializer::from_str(json));
        (meta, store, said, stopped)
    }

    fn item(name: &str, migrating: &str) -> String {
        format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns"}},"spec":{{"blob":"{}"}},"status":{{"conditions":[{{"type":"Migrating","status":"{migrating}"}}]}}}}"#,
            "x".repeat(100)
        )
    }

    #[test]
    fn items_go_into_the_store_whatever_the_order_of_the_keys() {
        let items = format!("[{},{},{}]", item("a", "False"), item("b", "True"), r#"{"metadata":{"name":7}}"#);
        for json in [
            format!(r#"{{"kind":"FooList","metadata":{{"resourceVersion":"42","continue":"t"}},"items":{items}}}"#),
            format!(r#"{{"items":{items},"apiVersion":"v1","metadata":{{"continue":"t","resourceVersion":"42"}}}}"#),
        ] {
            let (meta, store, _, stopped) = read(&json);
            let meta = meta.unwrap();
            assert_eq!((meta.resource_version.as_str(), meta.next.as_str(), stopped), ("42", "t", None));
            assert_eq!(store.len(), 3, "the nameless one is held, as unreadable");
            let said = store.problem("Foo").unwrap();
            assert!(said.contains(&format!("Foo #{} (no name)", 3)), "{said}");
        }
        let (meta, store, ..) = read(r#"{"items":[]}"#);
        assert!(meta.unwrap_err().to_string().contains("missing field `metadata`"));
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn progress_is_said_every_few_hundred_resources() {
        let items: Vec<String> = (0..1200).map(|i| item(&format!("r{i:04}"), "False")).collect();
        let json = format!(r#"{{"metadata":{{"resourceVersion":"1"}},"items":[{}]}}"#, items.join(","));
        let (meta, store, said, _) = read(&json);
        assert!(meta.is_ok());
        assert_eq!((store.len(), said), (1200, vec![500, 1000]));
    }
}
