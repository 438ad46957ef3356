//! The minimal Kubernetes REST client opstatus needs.
//!
//! - [`credentials`]: in-cluster and kubeconfig credentials, read at start;
//!   a client certificate is checked with its key then (`identity`), an
//!   exec credential plugin run then (`exec`).
//! - [`Client`]: verified TLS (for a kubeconfig's `tls-server-name`, that
//!   name asked for and verified, as client-go does), bounded timeouts and body sizes, bearer-token
//!   reload (at least once a minute, and at once after a 401), and
//!   Kubernetes `Status` error bodies turned into [`KubeError`]s that tell an
//!   admin what to do.
//! - [`yaml`]: the YAML subset kubeconfig files use.
//! - [`names`]: Kubernetes object-name rules.
//! - [`Fields`]: one object read for the few fields its caller uses.
//! - [`reflector`]: what a list-then-watch does after each list and watch
//!   (pure), for every watch opstatus keeps.
//!
//! It knows no feature: a request's caller says what the request is for
//! and where its permission is granted ([`KubeError::granted_by`]).

mod client;
pub(crate) mod credentials;
mod error;
mod exec;
mod failures;
mod identity;
pub(crate) mod names;
mod object;
mod object_ref;
pub(crate) mod reflector;
mod token;
mod watch_stream;
mod worker;
pub(crate) mod yaml;

pub use client::Client;
pub(crate) use client::call_bound;
pub use credentials::{Auth, Credentials};
pub(crate) use error::KubeError;
pub use exec::Plugin as ExecPlugin;
pub(crate) use object::{Fields, unreadable};
pub(crate) use object_ref::ObjectRef;
pub(crate) use watch_stream::{Closer, ListKey, PartBound, WatchStream};
pub(crate) use worker::{Stop, Worker};

/// The largest response body read. A ConfigMap holds at most 1 MiB of data;
/// anything much larger is not an answer we asked for.
pub(crate) const MAX_BODY: u64 = 4 * 1024 * 1024;

/// The stack of a thread of its own that runs a [`Client`] (a watch, the
/// Events sender): ureq, rustls and serde_json on small frames (no
/// recursion deeper than the JSON of one answer, which serde_json bounds at
/// 128 levels); 256 KiB is reserved, and only the pages it touches become
/// resident (a few tens of KiB). 128 KiB overflows in a debug build's TLS
/// handshake.
pub(crate) const CLIENT_STACK: usize = 256 * 1024;
#[cfg(test)]
pub(crate) use error::from_response;

/// A credential string that never prints itself.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}
