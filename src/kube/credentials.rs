//! Where the API server is and how to authenticate to it: in-cluster (the
//! service-account directory, as client-go reads it) or kubeconfig files
//! (merged as kubectl merges `KUBECONFIG`, a context chosen, an exec plugin
//! run: [`super::exec`]), chosen in controller-runtime's order
//! ([`choose`]), and named for the start line and `/status`
//! ([`Chosen::source`]): the kubeconfig files with the context and user, or
//! the service account the token's claims name.
//!
//! Everything here runs once at start and fails with a [`ConfigError`]
//! that names the file or variable at fault (exit code 2), before any
//! request to the API server. Files are read through [`files::read_bounded`]
//! (regular files only, each kind with its size limit); a client
//! certificate is checked with its key ([`identity`]). Secrets are held in
//! [`Secret`], whose `Debug` never shows them.

use super::exec::Plugin;
use super::{Secret, identity, yaml};
use crate::util::base64::{decode_base64, encode_base64};
use crate::util::config_error::ConfigError;
use crate::util::files;
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use ureq::tls::{Certificate, PemItem};

/// How requests authenticate.
#[derive(Clone, Debug)]
pub enum Auth {
    /// A bearer token that never changes (a kubeconfig `token`).
    Token(Secret),
    /// A bearer token in a file that is rewritten while we run (the
    /// projected service-account token, a kubeconfig `tokenFile`).
    TokenFile { path: PathBuf, initial: Secret },
    /// A client certificate and key, PEM.
    ClientCert { cert_pem: Vec<u8>, key_pem: Secret },
    /// A kubeconfig user's exec plugin, and once it ran the token it gave
    /// with its expiry: run again when that comes and after a 401.
    Exec { plugin: Box<Plugin>, issued: Option<(Secret, Option<SystemTime>)> },
    /// No credentials: only useful against servers that allow anonymous.
    Anonymous,
}

/// Everything needed to reach and authenticate to one API server.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// `https://host:port`, no trailing slash.
    pub server: String,
    /// The CA bundle (PEM) that the server certificate must chain to.
    pub ca_pem: Vec<u8>,
    /// Where the CA came from, for error messages (a path, or the
    /// kubeconfig cluster whose inline data it was).
    pub ca_source: String,
    /// The name the server's certificate is verified against instead of
    /// the server URL's host (a kubeconfig's `tls-server-name`: the API
    /// server reached through an address its certificate does not name).
    pub tls_server_name: Option<ServerName<'static>>,
    /// The proxy the API server is reached through (a kubeconfig cluster's
    /// `proxy-url`, an `http://` CONNECT proxy); never the environment's.
    pub proxy_url: Option<String>,
    pub auth: Auth,
    /// The namespace the credentials point at: the service-account
    /// namespace file, or the kubeconfig context's namespace.
    pub namespace: Option<String>,
}

fn fail<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

fn read_file(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, ConfigError> {
    files::read_bounded(path, limit, what).map_err(|e| ConfigError(e.to_string()))
}

/// Reads a token file: surrounding white space is not part of the token.
pub(crate) fn read_token(path: &Path) -> Result<Secret, ConfigError> {
    let raw = read_file(path, files::TOKEN_LIMIT, "token file")?;
    let token = String::from_utf8(raw).or_else(|_| fail(format!("token file {} is not UTF-8", path.display())))?;
    let token = token.trim();
    if token.is_empty() {
        return fail(format!("token file {} is empty", path.display()));
    }
    Ok(Secret::new(token))
}

/// The certificates of a PEM bundle (keys and other sections skipped);
/// an error naming `what` when the PEM is malformed or holds none.
pub(crate) fn pem_certificates(pem: &[u8], what: &str) -> Result<Vec<Certificate<'static>>, String> {
    let mut certificates = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(c)) => certificates.push(c),
            Ok(_) => {}
            Err(e) => return Err(format!("{what} is not valid PEM: {e}")),
        }
    }
    if certificates.is_empty() {
        return Err(format!("{what} holds no PEM certificate"));
    }
    Ok(certificates)
}

fn check_ca(pem: &[u8], source: &str) -> Result<(), ConfigError> {
    pem_certificates(pem, &format!("CA {source}")).map(drop).map_err(ConfigError)
}

/// The credentials opstatus acts with, and where they came from in words
/// (the start line, `/status`; never a secret).
#[derive(Debug)]
pub(crate) struct Chosen {
    pub creds: Credentials,
    pub source: String,
}

/// Picks credentials as controller-runtime does: an explicit kubeconfig
/// (`--kubeconfig`, or the files `KUBECONFIG` lists) first, even in a pod,
/// then in-cluster when `KUBERNETES_SERVICE_HOST` is set, then
/// `~/.kube/config`; a kubeconfig in `context` or its current one. Fails
/// with a [`ConfigError`] (exit code 2) before any request; a variable
/// that must be text and is not is one, naming it (never a fall-back to
/// other credentials). `lasting`: for `run` ([`from_kubeconfig`]).
pub(crate) fn choose(
    kubeconfig: &[PathBuf],
    context: Option<&str>,
    sa_dir: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
    lasting: bool,
) -> Result<Chosen, ConfigError> {
    let text = |name: &str| {
        let text = |v: OsString| v.into_string().map_err(|v| ConfigError(format!("{name}: {v:?} is not UTF-8 text")));
        env(name).map(text).transpose()
    };
    let host = text("KUBERNETES_SERVICE_HOST")?;
    if !kubeconfig.is_empty() {
        let mut chosen = from_kubeconfig(kubeconfig, context, lasting)?;
        if host.is_some() {
            chosen.source += " (not the pod's service account: a kubeconfig comes first)";
        }
        return Ok(chosen);
    }
    if host.is_some() {
        let port = text("KUBERNETES_SERVICE_PORT")?;
        let creds = in_cluster(host.as_deref(), port.as_deref(), sa_dir)?;
        let token = match &creds.auth {
            Auth::TokenFile { initial, .. } => service_account_of(initial.expose()),
            _ => None,
        };
        let source = match token {
            Some(account) => format!("service account {account} (in-cluster, token in {})", sa_dir.display()),
            None => {
                format!("service account of the in-cluster token in {} (its claims do not name it)", sa_dir.display())
            }
        };
        return Ok(Chosen { creds, source });
    }
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        let path = PathBuf::from(home).join(".kube").join("config");
        if path.exists() {
            return from_kubeconfig(&[path], context, lasting);
        }
    }
    fail(
        "no Kubernetes credentials: not in a cluster (KUBERNETES_SERVICE_HOST is unset), \
         no --kubeconfig or KUBECONFIG, and no ~/.kube/config",
    )
}

/// The service account (`namespace/name`) a service-account token's
/// claims name: the `kubernetes.io` claim of a projected token, else its
/// `sub` (`system:serviceaccount:NAMESPACE:NAME`). For the start line
/// only: the signature is not checked and the claims decide nothing (the
/// API server is what authenticates the token). Never shows the token;
/// `None` when it is no JWT or its claims are not names.
pub(crate) fn service_account_of(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    // base64url, as JWTs are encoded, read as standard base64.
    let standard = payload.replace('-', "+").replace('_', "/");
    let claims: Value = serde_json::from_slice(&decode_base64(&standard)?).ok()?;
    let projected = &claims["kubernetes.io"];
    let (namespace, name) = match (projected["namespace"].as_str(), projected["serviceaccount"]["name"].as_str()) {
        (Some(ns), Some(name)) => (ns, name),
        _ => {
            let sub = claims["sub"].as_str()?.strip_prefix("system:serviceaccount:")?;
            sub.split_once(':')?
        }
    };
    // Names, or nothing: this is what makes them safe to show.
    super::names::check_dns_label(namespace).ok()?;
    super::names::check_dns_subdomain(name).ok()?;
    Some(format!("{namespace}/{name}"))
}

/// In-cluster credentials, exactly as client-go's `rest.InClusterConfig`
/// finds them: `KUBERNETES_SERVICE_HOST` and `_PORT` (both required; an IPv6
/// host is bracketed), and `token`, `ca.crt`, `namespace` in `sa_dir`.
pub(crate) fn in_cluster(host: Option<&str>, port: Option<&str>, sa_dir: &Path) -> Result<Credentials, ConfigError> {
    let (host, port) = match (host, port) {
        (Some(h), Some(p)) if !h.is_empty() && !p.is_empty() => (h, p),
        _ => {
            return fail(
                "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set \
                 (or give --kubeconfig)",
            );
        }
    };
    if port.parse::<u16>().map_or(true, |p| p == 0) {
        return fail(format!("KUBERNETES_SERVICE_PORT={port:?} is not a port number"));
    }
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() };
    let token_path = sa_dir.join("token");
    let initial = read_token(&token_path)?;
    let ca_path = sa_dir.join("ca.crt");
    let ca_pem = read_file(&ca_path, files::CA_LIMIT, "CA file")?;
    let ca_source = ca_path.display().to_string();
    check_ca(&ca_pem, &ca_source)?;
    // client-go treats the namespace file as optional; so do we.
    let namespace = match files::read_bounded(&sa_dir.join("namespace"), files::SMALL_LIMIT, "namespace file") {
        Ok(raw) => Some(String::from_utf8_lossy(&raw).trim().to_string()).filter(|s| !s.is_empty()),
        Err(e) if e.is_not_found() => None,
        Err(e) => return fail(e.to_string()),
    };
    Ok(Credentials {
        server: format!("https://{host}:{port}"),
        ca_pem,
        ca_source,
        tls_server_name: None,
        proxy_url: None,
        auth: Auth::TokenFile { path: token_path, initial },
        namespace,
    })
}

/// Credentials from kubeconfig files merged as kubectl merges `KUBECONFIG`
/// ([`kubeconfig_credentials`]; a file that does not exist is skipped, as
/// long as one does), in `context` or the current one, and their name: the
/// files, the context and the user. An exec plugin runs now, bounded: its
/// failure is one too (exit code 2). `lasting`: for `run`, which renews
/// credentials while it runs, with no one to answer a plugin.
pub(crate) fn from_kubeconfig(paths: &[PathBuf], context: Option<&str>, lasting: bool) -> Result<Chosen, ConfigError> {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut files = Vec::new();
    for path in paths.iter().filter(|p| !p.as_os_str().is_empty()) {
        let text = match files::read_bounded(path, files::KUBECONFIG_LIMIT, "kubeconfig") {
            Err(e) if e.is_not_found() && paths.len() > 1 => continue,
            read => read.map_err(|e| ConfigError(e.to_string()))?,
        };
        let text = String::from_utf8(text).or_else(|_| fail(format!("kubeconfig {} is not UTF-8", path.display())))?;
        let doc = yaml::parse(&text).or_else(|e| fail(format!("kubeconfig {}: {e}", path.display())))?;
        files.push((path.parent().unwrap_or(Path::new(".")).to_path_buf(), doc));
    }
    if files.is_empty() {
        return fail(format!("none of the kubeconfig files in KUBECONFIG exists: {}", shown.join(", ")));
    }
    let shown = shown.join(":");
    let in_files = |ConfigError(e)| ConfigError(format!("kubeconfig {shown}: {e}"));
    let mut creds = kubeconfig_credentials(&files, context).map_err(in_files)?;
    let via = issue(&mut creds, lasting).map_err(in_files)?;
    // Names from the files, shown: sanitised and bounded.
    let name = |v: Option<&str>| v.map_or("none".into(), |v| format!("{:?}", crate::util::text::sanitize(v, 253)));
    let context = current_context(&files, context);
    let user =
        context.and_then(|c| named(&files, "contexts", c, "context").ok()).and_then(|(_, c)| str_field(c, "user"));
    let user = name(user.filter(|u| !u.is_empty()));
    Ok(Chosen { creds, source: format!("kubeconfig {shown}, context {}, user {user}{via}", name(context)) })
}

/// The context asked for, else the first `current-context` of the files.
fn current_context<'a>(files: &'a [(PathBuf, Value)], asked: Option<&'a str>) -> Option<&'a str> {
    asked.or_else(|| files.iter().find_map(|(_, doc)| str_field(doc, "current-context").filter(|c| !c.is_empty())))
}

/// Runs the exec plugin the credentials name, if any: its token (renewed
/// while opstatus runs) or its client certificate, checked with its key
/// (one that expires refused for a `lasting` command: renewing a client
/// certificate would mean new connections everywhere). The words the
/// start line adds.
fn issue(creds: &mut Credentials, lasting: bool) -> Result<String, ConfigError> {
    let Auth::Exec { plugin, issued } = &mut creds.auth else { return Ok(String::new()) };
    plugin.attended = !lasting;
    let got = plugin.run().map_err(ConfigError)?;
    let until = got.expires.map_or(String::new(), |t| format!(", until {}", crate::util::time::format_rfc3339(t)));
    let via = format!(" (exec plugin {}{until})", plugin.name());
    match (got.token, got.client_cert) {
        (Some(token), _) => *issued = Some((token, got.expires)),
        (None, Some((cert_pem, key_pem))) => {
            if lasting && got.expires.is_some() {
                return fail(format!(
                    "exec plugin {} gives a client certificate that expires{until}: `opstatus run` cannot renew a \
                     client certificate while it runs (its connections keep theirs); give it a user whose plugin \
                     gives a token",
                    plugin.name()
                ));
            }
            let chain = pem_certificates(&cert_pem, "the exec plugin's client certificate").map_err(ConfigError)?;
            identity::client_identity(&chain, key_pem.expose().as_bytes()).map_err(ConfigError)?;
            creds.auth = Auth::ClientCert { cert_pem, key_pem };
        }
        (None, None) => unreachable!("a plugin's output without either is refused"),
    }
    Ok(via)
}

/// Interprets kubeconfig files (each with its directory, against which its
/// relative paths resolve, as kubectl resolves them) merged as kubectl
/// merges `KUBECONFIG`: for each cluster, user and context, the first file
/// that defines its name wins; so does the first `current-context`, unless
/// `context` names one. An exec plugin is described, not run.
pub fn kubeconfig_credentials(files: &[(PathBuf, Value)], context: Option<&str>) -> Result<Credentials, ConfigError> {
    let context_name = match current_context(files, context) {
        Some(c) => c,
        None => return fail("no current-context is set (give --context)"),
    };
    let (_, context) = named(files, "contexts", context_name, "context")?;
    let cluster_name = str_field(context, "cluster")
        .ok_or_else(|| ConfigError(format!("context {context_name:?} names no cluster")))?;
    let (cluster_dir, cluster) = named(files, "clusters", cluster_name, "cluster")?;
    let user = match str_field(context, "user") {
        Some(u) if !u.is_empty() => Some((u, named(files, "users", u, "user")?)),
        _ => None,
    };

    let server =
        str_field(cluster, "server").ok_or_else(|| ConfigError(format!("cluster {cluster_name:?} has no server")))?;
    let server = server.trim_end_matches('/');
    crate::util::url::check_url(server).map_err(|why| ConfigError(format!("cluster {cluster_name:?} server {why}")))?;
    if !server.starts_with("https://") {
        return fail(format!(
            "cluster {cluster_name:?} server {server:?} is not https://: opstatus only talks to API servers over verified TLS"
        ));
    }
    if cluster.get("insecure-skip-tls-verify").and_then(Value::as_bool) == Some(true) {
        return fail(format!(
            "cluster {cluster_name:?} sets insecure-skip-tls-verify: opstatus always verifies TLS; give certificate-authority instead"
        ));
    }
    let proxy_url = match cluster.get("proxy-url") {
        None | Some(Value::Null) => None,
        Some(Value::String(url)) if crate::util::proxy::parse(url).is_ok() => Some(url.clone()),
        // The URL itself is not shown: a proxy URL may carry a password.
        Some(_) => return fail(format!("cluster {cluster_name:?} proxy-url is not an http:// proxy URL")),
    };
    let tls_server_name = match cluster.get("tls-server-name") {
        None | Some(Value::Null) => None,
        Some(name) => Some(name.as_str().and_then(|n| ServerName::try_from(n.to_string()).ok()).ok_or_else(|| {
            let shown = crate::util::text::sanitize(&name.to_string(), 256);
            ConfigError(format!("cluster {cluster_name:?} tls-server-name {shown} is not a DNS name or IP address"))
        })?),
    };
    let (ca_pem, ca_source) = if let Some(data) = str_field(cluster, "certificate-authority-data") {
        let source = format!("certificate-authority-data of cluster {cluster_name:?}");
        (decode_base64(data).ok_or_else(|| ConfigError(format!("{source} is not valid base64")))?, source)
    } else if let Some(file) = str_field(cluster, "certificate-authority") {
        let path = cluster_dir.join(file);
        (read_file(&path, files::CA_LIMIT, "CA file")?, path.display().to_string())
    } else {
        return fail(format!(
            "cluster {cluster_name:?} has no certificate-authority or certificate-authority-data: \
             opstatus verifies the server against the cluster's CA"
        ));
    };
    check_ca(&ca_pem, &ca_source)?;

    // What an exec plugin's `provideClusterInfo` hands it, as client-go does.
    let mut cluster_info = json!({"server": server, "certificate-authority-data": encode_base64(&ca_pem)});
    if let Some(name) = &tls_server_name {
        cluster_info["tls-server-name"] = json!(name.to_str());
    }
    let extensions = cluster.get("extensions").and_then(Value::as_array).into_iter().flatten();
    if let Some(config) =
        extensions.into_iter().find(|e| str_field(e, "name") == Some("client.authentication.k8s.io/exec"))
    {
        cluster_info["config"] = config.get("extension").cloned().unwrap_or(Value::Null);
    }
    let auth = match user {
        None => Auth::Anonymous,
        Some((name, (dir, user))) => {
            user_auth(user, dir, cluster_info).map_err(|ConfigError(e)| ConfigError(format!("user {name:?}: {e}")))?
        }
    };
    Ok(Credentials {
        server: server.to_string(),
        ca_pem,
        ca_source,
        tls_server_name,
        proxy_url,
        auth,
        namespace: str_field(context, "namespace").filter(|s| !s.is_empty()).map(String::from),
    })
}

fn user_auth(user: &Value, base: &Path, cluster_info: Value) -> Result<Auth, ConfigError> {
    if let Some(token) = str_field(user, "token").filter(|t| !t.is_empty()) {
        return Ok(Auth::Token(Secret::new(token)));
    }
    if let Some(file) = str_field(user, "tokenFile") {
        let path = base.join(file);
        let initial = read_token(&path)?;
        return Ok(Auth::TokenFile { path, initial });
    }
    if let Some(exec) = user.get("exec").filter(|e| !e.is_null()) {
        let plugin = Plugin::new(exec, base, cluster_info).map_err(ConfigError)?;
        return Ok(Auth::Exec { plugin: Box::new(plugin), issued: None });
    }
    let cert = pem_field(user, "client-certificate", files::CA_LIMIT, base)?;
    let key = pem_field(user, "client-key", files::KEY_LIMIT, base)?;
    match (cert, key) {
        (Some(cert_pem), Some(key_pem)) => {
            let key_pem = Secret::new(String::from_utf8_lossy(&key_pem));
            // Checked now: ureq would abort the process at the first handshake.
            let chain = pem_certificates(&cert_pem, "the client certificate").map_err(ConfigError)?;
            identity::client_identity(&chain, key_pem.expose().as_bytes()).map_err(ConfigError)?;
            return Ok(Auth::ClientCert { cert_pem, key_pem });
        }
        (Some(_), None) | (None, Some(_)) => {
            return fail("the user has only one of client-certificate and client-key");
        }
        (None, None) => {}
    }
    if user.get("auth-provider").is_some() {
        return fail(
            "the user's `auth-provider` authentication is not supported (kubectl itself dropped it): convert it to \
             an exec plugin (gke-gcloud-auth-plugin, `kubelogin convert-kubeconfig`)",
        );
    }
    if user.get("username").is_some() {
        return fail(
            "the user's `username` (basic) authentication is not supported: use a token, client certificate or exec plugin",
        );
    }
    Ok(Auth::Anonymous)
}

fn pem_field(user: &Value, key: &str, limit: u64, base: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(data) = str_field(user, &format!("{key}-data")) {
        return decode_base64(data).map(Some).ok_or_else(|| ConfigError(format!("{key}-data is not valid base64")));
    }
    match str_field(user, key) {
        Some(file) => read_file(&base.join(file), limit, &format!("{key} file")).map(Some),
        None => Ok(None),
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Finds `{name: NAME, FIELD: {...}}` in the list `list` of the first file
/// that has one, and returns FIELD with that file's directory.
fn named<'a>(
    files: &'a [(PathBuf, Value)],
    list: &str,
    name: &str,
    field: &str,
) -> Result<(&'a Path, &'a Value), ConfigError> {
    let entries = files.iter().flat_map(|(dir, doc)| {
        let entries = doc.get(list).and_then(Value::as_array).into_iter().flatten();
        entries.map(move |entry| (dir.as_path(), entry))
    });
    let found = entries.into_iter().find(|(_, entry)| str_field(entry, "name") == Some(name));
    found
        .and_then(|(dir, entry)| Some((dir, entry.get(field).filter(|v| v.is_object())?)))
        .ok_or_else(|| ConfigError(format!("{field} {name:?} is not defined in {list}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CA: &str = include_str!("../../tests/fixtures/fixture-ca.crt");

    /// One kubeconfig file in `dir`, read in its current context.
    fn one(doc: Value, dir: &Path) -> Result<Credentials, ConfigError> {
        kubeconfig_credentials(&[(dir.to_path_buf(), doc)], None)
    }

    fn kubeconfig(user: Value) -> Value {
        json!({
            "current-context": "dev",
            "contexts": [{"name": "other", "context": {"cluster": "nope"}},
                         {"name": "dev", "context": {"cluster": "c1", "user": "u1", "namespace": "team-a"}}],
            "clusters": [{"name": "c1", "cluster": {"server": "https://10.0.0.1:6443/", "certificate-authority-data": encode_base64(CA.as_bytes())}}],
            "users": [{"name": "u1", "user": user}]
        })
    }

    /// The account a token's claims name, for the start line only: the
    /// projected claim, else `sub`; anything that is not a name, nothing.
    #[test]
    fn the_service_account_is_read_from_the_claims_and_only_names_are_shown() {
        let jwt = |claims: Value| {
            let url = |s: String| s.trim_end_matches('=').replace('+', "-").replace('/', "_");
            format!("{}.{}.sig", url(encode_base64(b"{}")), url(encode_base64(claims.to_string().as_bytes())))
        };
        let projected = json!({"kubernetes.io": {"namespace": "ops", "serviceaccount": {"name": "opstatus"}},
                               "sub": "system:serviceaccount:other:ignored"});
        assert_eq!(service_account_of(&jwt(projected)).as_deref(), Some("ops/opstatus"));
        let legacy = json!({"sub": "system:serviceaccount:team-a:op.sa"});
        assert_eq!(service_account_of(&jwt(legacy)).as_deref(), Some("team-a/op.sa"));
        for hostile in [
            json!({"sub": "system:serviceaccount:ops:\u{1b}[2Jpwned"}),
            json!({"sub": "system:serviceaccount:Ops:x"}),
            json!({"sub": "system:node:worker-1"}),
            json!({"kubernetes.io": {"namespace": "ops\u{202e}", "serviceaccount": {"name": "x"}}}),
            json!({}),
        ] {
            assert_eq!(service_account_of(&jwt(hostile.clone())), None, "{hostile}");
        }
        for not_a_jwt in ["", "opaque-token", "a.!!!.c", "a.e30"] {
            assert_eq!(service_account_of(not_a_jwt), None, "{not_a_jwt}");
        }
    }

    #[test]
    fn kubeconfig_current_context_with_token() {
        let c = one(kubeconfig(json!({"token": "s3cr3t"})), Path::new("/")).unwrap();
        assert_eq!(c.server, "https://10.0.0.1:6443");
        assert_eq!(c.namespace.as_deref(), Some("team-a"));
        assert_eq!(c.ca_pem, CA.as_bytes());
        assert!(c.ca_source.contains("certificate-authority-data of cluster \"c1\""));
        assert!(matches!(&c.auth, Auth::Token(t) if t.expose() == "s3cr3t"));
        assert!(!format!("{c:?}").contains("s3cr3t"), "Debug must redact the token");
    }

    #[test]
    fn kubeconfig_token_file_and_client_cert_paths_are_relative_to_the_file() {
        let dir = std::env::temp_dir().join(format!("opstatus-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tok"), "  tok-from-file\n").unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["u1".to_string()]).unwrap().self_signed(&key).unwrap().pem();
        std::fs::write(dir.join("client.crt"), &cert).unwrap();
        let c = one(kubeconfig(json!({"tokenFile": "tok"})), &dir).unwrap();
        assert!(
            matches!(&c.auth, Auth::TokenFile { initial, path } if initial.expose() == "tok-from-file" && path == &dir.join("tok"))
        );
        let c = one(
            kubeconfig(json!({"client-certificate": "client.crt", "client-key-data": encode_base64(key.serialize_pem().as_bytes())})),
            &dir,
        )
        .unwrap();
        assert!(
            matches!(&c.auth, Auth::ClientCert { cert_pem, key_pem } if cert_pem == cert.as_bytes() && key_pem.expose() == key.serialize_pem())
        );
        // A key that is not the certificate's: refused now, naming the user.
        let other = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let e = one(
            kubeconfig(json!({"client-certificate": "client.crt", "client-key-data": encode_base64(other.as_bytes())})),
            &dir,
        )
        .unwrap_err();
        assert_eq!(e.0, "user \"u1\": the client key does not match the client certificate (their public keys differ)");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kubeconfig_tls_server_name_and_proxy_url_are_kept() {
        let with = |key: &str, value: Value| {
            let mut k = kubeconfig(json!({"token": "s3cr3t"}));
            k["clusters"][0]["cluster"][key] = value;
            one(k, Path::new("/"))
        };
        let c = with("tls-server-name", json!("kubernetes.default.svc")).unwrap();
        let name = |n: &str| Some(ServerName::try_from(n.to_string()).unwrap());
        assert_eq!(c.tls_server_name, name("kubernetes.default.svc"));
        assert_eq!(c.server, "https://10.0.0.1:6443", "the connection stays the server's");
        assert_eq!(with("tls-server-name", json!("10.96.0.1")).unwrap().tls_server_name, name("10.96.0.1"));
        assert_eq!(one(kubeconfig(json!({})), Path::new("/")).unwrap().tls_server_name, None);
        for bad in [json!("not a name!"), json!(""), json!(7)] {
            let e = with("tls-server-name", bad.clone()).unwrap_err();
            assert!(e.0.contains("tls-server-name") && e.0.contains("is not a DNS name or IP address"), "{bad}: {e}");
        }
        let proxy = with("proxy-url", json!("http://user:pw@proxy.example:3128")).unwrap().proxy_url;
        assert_eq!(proxy.as_deref(), Some("http://user:pw@proxy.example:3128"));
        let e = with("proxy-url", json!("socks5://user:pw@proxy.example:1080")).unwrap_err();
        assert_eq!(e.0, "cluster \"c1\" proxy-url is not an http:// proxy URL", "the proxy's URL is not shown");
    }

    #[test]
    fn kubeconfig_errors_name_what_is_wrong() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({}), "no current-context"),
            (json!({"current-context": "gone", "contexts": []}), "context \"gone\" is not defined"),
            (
                {
                    let mut k = kubeconfig(json!({}));
                    k["contexts"][1]["context"]["user"] = json!("ghost");
                    k
                },
                "user \"ghost\" is not defined",
            ),
            (
                {
                    let mut k = kubeconfig(json!({}));
                    k["clusters"][0]["cluster"]["server"] = json!("http://x");
                    k
                },
                "not https://",
            ),
            (
                {
                    let mut k = kubeconfig(json!({}));
                    k["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = json!(true);
                    k
                },
                "always verifies TLS",
            ),
            (
                {
                    let mut k = kubeconfig(json!({}));
                    k["clusters"][0]["cluster"].as_object_mut().unwrap().remove("certificate-authority-data");
                    k
                },
                "no certificate-authority",
            ),
            (
                {
                    let mut k = kubeconfig(json!({}));
                    k["clusters"][0]["cluster"]["certificate-authority-data"] = json!("!!");
                    k
                },
                "not valid base64",
            ),
            (
                {
                    let mut k = kubeconfig(json!({}));
                    k["clusters"][0]["cluster"]["certificate-authority-data"] = json!(encode_base64(b"hello"));
                    k
                },
                "holds no PEM certificate",
            ),
            (kubeconfig(json!({"exec": {"command": "aws"}})), "user \"u1\": its exec plugin's apiVersion \"\""),
            (kubeconfig(json!({"auth-provider": {"name": "gcp"}})), "convert it to an exec plugin"),
            (kubeconfig(json!({"client-certificate-data": encode_base64(b"C")})), "only one of client-certificate"),
            (kubeconfig(json!({"tokenFile": "/nonexistent/tok"})), "cannot read token file /nonexistent/tok"),
            (kubeconfig(json!({"tokenFile": "/dev/zero"})), "token file /dev/zero is a character device"),
            (
                kubeconfig(json!({"client-certificate": "/dev", "client-key": "k"})),
                "client-certificate file /dev is a directory",
            ),
        ];
        for (doc, needle) in cases {
            let e = one(doc, Path::new("/")).unwrap_err();
            assert!(e.0.contains(needle), "{needle:?} not in {e}");
        }
    }

    #[test]
    fn in_cluster_requires_both_variables_and_brackets_ipv6() {
        let dir = std::env::temp_dir().join(format!("opstatus-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), "t0k\n").unwrap();
        std::fs::write(dir.join("ca.crt"), CA).unwrap();
        std::fs::write(dir.join("namespace"), "ops\n").unwrap();
        let c = in_cluster(Some("fd00::1"), Some("443"), &dir).unwrap();
        assert_eq!(c.server, "https://[fd00::1]:443");
        assert_eq!(c.namespace.as_deref(), Some("ops"));
        assert_eq!(in_cluster(Some("10.96.0.1"), Some("443"), &dir).unwrap().server, "https://10.96.0.1:443");
        assert!(in_cluster(Some("10.96.0.1"), None, &dir).unwrap_err().0.contains("must both be set"));
        assert!(in_cluster(Some("h"), Some("http"), &dir).unwrap_err().0.contains("not a port number"));
        std::fs::write(dir.join("token"), " \n").unwrap();
        assert!(in_cluster(Some("h"), Some("1"), &dir).unwrap_err().0.contains("is empty"));
        std::fs::remove_file(dir.join("token")).unwrap();
        let e = in_cluster(Some("h"), Some("1"), &dir).unwrap_err();
        assert!(e.0.starts_with(&format!("cannot read token file {}", dir.join("token").display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
