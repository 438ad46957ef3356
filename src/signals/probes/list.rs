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

/// The time a list may take: `length` at most, or (`grows`) `length`
/// since the last page that brought a resource not listed before, so a
/// long list that keeps making progress is never cut short, and one that
/// stopped making progress (pages without new resources, as a server
/// whose pages never end sends) is.
#[derive(Clone, Copy)]
pub(super) struct Budget {
    pub length: Duration,
    pub until: Instant,
    pub grows: bool,
}

impl Budget {
    /// `length` from `now`, fixed (one check's list in `opstatus once`).
    pub(super) fn fixed(length: Duration, now: Instant) -> Budget {
        Budget { length, until: now.checked_add(length).unwrap_or(now), grows: false }
    }

    /// `length` from `now` and from each page that made progress (a
    /// watch thread's list, which holds no one up).
    pub(super) fn growing(length: Duration, now: Instant) -> Budget {
        Budget { grows: true, ..Budget::fixed(length, now) }
    }
}

/// The bounds on one collection's paging: resources, pages, the
/// [`Budget`], and the last [`SEEN_TOKENS`] tokens followed (as hashes: a
/// token can be long; a short scan, and no hash table linked in; a longer
/// cycle of tokens runs into the budget). Pure: the clock is an argument.
pub(super) struct Pager {
    pages: usize,
    budget: Budget,
    seen: Vec<u64>,
    /// Resources listed when the budget last grew.
    progressed_at: usize,
}

impl Pager {
    pub(super) fn new(budget: Budget) -> Pager {
        Pager { pages: 0, budget, seen: Vec::new(), progressed_at: 0 }
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
        if self.budget.grows && listed > self.progressed_at {
            self.progressed_at = listed;
            self.budget.until = now.checked_add(self.budget.length).unwrap_or(now);
        }
        self.within(now, listed)
    }

    /// Whether the budget allows another request, `listed` resources in.
    pub(super) fn within(&self, now: Instant, listed: usize) -> Result<(), String> {
        if now < self.budget.until {
            return Ok(());
        }
        let (length, pages) = (self.budget.length, self.pages);
        // Whole seconds, or milliseconds (an `--interval` under a second).
        let seconds = match length.subsec_millis() {
            0 => format!("{}s", length.as_secs()),
            _ => format!("{}ms", length.as_millis()),
        };
        Err(if self.budget.grows {
            format!(
                "listing made no progress for {seconds} ({pages} pages, {listed} resources): stopped; the next try \
                 starts over"
            )
        } else {
            format!("listing took longer than {seconds} ({pages} pages): stopped; the next check tries again")
        })
    }

    /// Resumes after a failed request, the budget counted from `now`.
    fn resume(&mut self, now: Instant) {
        self.budget.until = now.checked_add(self.budget.length).unwrap_or(now);
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

/// Every page of one collection into a store, within a fixed
/// [`Budget`] (`opstatus once`); its version is the list's.
pub(crate) fn list_into(client: &mut Client, collection: &Collection, budget: Duration) -> Result<Store, KubeError> {
    Listing::new(Budget::fixed(budget, Instant::now())).run(client, collection, &mut |_| {})
}

/// One collection's list, page by page, resumable: a request that fails
/// (a timeout, a 5xx, a broken connection) leaves what was listed and the
/// `continue` token, so the next try goes on from the page it was at
/// (the API server keeps a token valid until etcd compacts its version,
/// ~5 min by default) instead of starting over; `410 Gone` (the token
/// expired) starts over at once, and so does a list stopped by its bounds
/// ([`Pager`]) the next time.
pub(crate) struct Listing {
    store: Store,
    /// The `continue` token of the next page; empty: the first page.
    next: String,
    limit: usize,
    pager: Pager,
    budget: Budget,
}

impl Listing {
    pub(super) fn new(budget: Budget) -> Listing {
        Listing { store: Store::default(), next: String::new(), limit: PAGE_SIZE, pager: Pager::new(budget), budget }
    }

    /// Resources listed so far.
    pub(crate) fn listed(&self) -> usize {
        self.store.len()
    }

    /// Pages read so far.
    pub(crate) fn pages(&self) -> usize {
        self.pager.pages
    }

    /// Whether the next page is the first.
    pub(crate) fn at_start(&self) -> bool {
        self.next.is_empty()
    }

    fn start_over(&mut self) {
        *self = Listing::new(Budget { until: Instant::now(), ..self.budget });
        self.pager.resume(Instant::now());
    }

    /// Lists the remaining pages into the store, which it returns when
    /// complete (and starts over: the next call lists anew). `progress` is
    /// told the resources listed after each page.
    #[inline(never)]
    pub(crate) fn run(
        &mut self,
        client: &mut Client,
        collection: &Collection,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Store, KubeError> {
        // A continue token expires (410 Gone) when the list is older than
        // etcd's compaction window; start over once, then give up until the
        // next try.
        let mut restarts_left = 1;
        let action = format!("list {}{}", collection.name, collection.scope);
        self.pager.resume(Instant::now());
        let bounded = |this: &mut Listing, message: String| {
            this.start_over();
            KubeError::Response { message }
        };
        loop {
            let mut path = format!("{}?limit={}", collection.path, self.limit);
            if !self.next.is_empty() {
                path.push_str("&continue=");
                path.push_str(&percent_encode(&self.next));
            }
            let body = match client.get_path(&path, &action) {
                Ok(Some(body)) => body,
                Ok(None) => return Err(not_served(&collection.path)),
                Err(e) if e.code() == Some(410) => {
                    let expired = !self.next.is_empty();
                    self.start_over();
                    if expired && restarts_left > 0 {
                        restarts_left -= 1;
                        continue;
                    }
                    return Err(e);
                }
                Err(e) if e.is_too_large() => {
                    let Some(smaller) = next_limit(self.limit, false) else {
                        let message = format!(
                            "a single {} (after the first {} listed) is larger than {MAX_BODY} bytes, the most an \
                             answer may be: the resources past it cannot be listed",
                            collection.kind,
                            self.store.len()
                        );
                        return Err(bounded(self, message));
                    };
                    self.limit = smaller;
                    let within = self.pager.within(Instant::now(), self.store.len());
                    within.map_err(|message| bounded(self, message))?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            // As text: the events are parsed from text too, so the resource
            // parser is compiled once.
            let text = std::str::from_utf8(&body).map_err(|e| e.to_string());
            let page = text.and_then(|text| serde_json::from_str::<Page>(text).map_err(|e| e.to_string()));
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    let message = format!("unexpected list answer for {}: {e}", collection.path);
                    return Err(bounded(self, message));
                }
            };
            for item in page.items {
                let parsed = parse_item(item.get()).unwrap_or_else(|e| Parsed::Unreadable {
                    // Not even a name: said by its place in the list.
                    key: format!("#{} (no name)", self.store.len() + 1).into(),
                    version: String::new(),
                    why: crate::lock::error_kind(&e).into(),
                });
                self.store.insert(parsed, &collection.spec);
            }
            self.store.resource_version = page.metadata.resource_version;
            progress(self.store.len());
            if page.metadata.next.is_empty() {
                let mut store = std::mem::take(&mut self.store);
                store.shrink_to_fit();
                self.start_over();
                return Ok(store);
            }
            let follow = self.pager.follow(&page.metadata.next, self.store.len(), Instant::now());
            follow.map_err(|message| bounded(self, message))?;
            self.next = page.metadata.next;
            self.limit = next_limit(self.limit, true).unwrap_or(PAGE_SIZE);
        }
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
        let mut pager = Pager::new(Budget::fixed(LIST_BUDGET, now));
        let followed = (1..).take_while(|n| pager.follow(&format!("token-{n}"), n * PAGE_SIZE, now).is_ok()).count();
        assert_eq!(followed, MAX_RESOURCES / PAGE_SIZE - 1, "the first page and 399 followed tokens");
        let e = pager.follow("one-more", MAX_RESOURCES, now).unwrap_err();
        assert!(e.starts_with("the API server still had more after 100000 resources in 401 pages"), "{e}");
        let mut pager = Pager::new(Budget::fixed(LIST_BUDGET, now));
        let followed = (1..).take_while(|n| pager.follow(&format!("token-{n}"), 0, now).is_ok()).count();
        assert_eq!(followed, MAX_PAGES - 1, "empty pages: at most MAX_PAGES");
    }

    #[test]
    fn paging_stops_on_a_token_seen_before() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget::fixed(LIST_BUDGET, now));
        for token in ["a", "b", "c"] {
            assert_eq!(pager.follow(token, 0, now), Ok(()));
        }
        let e = pager.follow("b", 0, now).unwrap_err();
        assert!(e.contains("a continue token it had already given, after 4 pages"), "{e}");
        let mut pager = Pager::new(Budget::fixed(LIST_BUDGET, now));
        assert_eq!(pager.follow("b", 0, now), Ok(()), "a list started over may see its tokens again");
    }

    #[test]
    fn paging_stops_at_the_deadline() {
        let now = Instant::now();
        let mut pager = Pager::new(Budget::fixed(LIST_BUDGET, now));
        assert_eq!(pager.follow("a", 0, now + LIST_BUDGET - Duration::from_millis(1)), Ok(()));
        let e = pager.follow("b", 0, now + LIST_BUDGET).unwrap_err();
        assert_eq!(e, "listing took longer than 10s (2 pages): stopped; the next check tries again");
    }

    #[test]
    fn a_growing_budget_lasts_while_pages_bring_new_resources() {
        let (now, s) = (Instant::now(), Duration::from_secs);
        let mut pager = Pager::new(Budget::growing(s(10), now));
        // 200 pages of 250, 3 s apart: 600 s in all, never cut short.
        for page in 1..200 {
            assert_eq!(pager.follow(&format!("t{page}"), page * 250, now + s(3 * page as u64)), Ok(()), "{page}");
        }
        // Pages that bring nothing new (a server that pages without end
        // over the same resources): stopped once 10 s passed without one.
        let last = now + s(3 * 199);
        assert_eq!(pager.follow("same-1", 199 * 250, last + s(9)), Ok(()));
        let e = pager.follow("same-2", 199 * 250, last + s(10)).unwrap_err();
        assert_eq!(
            e,
            "listing made no progress for 10s (201 pages, 49750 resources): stopped; the next try starts over"
        );
        let mut fixed = Pager::new(Budget::fixed(s(10), now));
        assert_eq!(fixed.follow("a", 250, now + s(9)), Ok(()));
        assert!(fixed.follow("b", 500, now + s(10)).unwrap_err().starts_with("listing took longer than 10s (2 pages)"));
    }
}
