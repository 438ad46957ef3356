//! When a phase of a request ends, and the socket timeout that waits for
//! it: the time left, rounded down so that it rarely changes.

use std::io;
use std::time::{Duration, Instant};
use ureq::Timeout;
use ureq::unversioned::transport::NextTimeout;
use ureq::unversioned::transport::time::Duration as Remaining;

/// Socket timeouts are the phase's remaining time rounded down to this, so
/// that consecutive requests set the same value and the system call is
/// skipped; a read or write that times out before the deadline is
/// waited again for the time left.
pub(super) const TIMEOUT_STEP: Duration = Duration::from_millis(250);

/// When a phase ends, from ureq's remaining time when it was given.
#[derive(Clone, Copy)]
pub(super) struct Deadline {
    at: Option<Instant>,
    pub(super) reason: Timeout,
}

impl Deadline {
    pub(super) fn new(timeout: NextTimeout) -> Deadline {
        let at = match timeout.after {
            Remaining::NotHappening => None,
            Remaining::Exact(after) => Some(Instant::now() + after),
        };
        Deadline { at, reason: timeout.reason }
    }

    /// The time left, `None` for no bound; a phase already over is its timeout.
    pub(super) fn left(&self) -> Result<Option<Duration>, ureq::Error> {
        match self.at.map(|at| at.saturating_duration_since(Instant::now())) {
            Some(left) if left.is_zero() => Err(ureq::Error::Timeout(self.reason)),
            left => Ok(left),
        }
    }
}

/// The socket timeout for `left` of a phase: rounded down to
/// [`TIMEOUT_STEP`] when that leaves a step or more, so it rarely changes.
/// Never longer than `left`: a read or write never waits past the deadline.
pub(super) fn socket_timeout(left: Option<Duration>) -> Option<Duration> {
    let left = left?;
    let steps = left.as_nanos() / TIMEOUT_STEP.as_nanos();
    Some(if steps == 0 { left } else { TIMEOUT_STEP * steps as u32 })
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_timeout_is_rounded_down_to_a_step_and_never_lengthened() {
        let ms = Duration::from_millis;
        assert_eq!(socket_timeout(None), None);
        assert_eq!(socket_timeout(Some(ms(4_999))), Some(ms(4_750)));
        assert_eq!(socket_timeout(Some(ms(4_800))), Some(ms(4_750)));
        assert_eq!(socket_timeout(Some(ms(250))), Some(ms(250)));
        assert_eq!(socket_timeout(Some(ms(120))), Some(ms(120)));
    }
}
