//! A configuration error: a flag, a variable, a file or a credential that
//! is wrong, worded for the person who set it. Wherever it is found (the
//! command line, a kubeconfig, a service-account directory), it ends the
//! process with exit code 2, usage or configuration.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
