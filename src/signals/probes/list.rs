//! One probed collection listed page by page into a fresh [`Store`],
//! within the [`Pager`]'s bounds: what a watch starts from, and what
//! `opstatus once` evaluates.

use super::store::{Parsed, Store, parse_item};
use super::watcher::Collection;
use super::{Budget, PAGE_SIZE, Pager, not_served, percent_encode};
use crate::kube::{Client, KubeError};
use serde::Deserialize;
use std::time::{Duration, Instant};

/// A page of a list; each item is read on its own
/// ([`parse_item`](super::store::parse_item)), so one that cannot be read
/// is reported and the others still count.
#[derive(Deserialize)]
struct Page<'a> {
    metadata: PageMeta,
    #[serde(borrow)]
    items: Vec<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct PageMeta {
    #[serde(rename = "continue", default)]
    next: String,
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

/// Every page of one collection into a store, within the [`Pager`]'s
/// bounds; its version is the list's (what a watch starts from).
pub(crate) fn list_into(client: &mut Client, collection: &Collection, budget: Duration) -> Result<Store, KubeError> {
    // A continue token expires (410 Gone) when the list is older than etcd's
    // compaction window; start over once, then give up until the next try.
    let mut restarts_left = 1;
    let mut next = String::new();
    let mut store = Store::default();
    let until = Instant::now().checked_add(budget).unwrap_or_else(Instant::now);
    let mut pager = Pager::new(Budget { length: budget, until });
    let action = format!("list {}{}", collection.name, collection.scope);
    loop {
        let mut path = format!("{}?limit={PAGE_SIZE}", collection.path);
        if !next.is_empty() {
            path.push_str("&continue=");
            path.push_str(&percent_encode(&next));
        }
        let body = match client.get_path(&path, &action) {
            Ok(Some(body)) => body,
            Ok(None) => return Err(not_served(&collection.path)),
            Err(e) if e.code() == Some(410) && restarts_left > 0 => {
                restarts_left -= 1;
                next.clear();
                store = Store::default();
                pager.restart();
                continue;
            }
            Err(e) => return Err(e),
        };
        // As text: the events are parsed from text too, so the resource
        // parser is compiled once.
        let text = std::str::from_utf8(&body).map_err(|e| e.to_string());
        let page =
            text.and_then(|text| serde_json::from_str::<Page>(text).map_err(|e| e.to_string())).map_err(|e| {
                KubeError::Response { message: format!("unexpected list answer for {}: {e}", collection.path) }
            })?;
        for item in page.items {
            let parsed = parse_item(item.get()).unwrap_or_else(|e| Parsed::Unreadable {
                // Not even a name: said by its place in the list.
                key: format!("#{} (no name)", store.len() + 1).into(),
                version: String::new(),
                why: crate::lock::error_kind(&e).into(),
            });
            store.insert(parsed, &collection.spec);
        }
        store.resource_version = page.metadata.resource_version;
        if page.metadata.next.is_empty() {
            return Ok(store);
        }
        pager.follow(&page.metadata.next, Instant::now()).map_err(|message| KubeError::Response { message })?;
        next = page.metadata.next;
    }
}
