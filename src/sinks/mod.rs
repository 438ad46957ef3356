//! The resources opstatus publishes, one module each.
//!
//! The status ConfigMap is written by server-side apply (one request, no
//! read). The OperatorCondition and the ClusterOperator hold lists that
//! other writers share (conditions), so they are written as the APIs ask:
//! read, change only what opstatus owns, write back with the
//! `resourceVersion` that was read, and on a conflict (409) start over from
//! a fresh read: [`read_modify_write`].

pub mod cluster_operator;
pub mod configmap;
pub mod operator_condition;

use crate::kube::{Client, KubeError};
use serde_json::Value;

/// Attempts per write when others keep changing the object (409 Conflict).
pub const CONFLICT_ATTEMPTS: u32 = 3;

/// What a [`read_modify_write`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The object already said what we wanted: nothing was sent.
    Unchanged,
    Updated,
}

/// What a sink last wrote: an intent equal to it needs no request until the
/// next drift check. Forgotten on a failure, so the next check retries.
pub struct LastWritten<T>(Option<T>);

impl<T> Default for LastWritten<T> {
    fn default() -> Self {
        LastWritten(None)
    }
}

impl<T: PartialEq> LastWritten<T> {
    /// Whether `intent` is what was last written (compared as borrowed, so
    /// a check allocates nothing to ask).
    pub fn matches<Q: PartialEq + ?Sized>(&self, intent: &Q) -> bool
    where
        T: std::borrow::Borrow<Q>,
    {
        self.0.as_ref().is_some_and(|written| written.borrow() == intent)
    }

    /// Records the outcome of writing `intent`; an error becomes the
    /// sentence `explain` makes of it.
    pub fn record(
        &mut self,
        intent: T,
        result: Result<Written, KubeError>,
        explain: impl FnOnce(&KubeError) -> String,
    ) -> Result<Written, String> {
        self.0 = result.is_ok().then_some(intent);
        result.map_err(|e| explain(&e))
    }
}

/// GETs `path`, lets `modify` change the object (it returns whether it
/// did), and PUTs it to `path` + `write_suffix` (`""` or `"/status"`)
/// carrying the `resourceVersion` it read. A 409 starts over from a fresh
/// read, at most [`CONFLICT_ATTEMPTS`] times; any other error is returned.
pub fn read_modify_write(
    client: &mut Client,
    path: &str,
    write_suffix: &str,
    action: &str,
    modify: &mut dyn FnMut(&mut Value) -> Result<bool, String>,
) -> Result<Written, KubeError> {
    let mut attempt = 1;
    loop {
        let body = client.get_required(path, &format!("get {action}"))?;
        let mut object: Value = serde_json::from_slice(&body)
            .map_err(|e| KubeError::Response { message: format!("{action}: the object is not JSON: {e}") })?;
        let changed = modify(&mut object).map_err(|message| KubeError::Response { message })?;
        if !changed {
            return Ok(Written::Unchanged);
        }
        let body = serde_json::to_vec(&object).expect("a JSON value serialises");
        match client.put(&format!("{path}{write_suffix}"), &body, &format!("update {action}")) {
            Ok(_) => return Ok(Written::Updated),
            Err(e) if e.code() == Some(409) && attempt < CONFLICT_ATTEMPTS => {
                log::debug!("{action}: conflict on attempt {attempt}, reading again");
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
