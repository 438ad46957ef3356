//! The kube9-server client: `POST /v1/operator/register`, and the API key.
//!
//! - [`ApiKeySource`]: `--api-key-file` (a mounted Secret, re-read on every
//!   check so adding or removing the key needs no restart), else
//!   `KUBE9_API_KEY`. The key is a [`Secret`]: never logged, printed or
//!   published; its `Authorization` header is marked sensitive.
//! - [`Kube9Client`]: verified HTTPS (the given CA bundle, else the
//!   system's), through `HTTPS_PROXY` unless `NO_PROXY` names the server
//!   (`crate::util::proxy`); plain HTTP only when the user opts in
//!   ([`check_transport`]: the key would travel in clear), with a warning;
//!   every phase of a call is bounded so a hung server delays a heartbeat by
//!   at most [`call_bound`].
//! - [`classify`]: the server's answer as a registration [`Outcome`] (pure);
//!   the server's words are sanitised before anything logs or publishes them.
//! - [`cluster_identifier`]: `sha256:` + hex SHA-256 of the cluster CA
//!   certificate (else of the API server URL): stable, not reversible.

use crate::kube::Secret;
use crate::kube::credentials::pem_certificates;
use crate::pro::registration::Outcome;
use crate::util::files;
use crate::util::http::{self, Timeouts};
use crate::util::text::{MAX_FOREIGN, sanitize};
use crate::util::tls::{Tls, tls_config};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use ureq::http::header::AUTHORIZATION;
use ureq::tls::PemItem;

pub(crate) const DEFAULT_SERVER_URL: &str = "https://api.kube9.dev";

/// Each phase of a registration call is bounded: the spec's 30 s would
/// stall a loop that also keeps the heartbeat.
const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(2),
    send: Duration::from_secs(1),
    response: Duration::from_secs(2),
    body: Duration::from_secs(1),
};

/// The longest one registration call can take, whatever the server does
/// (9 s: the server's name looked up within the connect time, then the
/// call; 2 s for a server that accepts and never answers).
pub(crate) fn call_bound() -> Duration {
    TIMEOUTS.connect + TIMEOUTS.bound()
}
/// The longest `clusterId` accepted (kube9's are `cls_` + a few dozen
/// characters).
const MAX_CLUSTER_ID: usize = 256;
/// Registration answers are small; a larger body is a broken server.
const MAX_BODY: u64 = 64 * 1024;

/// Where system CA bundles live (Debian, Fedora, Alpine, macOS/BSD).
const SYSTEM_BUNDLES: [&str; 3] =
    ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"];

/// Where the API key comes from, first found wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKeySource {
    pub file: Option<PathBuf>,
    pub env: Option<Secret>,
}

impl ApiKeySource {
    pub fn is_configured(&self) -> bool {
        self.file.is_some() || self.env.is_some()
    }

    /// Reads the key now: `None` when there is none, an error when the
    /// source is configured but unusable (spec rule 2). A missing file falls
    /// through to the variable (an optional Secret that is not there means
    /// "no key").
    pub fn read(&self) -> Result<Option<Secret>, String> {
        if let Some(path) = &self.file {
            // Bounded and non-blocking: this runs on every check, in the loop
            // that also keeps the heartbeat.
            match files::read_bounded(path, files::API_KEY_LIMIT, "API key file") {
                Ok(raw) => {
                    let text = String::from_utf8_lossy(&raw);
                    if !text.trim().is_empty() {
                        return checked(text.trim(), &path.display().to_string());
                    }
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        match &self.env {
            Some(key) if !key.expose().trim().is_empty() => checked(key.expose().trim(), "KUBE9_API_KEY"),
            _ => Ok(None),
        }
    }
}

/// Keys look like `kdy_<env>_<random>`; anything else is a configuration
/// mistake (a pasted file name, a truncated value), reported without the
/// value itself.
fn checked(key: &str, source: &str) -> Result<Option<Secret>, String> {
    let well_formed = key.starts_with("kdy_")
        && key.len() > 6
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match well_formed {
        true => Ok(Some(Secret::new(key))),
        false => Err(format!("the API key in {source} is not a kube9 API key (kdy_<env>_<random>)")),
    }
}

/// The registration request body.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RegisterRequest {
    pub operator_version: String,
    pub cluster_identifier: String,
    pub kubernetes_version: String,
    pub approximate_node_count: u64,
}

pub(crate) struct Kube9Client {
    agent: ureq::Agent,
    register_url: String,
    /// The server's URL, as log lines name it.
    pub server: String,
}

/// The rules for how the key may travel, checked with the settings (exit
/// 2): `http://` only with `allow_insecure` (the key would be readable by
/// anyone on the path), and never with a CA file (which would then be
/// silently ignored).
pub(crate) fn check_transport(server_url: &str, allow_insecure: bool, ca_file: &Option<PathBuf>) -> Result<(), String> {
    if !server_url.starts_with("http://") {
        return Ok(());
    }
    let shown = crate::util::url::redacted(server_url);
    if ca_file.is_some() {
        return Err(format!(
            "--server-ca-file is for an https:// kube9-server, and --server-url (KUBE9_SERVER_URL) {shown:?} is http://"
        ));
    }
    if !allow_insecure {
        return Err(format!(
            "--server-url (KUBE9_SERVER_URL) {shown:?} is plain http://: the API key would travel unencrypted; \
             use https://, or give --allow-insecure-server-url to mean it"
        ));
    }
    Ok(())
}

impl Kube9Client {
    /// Loads the CA bundle: configuration errors (exit 2). The URL was
    /// checked with its flag; an `http://` one must have passed
    /// [`check_transport`], and is warned about here, once, at start.
    pub(crate) fn new(server_url: &str, ca_file: Option<&Path>) -> Result<Kube9Client, String> {
        let server = server_url.trim_end_matches('/').to_string();
        let tls = if server.starts_with("https://") {
            let (pem, source) = match ca_file {
                Some(path) => (
                    files::read_bounded(path, files::CA_LIMIT, "--server-ca-file").map_err(|e| e.to_string())?,
                    path.display().to_string(),
                ),
                None => system_bundle()?,
            };
            let roots = pem_certificates(&pem, &format!("CA bundle {source}"))?;
            let config = tls_config(&roots, None).map_err(|why| format!("CA bundle {source}: {why}"))?;
            Some(Tls { config, server_name: None })
        } else {
            log::warn!(
                "kube9-server {server} is plain http:// (--allow-insecure-server-url): the API key is sent unencrypted"
            );
            None
        };
        // `HTTPS_PROXY` (`HTTP_PROXY` for an http:// server) unless
        // `NO_PROXY` says otherwise; the lookup of the server's name is
        // bounded (a thread of ureq's per call: registration is rare).
        let proxy = crate::util::proxy::from_env(&server)?;
        let config = http::agent_config(TIMEOUTS).proxy(proxy).timeout_resolve(Some(TIMEOUTS.connect));
        Ok(Kube9Client {
            agent: http::agent(config.build(), tls).0,
            register_url: format!("{server}/v1/operator/register"),
            server,
        })
    }

    /// One registration attempt, bounded by [`call_bound`].
    pub(crate) fn register(&self, key: &Secret, request: &RegisterRequest) -> Outcome {
        let Some(authorization) = http::bearer(key.expose()) else {
            return Outcome::BadRequest { details: "the API key cannot be sent in an HTTP header".into() };
        };
        let body = serde_json::to_vec(request).expect("plain data serialises");
        let result = self
            .agent
            .post(&self.register_url)
            .header(AUTHORIZATION, authorization)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .send(&body[..]);
        let mut response = match result {
            Ok(r) => r,
            Err(e) => {
                return Outcome::Failed { reason: format!("Failed to connect to kube9-server: {}", describe(&e)) };
            }
        };
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| crate::util::backoff::parse_retry_after(v, SystemTime::now()));
        match response.body_mut().with_config().limit(MAX_BODY).read_to_vec() {
            Ok(body) => classify(code, &body, retry_after),
            Err(e) => Outcome::Failed { reason: format!("kube9-server's answer could not be read: {}", describe(&e)) },
        }
    }
}

fn system_bundle() -> Result<(Vec<u8>, String), String> {
    let candidates =
        std::env::var("SSL_CERT_FILE").ok().into_iter().chain(SYSTEM_BUNDLES.iter().map(|s| s.to_string()));
    for path in candidates {
        match files::read_bounded(Path::new(&path), files::CA_LIMIT, "CA bundle") {
            Ok(pem) => return Ok((pem, path)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("no CA bundle to verify kube9-server (none of SSL_CERT_FILE, /etc/ssl/certs/ca-certificates.crt, …): \
         give --server-ca-file or mount a bundle"
        .into())
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Resolve) => {
            format!("the server's name was not looked up within {}s", TIMEOUTS.connect.as_secs())
        }
        ureq::Error::Timeout(ureq::Timeout::Connect) => {
            format!("connection timeout after {}s", TIMEOUTS.connect.as_secs())
        }
        ureq::Error::Timeout(_) => format!("no answer within {}s", TIMEOUTS.response.as_secs()),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        ureq::Error::Io(io) => io.kind().to_string(),
        ureq::Error::BodyExceedsLimit(limit) => format!("answer larger than {limit} bytes"),
        ureq::Error::HostNotFound => "cannot resolve the server's host".into(),
        // May quote what the server sent (a bad header, a bad status line).
        other => sanitize(&other.to_string(), MAX_FOREIGN),
    }
}

/// The server's answer as an outcome. Pure.
pub fn classify(code: u16, body: &[u8], retry_after: Option<Duration>) -> Outcome {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    match code {
        200 | 201 => {
            let Some(v) = json else {
                return Outcome::Failed { reason: "kube9-server's answer to registration is not JSON".into() };
            };
            // Published in the ConfigMap as it is: refused, not cleaned, if
            // it is not a short printable identifier.
            let usable = |s: &&str| !s.is_empty() && s.len() <= MAX_CLUSTER_ID && sanitize(s, MAX_CLUSTER_ID) == *s;
            let Some(cluster_id) = v.get("clusterId").and_then(Value::as_str).filter(usable) else {
                return Outcome::Failed { reason: "kube9-server's answer to registration has no clusterId".into() };
            };
            let configuration = v.get("configuration");
            let number = |key: &str| configuration.and_then(|c| c.get(key)).and_then(Value::as_u64).filter(|n| *n > 0);
            Outcome::Registered {
                cluster_id: cluster_id.to_string(),
                status_interval: number("statusUpdateIntervalSeconds").map(Duration::from_secs),
                reregistration: number("reregistrationIntervalHours")
                    .map(|h| Duration::from_secs(h.saturating_mul(3600))),
            }
        }
        401 => Outcome::Unauthorized,
        429 => Outcome::RateLimited { retry_after },
        400 => {
            let details = json
                .as_ref()
                .and_then(|v| v.get("details").or_else(|| v.get("message")).or_else(|| v.get("error")))
                .map(|d| d.as_str().map(String::from).unwrap_or_else(|| d.to_string()))
                .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
            Outcome::BadRequest { details: sanitize(details.trim(), MAX_FOREIGN) }
        }
        _ => Outcome::Failed { reason: format!("kube9-server answered HTTP {code} to registration") },
    }
}

/// `sha256:` + hex SHA-256 of the cluster CA certificate (its DER, so PEM
/// formatting does not matter), else of the API server URL.
pub(crate) fn cluster_identifier(ca_pem: &[u8], server: &str) -> String {
    let der = ureq::tls::parse_pem(ca_pem).find_map(|item| match item {
        Ok(PemItem::Certificate(c)) => Some(c.der().to_vec()),
        _ => None,
    });
    let digest = ring::digest::digest(&ring::digest::SHA256, der.as_deref().unwrap_or(server.as_bytes()));
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = include_str!("../../tests/fixtures/fixture-ca.crt");

    #[test]
    fn classifies_every_answer_of_the_spec() {
        let ok = br#"{"status":"registered","clusterId":"cls_abc","tier":"pro","configuration":{"statusUpdateIntervalSeconds":30,"reregistrationIntervalHours":12},"message":"hi"}"#;
        assert_eq!(
            classify(200, ok, None),
            Outcome::Registered {
                cluster_id: "cls_abc".into(),
                status_interval: Some(Duration::from_secs(30)),
                reregistration: Some(Duration::from_secs(12 * 3600)),
            }
        );
        assert_eq!(
            classify(200, br#"{"status":"reregistered","clusterId":"cls_abc","configuration":{"statusUpdateIntervalSeconds":"x"}}"#, None),
            Outcome::Registered { cluster_id: "cls_abc".into(), status_interval: None, reregistration: None }
        );
        assert_eq!(classify(401, br#"{"error":"INVALID_API_KEY"}"#, None), Outcome::Unauthorized);
        assert_eq!(
            classify(429, b"", Some(Duration::from_secs(7))),
            Outcome::RateLimited { retry_after: Some(Duration::from_secs(7)) }
        );
        assert_eq!(
            classify(400, br#"{"details":"kubernetesVersion is required"}"#, None),
            Outcome::BadRequest { details: "kubernetesVersion is required".into() }
        );
        assert_eq!(classify(400, b"plain\ntext", None), Outcome::BadRequest { details: "plain text".into() });
        let hostile = format!(r#"{{"details":"\u001b[2J\rforged {}"}}"#, "x".repeat(5000));
        let Outcome::BadRequest { details } = classify(400, hostile.as_bytes(), None) else { panic!() };
        assert!(details.starts_with(" [2J forged xxx") && details.len() <= MAX_FOREIGN, "{details}");
        assert_eq!(
            classify(503, b"<html>", None),
            Outcome::Failed { reason: "kube9-server answered HTTP 503 to registration".into() }
        );
        assert_eq!(
            classify(200, b"{not json", None),
            Outcome::Failed { reason: "kube9-server's answer to registration is not JSON".into() }
        );
        assert_eq!(
            classify(200, b"{\"clusterId\":\"cls_\\u001b[2J\"}", None),
            Outcome::Failed { reason: "kube9-server's answer to registration has no clusterId".into() }
        );
        assert_eq!(
            classify(200, br#"{"status":"registered"}"#, None),
            Outcome::Failed { reason: "kube9-server's answer to registration has no clusterId".into() }
        );
    }

    #[test]
    fn cluster_identifier_is_stable_and_hides_its_input() {
        let a = cluster_identifier(CA.as_bytes(), "https://10.96.0.1:443");
        let reformatted = CA.replace('\n', "\r\n");
        assert_eq!(a, cluster_identifier(reformatted.as_bytes(), "https://elsewhere"));
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
        let by_url = cluster_identifier(b"", "https://10.96.0.1:443");
        assert_eq!(
            by_url,
            "sha256:".to_string()
                + &{
                    let d = ring::digest::digest(&ring::digest::SHA256, b"https://10.96.0.1:443");
                    d.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()
                }
        );
        assert_ne!(a, by_url);
    }

    #[test]
    fn key_sources_first_found_wins_and_bad_keys_are_named_not_shown() {
        let dir = std::env::temp_dir().join(format!("opstatus-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("api-key");
        let env_key = Secret::new("kdy_prod_fromenv123");
        let source = ApiKeySource { file: Some(file.clone()), env: Some(env_key.clone()) };
        assert_eq!(source.read(), Ok(Some(env_key.clone())), "missing file: the variable");
        std::fs::write(&file, "kdy_prod_fromfile456\n").unwrap();
        assert_eq!(source.read(), Ok(Some(Secret::new("kdy_prod_fromfile456"))));
        std::fs::write(&file, "  \n").unwrap();
        assert_eq!(source.read(), Ok(Some(env_key)), "empty file: the variable");
        std::fs::write(&file, "not-a-key secret-looking-value").unwrap();
        let invalid = source.read();
        assert_eq!(
            invalid,
            Err(format!("the API key in {} is not a kube9 API key (kdy_<env>_<random>)", file.display()))
        );
        assert!(!format!("{invalid:?}").contains("secret-looking-value"));
        assert_eq!(ApiKeySource { file: None, env: None }.read(), Ok(None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_call_is_bounded_by_nine_seconds() {
        assert_eq!(call_bound(), Duration::from_secs(9));
    }

    #[test]
    fn http_needs_the_opt_in_and_no_ca_file() {
        let ca = Some(PathBuf::from("/run/ca.pem"));
        assert_eq!(check_transport("https://api.kube9.dev", false, &ca), Ok(()));
        let e = check_transport("http://10.0.0.9:8080", false, &None).unwrap_err();
        assert!(e.contains("unencrypted") && e.contains("--allow-insecure-server-url"), "{e}");
        assert_eq!(check_transport("http://10.0.0.9:8080", true, &None), Ok(()));
        let e = check_transport("http://10.0.0.9:8080", true, &ca).unwrap_err();
        assert!(e.starts_with("--server-ca-file is for an https:// kube9-server"), "{e}");
    }

    #[test]
    fn the_client_posts_under_the_server_url_and_reads_its_ca_file() {
        assert_eq!(
            Kube9Client::new("http://127.0.0.1:9/", None).unwrap().register_url,
            "http://127.0.0.1:9/v1/operator/register"
        );
        let e = Kube9Client::new("https://x", Some(Path::new("/nonexistent/ca.pem"))).err().unwrap();
        assert!(e.starts_with("cannot read --server-ca-file /nonexistent/ca.pem"), "{e}");
    }
}
