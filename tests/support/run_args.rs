//! `opstatus run` command lines, built instead of spelled out: the flags
//! every test repeats (the heartbeat, the endpoint, the pro tier's three)
//! said once, each test adding what is its own.

use super::RunningAgent;
use std::path::Path;

/// An `opstatus run` command line.
#[derive(Clone, Debug)]
pub struct Run(Vec<String>);

impl Run {
    /// `opstatus run --interval INTERVAL`.
    pub fn every(interval: &str) -> Run {
        Run(vec!["run".into(), "--interval".into(), interval.into()])
    }

    /// `opstatus run` with the default interval.
    pub fn default_interval() -> Run {
        Run(vec!["run".into()])
    }

    /// `FLAG VALUE`.
    pub fn flag(mut self, flag: &str, value: impl AsRef<str>) -> Run {
        self.0.extend([flag.to_string(), value.as_ref().to_string()]);
        self
    }

    /// A flag without a separate value (`--no-final-status`, `--events=false`).
    pub fn switch(mut self, flag: &str) -> Run {
        self.0.push(flag.into());
        self
    }

    /// Signals checked every `interval`.
    pub fn checks(self, interval: &str) -> Run {
        self.flag("--check-interval", interval)
    }

    /// The probe endpoint on a free loopback port (its address is logged).
    pub fn listen(self) -> Run {
        self.flag("--listen", "127.0.0.1:0")
    }

    /// The pro tier: the API key in `key_file`, kube9-server at `url`
    /// whose certificate chains to `ca_file`.
    pub fn pro(self, key_file: &Path, url: &str, ca_file: &Path) -> Run {
        self.flag("--api-key-file", key_file.to_str().unwrap())
            .flag("--server-url", url)
            .flag("--server-ca-file", ca_file.to_str().unwrap())
    }

    /// The command line, for [`super::run_opstatus`] and friends.
    pub fn args(&self) -> Vec<&str> {
        self.0.iter().map(String::as_str).collect()
    }

    /// Starts `bin` with this command line and `env`.
    pub fn start(&self, bin: &Path, env: &[(String, String)]) -> RunningAgent {
        RunningAgent::start(bin, &self.args(), env)
    }
}
