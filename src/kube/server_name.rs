//! A kubeconfig's `tls-server-name`: the API server's certificate verified
//! against that name instead of the host the client connects to, as
//! client-go does (an API server reached through an IP address, a tunnel
//! or a load balancer its certificate does not name).
//!
//! The verification is rustls's own (the chain to the cluster's CA, the
//! validity period, the signatures); only the name it checks the
//! certificate for is the one the kubeconfig gives. The connection itself
//! (its address, and the SNI the handshake sends) stays the server URL's.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Verifies as rustls does, for `name` whatever host was connected to.
#[derive(Debug)]
struct VerifiedAs {
    verifier: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for VerifiedAs {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _connected_to: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier.verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier.supported_verify_schemes()
    }
}

/// `config` (built for `roots`) with its server certificates verified
/// against `name`.
pub(crate) fn verified_as(
    config: &ClientConfig,
    roots: &[ureq::tls::Certificate<'static>],
    name: &str,
) -> Result<Arc<ClientConfig>, String> {
    let name = ServerName::try_from(name.to_string()).map_err(|_| format!("{name:?} is not a TLS server name"))?;
    let mut store = RootCertStore::empty();
    store.add_parsable_certificates(roots.iter().map(|c| CertificateDer::from(c.der())));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider).build().map_err(|e| e.to_string())?;
    let mut config = config.clone();
    config.dangerous().set_certificate_verifier(Arc::new(VerifiedAs { verifier, name }));
    Ok(Arc::new(config))
}
