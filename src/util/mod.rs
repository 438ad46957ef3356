//! Small mechanisms every room uses and none owns: backoff and jitter,
//! base64, RFC 3339 time, signals and the shutdown watchdog, logging, the
//! outbound HTTP policy on ureq's transport, TLS and proxies, a problem
//! that is logged once per change, bounded, non-blocking reads of files
//! from outside, foreign text made safe to show, and the rule about
//! credentials in URLs.

pub(crate) mod backoff;
pub(crate) mod base64;
pub(crate) mod config_error;
pub(crate) mod files;
pub(crate) mod http;
pub mod logging;
pub(crate) mod proxy;
pub(crate) mod reported;
pub(crate) mod shutdown;
pub(crate) mod spelling;
pub(crate) mod text;
pub(crate) mod time;
pub(crate) mod tls;
pub(crate) mod url;
