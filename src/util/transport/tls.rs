//! The TLS client configuration of the connections under ureq: the roots
//! a server's certificate must chain to (always verified) and the client
//! certificate, with rustls on ring.

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use std::sync::Arc;

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
