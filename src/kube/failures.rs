//! What a failed exchange with the API server means: the transport's
//! error in words for the log and the status, named with the server (and,
//! for TLS, the CA its certificate must chain to), and whether the
//! request failed on a kept connection before it can have reached the
//! server (worth one new connection).

use super::KubeError;

pub(crate) fn body_error(server: &str, e: std::io::Error) -> KubeError {
    KubeError::Transport { message: format!("reading the response from {server} failed: {e}") }
}

/// A transport failure, named with the server (and, for TLS, with the
/// CA the certificate must chain to).
pub(crate) fn transport_error(server: &str, ca_source: &str, e: ureq::Error) -> KubeError {
    use std::io::ErrorKind;
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
            _ if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => {
                tls_message(server, ca_source, &io.to_string())
            }
            _ => format!("I/O error talking to {server}: {io}"),
        },
        ureq::Error::Rustls(tls) => tls_message(server, ca_source, &tls.to_string()),
        ureq::Error::ConnectionFailed => format!("could not connect to {server}"),
        ureq::Error::HostNotFound => format!("cannot resolve the host of {server}"),
        ureq::Error::BodyExceedsLimit(limit) => {
            return KubeError::Response { message: format!("the response from {server} is larger than {limit} bytes") };
        }
        other => format!("request to {server} failed: {other}"),
    };
    KubeError::Transport { message }
}

fn tls_message(server: &str, ca_source: &str, detail: &str) -> String {
    format!(
        "TLS with {server} failed: {detail} (the server certificate must chain to the CA in {ca_source} and name \
         this address)"
    )
}

/// Whether `e` says the request failed on a kept connection before it can
/// have reached the server (the transport marks it: its write failed, or
/// the server closed or reset the connection before a byte of the answer),
/// as when a server's idle close crosses the request. Not a timeout: the
/// server may be working on the request. Not a failed connect, TLS
/// verification or an oversized answer: a new connection would not fix
/// those.
pub(crate) fn connection_lost(e: &ureq::Error) -> bool {
    crate::util::transport::unsent(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn only_a_request_that_cannot_have_reached_the_server_is_worth_a_new_connection() {
        // Unmarked by the transport: a fresh connection's failure, or one
        // after the answer began.
        for kind in [ErrorKind::ConnectionReset, ErrorKind::UnexpectedEof, ErrorKind::BrokenPipe] {
            assert!(!connection_lost(&ureq::Error::Io(IoError::from(kind))), "{kind:?}");
        }
        // The server may be working on it: never sent twice.
        for phase in [ureq::Timeout::SendRequest, ureq::Timeout::SendBody, ureq::Timeout::RecvResponse] {
            assert!(!connection_lost(&ureq::Error::Timeout(phase)), "{phase:?}");
        }
        // A new connection fixes none of these.
        assert!(!connection_lost(&ureq::Error::Io(IoError::from(ErrorKind::ConnectionRefused))));
        assert!(!connection_lost(&ureq::Error::Timeout(ureq::Timeout::Connect)));
        assert!(!connection_lost(&ureq::Error::ConnectionFailed));
        assert!(!connection_lost(&ureq::Error::BodyExceedsLimit(1)));
    }
}
