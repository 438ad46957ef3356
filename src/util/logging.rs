//! Logging: one line per event on stderr, `TIMESTAMP LEVEL message`.
//!
//! `RUST_LOG` sets the level (default `info`). The line on every heartbeat
//! (target `opstatus::heartbeat`) is off unless `RUST_LOG` names it. Whatever it says, the HTTP
//! protocol layer's wire dump (`ureq_proto` at TRACE, documented by ureq as
//! "NOT REDACTED") stays off: a debugging session must never be one library
//! upgrade away from printing an `Authorization` header. Messages that span
//! lines (TLS handshake dumps at TRACE) are folded onto one line, so a log
//! collector never splits an event.

use std::fmt::{self, Write as _};
use std::io::Write;

/// The log target of the line on every heartbeat: off unless `RUST_LOG`
/// names it (`RUST_LOG=info,opstatus::heartbeat=info`).
pub(crate) const HEARTBEAT_TARGET: &str = "opstatus::heartbeat";

pub fn init() {
    let mut builder = env_logger::Builder::new();
    builder.filter_level(log::LevelFilter::Info);
    // Before RUST_LOG, which may turn it on: a line on every heartbeat.
    builder.filter_module(HEARTBEAT_TARGET, log::LevelFilter::Off);
    if let Ok(spec) = std::env::var("RUST_LOG") {
        builder.parse_filters(&spec);
    }
    // After RUST_LOG, so it cannot be overridden.
    builder.filter_module("ureq_proto", log::LevelFilter::Warn);
    builder.format(|buf, record| {
        // The message goes straight into env_logger's buffer, not through
        // a copy first: a heartbeat writes one of these lines.
        let stamp = crate::util::time::format_rfc3339(std::time::SystemTime::now());
        write!(buf, "{stamp} {:<5} ", record.level())?;
        let _ = write!(OneLine(&mut *buf), "{}", record.args());
        writeln!(buf)
    });
    builder.target(env_logger::Target::Stderr);
    let _ = builder.try_init();
}

/// Writes a message with line breaks (and the indentation after them)
/// folded into single spaces.
struct OneLine<W: Write>(W);

impl<W: Write> fmt::Write for OneLine<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for (i, part) in s.split('\n').enumerate() {
            let (space, part) = if i == 0 { ("", part) } else { (" ", part.trim_start()) };
            self.0.write_all(space.as_bytes()).map_err(|_| fmt::Error)?;
            self.0.write_all(part.trim_end_matches('\r').as_bytes()).map_err(|_| fmt::Error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_messages_are_folded() {
        // The formatter hands over the pieces separately: breaks in the
        // template and in the arguments are both folded.
        let payload = "[\n      1,\n    ]";
        let mut line = OneLine(Vec::new());
        write!(line, "Message {{\r\n    version: 1,\n    payload: {payload}\n}}").unwrap();
        assert_eq!(String::from_utf8(line.0).unwrap(), "Message { version: 1, payload: [ 1, ] }");
    }
}
