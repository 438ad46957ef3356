//! Which API server, which credentials and which namespace, from the
//! settings and the environment: the step between parsing flags and making
//! the first request. Fails with a [`CredentialsError`] (exit code 2).

use crate::cli::Settings;
use crate::kube::{Client, Credentials, CredentialsError, credentials};
use crate::sinks::configmap::DEFAULT_NAMESPACE;
use std::path::PathBuf;

/// A client and the namespace to work in.
pub struct Connection {
    pub client: Client,
    pub namespace: String,
    /// Where the credentials came from, for the start-up log line.
    pub source: String,
    /// The kube9 cluster identifier (from the cluster CA).
    pub cluster_identifier: String,
}

/// Picks credentials the way client-go does: an explicit kubeconfig
/// (`--kubeconfig` / `KUBECONFIG`) first, then in-cluster when
/// `KUBERNETES_SERVICE_HOST` is set, then `~/.kube/config`.
pub fn connect(settings: &Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<Connection, CredentialsError> {
    let (creds, source) = load_credentials(settings, env)?;
    let namespace =
        settings.namespace.clone().or_else(|| creds.namespace.clone()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    if let Err(why) = crate::kube::names::check_dns_label(&namespace) {
        return Err(CredentialsError(format!("namespace {namespace:?} from {source} is not valid: {why}")));
    }
    let cluster_identifier = crate::kube9::cluster_identifier(&creds.ca_pem, &creds.server);
    Ok(Connection { client: Client::new(&creds)?, namespace, source, cluster_identifier })
}

fn load_credentials(
    settings: &Settings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Credentials, String), CredentialsError> {
    if let Some(path) = &settings.kubeconfig {
        return Ok((credentials::from_kubeconfig(path)?, format!("kubeconfig {}", path.display())));
    }
    let host = env("KUBERNETES_SERVICE_HOST");
    if host.is_some() {
        let port = env("KUBERNETES_SERVICE_PORT");
        let creds = credentials::in_cluster(host.as_deref(), port.as_deref(), &settings.service_account_dir)?;
        return Ok((creds, format!("service account in {}", settings.service_account_dir.display())));
    }
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        let path = PathBuf::from(home).join(".kube").join("config");
        if path.exists() {
            return Ok((credentials::from_kubeconfig(&path)?, format!("kubeconfig {}", path.display())));
        }
    }
    Err(CredentialsError(
        "no Kubernetes credentials: not in a cluster (KUBERNETES_SERVICE_HOST is unset), \
         no --kubeconfig or KUBECONFIG, and no ~/.kube/config"
            .into(),
    ))
}
