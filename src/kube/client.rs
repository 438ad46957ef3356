//! [`Client`]: requests to one API server over verified TLS.

use super::MAX_BODY;
use super::credentials::{Auth, Credentials, pem_certificates};
use super::error::{KubeError, from_response};
use super::failures::{body_error, transport_error};
use super::identity::client_identity;
use super::object_ref::ObjectRef;
use super::token::Token;
pub(super) use super::watch_stream::WatchStream;
use crate::util::backoff::parse_retry_after;
use crate::util::config_error::ConfigError;
use crate::util::http::{self, FRESH_FOR, Opened, Timeouts, closed_before_answer};
use crate::util::tls::{Tls, tls_config};
use std::io::Read;
use std::time::{Duration, SystemTime};
use ureq::http::HeaderValue;
use ureq::http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const APPLY_PATCH: HeaderValue = HeaderValue::from_static("application/apply-patch+yaml");
const MERGE_PATCH: HeaderValue = HeaderValue::from_static("application/merge-patch+json");

/// The first buffer for an answer of unknown length (chunked): a status
/// write's answer and a page of a list fit in it or grow it a few times.
const UNSIZED_BODY: usize = 16 * 1024;

/// The most of an error answer's body read: a `Status` is far smaller.
const MAX_ERROR_BODY: u64 = 64 * 1024;

/// Each phase of a request is bounded, so one send never takes longer
/// than [`Timeouts::bound`] (19 s: the send phase counts twice) and one
/// call never longer than [`call_bound`]. kubelet's probes are answered by
/// the endpoint's own thread meanwhile, so no bound here must fit their
/// window; the liveness window allows for the worst tick.
const TIMEOUTS: Timeouts = Timeouts {
    connect: Duration::from_secs(3),
    send: Duration::from_secs(3),
    response: Duration::from_secs(5),
    body: Duration::from_secs(5),
};

/// The longest one Kubernetes call can take, whatever the server does: it
/// is sent again once after a 401 (a rotated token), and each of the two
/// may be sent again once on a new connection when the connection closed
/// before an answer; each send bounded by [`TIMEOUTS`] (19 s; the server's
/// name, from a kubeconfig, is looked up by the system's resolver, as
/// kubectl does: in a cluster it is an IP address). For the liveness window.
pub(crate) fn call_bound() -> Duration {
    TIMEOUTS.bound() * 4
}

/// How much longer than the heartbeat interval a kept connection may idle
/// in the pool: the next heartbeat is due an interval after the last write
/// finished, and the checks before it take a few seconds at most.
const KEEP_ALIVE_MARGIN: Duration = Duration::from_secs(30);

/// How long a client that calls at least once every `heartbeat` keeps its
/// idle connection, so that no heartbeat pays a TLS handshake.
pub(super) fn keep_alive_for(heartbeat: Duration) -> Duration {
    heartbeat + KEEP_ALIVE_MARGIN
}

/// A client for one API server. Not `Clone`: it owns the token state.
pub struct Client {
    pub(super) agent: ureq::Agent,
    /// The connections `agent` opened.
    opened: Opened,
    /// TLS verified against the cluster's CA (and the kubeconfig's
    /// `tls-server-name`), shared with [`Client::sibling`]s.
    tls: Tls,
    server: String,
    ca_source: String,
    token: Token,
}

impl Client {
    /// A client for one-shot commands: see [`Client::kept_alive`].
    pub fn new(creds: &Credentials) -> Result<Client, ConfigError> {
        Self::kept_alive(creds, None)
    }

    /// Builds the client; fails (exit code 2) when the CA or client
    /// certificate cannot be loaded. Makes no request. The client of a loop
    /// that calls at least once every `heartbeat` keeps its connection (and
    /// TLS session) from one heartbeat to the next; without one, an idle
    /// connection is kept for ureq's default 15 s.
    pub fn kept_alive(creds: &Credentials, heartbeat: Option<Duration>) -> Result<Client, ConfigError> {
        let roots = pem_certificates(&creds.ca_pem, &format!("CA {}", creds.ca_source)).map_err(ConfigError)?;
        let mut identity = None;
        let token = Token::of(&creds.auth)?;
        if let Auth::ClientCert { cert_pem, key_pem } = &creds.auth {
            let chain = pem_certificates(cert_pem, "the client certificate").map_err(ConfigError)?;
            identity = Some(client_identity(&chain, key_pem.expose().as_bytes()).map_err(ConfigError)?);
        }
        let config = tls_config(&roots, identity)
            .map_err(|why| ConfigError(format!("TLS with CA {}: {why}", creds.ca_source)))?;
        let tls = Tls { config, server_name: creds.tls_server_name.clone() };
        // The kubeconfig cluster's `proxy-url`, never the environment's.
        let proxy = creds.proxy_url.as_deref().map(crate::util::proxy::parse).transpose().map_err(ConfigError)?;
        let mut agent_config = http::agent_config(TIMEOUTS).https_only(true).proxy(proxy);
        if let Some(idle) = heartbeat.map(keep_alive_for) {
            agent_config = http::kept_alive(agent_config, idle);
        }
        let (agent, opened) = http::agent(agent_config.build(), Some(tls.clone()));
        Ok(Client { agent, opened, tls, server: creds.server.clone(), ca_source: creds.ca_source.clone(), token })
    }

    /// A client for another thread: the same server, TLS and credentials
    /// (a token file is re-read by each client on its own schedule, so a
    /// rotation reaches both) and proxy, with a connection pool of its
    /// own, so a long-lived watch never takes the connection the heartbeat
    /// keeps.
    pub fn sibling(&self) -> Client {
        let (agent, opened) = http::agent(self.agent.config().clone(), Some(self.tls.clone()));
        Client {
            agent,
            opened,
            tls: self.tls.clone(),
            server: self.server.clone(),
            ca_source: self.ca_source.clone(),
            token: self.token.clone(),
        }
    }

    /// Starts a watch (`path` carries `watch=1` and its `timeoutSeconds`):
    /// its events are read line by line from the stream returned, for at
    /// most `lasting` (longer than the server's `timeoutSeconds`, so the
    /// server ends it; the bound catches a server that went silent). An
    /// error status (a 410 Gone among them) is a [`KubeError::Api`].
    pub fn watch(&mut self, path: &str, action: &str, lasting: Duration) -> Result<WatchStream, KubeError> {
        self.authorized(|c| c.open_stream(path, action, TIMEOUTS.response, lasting))
    }

    /// A GET whose answer is parsed as it arrives
    /// ([`WatchStream::next_value`]) instead of buffered: a list whose
    /// items may be large, of which little is kept. Bounded as any call.
    pub(crate) fn get_stream(&mut self, path: &str, action: &str) -> Result<WatchStream, KubeError> {
        self.watch(path, action, TIMEOUTS.body)
    }

    /// A GET whose answer may take up to `within` to begin and as long
    /// again to arrive, parsed as it arrives
    /// ([`WatchStream::read_parts`]): a list of any size, which the API
    /// server writes only once it encoded the whole of it.
    pub(crate) fn get_stream_within(
        &mut self,
        path: &str,
        action: &str,
        within: Duration,
    ) -> Result<WatchStream, KubeError> {
        self.authorized(|c| c.open_stream(path, action, within, within))
    }

    /// Calls `call` with a token re-read when due, and once more when it
    /// answers 401 and the token, read again at once, changed: a rotated
    /// token answers 401 until the new one is read.
    fn authorized<T>(&mut self, call: impl Fn(&mut Client) -> Result<T, KubeError>) -> Result<T, KubeError> {
        self.token.refresh_if_due();
        match call(self) {
            Err(e) if e.code() == Some(401) && self.token.reload() => call(self),
            other => other,
        }
    }

    /// Opens an answer that is read as a stream: its head within
    /// `response`, its body within `lasting` after that.
    fn open_stream(
        &mut self,
        path: &str,
        action: &str,
        response: Duration,
        lasting: Duration,
    ) -> Result<WatchStream, KubeError> {
        let url = format!("{}{path}", self.server);
        // A watch is not sent again when its connection turns out closed:
        // like a POST, it never takes one that idled long.
        let config =
            self.agent.get(&url).config().timeout_recv_response(Some(response)).timeout_recv_body(Some(lasting));
        let request = self.with_headers(config.max_idle_age(FRESH_FOR).build());
        let response = request.call().map_err(|e| transport_error(&self.server, &self.ca_source, e))?;
        let code = response.status().as_u16();
        let mut body = response.into_body();
        if !(200..300).contains(&code) {
            return Err(self.error_answer(&mut body, code, action, None));
        }
        let reader = body.into_with_config().limit(u64::MAX).reader();
        Ok(WatchStream::new(reader, &self.server))
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
        let path = format!("{}?fieldManager={field_manager}{force}", object.path());
        self.send(Method::Apply(body), &path, &object.action("patch"), true).map_err(|e| match e {
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
        self.send(Method::Get, path, action, true)
    }

    /// PUT a whole object (an update: the body carries the
    /// `resourceVersion` it was read at, so a concurrent change is a 409,
    /// never silently overwritten). The stored object it answers with is
    /// read (bounded) and dropped: it is as large as what was sent.
    pub fn put(&mut self, path: &str, body: &[u8], action: &str) -> Result<(), KubeError> {
        self.send(Method::Put(body), path, action, false).map(drop)
    }

    /// JSON merge patch (`application/merge-patch+json`) of an existing
    /// object: a 404 when it is gone. The stored object it answers with is
    /// drained and dropped.
    pub fn merge_patch(&mut self, path: &str, body: &[u8], action: &str) -> Result<(), KubeError> {
        self.send(Method::MergePatch(body), path, action, false).map(drop)
    }

    /// POST a new object to a collection path. Returns the stored object.
    pub fn create(&mut self, path: &str, body: &[u8], action: &str) -> Result<Vec<u8>, KubeError> {
        self.send(Method::Post(body), path, action, true)
    }

    /// Sends `method` to `path`; `want_body` false: a success's body is
    /// drained (bounded, so the connection can be reused) and dropped.
    /// Sent again, once, on a new connection when the kept connection it
    /// went out on closed or was reset before a byte of the answer (a
    /// server's idle close crossing the request): ureq does not retry. A
    /// timeout is never resent: the server may be working on the request,
    /// and a second one would double the write on a server already slow.
    /// Only requests that do no harm twice are sent again: reads,
    /// server-side apply (declarative: the same apply twice is the same
    /// object; one with a `resourceVersion` precondition is a 409 the
    /// second time, never a double write), a PUT (it carries its
    /// `resourceVersion`) and a merge patch of absolute values (an event's
    /// `count`); never a POST.
    fn send(&mut self, method: Method<'_>, path: &str, action: &str, want_body: bool) -> Result<Vec<u8>, KubeError> {
        let url = format!("{}{path}", self.server);
        self.authorized(|c| match c.exchange(&method, &url, action, want_body) {
            Err((error, true)) if method.safe_to_repeat() => {
                log::debug!(
                    "The kept connection was closed under the request ({error}); sending it again on a new one"
                );
                c.exchange(&method, &url, action, want_body).map_err(|(e, _)| e)
            }
            other => other.map_err(|(e, _)| e),
        })
    }

    /// The headers every request carries besides ureq's own (`Host`,
    /// `User-Agent`). The `Authorization` value is the current token's,
    /// checked when the token was read ([`Token::header`]).
    fn with_headers<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        let request = request.header(ACCEPT, JSON);
        match &self.token.header {
            Some(token) => request.header(AUTHORIZATION, token.clone()),
            None => request,
        }
    }

    /// Sends once; a failure says whether the connection closed before
    /// the answer.
    fn exchange(&mut self, method: &Method<'_>, url: &str, action: &str, want_body: bool) -> Result<Vec<u8>, Failed> {
        let opened = self.opened.count();
        let result = match *method {
            Method::Get => self.with_headers(self.agent.get(url)).call(),
            Method::Apply(body) | Method::MergePatch(body) | Method::Put(body) | Method::Post(body) => {
                let (builder, content_type) = match method {
                    Method::Apply(_) => (self.agent.patch(url), APPLY_PATCH),
                    Method::MergePatch(_) => (self.agent.patch(url), MERGE_PATCH),
                    Method::Put(_) => (self.agent.put(url), JSON),
                    // Sent at most once (see `send`): never on a
                    // connection that idled long enough for the server to
                    // have closed it without a word (a middlebox).
                    _ => (self.agent.post(url).config().max_idle_age(FRESH_FOR).build(), JSON),
                };
                self.with_headers(builder).header(CONTENT_TYPE, content_type).send(body)
            }
        };
        let mut response = result.map_err(|e| {
            let closed = closed_before_answer(&e, opened, self.opened.count());
            (transport_error(&self.server, &self.ca_source, e), closed)
        })?;
        let code = response.status().as_u16();
        if !(200..300).contains(&code) {
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            return Err((self.error_answer(response.body_mut(), code, action, retry_after), false));
        }
        let body = response.body_mut();
        if !want_body {
            // Drain (bounded) so the connection can be reused, keeping nothing.
            let mut reader = body.with_config().limit(MAX_BODY).reader();
            std::io::copy(&mut reader.by_ref().take(MAX_BODY), &mut std::io::sink())
                .map_err(|e| (body_error(&self.server, e), false))?;
            return Ok(Vec::new());
        }
        // Sized once from Content-Length (one byte over the limit, so a
        // longer body fails without growing the buffer): a buffer that
        // doubles as it fills is copied at each step, and the allocator
        // keeps the old copies (a 4 MiB body cost ~12 MiB of RSS that way).
        let capacity = body.content_length().map_or(UNSIZED_BODY, |n| n.min(MAX_BODY + 1) as usize);
        let mut buffer = Vec::with_capacity(capacity);
        let mut reader = body.with_config().limit(MAX_BODY).reader();
        match reader.read_to_end(&mut buffer) {
            Ok(_) => Ok(buffer),
            Err(e) => Err((transport_error(&self.server, &self.ca_source, e.into()), false)),
        }
    }

    /// The error an answer with a non-2xx `code` stands for. A `Status` is
    /// a few hundred bytes: the head of a larger error body is all the
    /// message needs, so a huge one costs no memory.
    fn error_answer(&self, body: &mut ureq::Body, code: u16, action: &str, retry_after: Option<Duration>) -> KubeError {
        let mut head = Vec::new();
        let mut reader = body.with_config().limit(MAX_BODY).reader();
        match reader.by_ref().take(MAX_ERROR_BODY).read_to_end(&mut head) {
            Ok(_) => from_response(code, &head, action, retry_after),
            Err(e) => body_error(&self.server, e),
        }
    }
}

/// A request's method, with its body.
enum Method<'a> {
    Get,
    /// Server-side apply (`PATCH`, `application/apply-patch+yaml`).
    Apply(&'a [u8]),
    /// A JSON merge patch: fields set to absolute values, so sending it
    /// twice is the same as once.
    MergePatch(&'a [u8]),
    Put(&'a [u8]),
    Post(&'a [u8]),
}

impl Method<'_> {
    /// Whether sending it twice does no harm (see `send`).
    fn safe_to_repeat(&self) -> bool {
        !matches!(self, Method::Post(_))
    }
}

/// A failed attempt, and whether its connection closed before the answer.
type Failed = (KubeError, bool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_is_never_sent_twice() {
        assert!(!Method::Post(b"{}").safe_to_repeat());
        assert!(
            Method::Get.safe_to_repeat()
                && Method::Apply(b"{}").safe_to_repeat()
                && Method::MergePatch(b"{}").safe_to_repeat()
                && Method::Put(b"{}").safe_to_repeat()
        );
    }

    #[test]
    fn a_connection_is_kept_past_the_longest_gap_between_heartbeats() {
        assert_eq!(keep_alive_for(Duration::from_secs(60)), Duration::from_secs(90));
        assert_eq!(keep_alive_for(crate::status::MAX_INTERVAL), Duration::from_secs(270));
        // Longer than ureq's own 15 s, which the one-shot commands keep.
        assert!(keep_alive_for(crate::status::MIN_INTERVAL) > Duration::from_secs(15));
    }
}
