//! Small mechanisms every room uses and none owns: backoff and jitter,
//! RFC 3339 time, signals and the shutdown watchdog, logging, the outbound
//! HTTP policy, a problem that is logged once per change, and bounded,
//! non-blocking reads of files from outside.

pub mod backoff;
pub mod files;
pub mod http;
pub mod logging;
pub mod reported;
pub mod shutdown;
pub mod time;
