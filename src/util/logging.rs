//! Logging: one line per event on stderr, `TIMESTAMP LEVEL message`.
//!
//! `RUST_LOG` sets the level (default `info`). Whatever it says, the HTTP
//! protocol layer's wire dump (`ureq_proto` at TRACE, documented by ureq as
//! "NOT REDACTED") stays off: a debugging session must never be one library
//! upgrade away from printing an `Authorization` header. Messages that span
//! lines (TLS handshake dumps at TRACE) are folded onto one line, so a log
//! collector never splits an event.

use std::fmt::{self, Write as _};
use std::io::Write;

pub fn init() {
    let mut builder = env_logger::Builder::new();
    builder.filter_level(log::LevelFilter::Info);
    if let Ok(spec) = std::env::var("RUST_LOG") {
        builder.parse_filters(&spec);
    }
    // After RUST_LOG, so it cannot be overridden.
    builder.filter_module("ureq_proto", log::LevelFilter::Warn);
    builder.format(|buf, record| {
        let mut line = OneLine(String::new());
        let _ = write!(line, "{}", record.args());
        writeln!(
            buf,
            "{} {:<5} {}",
            crate::util::time::format_rfc3339(std::time::SystemTime::now()),
            record.level(),
            line.0
        )
    });
    builder.target(env_logger::Target::Stderr);
    let _ = builder.try_init();
}

/// Collects a message with line breaks (and the indentation after them)
/// folded into single spaces.
struct OneLine(String);

impl fmt::Write for OneLine {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut parts = s.split('\n');
        if let Some(first) = parts.next() {
            self.0.push_str(first.trim_end_matches('\r'));
        }
        for part in parts {
            self.0.push(' ');
            self.0.push_str(part.trim_start().trim_end_matches('\r'));
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
        let mut line = OneLine(String::new());
        write!(line, "Message {{\r\n    version: 1,\n    payload: {payload}\n}}").unwrap();
        assert_eq!(line.0, "Message { version: 1, payload: [ 1, ] }");
    }
}
