//! The in-process tests, one binary: the CLI and the agent against the
//! in-process fake API server, kube9-server and operator (faults the real
//! API server cannot produce), the built binaries and images, and the fuzz
//! corpora. One module per behaviour; `support` is shared with `tests/e2e`.

#[path = "../../fuzz/exercise.rs"]
mod exercise;
#[path = "../support/mod.rs"]
mod support;

mod auditable;
mod client_certificates;
mod cluster_operator_ownership;
mod component_target;
mod config_errors;
mod credential_files;
mod credential_source;
mod docs;
mod endless_pagination;
mod endpoint_abuse;
mod endpoint_accept_errors;
mod endpoint_exhaustion;
mod foreign_text;
mod foreign_time;
mod fuzz_corpus;
mod get_command;
mod heartbeat_threads;
mod help;
mod house_rules;
mod image;
mod input_text;
mod insecure_server_url;
mod kept_connection_closed;
mod kubebuilder_layout;
mod large_objects;
mod monitoring;
mod operator_condition_conflict;
mod operator_condition_log;
mod operator_condition_ownership;
mod operator_flapping;
mod operator_starting;
mod operator_watch;
mod placement_warning;
mod pro_tier;
mod probe_endpoint;
mod probe_list_cut;
mod probe_list_resume;
mod probe_list_stream;
mod probe_past_cap;
mod probe_watch;
mod probe_watch_bounds;
mod probe_watch_failures;
mod probe_watch_stop;
mod proxies;
mod readiness_file;
mod registration_bounds;
mod release;
mod replicas;
mod response_limits;
mod secrets;
mod shutdown;
mod slow_write;
mod status_write;
mod stray_response;
mod tls_verification;
mod token_reload;
mod watch_container;
mod watch_url_deadline;
mod watch_url_keep_alive;
mod write_failures;
