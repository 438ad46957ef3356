//! One probed collection listed into a fresh [`Store`], within the
//! [`Pager`]'s bounds: what a watch starts from, and what `opstatus once`
//! evaluates.
//!
//! Each answer is read as it arrives ([`WatchStream::read_parts`]): every
//! resource in it is parsed on its own ([`parse_item`]) and goes into the
//! store at once, so an answer is never held whole, whatever its size (the
//! watch cache answers 50,000 CRs in one, about 100 MB). Each resource is
//! bounded by the client's 4 MiB ([`MAX_BODY`]; etcd stores at most
//! ~1.5 MiB): one over it ends the list with a problem that says so. The
//! answer is bounded by [`MAX_RESOURCES`] resources and the list's time
//! ([`Pager`]), which each resource read extends.
//!
//! Where a list reads from is client-go's reflector's choice
//! ([`ReadFrom`]): a watch's first list asks for any version
//! (`resourceVersion=0`), which the API server answers from its watch
//! cache (v1.20 in one answer, whatever the `limit`; a server without the
//! cache, or a newer one, in pages); a list again after a watch was lost
//! asks for a version not older than the last one seen, also from the cache
//! (paged only where the server paged before); when the server no longer
//! has that version (`410 Gone`), the latest, from etcd (a quorum read).
//! `opstatus once` always reads the latest. Pages after the first carry
//! only their `continue` token: the server refuses a version beside it.

use super::answer::{AnswerSeed, Items, PageMeta};
use super::collection::Collection;
use super::pager::Pager;
use super::store::Store;
use super::{LIST_ANSWER, MAX_RESOURCES, PAGE_SIZE, not_served, percent_encode};
use crate::kube::{Client, KubeError, MAX_BODY, PartBound, WatchStream};
use std::time::{Duration, Instant};

/// Where a list reads from: the `resourceVersion` its first request asks
/// for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ReadFrom {
    /// `resourceVersion=0`: any version, from the API server's watch cache
    /// (a watch's first list).
    Cache,
    /// `resourceVersion=N`: not older than the version last seen, from the
    /// watch cache (a list again after a watch was lost: nothing older
    /// than what was seen).
    NotOlderThan(String),
    /// No `resourceVersion`: the latest, a quorum read from etcd
    /// (`opstatus once`; a list whose version the server no longer has).
    Latest,
}

/// Whether a list from a version failed because the server no longer has
/// that version (410, etcd compacted it) or does not have it yet (its
/// watch cache is behind: client-go reads the latest then too).
fn version_unavailable(e: &KubeError) -> bool {
    match e.code() {
        Some(410) => true,
        Some(504) => e.to_string().contains("Too large resource version"),
        _ => false,
    }
}

/// One collection's list, resumable: a request that fails (a timeout, a
/// 5xx, a broken connection) leaves what was listed and the `continue`
/// token, so the next try goes on from the page it was at (the API server
/// keeps a token valid until etcd compacts its version, ~5 min by default)
/// instead of starting over; `410 Gone` (the token expired) starts over at
/// once, and so does a list stopped by its bounds ([`Pager`]) the next
/// time. A first page is always read whole again: what a try read of it
/// before is dropped.
pub(crate) struct Listing {
    store: Store,
    /// The `continue` token of the next page; empty: the first page.
    next: String,
    /// Always the latest (`opstatus once`).
    latest_only: bool,
    /// The server no longer has the version last seen (a list from it got
    /// 410): the next list reads the latest.
    version_gone: bool,
    /// The last complete list came in pages: the server pages lists from a
    /// version (no watch cache), so a list from a version asks for pages
    /// too (client-go's reflector does the same).
    paged: bool,
    pager: Pager,
    /// The last list stopped at [`MAX_RESOURCES`]: the collection holds
    /// more than a probe keeps.
    past_cap: bool,
}

impl Listing {
    /// A watch's list, which may go `budget` without progress
    /// ([`Pager`]): the first from the watch cache.
    pub(super) fn new(budget: Duration) -> Listing {
        Listing {
            store: Store::default(),
            next: String::new(),
            latest_only: false,
            version_gone: false,
            paged: false,
            pager: Pager::new(budget, Instant::now()),
            past_cap: false,
        }
    }

    /// A list that always reads the latest, a consistent read (`opstatus
    /// once`), within the same bounds.
    pub(super) fn latest(budget: Duration) -> Listing {
        Listing { latest_only: true, ..Listing::new(budget) }
    }

    /// Resources listed so far.
    pub(crate) fn listed(&self) -> usize {
        self.store.len()
    }

    /// Pages read so far.
    pub(crate) fn pages(&self) -> usize {
        self.pager.pages()
    }

    /// Whether the last list stopped at [`MAX_RESOURCES`].
    pub(crate) fn past_cap(&self) -> bool {
        self.past_cap
    }

    /// Whether the next page is the first.
    pub(crate) fn at_start(&self) -> bool {
        self.next.is_empty()
    }

    fn start_over(&mut self) {
        self.next.clear();
        self.first_page(Instant::now());
    }

    /// Before the first page is asked (again): the store and the pager's
    /// progress go together, so a try cut during its first page leaves its
    /// retry a whole budget from `now` and each resource it reads counts as
    /// progress again (not only those past where the cut try got).
    fn first_page(&mut self, now: Instant) {
        self.store = Store::default();
        self.pager.restart(now);
    }

    /// Where a list starts reading from, `seen` the version last seen
    /// (empty: none yet).
    fn read_from(&self, seen: &str) -> ReadFrom {
        match (self.latest_only || self.version_gone, seen.is_empty()) {
            (true, _) => ReadFrom::Latest,
            (false, true) => ReadFrom::Cache,
            (false, false) => ReadFrom::NotOlderThan(seen.to_string()),
        }
    }

    /// The next request's path and query, a first page read `from` there.
    fn path(&self, collection: &Collection, from: &ReadFrom) -> String {
        let mut path = collection.path.clone();
        match from {
            _ if !self.next.is_empty() => {
                path.push_str(&format!("?limit={PAGE_SIZE}&continue="));
                path.push_str(&percent_encode(&self.next));
            }
            ReadFrom::Cache => path.push_str(&format!("?limit={PAGE_SIZE}&resourceVersion=0")),
            // As client-go: a `limit` would send the list to etcd (at
            // exactly that version, on v1.20), unless the server pages anyway.
            ReadFrom::NotOlderThan(version) if !self.paged => {
                path.push_str("?resourceVersion=");
                path.push_str(&percent_encode(version));
            }
            ReadFrom::NotOlderThan(version) => {
                path.push_str(&format!("?limit={PAGE_SIZE}&resourceVersion="));
                path.push_str(&percent_encode(version));
            }
            ReadFrom::Latest => path.push_str(&format!("?limit={PAGE_SIZE}")),
        }
        path
    }

    /// Lists the remaining pages into the store, which it returns when
    /// complete (and starts over: the next call lists anew). `seen` is the
    /// version last seen (empty: none). `progress` is told the resources
    /// listed as they come.
    #[inline(never)]
    pub(crate) fn run(
        &mut self,
        client: &mut Client,
        collection: &Collection,
        seen: &str,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Store, KubeError> {
        // A continue token expires (410 Gone) when the list is older than
        // etcd's compaction window; start over once, then give up until the
        // next try.
        let mut restarts_left = 1;
        self.past_cap = false;
        let action = format!("list {}{}", collection.name, collection.scope);
        self.pager.resume(Instant::now());
        loop {
            if self.next.is_empty() {
                self.first_page(Instant::now());
            }
            let from = self.read_from(seen);
            let path = self.path(collection, &from);
            // An answer that stalled is given up.
            let mut answer = match client.get_stream_within(&path, &action, LIST_ANSWER) {
                Ok(answer) => answer,
                Err(e) if e.code() == Some(404) => return Err(not_served(&collection.path)),
                Err(e) if self.next.is_empty() && from != ReadFrom::Latest && version_unavailable(&e) => {
                    log::debug!("Listing {} from version {from:?}: {e}; listing the latest", collection.name);
                    self.version_gone = true;
                    continue;
                }
                Err(e) if e.code() == Some(410) => {
                    let expired = !self.next.is_empty();
                    self.start_over();
                    if expired && restarts_left > 0 {
                        restarts_left -= 1;
                        continue;
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            let meta = self.read(&mut answer, collection, progress)?;
            answer.finish();
            self.store.resource_version = meta.resource_version;
            progress(self.store.len());
            if meta.next.is_empty() {
                self.paged = self.pager.pages() > 0;
                self.version_gone = false;
                let mut store = std::mem::take(&mut self.store);
                store.shrink_to_fit();
                self.start_over();
                return Ok(store);
            }
            let follow = self.pager.follow(self.store.len(), Instant::now());
            if let Err(message) = follow {
                self.past_cap = self.store.len() >= MAX_RESOURCES;
                self.start_over();
                return Err(KubeError::Response { message });
            }
            self.next = meta.next;
        }
    }

    /// Reads one answer into the store, as it arrives; its `metadata`.
    fn read(
        &mut self,
        answer: &mut WatchStream,
        collection: &Collection,
        progress: &mut dyn FnMut(usize),
    ) -> Result<PageMeta, KubeError> {
        let bound = PartBound::default();
        let mut stopped = None;
        let items = Items {
            store: &mut self.store,
            collection,
            pager: &mut self.pager,
            bound: &bound,
            progress,
            stopped: &mut stopped,
        };
        let read = answer.read_parts(&bound, AnswerSeed(items));
        let message = match read {
            Ok(Ok(meta)) => return Ok(meta),
            Ok(Err(e)) => match stopped {
                Some(why) => why,
                None => format!("unexpected list answer for {}: {e}", collection.path),
            },
            Err(_) if bound.over() => format!(
                "a single {} (after the first {} listed) is larger than {MAX_BODY} bytes, the most one resource \
                 may be: the resources past it cannot be listed",
                collection.kind,
                self.store.len()
            ),
            // Cut short, timed out: what was listed stays, for the next try.
            Err(e) => return Err(e),
        };
        self.past_cap = self.store.len() >= MAX_RESOURCES;
        self.start_over();
        Err(KubeError::Response { message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_answer_read_again_after_a_cut_counts_as_progress_again() {
        let (t0, s) = (Instant::now(), Duration::from_secs);
        let mut listing = Listing::new(s(10));
        // The first try reads 40,000 resources of its one answer, 1,000 a
        // second, and is cut.
        for listed in (1_000..=40_000).step_by(1_000) {
            assert_eq!(listing.pager.progress(listed, t0 + s(listed as u64 / 1_000)), Ok(()), "{listed}");
        }
        // Its retry asks for the first page again and reads the whole
        // answer at the same pace: never 10 s without a resource.
        let retry = t0 + s(60);
        listing.first_page(retry);
        assert_eq!((listing.listed(), listing.pages()), (0, 0));
        for listed in (1_000..=50_000).step_by(1_000) {
            let read = listing.pager.progress(listed, retry + s(listed as u64 / 1_000));
            assert_eq!(read, Ok(()), "the retry stopped at {listed} of 50000");
        }
    }
}
