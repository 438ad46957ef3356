//! Small mechanisms every room uses and none owns: backoff and jitter,
//! RFC 3339 time, signals and the shutdown watchdog, logging, the outbound
//! HTTP policy, and a problem that is logged once per change.

pub mod backoff;
pub mod http;
pub mod logging;
pub mod reported;
pub mod shutdown;
pub mod time;
