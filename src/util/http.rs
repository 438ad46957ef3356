//! What every outgoing HTTP client of opstatus shares: the Kubernetes API
//! client, the kube9-server client and the operator health checks, each a
//! ureq agent on ureq's own transport (its CONNECT-proxy and TCP
//! connectors, then [`Tls`] for `https://`).

use super::tls::Tls;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use ureq::config::{Config, ConfigBuilder};
use ureq::http::HeaderValue;
use ureq::typestate::AgentScope;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{ConnectProxyConnector, ConnectionDetails, Connector, TcpConnector, Transport};

/// How long each phase of a call may take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub connect: Duration,
    pub send: Duration,
    pub response: Duration,
    pub body: Duration,
}

impl Timeouts {
    /// The longest a call can take, whatever the server does.
    pub(crate) fn bound(&self) -> Duration {
        self.connect + self.send * 2 + self.response + self.body
    }
}

/// What every request of opstatus says it comes from.
pub(crate) const USER_AGENT: &str = concat!("opstatus/", env!("CARGO_PKG_VERSION"));

/// The `Authorization` value `Bearer TOKEN`, checked when the token is read
/// and marked sensitive (it prints as `Sensitive`); `None` when the token
/// holds a byte a header value must not carry: a line break (which would
/// end the line and start another), any other control character, anything
/// not ASCII.
pub(crate) fn bearer(token: &str) -> Option<HeaderValue> {
    let sendable = |b: &u8| *b == b'\t' || (b' '..=b'~').contains(b);
    if !token.as_bytes().iter().all(sendable) {
        return None;
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Requests are ~1.5 KB and bodies stream through; ureq's 128 KiB buffers
/// cost RSS (2.2 → 1.8 MiB steady) and buy nothing here. Also the cap on a
/// response's headers (Kubernetes sends a few hundred bytes).
const IO_BUFFER: usize = 16 * 1024;

/// A ureq configuration with:
/// - status codes as values, so error bodies (`Status` JSON) can be read;
/// - no proxy unless the client names one (`super::proxy` says which);
/// - no redirects: nothing opstatus calls redirects, and following one
///   could carry credentials elsewhere;
/// - per-phase timeouts only: a global or per-call timeout makes ureq spawn
///   a thread per request;
/// - opstatus's User-Agent and small buffers.
pub(crate) fn agent_config(t: Timeouts) -> ConfigBuilder<AgentScope> {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .max_redirects(0)
        .user_agent(USER_AGENT)
        .timeout_connect(Some(t.connect))
        .timeout_send_request(Some(t.send))
        .timeout_send_body(Some(t.send))
        .timeout_recv_response(Some(t.response))
        .timeout_recv_body(Some(t.body))
        .input_buffer_size(IO_BUFFER)
        .output_buffer_size(IO_BUFFER)
        .max_response_header_size(IO_BUFFER)
}

/// How long a kept connection counts as fresh for a request that must not
/// be sent twice (a POST, a watch): one idle longer is not taken for it. A
/// connection the server closed is seen when it is taken (ureq's probe),
/// but a middlebox that forgot an idle flow says nothing; servers and
/// middleboxes forget idle connections after tens of seconds, not a few.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(5);

/// Keeps an idle connection in ureq's pool for `idle` (ureq's default is
/// 15 s) instead of paying a TLS handshake on the next call, for a client
/// that calls one server one request at a time: one idle connection is all
/// it ever has to keep.
///
/// ureq probes a kept connection when it is taken again: anything the
/// server sent since its answer (a stray second response, its close, a
/// reset) means it is dropped, never read as the next request's answer. A
/// close that crosses the request fails it before its answer
/// ([`closed_before_answer`]): ureq does not retry, so the Kubernetes
/// client and the health checks send such a request once more on a new
/// connection when it does no harm twice (reads, apply, update, merge
/// patch), and send the rest (a POST, a watch) only on a connection used
/// less than [`FRESH_FOR`] ago.
pub(crate) fn kept_alive(config: ConfigBuilder<AgentScope>, idle: Duration) -> ConfigBuilder<AgentScope> {
    config.max_idle_age(idle).max_idle_connections(1).max_idle_connections_per_host(1)
}

/// An agent on ureq's transport with `config`: through the proxy the
/// configuration names, if any, then TCP, then `tls` for an `https://` URL
/// (without it, such a URL fails); and the count of connections it opens.
pub(crate) fn agent(config: Config, tls: Option<Tls>) -> (ureq::Agent, Opened) {
    let opened = Opened::default();
    let tcp = ().chain(ConnectProxyConnector::default()).chain(TcpConnector::default());
    let agent = match tls {
        Some(tls) => ureq::Agent::with_parts(config, tcp.chain(tls).chain(opened.clone()), DefaultResolver::default()),
        None => ureq::Agent::with_parts(config, tcp.chain(opened.clone()), DefaultResolver::default()),
    };
    (agent, opened)
}

/// How many connections an agent opened: a call during which it opened
/// none went out on a connection kept from an earlier one.
#[derive(Clone, Debug, Default)]
pub(crate) struct Opened(Arc<AtomicUsize>);

impl Opened {
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

impl<In: Transport> Connector<In> for Opened {
    type Out = In;

    fn connect(&self, _: &ConnectionDetails, opened: Option<In>) -> Result<Option<In>, ureq::Error> {
        self.0.fetch_add(usize::from(opened.is_some()), Ordering::Relaxed);
        Ok(opened)
    }
}

/// Whether a call that went out on a kept connection (`opened` did not
/// change during it) failed because the connection closed or was reset
/// before any of its answer arrived: the server's idle close crossing the
/// request, which cannot have reached the server. Never a timeout (the
/// server may be working on the request), a refused connection, a TLS
/// error, nor a close on a new connection (the server's answer, as an
/// operator whose process exits under the check).
pub(crate) fn closed_before_answer(e: &ureq::Error, opened: usize, after: usize) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    opened == after
        && matches!(e, ureq::Error::Io(io) if matches!(io.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_kept_connection_closed_before_the_answer_is_worth_a_new_one() {
        use std::io::{Error as IoError, ErrorKind};
        for kind in [ErrorKind::ConnectionReset, ErrorKind::UnexpectedEof, ErrorKind::BrokenPipe] {
            assert!(closed_before_answer(&ureq::Error::Io(IoError::from(kind)), 1, 1), "{kind:?}");
            assert!(!closed_before_answer(&ureq::Error::Io(IoError::from(kind)), 1, 2), "{kind:?} on a new connection");
        }
        // The server may be working on it: never sent twice.
        for phase in [ureq::Timeout::SendRequest, ureq::Timeout::SendBody, ureq::Timeout::RecvResponse] {
            assert!(!closed_before_answer(&ureq::Error::Timeout(phase), 1, 1), "{phase:?}");
        }
        // A new connection fixes none of these.
        assert!(!closed_before_answer(&ureq::Error::Io(IoError::from(ErrorKind::ConnectionRefused)), 1, 1));
        assert!(!closed_before_answer(&ureq::Error::Io(IoError::new(ErrorKind::InvalidData, "bad certificate")), 1, 1));
        assert!(!closed_before_answer(&ureq::Error::ConnectionFailed, 1, 1));
        assert!(!closed_before_answer(&ureq::Error::BodyExceedsLimit(1), 1, 1));
    }

    #[test]
    fn a_token_that_would_break_the_head_makes_no_header_and_none_prints() {
        for bad in ["a\r\nX-Injected: 1", "a\nb", "a\rb", "nul\0", "caf\u{e9}", "del\u{7f}"] {
            assert_eq!(bearer(bad), None, "{bad:?}");
        }
        let header = bearer("secret-token\twith tab").unwrap();
        assert_eq!(header.as_bytes(), b"Bearer secret-token\twith tab");
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("secret-token"), "{header:?}");
    }
}
