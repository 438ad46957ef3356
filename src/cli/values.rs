//! Parsers for the kinds of value flags take (durations, intervals, listen
//! addresses, switches), and [`Given`]: one raw value with the flag or
//! variable to blame when it is wrong.

use super::ConfigError;
use crate::status::{MAX_INTERVAL, MIN_INTERVAL};
use std::ffi::OsString;
use std::fmt::Display;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

/// One raw value and where it came from (`--flag` or `VARIABLE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Given {
    pub value: String,
    pub source: &'static str,
}

impl Given {
    /// `SOURCE: "VALUE" WHY`: every message about a bad value has this shape.
    pub(super) fn blame(&self, why: impl Display) -> ConfigError {
        ConfigError(format!("{}: {:?} {why}", self.source, self.value))
    }

    pub(super) fn parse<T>(&self, parse: impl FnOnce(&str) -> Result<T, String>) -> Result<T, ConfigError> {
        parse(&self.value).map_err(|why| self.blame(why))
    }

    /// The value as a Kubernetes name; `what` completes "SOURCE: VALUE ...".
    pub(super) fn name(&self, check: fn(&str) -> Result<(), &'static str>, what: &str) -> Result<String, ConfigError> {
        check(&self.value).map_err(|why| self.blame(format!("{what}: {why}")))?;
        Ok(self.value.clone())
    }

    /// A duration within `range`, stated in seconds when it is not.
    pub(super) fn duration(&self, range: RangeInclusive<Duration>) -> Result<Duration, ConfigError> {
        let d = self.parse(parse_duration)?;
        if !range.contains(&d) {
            let (min, max) = (range.start().as_secs(), range.end().as_secs());
            return Err(self.blame(format!("must be between {min}s and {max}s")));
        }
        Ok(d)
    }
}

/// A raw value that must be text: UTF-8, else a usage error naming
/// `source` (the value shown escaped, as `"state\xFF"`).
pub(crate) fn text(raw: OsString, source: &str) -> Result<String, ConfigError> {
    raw.into_string().map_err(|raw| ConfigError(format!("{source}: {raw:?} is not UTF-8 text")))
}

/// `IP:PORT`, `[IPv6]:PORT` or `:PORT` (all IPv4 interfaces). Names are
/// refused: resolving them would need a resolver a scratch image lacks.
pub(super) fn parse_listen(v: &str) -> Result<SocketAddr, String> {
    let full = if v.starts_with(':') { format!("0.0.0.0{v}") } else { v.to_string() };
    full.parse().map_err(|_| "is not IP:PORT or :PORT (e.g. :8090, 127.0.0.1:8090, [::]:8090)".to_string())
}

/// Parses an interval: whole seconds (`90`), or a number with `s`, `m` or
/// `h` (`90s`, `2m`), within [`MIN_INTERVAL`]..=[`MAX_INTERVAL`].
pub(super) fn parse_interval(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v)?;
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err("must be between 1s and 4m (readers treat a status older than 5 minutes as stale)".into());
    }
    Ok(d)
}

/// `90`, `90s`, `2m`, `1h`: a whole number with an optional unit.
pub(super) fn parse_duration(v: &str) -> Result<Duration, String> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = v.split_at(digits);
    if number.is_empty() {
        return Err("is not a duration (use e.g. 90, 90s, 2m)".into());
    }
    let n: u64 = number.parse().map_err(|_| "is too large".to_string())?;
    let seconds = match unit {
        "" | "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => return Err(format!("has an unknown unit {unit:?} (use s, m or h)")),
    };
    seconds.map(Duration::from_secs).ok_or_else(|| "is too large".into())
}

/// A switch's value: `true`/`false`, `1`/`0`, `yes`/`no`, any case.
pub(super) fn parse_switch(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err("is not true or false".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        for (v, secs) in [("90", 90), ("90s", 90), ("2m", 120), ("1s", 1), ("4m", 240)] {
            assert_eq!(parse_interval(v), Ok(Duration::from_secs(secs)), "{v}");
        }
        for v in
            ["", "0", "0s", "5m", "1h", "-5", "1.5s", "5x", "s", "99999999999999999999999", "18446744073709551615h"]
        {
            assert!(parse_interval(v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn switches() {
        for (v, want) in [("true", true), ("YES", true), ("1", true), ("False", false), ("no", false), ("0", false)] {
            assert_eq!(parse_switch(v), Ok(want), "{v}");
        }
        assert!(parse_switch("maybe").is_err());
    }
}
