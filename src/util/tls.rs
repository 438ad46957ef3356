//! TLS for the connections under ureq: rustls with opstatus's own client
//! configuration (the roots a server's certificate must chain to, always
//! verified; the client certificate, checked at start) and, when given, the
//! name the certificate is verified against instead of the URL's host (a
//! kubeconfig's `tls-server-name`, as in client-go).
//!
//! ureq's own rustls connector builds its configuration from ureq's
//! `TlsConfig`, which has no server name of its own; [`Tls`] is that
//! connector over a configuration built here, plugged in after ureq's TCP
//! and CONNECT-proxy connectors through `ureq::unversioned::transport`
//! (outside ureq's semver promise: the version is pinned in Cargo.toml).

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::sync::Arc;
use ureq::Error;
use ureq::unversioned::transport::time::{Duration, Instant};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport, TransportAdapter,
};

/// The TLS client configuration: the roots a server's certificate must
/// chain to, and the client certificate (chain and key, checked at start)
/// when the user authenticates with one.
pub(crate) fn tls_config(
    roots: &[ureq::tls::Certificate<'static>],
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<Arc<ClientConfig>, String> {
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(roots.iter().map(|c| CertificateDer::from(c.der())));
    if added == 0 {
        return Err("none of the CA certificates can be parsed as X.509".into());
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| e.to_string())?
        .with_root_certificates(store);
    let config = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Wraps the connection ureq's TCP (or CONNECT-proxy) connector opened in
/// TLS for an `https://` URL; an `http://` one passes as it is.
#[derive(Clone, Debug)]
pub(crate) struct Tls {
    pub config: Arc<ClientConfig>,
    /// Verified against instead of the URL's host, when given.
    pub server_name: Option<ServerName<'static>>,
}

impl<In: Transport> Connector<In> for Tls {
    type Out = Either<In, TlsTransport>;

    fn connect(&self, details: &ConnectionDetails, chained: Option<In>) -> Result<Option<Self::Out>, Error> {
        let Some(transport) = chained else { return Ok(None) };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => {
                let host = details.uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
                ServerName::try_from(host.to_string())
                    .map_err(|_| Error::Tls("the server's host is not a valid TLS server name"))?
            }
        };
        let mut tls = ClientConnection::new(self.config.clone(), name)?;
        let mut socket = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        // The handshake within what is left of the connect phase.
        let mut left = details.timeout;
        if let (Duration::Exact(phase), Instant::Exact(started)) = (left.after, details.now) {
            left.after = Duration::Exact(phase.saturating_sub(started.elapsed()));
        }
        socket.set_timeout(left);
        tls.complete_io(&mut socket)?;
        let buffers = LazyBuffers::new(details.config.input_buffer_size(), details.config.output_buffer_size());
        Ok(Some(Either::B(TlsTransport { buffers, stream: StreamOwned::new(tls, socket) })))
    }
}

/// One TLS connection, as ureq's own rustls transport.
pub(crate) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsTransport")
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.stream.get_mut().set_timeout(timeout);
        self.stream.write_all(&self.buffers.output()[..amount])?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.stream.get_mut().set_timeout(timeout);
        let read = self.stream.read(self.buffers.input_append_buf())?;
        self.buffers.input_appended(read);
        Ok(read > 0)
    }

    /// Whether the connection can carry the next request: the TCP
    /// connection's own probe (nothing arrived since the answer: no stray
    /// bytes, no close).
    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}
