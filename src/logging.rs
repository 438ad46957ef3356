//! Logging: one line per event on stderr, `TIMESTAMP LEVEL message`.
//!
//! `RUST_LOG` sets the level (default `info`). Whatever it says, the HTTP
//! layer's wire dump (`ureq_proto` at TRACE, which prints request headers,
//! `Authorization` included, unredacted) is never enabled: a debugging
//! session must not leak the token into a log collector.

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
        writeln!(
            buf,
            "{} {:<5} {}",
            crate::time::format_rfc3339(std::time::SystemTime::now()),
            record.level(),
            record.args()
        )
    });
    builder.target(env_logger::Target::Stderr);
    let _ = builder.try_init();
}
