//! The bounds on one collection's list ([`Pager`]): resources, pages, and
//! time without progress; and when a collection found past
//! [`MAX_RESOURCES`] is counted again ([`OverCap`]). Pure: the clock is an
//! argument.

use super::{MAX_PAGES, MAX_RESOURCES};
use std::time::{Duration, Instant};

/// A collection found past [`MAX_RESOURCES`] is not listed again (the
/// heaviest request a client makes, on the clusters that can least afford
/// it) until a count says it fits: one request with `limit=1`, reading the
/// server's `remainingItemCount`. The first count comes this long after
/// the list that found it, each count that finds it still past after twice
/// the wait before, up to [`OVER_CAP_MOST`].
pub(super) const OVER_CAP_FIRST: Duration = Duration::from_secs(60);
pub(super) const OVER_CAP_MOST: Duration = Duration::from_secs(3600);

/// When a collection past [`MAX_RESOURCES`] is counted again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OverCap {
    wait: Duration,
    pub due: Instant,
}

impl OverCap {
    /// Found past the cap (by a list or a count) at `now`; `before`: the
    /// last, while it has been past since (its wait doubles).
    pub(super) fn after(before: Option<OverCap>, now: Instant) -> OverCap {
        let wait = before.map_or(OVER_CAP_FIRST, |b| b.wait.saturating_mul(2).min(OVER_CAP_MOST));
        OverCap { wait, due: now + wait }
    }
}

/// The bounds on one collection's list: resources, pages, and time:
/// `length` since the last resource not listed before, so a long list that
/// keeps making progress is never cut short, and one that stopped making
/// progress (pages without new resources, as a server whose pages never
/// end sends, or whose continue token comes back) is. Pure: the clock is
/// an argument.
pub(super) struct Pager {
    pages: usize,
    length: Duration,
    until: Instant,
    /// Resources listed when the budget last grew.
    progressed_at: usize,
}

impl Pager {
    /// A list that may go `length` without progress, from `now`.
    pub(super) fn new(length: Duration, now: Instant) -> Pager {
        let mut pager = Pager { pages: 0, length, until: now, progressed_at: 0 };
        pager.resume(now);
        pager
    }

    /// The same bounds for a list that starts over at `now`.
    pub(super) fn restart(&mut self, now: Instant) {
        *self = Pager::new(self.length, now);
    }

    /// Pages followed so far.
    pub(super) fn pages(&self) -> usize {
        self.pages
    }

    /// Whether to fetch the next page, `listed` resources in; why not,
    /// when not.
    pub(super) fn follow(&mut self, listed: usize, now: Instant) -> Result<(), String> {
        self.pages += 1;
        if listed >= MAX_RESOURCES || self.pages >= MAX_PAGES {
            return Err(format!(
                "the API server still had more after {listed} resources in {} pages (at most {MAX_RESOURCES} are \
                 probed per type and namespace): stopped listing",
                self.pages
            ));
        }
        self.progress(listed, now)
    }

    /// A resource was read, `listed` in all: the budget grows when that
    /// one is new; whether it allows another.
    pub(super) fn progress(&mut self, listed: usize, now: Instant) -> Result<(), String> {
        if listed > self.progressed_at {
            self.progressed_at = listed;
            self.resume(now);
        }
        if now < self.until {
            return Ok(());
        }
        let (length, pages) = (self.length, self.pages);
        // Whole seconds, or milliseconds (an `--interval` under a second).
        let seconds = match length.subsec_millis() {
            0 => format!("{}s", length.as_secs()),
            _ => format!("{}ms", length.as_millis()),
        };
        Err(format!(
            "listing made no progress for {seconds} ({pages} pages, {listed} resources): stopped; the next try \
             starts over"
        ))
    }

    /// Resumes after a failed request, the budget counted from `now`.
    pub(super) fn resume(&mut self, now: Instant) {
        self.until = now.checked_add(self.length).unwrap_or(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::probes::{LIST_BUDGET, PAGE_SIZE};

    #[test]
    fn paging_stops_at_the_resource_bound() {
        let now = Instant::now();
        let mut pager = Pager::new(LIST_BUDGET, now);
        let followed = (1..).take_while(|n| pager.follow(n * PAGE_SIZE, now).is_ok()).count();
        assert_eq!(followed, MAX_RESOURCES / PAGE_SIZE - 1, "the first page and 199 followed tokens");
        let e = pager.follow(MAX_RESOURCES, now).unwrap_err();
        assert!(e.starts_with("the API server still had more after 100000 resources in 201 pages"), "{e}");
        let mut pager = Pager::new(LIST_BUDGET, now);
        let followed = std::iter::from_fn(|| pager.follow(0, now).ok()).count();
        assert_eq!(followed, MAX_PAGES - 1, "empty pages: at most MAX_PAGES");
    }

    #[test]
    fn past_the_cap_it_is_counted_after_a_minute_doubling_to_an_hour() {
        let t0 = Instant::now();
        let mut over = None;
        let mut counts = Vec::new();
        // A collection that stays past the cap for a day: each count finds
        // it past again.
        let mut now = t0;
        while now < t0 + Duration::from_secs(24 * 3600) {
            let next = OverCap::after(over, now);
            (now, over) = (next.due, Some(next));
            counts.push(now.duration_since(t0).as_secs() / 60);
        }
        assert_eq!(counts[..8], [1, 3, 7, 15, 31, 63, 123, 183], "minutes after the list that found it");
        assert_eq!(counts.len(), 29, "29 one-item counts in a day, not a list of 100,000 every 30 s (2,880)");
    }

    #[test]
    fn a_growing_budget_lasts_while_pages_bring_new_resources() {
        let (now, s) = (Instant::now(), Duration::from_secs);
        let mut pager = Pager::new(s(10), now);
        // 200 pages of 250, 3 s apart: 600 s in all, never cut short.
        for page in 1..200 {
            assert_eq!(pager.follow(page * 250, now + s(3 * page as u64)), Ok(()), "{page}");
        }
        // Pages that bring nothing new (a server that pages without end
        // over the same resources): stopped once 10 s passed without one.
        let last = now + s(3 * 199);
        assert_eq!(pager.follow(199 * 250, last + s(9)), Ok(()));
        let e = pager.follow(199 * 250, last + s(10)).unwrap_err();
        assert_eq!(
            e,
            "listing made no progress for 10s (201 pages, 49750 resources): stopped; the next try starts over"
        );
    }
}
