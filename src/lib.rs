//! # opstatus
//!
//! A tiny sidecar agent that works out a Kubernetes operator's health and
//! publishes it where the cluster looks: the kube9 status ConfigMap
//! (`kube9-operator-status`), written by one server-side apply request per
//! heartbeat; OLM's OperatorCondition (`Upgradeable`, `Important`, computed
//! from the operator's own resources); OpenShift's ClusterOperator; a
//! readiness endpoint or file; Prometheus metrics.
//!
//! The crate is synchronous: one loop, no async runtime. Helper threads
//! exist only where blocking calls demand them: the probe endpoint (kubelet
//! must get answers while an API call blocks), the shutdown watchdog, the
//! Kubernetes Events sender (unless `--events=false`), and one per watch
//! (each probed collection's list-then-watch, the operator's Pod with
//! `--watch-container`), each with a client of its own, and, when the API
//! server or an endpoint is named by a host name rather than an address,
//! one host-name lookup thread (so a lookup is bounded by the connect time).
//!
//! The layout is the pipeline, input → signals → one verdict per tick →
//! sinks, over the Kubernetes client and pure cores:
//!
//! | room | owns |
//! |---|---|
//! | `cli` | flags and environment variables: one table, validated with clear messages |
//! | `app` | the composition root: settings → credentials → the agent with its signals and sinks; the commands |
//! | `signals` | what is looked at on each check: the operator's watches, the probes of its resources |
//! | `pro` | the pro tier as a signal: the API key, kube9-server registration |
//! | `agent` | the loop: one observation, one verdict per tick, the heartbeat, backoff, shutdown |
//! | `sinks` | where the verdict goes: the status ConfigMap (primary), OperatorCondition, ClusterOperator, Kubernetes Events |
//! | `endpoint` | the probe and metrics endpoint (its own thread), Prometheus text |
//! | `kube` | the minimal Kubernetes REST client, credentials, object names |
//! | `status`, `conditions`, `expr`, `reader`, `ready_file`, `writers`, `inertia` | pure cores: the kube9 document and health rules, metav1.Condition semantics, condition expressions, the reader's interpretation, the readiness file, who else writes the status, inertia |
//! | `util` | backoff, time, signals, logging, the outbound HTTP policy |
//!
//! Modules are private; what the integration tests and the fuzz targets
//! exercise directly is re-exported below.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

mod agent;
pub mod app;
pub mod cli;
mod conditions;
mod endpoint;
mod expr;
mod inertia;
mod kube;
mod lock;
mod pro;
mod reader;
mod ready_file;
mod signals;
mod sinks;
mod status;
mod upgrade_hold;
mod util;
mod writers;

/// What `main` uses besides [`app`] and [`cli`].
pub use util::logging;

/// What the integration tests and the fuzz targets use directly: the pure
/// parsers the fuzzers feed, the clock formats, and the Kubernetes client
/// the end-to-end tests create many objects with.
pub mod testing {
    pub use crate::endpoint::MAX_HEAD;
    pub use crate::endpoint::routes::{Parsed, parse_request};
    pub use crate::expr::{Expr, Grammar, Truth};
    pub use crate::kube::credentials::kubeconfig_credentials;
    pub use crate::kube::yaml::parse as parse_yaml;
    pub use crate::kube::{Auth, Client, Credentials, ExecPlugin, Secret};
    pub use crate::pro::client::classify;
    pub use crate::reader::{interpret, render_text, status_of_configmap};
    pub use crate::signals::probes::grammar::parse_probe;
    pub use crate::util::backoff::parse_retry_after;
    pub use crate::util::time::{format_rfc3339, parse_rfc3339};

    /// What a read or a write of the status ConfigMap takes from its body:
    /// the lock's holder and another manager of the status key.
    pub fn status_configmap_parties(body: &[u8]) -> Option<(Option<String>, Option<String>)> {
        let current = crate::sinks::configmap::seen(body).ok()?;
        let holder = current.lock.record().map(|r| r.holder_identity.clone());
        Some((holder, current.foreign.map(|f| f.writer.to_string())))
    }

    /// Watch lines applied in turn to one probe's store (`probe` as
    /// `--probe` takes it): each line's outcome (`Err`: why the stream
    /// cannot be trusted), and the store's problem text after them.
    pub fn apply_watch_lines(probe: &str, lines: &[&[u8]]) -> (Vec<Result<(), String>>, Option<String>) {
        use crate::signals::probes::store::{Applied, Store};
        let spec = crate::signals::probes::grammar::parse_probe(probe).expect("a valid probe");
        let mut store = Store::default();
        let outcomes = lines
            .iter()
            .map(|line| match store.apply(line, &spec) {
                Applied::Failed(why) => Err(why),
                _ => Ok(()),
            })
            .collect();
        (outcomes, store.problem("Foo"))
    }

    /// The operator container's judgement (`--watch-container NAME`) from
    /// a Pod's JSON: `None` when it is no Pod.
    pub fn judge_container(
        pod: &[u8],
        name: &str,
        now: std::time::SystemTime,
    ) -> Option<Result<Option<String>, String>> {
        let (pod, _) = crate::signals::container::pod::pod(pod, name).ok()?;
        let clean_run = crate::signals::container::judge::DEFAULT_CLEAN_RUN;
        Some(crate::signals::container::judge::judge(&pod, name, clean_run, now))
    }
}
