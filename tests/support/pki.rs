//! Test certificates: a CA and a server certificate it signs, made fresh.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

pub struct TestPki {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
}

/// A CA named `ca_name` and a server certificate for `sans` (IP addresses
/// become IP SANs, as the API server's `10.96.0.1` is).
pub fn generate(ca_name: &str, sans: &[&str]) -> TestPki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().expect("server key");
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(sans).expect("server params");
    params.distinguished_name.push(DnType::CommonName, "test-apiserver");
    let server_cert = params.signed_by(&server_key, &issuer).expect("server certificate");
    TestPki { ca_pem: ca_cert.pem(), server_cert_pem: server_cert.pem(), server_key_pem: server_key.serialize_pem() }
}
