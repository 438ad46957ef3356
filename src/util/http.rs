//! What every outgoing HTTP client of opstatus shares: the Kubernetes API
//! client, the kube9-server client and the operator health checks.

use std::time::Duration;
use ureq::config::ConfigBuilder;
use ureq::http::HeaderValue;
use ureq::typestate::AgentScope;

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
/// - no proxy from the environment: an `HTTPS_PROXY` set for the operator
///   must not capture the sidecar's traffic by surprise;
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

/// Keeps an idle connection in ureq's pool for `idle` (ureq's default is
/// 15 s) instead of paying a TLS handshake on the next call, for a client
/// that calls one server one request at a time: one idle connection is all
/// it ever has to keep.
///
/// The transport tells with one system call whether a kept connection
/// can take the next request (nothing arrived on it since its answer: no
/// stray bytes, no close). A close that crosses the request surfaces on
/// it: ureq does not retry, so the Kubernetes client sends the request
/// once more on a new connection when it cannot have reached the server
/// and may be sent twice (reads, apply, update, merge patch), and sends
/// the rest (a POST, a watch) only on a connection used less than
/// [`FRESH_FOR`] ago.
///
/// [`FRESH_FOR`]: crate::util::transport::FRESH_FOR
pub(crate) fn kept_alive(config: ConfigBuilder<AgentScope>, idle: Duration) -> ConfigBuilder<AgentScope> {
    config.max_idle_age(idle).max_idle_connections(1).max_idle_connections_per_host(1)
}

#[cfg(test)]
mod tests {
    use super::*;

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
