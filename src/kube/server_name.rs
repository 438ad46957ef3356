//! A kubeconfig's `tls-server-name`: the API server's certificate verified
//! against that name instead of the host the client connects to, as
//! client-go does (an API server reached through an IP address, a tunnel
//! or a load balancer its certificate does not name).
//!
//! The verification is rustls's own (the chain to the cluster's CA, the
//! validity period, the signatures); only the name it checks the
//! certificate for is the one the kubeconfig gives. The connection itself
//! (its address, and the SNI the handshake sends) stays the server URL's.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Verifies as rustls's own verifier does (its public parts: the chain to
/// the roots, then the name; the handshake's signatures), for `name`
/// whatever host was connected to. rustls's `WebPkiServerVerifier` would
/// do the same with certificate revocation lists opstatus never gives,
/// at 21 KB more of binary.
#[derive(Debug)]
struct VerifiedAs {
    roots: RootCertStore,
    algorithms: WebPkiSupportedAlgorithms,
    name: ServerName<'static>,
}

impl ServerCertVerifier for VerifiedAs {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _connected_to: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(&cert, &self.roots, intermediates, now, self.algorithms.all)?;
        verify_server_name(&cert, &self.name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
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
    let algorithms = config.crypto_provider().signature_verification_algorithms;
    let mut config = config.clone();
    config.dangerous().set_certificate_verifier(Arc::new(VerifiedAs { roots: store, algorithms, name }));
    Ok(Arc::new(config))
}
