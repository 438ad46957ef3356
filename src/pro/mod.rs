//! The pro tier at run time: watches the API key, gathers the cluster facts
//! kube9-server asks for, registers when the [`Registration`] state machine
//! says so, and tells the agent what to publish.
//!
//! Everything runs on the agent's check tick, as a [`Signal`]. A
//! registration call is bounded by [`client::call_bound`], the only delay it
//! can add to a heartbeat; the probe endpoint is on its own thread and never
//! waits.
//!
//! - [`client`]: the kube9-server client, the API key, the cluster identifier.
//! - [`registration`]: the registration state machine (pure).

pub(crate) mod client;
pub(crate) mod registration;

use crate::kube::{Client, Secret};
use crate::signals::{Observation, Signal};
use crate::status::{Mode, ProFields, Problem, REGISTRATION_FAILURES_TOLERATED, Rule, Tier};
use crate::util::backoff::Jitter;
use crate::util::reported::Reported;
use client::{ApiKeySource, Kube9Client, RegisterRequest};
use registration::{Outcome, Registration};
use serde_json::Value;
use std::time::{Duration, Instant};

pub(crate) struct ProTier {
    source: ApiKeySource,
    key: Option<Secret>,
    /// Why the configured key source is unusable (spec rule 2).
    key_error: Reported,
    registration: Registration,
    kube9: Kube9Client,
    cluster_identifier: String,
    operator_version: String,
    /// Asked once: the API server's version does not change under us often
    /// enough to spend a request on it every attempt.
    kubernetes_version: Option<String>,
    jitter: Jitter,
}

/// kube9's rules 3 and 4: an API key but no registration, or more than
/// [`REGISTRATION_FAILURES_TOLERATED`] failures in a row (a registration
/// that is kept while re-registering fails).
pub(crate) fn registration_problem(
    key_configured: bool,
    registered: bool,
    failures: u32,
    error: Option<&str>,
) -> Option<Problem> {
    if key_configured && !registered {
        let reason = error.unwrap_or("API key configured but the operator is not registered yet");
        return Some(Problem::degraded(Rule::Registration, reason));
    }
    if failures > REGISTRATION_FAILURES_TOLERATED {
        let reason = error.unwrap_or("registration keeps failing");
        return Some(Problem::degraded(
            Rule::Registration,
            format!("{failures} consecutive registration failures: {reason}"),
        ));
    }
    None
}

impl ProTier {
    /// Re-reads the key, and registers when due.
    fn check(&mut self, kube: &mut Client, now: Instant) {
        self.reload_key(now);
        let Some(key) = self.key.clone() else { return };
        if !self.registration.due(now) {
            return;
        }
        let request = RegisterRequest {
            operator_version: self.operator_version.clone(),
            cluster_identifier: self.cluster_identifier.clone(),
            kubernetes_version: self.kubernetes_version(kube),
            approximate_node_count: approximate_node_count(kube),
        };
        let outcome = self.kube9.register(&key, &request);
        match &outcome {
            Outcome::Registered { cluster_id, .. } => {
                log::info!("Registered with kube9-server {}: clusterId={cluster_id}, tier=pro", self.kube9.server)
            }
            Outcome::BadRequest { details } => {
                log::error!(
                    "kube9-server rejected the registration request (400): {details}; not retrying until the configuration changes"
                )
            }
            _ => {}
        }
        self.registration.record(outcome, Instant::now(), self.jitter.next_u64());
        if let Some(reason) = self.registration.error.as_deref() {
            let retry =
                self.registration.next_attempt.map(|t| t.saturating_duration_since(Instant::now()).as_secs_f64());
            match retry {
                Some(secs) => log::error!("Registration failed: {reason}; retrying in {secs:.0}s"),
                None => log::error!("Registration failed: {reason}"),
            }
        }
    }

    fn reload_key(&mut self, now: Instant) {
        let (key, error) = match self.source.read() {
            Ok(key) => (key, None),
            Err(why) => (None, Some(why)),
        };
        self.key_error.update(error, log::Level::Error, "");
        if key != self.key {
            log::info!(
                "API key {}",
                if key.is_some() { "configured: registering with kube9-server" } else { "removed: free tier" }
            );
            self.registration.key_changed(key.is_some(), now);
            self.key = key;
        }
    }

    fn kubernetes_version(&mut self, kube: &mut Client) -> String {
        if self.kubernetes_version.is_none() {
            let version = kube
                .get_path("/version", "get /version")
                .ok()
                .flatten()
                .and_then(|body| serde_json::from_slice::<Value>(&body).ok())
                .and_then(|v| v.get("gitVersion").and_then(Value::as_str).map(String::from));
            self.kubernetes_version = version;
        }
        self.kubernetes_version.clone().unwrap_or_else(|| "unknown".into())
    }
}

impl Signal for ProTier {
    fn observe(&mut self, client: &mut Client, now: Instant, into: &mut Observation) {
        self.check(client, now);
        if let Some(why) = self.key_error.get() {
            into.problems.push(Problem::configuration(why));
        }
        let (registration, registered) = (&self.registration, self.registration.registered());
        into.problems.extend(registration_problem(
            self.key.is_some(),
            registered,
            registration.failures,
            registration.error.as_deref(),
        ));
        into.pro = ProFields {
            mode: if self.key.is_some() && !registration.rejected() { Mode::Enabled } else { Mode::Operated },
            tier: if registered { Tier::Pro } else { Tier::Free },
            registered,
            cluster_id: registration.cluster_id().map(String::from),
        };
        into.asked_interval = registration.status_interval;
    }

    /// A due registration: the API server's version and node count (two
    /// Kubernetes calls), then one call to kube9-server.
    fn worst_case(&self) -> Duration {
        crate::kube::call_bound().saturating_mul(2).saturating_add(client::call_bound())
    }
}

/// The node count without downloading the nodes: a one-item page and its
/// `remainingItemCount`. 0 when the sidecar may not list nodes (it needs no
/// cluster-wide rights, and usually has none).
fn approximate_node_count(kube: &mut Client) -> u64 {
    let Ok(Some(body)) = kube.get_path("/api/v1/nodes?limit=1", "list nodes") else { return 0 };
    let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let items = list.get("items").and_then(Value::as_array).map_or(0, |a| a.len() as u64);
    let remaining = list.pointer("/metadata/remainingItemCount").and_then(Value::as_u64).unwrap_or(0);
    items + remaining
}

/// Builds the pro tier from the settings; `None` when no key source is
/// configured at all.
pub(crate) fn from_settings(
    source: ApiKeySource,
    server_url: &str,
    server_ca_file: Option<&std::path::Path>,
    cluster_identifier: String,
    operator_version: String,
) -> Result<Option<ProTier>, String> {
    if !source.is_configured() {
        return Ok(None);
    }
    Ok(Some(ProTier {
        source,
        key: None,
        key_error: Reported::default(),
        registration: Registration::default(),
        kube9: Kube9Client::new(server_url, server_ca_file)?,
        cluster_identifier,
        operator_version,
        kubernetes_version: None,
        jitter: Jitter::from_os(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Health, evaluate_health};

    #[test]
    fn rule_3_key_without_registration_is_degraded() {
        let p = registration_problem(true, false, 1, Some("Failed to connect to kube9-server: connection refused"));
        let v = evaluate_health(&p);
        assert_eq!(v.health, Health::Degraded);
        assert_eq!(v.error.as_deref(), Some("Failed to connect to kube9-server: connection refused"));
    }

    #[test]
    fn rule_4_more_than_three_registration_failures_is_degraded() {
        let registered_but_failing = |n| evaluate_health(&registration_problem(true, true, n, Some("HTTP 503")));
        assert_eq!(registered_but_failing(3).health, Health::Healthy);
        let v = registered_but_failing(4);
        assert_eq!(v.health, Health::Degraded);
        assert_eq!(v.error.as_deref(), Some("4 consecutive registration failures: HTTP 503"));
    }

    #[test]
    fn no_key_means_registration_does_not_matter() {
        assert_eq!(registration_problem(false, false, 0, None), None);
    }
}
