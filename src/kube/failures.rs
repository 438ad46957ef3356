//! What a failed exchange with the API server means: the transport's
//! error in words for the log and the status, named with the server (and,
//! for TLS, the CA its certificate must chain to).

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
