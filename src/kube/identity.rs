//! A client certificate and its key, checked before they are used.
//!
//! rustls refuses a bad pair when the TLS configuration is built, with an
//! error that names no cause an admin can act on. [`client_identity`] runs
//! the very check rustls runs (`CertifiedKey::from_der` with the ring provider: the key parses, is
//! a kind ring signs with, and matches the certificate's public key, which
//! must parse as X.509 v3) at start, so a bad identity is a configuration
//! error (exit code 2) with a sentence saying what is wrong.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, Error, InconsistentKeys};
use ureq::tls::Certificate;

/// The certificate chain and key a TLS client presents.
pub(crate) type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The identity the client will present (`chain` parsed from the client
/// certificate's PEM, `key_pem` the key), once rustls is known to accept
/// it; else a sentence for the person who configured it (never the key
/// itself).
pub(super) fn client_identity(chain: &[Certificate<'static>], key_pem: &[u8]) -> Result<Identity, String> {
    let not_a_key = || "the client key is not a PEM private key (PKCS#8, SEC1 or PKCS#1)".to_string();
    let key_der = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| not_a_key())?;
    let chain_der: Vec<_> = chain.iter().map(|c| CertificateDer::from(c.der()).into_owned()).collect();
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain_der.clone(), key_der.clone_key(), &provider).map_err(|e| explain(&e))?;
    Ok((chain_der, key_der))
}

/// rustls's refusal, worded for an admin.
fn explain(e: &Error) -> String {
    match e {
        // The only error of ring's key loader: no signer for this key.
        Error::General(_) => "the client key is not a key opstatus can sign with: use RSA, ECDSA P-256 or P-384, \
                              or Ed25519 (P-521 and other curves are not supported)"
            .into(),
        Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => {
            "the client key does not match the client certificate (their public keys differ)".into()
        }
        // webpki's `UnsupportedCertVersion`, which rustls passes on as text.
        Error::InvalidCertificate(CertificateError::Other(other)) if other.to_string() == "UnsupportedCertVersion" => {
            "the client certificate is X.509 v1, and v1 certificates are not supported: issue an X.509 v3 \
             certificate (with extensions, e.g. keyUsage and extendedKeyUsage=clientAuth)"
                .into()
        }
        Error::InvalidCertificate(_) => format!("the client certificate cannot be parsed as X.509 v3 ({e})"),
        other => format!("the client certificate and key cannot be used: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::credentials::pem_certificates;
    use rcgen::{CertificateParams, KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_ED25519};

    /// As the credentials use it: the PEM parsed, then checked.
    fn identity(cert_pem: &[u8], key_pem: &str) -> Result<Identity, String> {
        client_identity(&pem_certificates(cert_pem, "the client certificate")?, key_pem.as_bytes())
    }

    fn certificate(key: &KeyPair) -> String {
        CertificateParams::new(vec!["alice".to_string()]).unwrap().self_signed(key).unwrap().pem()
    }

    #[test]
    fn a_v3_certificate_with_its_key_is_accepted() {
        for alg in [&PKCS_ECDSA_P256_SHA256, &PKCS_ED25519] {
            let key = KeyPair::generate_for(alg).unwrap();
            assert!(identity(certificate(&key).as_bytes(), &key.serialize_pem()).is_ok());
        }
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let key = KeyPair::generate().unwrap();
        let other = KeyPair::generate().unwrap();
        let e = identity(certificate(&key).as_bytes(), &other.serialize_pem()).unwrap_err();
        assert_eq!(e, "the client key does not match the client certificate (their public keys differ)");
    }

    #[test]
    fn text_that_is_no_key_or_certificate_is_refused_without_echoing_it() {
        let key = KeyPair::generate().unwrap();
        let e = identity(certificate(&key).as_bytes(), "s3cr3t-not-pem").unwrap_err();
        assert!(e.contains("not a PEM private key") && !e.contains("s3cr3t"), "{e}");
        let e = identity(b"CERT", &key.serialize_pem()).unwrap_err();
        assert!(e.contains("the client certificate holds no PEM certificate"), "{e}");
    }
}
