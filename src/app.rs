//! The commands behind `main`: `run`, `once` and `get`, and the error type
//! that maps every failure to its exit code.

use crate::agent::{Agent, AgentConfig};
use crate::cluster::{Connection, connect};
use crate::config::{OutputFormat, Settings};
use crate::reader;
use crate::shutdown::Shutdown;
use crate::sinks::configmap::StatusConfigMap;
use std::fmt;
use std::time::SystemTime;

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Usage or configuration: exit code 2, before any network traffic.
    Config(String),
    /// Something failed at run time: exit code 1.
    Runtime(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Config(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Config(m) | Failure::Runtime(m) => f.write_str(m),
        }
    }
}

fn agent_for(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<Agent, Failure> {
    let Connection {
        client,
        namespace,
        source,
    } = connect(settings, env).map_err(|e| Failure::Config(e.to_string()))?;
    log::debug!("Using credentials from {source}");
    let config = AgentConfig {
        target: StatusConfigMap {
            namespace,
            name: settings.configmap.clone(),
        },
        interval: settings.interval,
        operator_version: settings.operator_version.clone(),
    };
    Ok(Agent::new(client, config))
}

/// `opstatus run`: the agent loop, until SIGTERM or SIGINT.
pub fn run(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    // Handlers first: a SIGTERM during start-up must not be lost.
    let mut shutdown = Shutdown::install()
        .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    let mut agent = agent_for(settings, env)?;
    agent.run(&mut shutdown);
    Ok(())
}

/// `opstatus once`: one write; its failure is the command's failure.
pub fn once(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Failure> {
    let mut agent = agent_for(settings, env)?;
    agent
        .heartbeat()
        .map_err(|e| Failure::Runtime(format!("failed to write status ConfigMap: {e}")))
}

/// `opstatus get`: read and interpret the published status; prints it.
pub fn get(
    settings: &Settings,
    output: OutputFormat,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Failure> {
    let Connection {
        mut client,
        namespace,
        ..
    } = connect(settings, env).map_err(|e| Failure::Config(e.to_string()))?;
    let target = StatusConfigMap {
        namespace,
        name: settings.configmap.clone(),
    };
    let body = target.fetch(&mut client).map_err(|e| {
        Failure::Runtime(format!(
            "cannot read ConfigMap {}/{}: {e}",
            target.namespace, target.name
        ))
    })?;
    let status = body.as_deref().map(reader::status_of_configmap).transpose();
    let now = SystemTime::now();
    let reading = status
        .and_then(|s| reader::interpret(s.as_deref(), now))
        .map_err(|e| {
            Failure::Runtime(format!(
                "ConfigMap {}/{}: {e}",
                target.namespace, target.name
            ))
        })?;
    Ok(match output {
        OutputFormat::Json => {
            serde_json::to_string(&reading).expect("plain data serialises") + "\n"
        }
        OutputFormat::Text => reader::render_text(&reading, &target.name, &target.namespace, now),
    })
}
