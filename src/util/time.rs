//! RFC 3339 timestamps (`2025-11-10T15:30:00Z`) without a date crate.
//!
//! The kube9 status needs `lastUpdate` in UTC with second precision, and the
//! reader must parse what any writer put there (fractions and offsets
//! included). Days-from-civil arithmetic is Howard Hinnant's public-domain
//! algorithm; it is exact for the whole proleptic Gregorian calendar.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Formats `t` as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds).
///
/// Times before 1970 are clamped to the epoch: a status is never written
/// with such a clock, and clamping keeps the function total.
pub fn format_rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses an RFC 3339 date-time: `2025-11-10T15:30:00Z`, with optional
/// fractional seconds and a `Z` or `±HH:MM` offset (`t`/`z` accepted too).
/// Returns `None` for anything else, including impossible dates.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r| digits(s, r);
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let count = frac.bytes().take_while(u8::is_ascii_digit).count();
        if count == 0 {
            return None;
        }
        // Nanosecond precision; digits beyond the ninth are dropped.
        for (i, d) in frac.bytes().take(9).take_while(u8::is_ascii_digit).enumerate() {
            nanos += u32::from(d - b'0') * 10u32.pow(8 - i as u32);
        }
        rest = &frac[count..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ => {
            let ob = rest.as_bytes();
            if ob.len() != 6 || !matches!(ob[0], b'+' | b'-') || ob[3] != b':' {
                return None;
            }
            let (oh, om) = (digits(rest, 1..3)?, digits(rest, 4..6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let sign = if ob[0] == b'-' { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_secs;
    u64::try_from(secs).ok().map(|s| UNIX_EPOCH + Duration::new(s, nanos))
}

/// The ASCII decimal number at `r`, or `None` (also for signs and non-ASCII).
fn digits(s: &str, r: std::ops::Range<usize>) -> Option<i64> {
    let part = s.get(r)?;
    if part.bytes().all(|c| c.is_ascii_digit()) { part.parse().ok() } else { None }
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

/// A length of time as a person says it: seconds up to two minutes,
/// minutes up to two hours, then hours and minutes.
pub(crate) fn spoken(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ if secs % 3600 < 60 => format!("{} h", secs / 3600),
        _ => format!("{} h {} min", secs / 3600, secs / 60 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(at(1_762_788_600)), "2025-11-10T15:30:00Z");
        assert_eq!(format_rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        // Sub-second parts are dropped, not rounded.
        let t = at(1_762_788_600) + Duration::from_millis(999);
        assert_eq!(format_rfc3339(t), "2025-11-10T15:30:00Z");
        // Past year 9999 the year takes the digits it needs.
        assert_eq!(format_rfc3339(at(253_402_300_799)), "9999-12-31T23:59:59Z");
        assert_eq!(format_rfc3339(at(253_402_300_800)), "10000-01-01T00:00:00Z");
    }

    #[test]
    fn parse_round_trips_format_across_centuries() {
        for secs in [0, 86_399, 951_782_400, 1_762_788_600, 4_102_444_800, 253_402_300_799] {
            assert_eq!(parse_rfc3339(&format_rfc3339(at(secs))), Some(at(secs)), "{secs}");
        }
    }

    #[test]
    fn parses_fractions_and_offsets() {
        let want = Some(at(1_762_788_600));
        assert_eq!(parse_rfc3339("2025-11-10T15:30:00.000Z"), want);
        assert_eq!(
            parse_rfc3339("2025-11-10T15:30:00.123456Z"),
            Some(at(1_762_788_600) + Duration::from_micros(123_456))
        );
        assert_eq!(
            parse_rfc3339("2025-11-10T15:30:00.1234567891Z"),
            Some(at(1_762_788_600) + Duration::from_nanos(123_456_789))
        );
        assert_eq!(parse_rfc3339("2025-11-10T16:30:00+01:00"), want);
        assert_eq!(parse_rfc3339("2025-11-10T10:30:00-05:00"), want);
        assert_eq!(parse_rfc3339("2025-11-10t15:30:00z"), want);
    }

    #[test]
    fn rejects_malformed_and_impossible_dates() {
        for bad in [
            "",
            "2025-11-10",
            "2025-11-10T15:30:00",
            "2025-13-10T15:30:00Z",
            "2025-02-29T00:00:00Z",
            "2025-11-31T00:00:00Z",
            "2025-11-10T24:00:00Z",
            "2025-11-10T15:30:00.Z",
            "2025-11-10T15:30:00+0100",
            "2025-11-10T15:30:00 UTC",
            "２０25-11-10T15:30:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
