//! Small mechanisms every room uses and none owns: backoff and jitter,
//! RFC 3339 time, signals and the shutdown watchdog, logging, the outbound
//! HTTP policy, a problem that is logged once per change, bounded,
//! non-blocking reads of files from outside, foreign text made safe to
//! show, and the rule about credentials in URLs.

pub mod backoff;
pub mod config_error;
pub mod files;
pub mod http;
pub mod logging;
pub mod reported;
pub mod shutdown;
pub(crate) mod spelling;
pub mod text;
pub mod time;
pub mod url;
