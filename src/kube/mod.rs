//! The minimal Kubernetes REST client opstatus needs.
//!
//! - [`credentials`]: in-cluster and kubeconfig credentials, read at start.
//! - [`Client`]: verified TLS, bounded timeouts and body sizes, bearer-token
//!   reload (at least once a minute, and at once after a 401), and
//!   Kubernetes `Status` error bodies turned into [`KubeError`]s that tell an
//!   admin what to do.
//! - [`yaml`]: the YAML subset kubeconfig files use.
//! - [`names`]: the object-name rules (RFC 1123 labels and subdomains).

mod client;
pub mod credentials;
mod error;
pub mod names;
pub mod yaml;

pub use client::{Client, ObjectRef, TOKEN_RELOAD_INTERVAL};
pub use credentials::{Auth, Credentials, CredentialsError, Secret};
pub use error::KubeError;
