//! The same job as opstatus, the way a Rust user would write it with
//! kube-rs: every INTERVAL seconds (the first argument), server-side apply
//! the kube9 status ConfigMap (one PATCH on kube's kept-alive connection).
//! In-cluster style: the API server from KUBERNETES_SERVICE_HOST/_PORT, the
//! token (re-read by kube as it rotates), CA and namespace from the
//! service-account directory in OPSTATUS_SERVICE_ACCOUNT_DIR. Prints
//! nothing (the benchmark reads the writes from the audit log). Tokio's current-thread runtime: the lightest a sidecar
//! would pick.
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{AuthInfo, Config};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CM: &str = "kube9-operator-status";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sa = std::env::var("OPSTATUS_SERVICE_ACCOUNT_DIR")?;
    let interval: f64 = std::env::args().nth(1).map_or(Ok(60.0), |s| s.parse())?;
    let host = std::env::var("KUBERNETES_SERVICE_HOST")?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT")?;
    let mut config = Config::new(format!("https://{host}:{port}").parse()?);
    let pem = std::fs::read(format!("{sa}/ca.crt"))?;
    let roots: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).map(|c| c.map(|c| c.to_vec())).collect();
    config.root_cert = Some(roots?);
    config.auth_info = AuthInfo { token_file: Some(format!("{sa}/token")), ..Default::default() };
    let namespace = std::fs::read_to_string(format!("{sa}/namespace"))?.trim().to_string();
    config.default_namespace = namespace.clone();
    let api: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config)?, &namespace);
    let params = PatchParams::apply("kube-writer").force();
    loop {
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let status = serde_json::json!({
            "mode": "operated", "tier": "free", "version": "1.0.0", "health": "healthy",
            "lastUpdate": now.to_string(), "registered": false, "error": null, "namespace": namespace,
        });
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CM, "namespace": namespace},
            "data": {"status": status.to_string()},
        });
        api.patch(CM, &params, &Patch::Apply(&body)).await?;
        tokio::time::sleep(Duration::from_secs_f64(interval)).await;
    }
}
