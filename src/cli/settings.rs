//! The validated [`Settings`] every command shares, and the rules that
//! join flags (applied once every flag has been read).

use super::{Command, ConfigError};
use crate::agent::AgentSettings;
use crate::inertia::Windows;
use crate::pro::client::ApiKeySource;
use crate::signals::probes::grammar::ProbeSpec;
use crate::sinks::cluster_operator::intent::{RelatedObject, Version};
use crate::sinks::leader_endpoints::ServicePort;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The validated settings shared by every command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Explicit namespace (`--namespace` / `POD_NAMESPACE`); when `None` the
    /// credentials' namespace, then
    /// [`DEFAULT_NAMESPACE`](crate::sinks::configmap::DEFAULT_NAMESPACE), is used.
    pub namespace: Option<String>,
    /// `get` without `--namespace`: the kube9 extension's
    /// `kube9.operatorNamespace` setting, mirrored; `None`: its default
    /// search (kube9-system, then default).
    pub extension_namespace: Option<String>,
    /// Where the operator runs, when the status is written elsewhere (e.g.
    /// into kube9-system): the document's `namespace` field and the
    /// OperatorCondition's namespace; `None`: the status ConfigMap's.
    pub operator_namespace: Option<String>,
    pub configmap: String,
    /// The heartbeat, the check interval, the readiness file, the lock:
    /// the agent's own.
    pub agent: AgentSettings,
    pub service_account_dir: PathBuf,
    /// `--kubeconfig`'s file, or the files `KUBECONFIG` lists (merged as
    /// kubectl merges them); empty: none.
    pub kubeconfig: Vec<PathBuf>,
    /// The kubeconfig context to use instead of its current one.
    pub context: Option<String>,
    /// The probe and metrics endpoint's address; off when `None`.
    pub listen: Option<SocketAddr>,
    /// `opstatus probe`: the oldest readiness file that still counts.
    pub max_age: Duration,
    /// This instance's name in the publisher lock; `None`: `POD_NAME`,
    /// else `HOSTNAME` (resolved where the agent is composed).
    pub identity: Option<String>,
    /// Kubernetes Events on published changes.
    pub events: bool,
    pub watch: WatchSettings,
    pub pro: ProSettings,
    /// OLM's OperatorCondition name; off when `None`.
    pub operator_condition: Option<String>,
    pub probes: ProbeSettings,
    /// OpenShift's ClusterOperator; off when `None`.
    pub cluster_operator: Option<ClusterOperatorSettings>,
    /// The leader's Service (`--leader-service`): its EndpointSlice points
    /// at the operator's leader; off when `None`.
    pub leader_service: Option<String>,
    /// The ports that slice names (`--leader-service-port`).
    pub leader_service_ports: Vec<ServicePort>,
}

/// The operator's own health: watched URLs and heartbeat file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchSettings {
    pub urls: Vec<String>,
    /// A failing watch makes the status `unhealthy` instead of `degraded`.
    pub critical: bool,
    pub file: Option<PathBuf>,
    pub max_age: Duration,
    /// The operator's container in this pod, whose restarts count.
    pub container: Option<String>,
    /// How long that container must run after a restart before the restart
    /// no longer counts.
    pub clean_run: Duration,
}

/// The pro tier: the API key and kube9-server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProSettings {
    /// Where the kube9 API key comes from (file first, then variable).
    pub api_key: ApiKeySource,
    pub server_url: String,
    pub server_ca_file: Option<PathBuf>,
    /// An `http://` server URL is allowed (the key travels unencrypted).
    pub allow_insecure_server_url: bool,
}

impl Default for ProSettings {
    fn default() -> Self {
        let api_key = ApiKeySource { file: None, env: None };
        ProSettings { api_key, server_url: String::new(), server_ca_file: None, allow_insecure_server_url: false }
    }
}

/// Conditions computed from the operator's own resources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeSettings {
    pub specs: Vec<ProbeSpec>,
    /// CRDs whose annotations declare probes.
    pub crds: Vec<String>,
    /// Where namespaced probed resources are listed; empty: everywhere.
    pub namespaces: Vec<String>,
    /// Condition types per resource type with metrics of their own.
    pub condition_types: usize,
}

/// Everything about the ClusterOperator: it exists only with a name, so a
/// flag that needs `--cluster-operator` cannot be set without it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterOperatorSettings {
    pub name: String,
    pub operand_versions: Vec<Version>,
    pub version_file: Option<PathBuf>,
    pub related_objects: Vec<RelatedObject>,
    pub degraded_inertia: Windows,
}

/// Where the ClusterOperator flags put their values while the flags are
/// read. Each is validated in table order whether or not `--cluster-operator`
/// is given, so the first bad value is the one reported; until
/// `--cluster-operator` names it, the name is empty and [`finish`] either
/// rejects the flags that need it or drops them.
pub(super) fn cluster_operator(s: &mut Settings) -> &mut ClusterOperatorSettings {
    s.cluster_operator.get_or_insert_with(ClusterOperatorSettings::default)
}

/// The probes watch at most [`MAX_COLLECTIONS`] collections (each a thread
/// and an API-server connection), counted as if every probed type were
/// namespaced: the bound holds whatever discovery finds.
fn check_collections(probes: &ProbeSettings) -> Result<(), ConfigError> {
    use crate::signals::probes::MAX_COLLECTIONS;
    let sources = probes.specs.len() + probes.crds.len();
    let namespaces = probes.namespaces.len().max(1);
    let collections = sources * namespaces;
    if collections <= MAX_COLLECTIONS {
        return Ok(());
    }
    let probes = if sources == 1 { "probe" } else { "probes" };
    Err(ConfigError(format!(
        "the probes would watch {collections} collections ({sources} {probes} in {namespaces} namespaces), more than \
         {MAX_COLLECTIONS} (each takes a thread and an API-server connection): probe fewer namespaces, or all at \
         once (no --probe-namespace or WATCH_NAMESPACE, and a ClusterRole to list and watch)"
    )))
}

/// The leader's Service follows the operator's Lease and names its ports.
fn check_leader_service(s: &Settings) -> Result<(), ConfigError> {
    use crate::sinks::leader_endpoints::MAX_PORTS;
    let (service, ports) = (&s.leader_service, &s.leader_service_ports);
    let named = |name: &str| ports.iter().filter(|p| p.name == name).count();
    if let Some(twice) = ports.iter().find(|p| named(&p.name) > 1) {
        let name = if twice.name.is_empty() { "(unnamed)" } else { &twice.name };
        return Err(ConfigError(format!(
            "--leader-service-port: the port name {name} is given twice (a Service's ports have distinct names)"
        )));
    }
    let why = match service {
        None if !ports.is_empty() => "--leader-service-port is for --leader-service: give --leader-service too",
        Some(_) if s.agent.follow_leader_lease.is_none() => {
            "--leader-service points its Service at the operator's leader: give --follow-leader-lease (the \
             operator's leader-election Lease) too"
        }
        Some(_) if ports.is_empty() => {
            "--leader-service needs the Service's ports: give --leader-service-port [name:]port[/protocol] (e.g. \
             http:8080/TCP), as the Service names them"
        }
        Some(_) if ports.len() > MAX_PORTS => "--leader-service-port: at most 16 ports",
        _ => return Ok(()),
    };
    Err(ConfigError(why.into()))
}

/// The rules between flags, and between the command and the flags.
pub(super) fn finish(mut s: Settings, command: &Command) -> Result<Settings, ConfigError> {
    // Signals are checked at least as often as the heartbeat.
    s.agent.check_interval = s.agent.check_interval.min(s.agent.interval);
    if let Some(co) = &s.cluster_operator
        && co.name.is_empty()
    {
        let needs_a_name = [
            ("--operand-version", !co.operand_versions.is_empty()),
            ("--version-file", co.version_file.is_some()),
            ("--related-object", !co.related_objects.is_empty()),
        ];
        if let Some((flag, _)) = needs_a_name.iter().find(|(_, given)| *given) {
            return Err(ConfigError(format!("{flag} is for the ClusterOperator: give --cluster-operator too")));
        }
        // `--degraded-inertia` alone is valid and has nothing to act on.
        s.cluster_operator = None;
    }
    crate::pro::client::check_transport(&s.pro.server_url, s.pro.allow_insecure_server_url, &s.pro.server_ca_file)
        .map_err(ConfigError)?;
    if matches!(command, Command::Run | Command::Once) {
        check_collections(&s.probes)?;
    }
    check_leader_service(&s)?;
    if *command == Command::Probe && s.agent.ready_file.is_none() {
        return Err(ConfigError("probe needs --ready-file (or OPSTATUS_READY_FILE)".into()));
    }
    if *command == Command::PreStop && s.listen.is_none() {
        return Err(ConfigError("prestop needs --listen (or OPSTATUS_LISTEN): where `run` listens".into()));
    }
    Ok(s)
}
