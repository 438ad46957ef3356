//! The end-to-end tests, one binary, against a real kube-apiserver and etcd
//! (`scripts/control-plane.sh`; `OPSTATUS_KUBE_VERSION` chooses which). The
//! tests share one control plane ([`support::control_plane::shared`]), each
//! in its own namespace with its own ServiceAccount; a test that stops,
//! restarts or re-keys the API server starts a control plane of its own.

#[path = "../support/mod.rs"]
mod support;

mod apiserver_restart;
mod arch;
mod client_certificate;
mod cluster_operator;
mod component;
mod condition_metrics;
mod events;
mod first_hour;
mod foreign_time;
mod foreign_writer;
mod get;
mod get_exec;
mod get_extension;
mod handover_writer;
mod heartbeat;
mod inertia;
mod kept_connection;
mod kubebuilder_layout;
mod leader_pod;
mod leader_service;
mod manifests;
mod monitoring;
mod node_kubebuilder;
mod node_loopback;
mod node_native_sidecar;
mod node_olm_kube9;
mod node_operator_starting;
mod node_pod;
mod node_quick_start;
mod node_release;
mod node_rollout;
mod node_sidecar;
mod node_watch_container;
mod olm_kube9;
mod operator_condition;
mod operator_starting;
mod operator_watch;
mod pod_deleted;
mod pro_tier;
mod probe_cache_list;
mod probe_first_list;
mod probe_large_objects;
mod probe_scale;
mod probe_standby;
mod probe_unreadable;
mod probe_watch;
mod probe_watch_stop;
mod publisher;
mod quick_start;
mod rbac_revoked;
mod readiness_outage;
mod scratch;
mod silent_leader;
mod status_deleted;
mod status_in_kube9_system;
mod token_rotation;
mod url_credentials;
mod watch_container;
