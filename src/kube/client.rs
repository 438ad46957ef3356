//! [`Client`]: requests to one API server over verified TLS.

use super::credentials::{Auth, Credentials, CredentialsError, Secret, pem_certificates, read_token};
use super::error::{KubeError, from_response};
use super::identity::client_identity;
use crate::util::backoff::parse_retry_after;
use crate::util::http::{self, Timeouts};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use ureq::http::HeaderValue;
use ureq::http::header::AUTHORIZATION;
use ureq::tls::{RootCerts, TlsConfig};

/// Bound tokens expire (1 h by default) and kubelet rewrites the file at 80 %
/// of their life: re-reading it every minute never sends an expired token.
pub const TOKEN_RELOAD_INTERVAL: Duration = Duration::from_secs(60);

/// The largest response body read. A ConfigMap holds at most 1 MiB of data;
/// anything much larger is not an answer we asked for.
const MAX_BODY: u64 = 4 * 1024 * 1024;

/// The most of an error answer's body read: a `Status` is far smaller.
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// Each phase of a request is bounded, so the agent's thread is never
/// stuck on one call for longer than their sum (16 s, well under kubelet's
/// default probe failure window of 30 s; the probes are served elsewhere).
const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(3),
    send: Duration::from_secs(3),
    response: Duration::from_secs(5),
    body: Duration::from_secs(5),
};

/// The longest one Kubernetes call can take, whatever the server does: it
/// is sent again once after a 401 (a rotated token), each send bounded by
/// [`TIMEOUTS`] (19 s). For the liveness window.
pub fn call_bound() -> Duration {
    TIMEOUTS.bound() * 2
}

/// A namespaced (or cluster-scoped) object addressed by resource and name.
#[derive(Clone, Copy, Debug)]
pub struct ObjectRef<'a> {
    /// The API path prefix: `/api/v1` or `/apis/GROUP/VERSION`.
    pub api: &'a str,
    /// The plural resource name, e.g. `configmaps`.
    pub resource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

impl ObjectRef<'_> {
    pub fn path(&self) -> String {
        match self.namespace {
            Some(ns) => format!("{}/namespaces/{ns}/{}/{}", self.api, self.resource, self.name),
            None => format!("{}/{}/{}", self.api, self.resource, self.name),
        }
    }

    /// `patch configmaps "x" in namespace "y"`: what an RBAC rule must allow.
    fn action(&self, verb: &str) -> String {
        match self.namespace {
            Some(ns) => format!("{verb} {} {:?} in namespace {ns:?}", self.resource, self.name),
            None => format!("{verb} {} {:?}", self.resource, self.name),
        }
    }
}

/// A bearer token with its `Authorization` header, built once. A bound
/// service-account token is ~1 KB, and validating it into a header on every
/// request was a measurable share of a heartbeat's CPU. The header is marked
/// sensitive, so the HTTP stack never prints it.
struct Bearer {
    token: Secret,
    header: HeaderValue,
}

impl Bearer {
    fn new(token: Secret) -> Result<Bearer, String> {
        let mut header = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| "the token holds characters that cannot be sent in an HTTP header".to_string())?;
        header.set_sensitive(true);
        Ok(Bearer { token, header })
    }
}

enum Token {
    None,
    Static(Bearer),
    File { path: PathBuf, current: Bearer, read_at: Instant },
}

/// A client for one API server. Not `Clone`: it owns the token state.
pub struct Client {
    agent: ureq::Agent,
    server: String,
    ca_source: String,
    token: Token,
}

impl Client {
    /// Builds the client; fails (exit code 2) when the CA or client
    /// certificate cannot be loaded. Makes no request.
    pub fn new(creds: &Credentials) -> Result<Client, CredentialsError> {
        let roots = pem_certificates(&creds.ca_pem, &format!("CA {}", creds.ca_source)).map_err(CredentialsError)?;
        let mut tls = TlsConfig::builder()
            .root_certs(RootCerts::new_with_certs(&roots))
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
        let mut token = Token::None;
        match &creds.auth {
            Auth::Token(t) => token = Token::Static(Bearer::new(t.clone()).map_err(CredentialsError)?),
            Auth::TokenFile { path, initial } => {
                let current = Bearer::new(initial.clone())
                    .map_err(|why| CredentialsError(format!("token file {}: {why}", path.display())))?;
                token = Token::File { path: path.clone(), current, read_at: Instant::now() };
            }
            Auth::ClientCert { cert_pem, key_pem } => {
                let identity = client_identity(cert_pem, key_pem).map_err(CredentialsError)?;
                tls = tls.client_cert(Some(identity));
            }
            Auth::Anonymous => {}
        }
        let agent = http::agent_config(TIMEOUTS).tls_config(tls.build()).https_only(true).build().new_agent();
        Ok(Client { agent, server: creds.server.clone(), ca_source: creds.ca_source.clone(), token })
    }

    /// The API server URL, e.g. `https://10.96.0.1:443`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Server-side apply: creates the object or updates the fields this
    /// field manager owns, in one request, keeping everyone else's fields.
    /// `force` takes over fields another manager set (else that is a 409).
    /// Returns the object as stored.
    pub fn apply(
        &mut self,
        object: &ObjectRef<'_>,
        field_manager: &str,
        force: bool,
        body: &[u8],
    ) -> Result<Vec<u8>, KubeError> {
        let force = if force { "&force=true" } else { "" };
        let url = format!("{}{}?fieldManager={field_manager}{force}", self.server, object.path());
        let request = Request { method: Method::Apply(body), url: &url, action: &object.action("patch") };
        self.send(request, true).map_err(|e| match e {
            // Apply that finds no object creates it, and the API server
            // authorizes that as `create` on the name; RBAC's denial then
            // carries an empty reason ("... is forbidden: ").
            KubeError::Api { code: 403, reason, message, retry_after, grant, .. }
                if message.trim_end().ends_with("is forbidden:") =>
            {
                KubeError::Api {
                    code: 403,
                    reason,
                    message: format!("{} server-side apply must create the missing object", message.trim_end()),
                    action: object.action("create"),
                    retry_after,
                    grant,
                }
            }
            other => other,
        })
    }

    /// GET an object's JSON; `None` when it does not exist (404).
    pub fn get(&mut self, object: &ObjectRef<'_>) -> Result<Option<Vec<u8>>, KubeError> {
        self.get_path(&object.path(), &object.action("get"))
    }

    /// GET any API path (`/version`, a list with a query); `None` on 404.
    /// `action` says what it is for error messages (`list nodes`).
    pub fn get_path(&mut self, path: &str, action: &str) -> Result<Option<Vec<u8>>, KubeError> {
        match self.get_required(path, action) {
            Ok(body) => Ok(Some(body)),
            Err(e) if e.code() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GET an object; a 404 is an error here, so the caller can tell a
    /// missing object from an API that is not served
    /// ([`KubeError::is_missing_object`]).
    pub fn get_required(&mut self, path: &str, action: &str) -> Result<Vec<u8>, KubeError> {
        let url = format!("{}{path}", self.server);
        self.send(Request { method: Method::Get, url: &url, action }, true)
    }

    /// PUT a whole object (an update: the body carries the
    /// `resourceVersion` it was read at, so a concurrent change is a 409,
    /// never silently overwritten). The stored object it answers with is
    /// read (bounded) and dropped: it is as large as what was sent.
    pub fn put(&mut self, path: &str, body: &[u8], action: &str) -> Result<(), KubeError> {
        let url = format!("{}{path}", self.server);
        self.send(Request { method: Method::Put(body), url: &url, action }, false).map(drop)
    }

    /// POST a new object to a collection path. Returns the stored object.
    pub fn create(&mut self, path: &str, body: &[u8], action: &str) -> Result<Vec<u8>, KubeError> {
        let url = format!("{}{path}", self.server);
        self.send(Request { method: Method::Post(body), url: &url, action }, true)
    }

    /// `want_body` false: a success's body is drained (bounded, so the
    /// connection can be reused) and dropped.
    fn send(&mut self, request: Request<'_>, want_body: bool) -> Result<Vec<u8>, KubeError> {
        self.refresh_token_if_due();
        let first = self.send_once(&request, want_body);
        match first {
            // A rotated token answers 401 until we read the new one: read it
            // at once and retry once if it changed.
            Err(e) if e.code() == Some(401) && self.reload_token() => self.send_once(&request, want_body),
            other => other,
        }
    }

    fn send_once(&self, request: &Request<'_>, want_body: bool) -> Result<Vec<u8>, KubeError> {
        let authorization = match &self.token {
            Token::None => None,
            Token::Static(b) | Token::File { current: b, .. } => Some(b.header.clone()),
        };
        let result = match request.method {
            Method::Get => {
                let mut r = self.agent.get(request.url).header("Accept", "application/json");
                if let Some(a) = &authorization {
                    r = r.header(AUTHORIZATION, a.clone());
                }
                r.call()
            }
            Method::Apply(body) | Method::Put(body) | Method::Post(body) => {
                let (builder, content_type) = match request.method {
                    Method::Apply(_) => (self.agent.patch(request.url), "application/apply-patch+yaml"),
                    Method::Put(_) => (self.agent.put(request.url), "application/json"),
                    _ => (self.agent.post(request.url), "application/json"),
                };
                let mut r = builder.header("Accept", "application/json").header("Content-Type", content_type);
                if let Some(a) = &authorization {
                    r = r.header(AUTHORIZATION, a.clone());
                }
                r.send(body)
            }
        };
        let mut response = result.map_err(|e| self.transport_error(e))?;
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let body = response.body_mut();
        if (200..300).contains(&code) && !want_body {
            // Drain (bounded) so the connection can be reused, keeping nothing.
            let mut reader = body.with_config().limit(MAX_BODY).reader();
            std::io::copy(&mut reader.by_ref().take(MAX_BODY), &mut std::io::sink()).map_err(|e| self.body_error(e))?;
            return Ok(Vec::new());
        }
        if !(200..300).contains(&code) {
            // A `Status` is a few hundred bytes: the head of a larger error
            // body is all the message needs, so a huge one costs no memory.
            let mut head = Vec::new();
            let mut reader = body.with_config().limit(MAX_BODY).reader();
            reader.by_ref().take(MAX_ERROR_BODY).read_to_end(&mut head).map_err(|e| self.body_error(e))?;
            return Err(from_response(code, &head, request.action, retry_after));
        }
        body.with_config().limit(MAX_BODY).read_to_vec().map_err(|e| self.transport_error(e))
    }

    fn refresh_token_if_due(&mut self) {
        if let Token::File { read_at, .. } = &self.token
            && read_at.elapsed() >= TOKEN_RELOAD_INTERVAL
        {
            self.reload_token();
        }
    }

    /// Re-reads the token file; true when the token changed. A failed read
    /// keeps the old token: kubelet may be mid-rewrite.
    fn reload_token(&mut self) -> bool {
        let Token::File { path, current, read_at } = &mut self.token else {
            return false;
        };
        *read_at = Instant::now();
        match read_token(path)
            .map_err(|e| e.to_string())
            .and_then(|fresh| if fresh == current.token { Ok(None) } else { Bearer::new(fresh).map(Some) })
        {
            Ok(Some(fresh)) => {
                *current = fresh;
                log::info!("Reloaded the changed token from {}", path.display());
                true
            }
            Ok(None) => false,
            Err(e) => {
                log::warn!("Keeping the previous token: {e}");
                false
            }
        }
    }

    fn body_error(&self, e: std::io::Error) -> KubeError {
        KubeError::Transport { message: format!("reading the response from {} failed: {e}", self.server) }
    }

    fn transport_error(&self, e: ureq::Error) -> KubeError {
        use std::io::ErrorKind;
        let server = &self.server;
        let message = match e {
            ureq::Error::Timeout(phase) => format!("timed out ({phase}) talking to {server}"),
            ureq::Error::Io(io) => match io.kind() {
                ErrorKind::ConnectionRefused => format!("connection refused by {server}"),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::UnexpectedEof => {
                    format!("connection to {server} closed unexpectedly ({io})")
                }
                ErrorKind::TimedOut | ErrorKind::WouldBlock => {
                    format!("timed out talking to {server}")
                }
                _ if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => self.tls_message(&io.to_string()),
                _ => format!("I/O error talking to {server}: {io}"),
            },
            ureq::Error::Rustls(tls) => self.tls_message(&tls.to_string()),
            ureq::Error::ConnectionFailed => format!("could not connect to {server}"),
            ureq::Error::HostNotFound => format!("cannot resolve the host of {server}"),
            ureq::Error::BodyExceedsLimit(limit) => {
                return KubeError::Response {
                    message: format!("the response from {server} is larger than {limit} bytes"),
                };
            }
            other => format!("request to {server} failed: {other}"),
        };
        KubeError::Transport { message }
    }

    fn tls_message(&self, detail: &str) -> String {
        format!(
            "TLS with {} failed: {detail} (the server certificate must chain to the CA in {} and name this address)",
            self.server, self.ca_source
        )
    }
}

struct Request<'a> {
    method: Method<'a>,
    url: &'a str,
    action: &'a str,
}

enum Method<'a> {
    Get,
    /// Server-side apply (`PATCH`, `application/apply-patch+yaml`).
    Apply(&'a [u8]),
    Put(&'a [u8]),
    Post(&'a [u8]),
}
