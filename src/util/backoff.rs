//! Retry timing: exponential backoff with full jitter, and `Retry-After`.
//!
//! Pure: the random source and the clock are passed in, so the schedule is
//! unit-tested without sleeping.

use std::time::{Duration, SystemTime};

/// Exponential backoff with full jitter between `base` and a growing ceiling.
///
/// Attempt *n* (0-based) waits a uniformly random time in
/// `[base, min(cap, base·2ⁿ)]`. The floor of `base` (instead of the usual 0)
/// guarantees that no two attempts are ever closer than `base`: a failing
/// dependency never sees a tight loop, however the dice fall.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
}

/// The longest `Retry-After` honoured; a larger one is treated as this. A
/// server (or a proxy) asking for hours would otherwise silence the status.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// The longest wait [`parse_retry_after`] ever returns, whoever asks: a
/// header is outside input, and an unbounded one (`99999999999999999999`)
/// would overflow the first `Instant + Duration` it reached. Each caller
/// may cap lower ([`MAX_RETRY_AFTER`] for the API server).
pub(crate) const RETRY_AFTER_LIMIT: Duration = Duration::from_secs(3600);

impl Backoff {
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        Backoff { base, cap: cap.max(base), failures: 0 }
    }

    /// Consecutive failures since the last success.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// The delay before the next attempt after one more failure. `random` is
    /// a uniformly distributed `u64`; `retry_after`, the server's request,
    /// which wins when it asks for longer (up to [`MAX_RETRY_AFTER`]).
    pub(crate) fn next_delay(&mut self, random: u64, retry_after: Option<Duration>) -> Duration {
        let ceiling = self.ceiling(self.failures);
        self.failures = self.failures.saturating_add(1);
        let spread = ceiling.saturating_sub(self.base).as_millis() as u64;
        let jittered = self.base + Duration::from_millis(random % (spread + 1));
        match retry_after {
            Some(asked) => jittered.max(asked.min(MAX_RETRY_AFTER)),
            None => jittered,
        }
    }

    /// The upper bound of the delay after `failures` earlier failures.
    pub(crate) fn ceiling(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }

    /// A new cap (the heartbeat interval changed), never below the base.
    pub(crate) fn set_cap(&mut self, cap: Duration) {
        self.cap = cap.max(self.base);
    }
}

/// Parses a `Retry-After` header value: delay-seconds or an HTTP-date
/// (RFC 9110 §10.2.3). A date in the past means "now" (zero); anything
/// longer than [`RETRY_AFTER_LIMIT`] (however many digits) is that limit.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let asked = if !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit()) {
        // Saturate absurdly long digit strings instead of rejecting them.
        Duration::from_secs(value.parse().unwrap_or(u64::MAX))
    } else {
        let when = httpdate::parse_http_date(value).ok()?;
        when.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(asked.min(RETRY_AFTER_LIMIT))
}

/// A small, fast pseudo-random generator for jitter (xorshift64*), seeded
/// from the OS through std's hasher keys. Jitter needs spread, not secrecy.
#[derive(Clone, Debug)]
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn from_os() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Jitter(seed | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_cap_follows_the_interval_and_never_drops_below_the_base() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(b.ceiling(20), Duration::from_secs(60));
        b.set_cap(Duration::from_secs(240));
        assert_eq!(b.ceiling(20), Duration::from_secs(240));
        b.set_cap(Duration::ZERO);
        assert_eq!(b.ceiling(20), Duration::from_secs(1));
    }

    #[test]
    fn ceilings_double_from_base_up_to_cap() {
        let b = Backoff::new(S, 60 * S);
        let ceilings: Vec<u64> = (0..9).map(|n| b.ceiling(n).as_secs()).collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(b.ceiling(u32::MAX), 60 * S);
    }

    #[test]
    fn delays_stay_within_base_and_ceiling_for_any_random_value() {
        for random in [0, 1, 999, 1000, 12_345, u64::MAX / 2, u64::MAX] {
            let mut b = Backoff::new(S, 60 * S);
            for n in 0..12 {
                let ceiling = b.ceiling(n);
                let d = b.next_delay(random, None);
                assert!(d >= S && d <= ceiling, "attempt {n}: {d:?} not in [1s, {ceiling:?}]");
            }
        }
    }

    #[test]
    fn jitter_spreads_delays_across_the_window() {
        let mut rng = Jitter::from_os();
        let delays: Vec<Duration> = (0..200)
            .map(|_| Backoff::new(S, 60 * S).tap(|b| b.failures = 6).next_delay(rng.next_u64(), None))
            .collect();
        let (min, max) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
        assert!(*min < 15 * S && *max > 45 * S, "no spread: {min:?}..{max:?}");
    }

    #[test]
    fn retry_after_wins_when_longer_and_is_capped() {
        let mut b = Backoff::new(S, 60 * S);
        assert_eq!(b.next_delay(0, Some(30 * S)), 30 * S);
        assert_eq!(b.next_delay(0, Some(Duration::ZERO)), S);
        assert_eq!(b.next_delay(0, Some(86_400 * S)), MAX_RETRY_AFTER);
    }

    #[test]
    fn reset_starts_the_schedule_again() {
        let mut b = Backoff::new(S, 60 * S);
        for _ in 0..5 {
            b.next_delay(7, None);
        }
        assert_eq!(b.failures(), 5);
        b.reset();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.next_delay(u64::MAX, None), S);
    }

    #[test]
    fn cap_below_base_is_raised_to_base() {
        let mut b = Backoff::new(2 * S, S);
        assert_eq!(b.next_delay(u64::MAX, None), 2 * S);
    }

    #[test]
    fn parses_retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("120", now), Some(120 * S));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now), Some(30 * S));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("3600", now), Some(RETRY_AFTER_LIMIT));
        assert_eq!(parse_retry_after("3601", now), Some(RETRY_AFTER_LIMIT));
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(RETRY_AFTER_LIMIT));
        assert_eq!(parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now), Some(RETRY_AFTER_LIMIT));
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    trait Tap: Sized {
        fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
            f(&mut self);
            self
        }
    }
    impl Tap for Backoff {}
}
