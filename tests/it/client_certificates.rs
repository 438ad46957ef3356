//! Client-certificate kubeconfigs rustls cannot use (an X.509 v1
//! certificate, a key of another certificate, a P-521 key) are refused at
//! start, exit 2, with a sentence naming the kubeconfig user: never a crash
//! at the first TLS handshake. (The good case runs against the real API
//! server: tests/e2e_client_certificate.rs.)

use crate::support;

use std::time::Duration;
use support::client_cert::{self, KeyType, Version};
use support::fake_apiserver::FakeApiServer;
use support::{TempDir, opstatus_bin, run_to_end};

#[test]
fn unusable_client_identities_exit_2_naming_the_user_and_the_fault() {
    let server = FakeApiServer::start("unused-token");
    let dir = TempDir::new("client-certs");
    client_cert::make_ca(dir.path());
    let (ca_cert, ca_key) = (dir.path().join("ca.crt"), dir.path().join("ca.key"));
    let issue = |key, version, label| client_cert::issue(dir.path(), &ca_cert, &ca_key, "alice", key, version, label);
    let good = issue(KeyType::P256, Version::V3, "good");
    let v1 = issue(KeyType::Rsa, Version::V1, "v1");
    let p521 = issue(KeyType::P521, Version::V3, "p521");
    let cases = [
        (&v1.cert_pem, &v1.key_pem, "the client certificate is X.509 v1, and v1 certificates are not supported"),
        (&good.cert_pem, &v1.key_pem, "the client key does not match the client certificate"),
        (
            &p521.cert_pem,
            &p521.key_pem,
            "the client key is not a key opstatus can sign with: use RSA, ECDSA P-256 or P-384, or Ed25519 \
             (P-521 and other curves are not supported)",
        ),
    ];
    for (i, (cert, key, fault)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("kubeconfig-{i}"));
        std::fs::write(&path, client_cert::kubeconfig(&server.url(), &server.pki.ca_pem, "alice", cert, key)).unwrap();
        let args = ["once", "--namespace", "ops", "--kubeconfig", path.to_str().unwrap()];
        let out = run_to_end(&opstatus_bin(), &args, &[], Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{fault}: {stderr}");
        let expect = format!("kubeconfig {}: user \"alice\": {fault}", path.display());
        assert!(stderr.contains(&expect), "expected {expect:?} in:\n{stderr}");
        assert!(!stderr.contains("PRIVATE KEY"), "{stderr}");
    }
    assert!(server.requests().is_empty(), "refused before any request");
}
