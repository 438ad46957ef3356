//! # opstatus
//!
//! A tiny sidecar agent that works out a Kubernetes operator's health and
//! publishes it where the cluster looks: the kube9 status ConfigMap
//! (`kube9-operator-status`), written by one server-side apply request per
//! heartbeat; OLM's OperatorCondition (`Upgradeable`, `Important`, computed
//! from the operator's own resources); OpenShift's ClusterOperator.
//!
//! The crate is synchronous: one loop, no async runtime. Two helper threads
//! exist only where blocking calls demand them: the probe endpoint (kubelet
//! must get answers while an API call blocks) and the shutdown watchdog.
//! The pieces, one concept each:
//!
//! | module | owns |
//! |---|---|
//! | [`cli`] | flags and environment variables, validated with clear messages |
//! | [`cluster`] | choosing credentials (in-cluster or kubeconfig) and the namespace |
//! | [`kube`] | the minimal Kubernetes REST client |
//! | [`http`] | what every outgoing HTTP client shares (no env proxy, no redirects, bounded phases) |
//! | [`status`] | the kube9 status document and the health rules (pure) |
//! | [`sinks`] | the published resources: status ConfigMap, OperatorCondition, ClusterOperator |
//! | [`conditions`] | metav1.Condition semantics: set, transition times (pure) |
//! | [`expr`] | the condition expressions `!A`, `A && B`, `A \|\| B`, three-valued (pure) |
//! | [`probes`] | conditions computed from the operator's own resources (OLM's Probe design) |
//! | [`condition_sinks`] | running the probes and the two condition sinks on each check |
//! | [`backoff`] | exponential backoff with jitter, `Retry-After` (pure) |
//! | [`agent`] | the loop: checks, heartbeats, change-driven writes, shutdown |
//! | [`watch`] | the operator's own health: watched URLs and heartbeat file |
//! | [`serve`] | the probe and metrics endpoint (its own thread) |
//! | [`metrics`] | Prometheus text format |
//! | [`registration`] | the kube9-server registration state machine (pure) |
//! | [`kube9`] | the kube9-server client, the API key, the cluster identifier |
//! | [`pro_tier`] | the pro tier at run time: key watching and registration |
//! | [`ready_file`] | the readiness file and `opstatus probe` (pure check) |
//! | [`reader`] | interpreting a published status as kube9 readers do (pure) |
//! | [`shutdown`] | SIGTERM / SIGINT: wake the loop, bound the shutdown |
//! | [`logging`] | one line per event on stderr, secrets kept out |
//! | [`time`] | RFC 3339 timestamps |
//! | [`app`] | the commands: `run`, `once`, `get`, `probe` |

#![forbid(unsafe_code)]

pub mod agent;
pub mod app;
pub mod backoff;
pub mod cli;
pub mod cluster;
pub mod condition_sinks;
pub mod conditions;
pub mod expr;
pub mod http;
pub mod kube;
pub mod kube9;
pub mod logging;
pub mod metrics;
pub mod pro_tier;
pub mod probes;
pub mod reader;
pub mod ready_file;
pub mod registration;
pub mod serve;
pub mod shutdown;
pub mod sinks;
pub mod status;
pub mod time;
pub mod watch;
