//! The agent: the heartbeat loop that keeps the status ConfigMap current.
//!
//! Each heartbeat renders the status and writes it in one request. A failed
//! write is retried with exponential backoff and full jitter (base 1 s, cap
//! = the interval, `Retry-After` honoured); the agent never exits on an API
//! error and never spins. While writes fail its health is `unhealthy` with
//! the failure as the reason (spec rule 1): that is what its logs say, and
//! readers of the ConfigMap see it as a `lastUpdate` that stops moving. The
//! first write that succeeds again publishes the state as it is then, not
//! the outage that just ended: the document must describe the present.

use crate::backoff::{Backoff, Jitter};
use crate::kube::{Client, KubeError};
use crate::shutdown::Shutdown;
use crate::sinks::configmap::StatusConfigMap;
use crate::status::{HealthInputs, Mode, StatusDocument, Tier, Verdict, evaluate_health};
use crate::time::format_rfc3339;
use std::time::{Duration, Instant, SystemTime};

/// The first retry after a failed write waits at least this long.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// What the agent needs to know, fixed at start.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub target: StatusConfigMap,
    pub interval: Duration,
    pub operator_version: String,
}

pub struct Agent {
    client: Client,
    config: AgentConfig,
    backoff: Backoff,
    jitter: Jitter,
    /// Why the last status write failed; `None` after a success.
    write_error: Option<String>,
}

impl Agent {
    pub fn new(client: Client, config: AgentConfig) -> Agent {
        Agent {
            client,
            backoff: Backoff::new(BACKOFF_BASE, config.interval),
            config,
            jitter: Jitter::from_os(),
            write_error: None,
        }
    }

    /// The health as the agent sees it now, write failures included.
    pub fn verdict(&self) -> Verdict {
        evaluate_health(&self.health_inputs(self.write_error.as_deref()))
    }

    fn health_inputs<'a>(&self, status_write_error: Option<&'a str>) -> HealthInputs<'a> {
        HealthInputs {
            status_write_error,
            ..HealthInputs::default()
        }
    }

    /// The document to publish at `now`. The status write's own failure is
    /// left out: if this write succeeds, writing works.
    pub fn document(&self, now: SystemTime) -> StatusDocument {
        let verdict = evaluate_health(&self.health_inputs(None));
        StatusDocument {
            mode: Mode::Operated,
            tier: Tier::Free,
            version: self.config.operator_version.clone(),
            health: verdict.health,
            last_update: format_rfc3339(now),
            registered: false,
            error: verdict.error,
            namespace: self.config.target.namespace.clone(),
            cluster_id: None,
        }
    }

    /// One heartbeat: render and write. Logs the outcome in the spec's words.
    pub fn heartbeat(&mut self) -> Result<(), KubeError> {
        let doc = self.document(SystemTime::now());
        match self.config.target.publish(&mut self.client, &doc) {
            Ok(()) => {
                if self.write_error.take().is_some() {
                    log::info!(
                        "Status ConfigMap {}/{} is writable again after {} failed attempts",
                        self.config.target.namespace,
                        self.config.target.name,
                        self.backoff.failures()
                    );
                }
                self.backoff.reset();
                log::info!(
                    "Status updated: mode={}, tier={}, health={}, registered={}",
                    doc.mode.as_str(),
                    doc.tier.as_str(),
                    doc.health,
                    doc.registered
                );
                Ok(())
            }
            Err(e) => {
                self.write_error = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// The loop: a heartbeat now and every interval, retries with backoff,
    /// until SIGTERM or SIGINT.
    pub fn run(&mut self, shutdown: &mut Shutdown) {
        log::info!(
            "Publishing status to ConfigMap {}/{} on {} every {}s",
            self.config.target.namespace,
            self.config.target.name,
            self.client.server(),
            self.config.interval.as_secs()
        );
        let mut next = Instant::now();
        while !shutdown.wait_until(next) {
            let started = Instant::now();
            next = match self.heartbeat() {
                // Scheduled from the attempt's start, so the cadence does
                // not drift by the request's duration.
                Ok(()) => started + self.config.interval,
                Err(e) => {
                    let delay = self
                        .backoff
                        .next_delay(self.jitter.next_u64(), e.retry_after());
                    log::warn!(
                        "Failed to write status ConfigMap {}/{}: {e}; health={}; retrying in {:.1}s (attempt {})",
                        self.config.target.namespace,
                        self.config.target.name,
                        self.verdict().health,
                        delay.as_secs_f64(),
                        self.backoff.failures()
                    );
                    Instant::now() + delay
                }
            };
        }
        log::info!("Shutting down");
    }
}
