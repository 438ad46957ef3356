//! What the log says of status writes. A heartbeat that publishes what the
//! last one did is news to nobody: at the 60 s default that would be 1,440
//! identical lines a day per pod, which log pipelines store and bill. So:
//!
//! - `Status updated: …` (the spec's words) at INFO when the published
//!   status changes: the first write, and any change of mode, tier,
//!   health, reason or registration;
//! - a one-line summary at INFO once an hour, so a quiet log still shows
//!   the sidecar at work;
//! - every heartbeat's `Status updated: …` under the log target
//!   [`HEARTBEAT_TARGET`], off unless `RUST_LOG` names it
//!   (`RUST_LOG=info,opstatus::heartbeat=info`).
//!
//! A failed write is a WARN each time, as before (`super`).

use std::time::{Duration, Instant};

pub(super) use crate::util::logging::HEARTBEAT_TARGET;

/// How often the summary line is written.
pub(super) const SUMMARY_EVERY: Duration = Duration::from_secs(3600);

/// Counts successful writes between summaries. Pure: the clock is an
/// argument.
pub(super) struct WriteLog {
    writes: u64,
    since: Instant,
}

impl WriteLog {
    pub(super) fn new(now: Instant) -> WriteLog {
        WriteLog { writes: 0, since: now }
    }

    /// Counts a successful write at `now`; the summary (how many writes
    /// succeeded over how long), once [`SUMMARY_EVERY`] has passed since the
    /// last one (or the start).
    pub(super) fn wrote(&mut self, now: Instant) -> Option<(u64, Duration)> {
        self.writes += 1;
        let over = now.saturating_duration_since(self.since);
        if over < SUMMARY_EVERY {
            return None;
        }
        let writes = self.writes;
        *self = WriteLog::new(now);
        Some((writes, over))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_comes_once_an_hour_with_the_writes_since_the_last() {
        let start = Instant::now();
        let mut log = WriteLog::new(start);
        let minute = Duration::from_secs(60);
        for n in 1..60 {
            assert_eq!(log.wrote(start + minute * n), None, "minute {n}");
        }
        assert_eq!(log.wrote(start + minute * 60), Some((60, minute * 60)));
        // The next hour counts from there; a late write still summarises.
        assert_eq!(log.wrote(start + minute * 61), None);
        let late = start + minute * 125;
        assert_eq!(log.wrote(late), Some((2, minute * 65)));
    }
}
