//! The commands behind `main`: `run`, `once`, `get` and `probe`, and the
//! error type that maps every failure to its exit code.

use crate::agent::{Agent, AgentConfig};
use crate::cli::{OutputFormat, Settings};
use crate::cluster::{Connection, connect};
use crate::condition_sinks::{ClusterOperatorSetup, ConditionSinks};
use crate::pro_tier;
use crate::probes::Prober;
use crate::reader;
use crate::ready_file;
use crate::serve;
use crate::shutdown::Shutdown;
use crate::sinks::cluster_operator::{ClusterOperatorSink, OPERATOR, RelatedObject, Version};
use crate::sinks::configmap::StatusConfigMap;
use crate::sinks::operator_condition::OperatorConditionSink;
use crate::watch::Watches;
use std::fmt;
use std::time::SystemTime;

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Usage or configuration: exit code 2, before any network traffic.
    Config(String),
    /// Something failed at run time: exit code 1.
    Runtime(String),
    /// `opstatus probe` found the agent not ready: exit code 1, the line on
    /// stdout (where kubelet records an exec probe's output).
    NotReady(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Config(_) => 2,
            Failure::Runtime(_) | Failure::NotReady(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Config(m) | Failure::Runtime(m) | Failure::NotReady(m) => f.write_str(m),
        }
    }
}

fn agent_for(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<Agent, Failure> {
    let Connection { client, namespace, source, cluster_identifier } =
        connect(settings, env).map_err(|e| Failure::Config(e.to_string()))?;
    log::debug!("Using credentials from {source}");
    let pro = pro_tier::from_settings(
        settings.pro.api_key.clone(),
        &settings.pro.server_url,
        settings.pro.server_ca_file.as_deref(),
        cluster_identifier,
        settings.operator_version.clone(),
    )
    .map_err(Failure::Config)?;
    let config = AgentConfig {
        target: StatusConfigMap { namespace, name: settings.configmap.clone() },
        interval: settings.interval,
        check_interval: settings.check_interval,
        operator_version: settings.operator_version.clone(),
        ready_file: settings.ready_file.clone(),
        watch_critical: settings.watch.critical,
        final_status: settings.final_status,
    };
    let file = settings.watch.file.clone().map(|f| (f, settings.watch.max_age));
    let sinks = condition_sinks(settings, &config.target);
    Ok(Agent::new(client, config, Watches::new(settings.watch.urls.clone(), file), pro, sinks))
}

/// The probes, OperatorCondition and ClusterOperator the settings ask for.
fn condition_sinks(settings: &Settings, target: &StatusConfigMap) -> ConditionSinks {
    let namespace = &target.namespace;
    let prober =
        Prober::new(settings.probes.specs.clone(), settings.probes.crds.clone(), settings.probes.namespaces.clone());
    let operator_condition =
        settings.operator_condition.clone().map(|name| OperatorConditionSink::new(namespace.clone(), name));
    if operator_condition.is_some() && prober.is_empty() {
        log::warn!(
            "The OperatorCondition is set but no probe is: opstatus leaves its conditions to the operator \
             (add --probe or --probe-from-crd-annotations)"
        );
    }
    let cluster_operator = settings.cluster_operator.as_ref().map(|co| {
        let mut related = vec![
            RelatedObject::new("", "namespaces", "", namespace),
            RelatedObject::new("", "configmaps", namespace, &target.name),
        ];
        if let Some(oc) = &settings.operator_condition {
            related.push(RelatedObject::new("operators.coreos.com", "operatorconditions", namespace, oc));
        }
        related.extend(co.related_objects.iter().cloned());
        let mut targets = vec![Version::new(OPERATOR, &settings.operator_version)];
        targets.extend(co.operand_versions.iter().cloned());
        ClusterOperatorSetup {
            sink: ClusterOperatorSink::new(co.name.clone()),
            targets,
            version_file: co.version_file.clone(),
            related,
            inertia: co.degraded_inertia,
        }
    });
    ConditionSinks::new(prober, operator_condition, cluster_operator)
}

/// `opstatus run`: the agent loop, until SIGTERM or SIGINT.
pub fn run(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    // Handlers first: a SIGTERM during start-up must not be lost.
    let ready = settings.ready_file.clone();
    let mut shutdown = Shutdown::install(move || {
        if let Some(path) = ready {
            let _ = ready_file::remove(&path);
        }
    })
    .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    let mut agent = agent_for(settings, env)?;
    if let Some(addr) = settings.listen {
        let bound = serve::spawn(addr, agent.shared())
            .map_err(|e| Failure::Runtime(format!("cannot listen on {addr} (--listen): {e}")))?;
        log::info!("Serving /healthz, /readyz, /status and /metrics on http://{bound}");
    }
    agent.run(&mut shutdown);
    Ok(())
}

/// `opstatus once`: one write; its failure is the command's failure.
pub fn once(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    let mut agent = agent_for(settings, env)?;
    agent.check();
    agent.heartbeat().map_err(|e| Failure::Runtime(format!("failed to write status ConfigMap: {e}")))
}

/// `opstatus get`: read and interpret the published status; prints it.
pub fn get(settings: &Settings, output: OutputFormat, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Failure> {
    let Connection { mut client, namespace, .. } =
        connect(settings, env).map_err(|e| Failure::Config(e.to_string()))?;
    let target = StatusConfigMap { namespace, name: settings.configmap.clone() };
    let body = target
        .fetch(&mut client)
        .map_err(|e| Failure::Runtime(format!("cannot read ConfigMap {}/{}: {e}", target.namespace, target.name)))?;
    let status = body.as_deref().map(reader::status_of_configmap).transpose();
    let now = SystemTime::now();
    let reading = status
        .and_then(|s| reader::interpret(s.as_deref(), now))
        .map_err(|e| Failure::Runtime(format!("ConfigMap {}/{}: {e}", target.namespace, target.name)))?;
    Ok(match output {
        OutputFormat::Json => serde_json::to_string(&reading).expect("plain data serialises") + "\n",
        OutputFormat::Text => reader::render_text(&reading, &target.name, &target.namespace, now),
    })
}

/// `opstatus probe`: one line for stdout; `Ok` when ready.
pub fn probe(settings: &Settings) -> Result<String, Failure> {
    let path = settings.ready_file.as_deref().expect("config requires --ready-file for probe");
    let contents = match std::fs::read_to_string(path) {
        Ok(c) => Some(c),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Failure::NotReady(format!("not ready: cannot read {}: {e}", path.display()))),
    };
    ready_file::check(path, contents.as_deref(), SystemTime::now(), settings.max_age)
        .map(|line| line + "\n")
        .map_err(Failure::NotReady)
}
