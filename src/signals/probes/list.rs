//! One probed collection listed page by page into a fresh [`Store`],
//! within the [`Pager`]'s bounds: what a watch starts from, and what
//! `opstatus once` evaluates.
//!
//! A page is asked for with `limit` [`PAGE_SIZE`]; one refused for its
//! size (over the client's 4 MiB answer limit: 250 objects averaging over
//! ~16.7 KiB, a dozen 400 KB ones) is asked again with a quarter of the
//! `limit`, down to one, and the `limit` doubles back after each page that
//! fits ([`next_limit`]). So any legal object size lists (etcd stores at
//! most ~1.5 MiB); a single object over the limit ends the list with a
//! problem that says so.

use super::store::{Parsed, Store, parse_item};
use super::watcher::Collection;
use super::{MAX_PAGES, MAX_RESOURCES, PAGE_SIZE, not_served, percent_encode};
use crate::kube::{Client, KubeError, MAX_BODY};
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

/// How many followed continue tokens a list remembers, to stop at one that
/// comes back.
const SEEN_TOKENS: usize = 64;

/// The time one check may spend listing: its length, and when it ends.
#[derive(Clone, Copy)]
pub(super) struct Budget {
    pub length: Duration,
    pub until: Instant,
}

/// The bounds on one collection's paging: resources, pages, the check's
/// [`Budget`], and the last [`SEEN_TOKENS`] tokens followed (as hashes: a
/// token can be long; a short scan, and no hash table linked in; a longer
/// cycle of tokens runs into the budget). Pure: the clock is an argument.
pub(super) struct Pager {
    pages: usize,
    budget: Budget,
    seen: Vec<u64>,
}

impl Pager {
    pub(super) fn new(budget: Budget) -> Pager {
        Pager { pages: 0, budget, seen: Vec::new() }
    }

    /// Whether to fetch the page `token` points at, `listed` resources in;
    /// why not, when not.
    pub(super) fn follow(&mut self, token: &str, listed: usize, now: Instant) -> Result<(), String> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        self.pages += 1;
        if listed >= MAX_RESOURCES || self.pages >= MAX_PAGES {
            return Err(format!(
                "the API server still had more after {listed} resources in {} pages (at most {MAX_RESOURCES} are \
                 probed per type and namespace): stopped listing",
                self.pages
            ));
        }
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(token);
        if self.seen.contains(&hash) {
            return Err(format!(
                "the API server returned a continue token it had already given, after {} pages: stopped listing",
                self.pages
            ));
        }
        if self.seen.len() == SEEN_TOKENS {
            self.seen.remove(0);
        }
        self.seen.push(hash);
        self.within(now)
    }

    /// Whether the budget allows another request.
    pub(super) fn within(&self, now: Instant) -> Result<(), String> {
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

/// The `limit` to ask the next page with, after a page of `limit` fitted
/// (doubled, up to [`PAGE_SIZE`]) or was refused for its size (a quarter,
/// down to one); `None` when a page of one was refused: that one object is
/// over the limit.
pub(super) fn next_limit(limit: usize, fitted: bool) -> Option<usize> {
    match (fitted, limit) {
        (true, _) => Some(limit.saturating_mul(2).min(PAGE_SIZE)),
        (false, 0 | 1) => None,
        (false, _) => Some((limit / 4).max(1)),
    }
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
    let mut limit = PAGE_SIZE;
    loop {
        let mut path = format!("{}?limit={limit}", collection.path);
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
            Err(e) if e.is_too_large() => {
                let Some(smaller) = next_limit(limit, false) else {
                    return Err(KubeError::Response {
                        message: format!(
                            "a single {} (after the first {} listed) is larger than {MAX_BODY} bytes, the most an \
                             answer may be: the resources past it cannot be listed",
                            collection.kind,
                            store.len()
                        ),
                    });
                };
                limit = smaller;
                pager.within(Instant::now()).map_err(|message| KubeError::Response { message })?;
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
        pager
            .follow(&page.metadata.next, store.len(), Instant::now())
            .map_err(|message| KubeError::Response { message })?;
        next = page.metadata.next;
        limit = next_limit(limit, true).unwrap_or(PAGE_SIZE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::probes::LIST_BUDGET;

    #[test]
    fn a_page_refused_for_its_size_is_asked_again_smaller_down_to_one() {
        let mut refused = vec![PAGE_SIZE];
        while let Some(limit) = next_limit(*refused.last().unwrap(), false) {
            refused.push(limit);
        }
        assert_eq!(refused, [250, 62, 15, 3, 1], "four refusals at most before a page of one");
        assert_eq!(next_limit(3, true), Some(6), "then back up, doubling");
        assert_eq!(next_limit(200, true), Some(PAGE_SIZE));
        assert_eq!(next_limit(1, false), None, "one object over the limit");
    }

    #[test]
    fn paging_stops_at_the_resource_bound() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        let followed = (1..).take_while(|n| pager.follow(&format!("token-{n}"), n * PAGE_SIZE, now).is_ok()).count();
        assert_eq!(followed, MAX_RESOURCES / PAGE_SIZE - 1, "the first page and 399 followed tokens");
        let e = pager.follow("one-more", MAX_RESOURCES, now).unwrap_err();
        assert!(e.starts_with("the API server still had more after 100000 resources in 401 pages"), "{e}");
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        let followed = (1..).take_while(|n| pager.follow(&format!("token-{n}"), 0, now).is_ok()).count();
        assert_eq!(followed, MAX_PAGES - 1, "empty pages: at most MAX_PAGES");
    }

    #[test]
    fn paging_stops_on_a_token_seen_before() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        for token in ["a", "b", "c"] {
            assert_eq!(pager.follow(token, 0, now), Ok(()));
        }
        let e = pager.follow("b", 0, now).unwrap_err();
        assert!(e.contains("a continue token it had already given, after 4 pages"), "{e}");
        pager.restart();
        assert_eq!(pager.follow("b", 0, now), Ok(()), "a restarted list may see its tokens again");
    }

    #[test]
    fn paging_stops_at_the_deadline() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget { length: LIST_BUDGET, until: now + LIST_BUDGET });
        assert_eq!(pager.follow("a", 0, now + LIST_BUDGET - Duration::from_millis(1)), Ok(()));
        let e = pager.follow("b", 0, now + LIST_BUDGET).unwrap_err();
        assert_eq!(e, "listing took longer than 10s (2 pages): stopped; the next check tries again");
    }
}
