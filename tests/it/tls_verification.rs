//! TLS is always verified: a certificate from another CA, or for another
//! address, fails closed with a message naming the CA file.

use crate::support;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pki, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-tls-tests";

fn once_fails_with_tls_error(server: &FakeApiServer, ca_pem: &str) {
    let sa = ServiceAccountDir::new(TOKEN, ca_pem, "ops");
    let out = run_to_end(&opstatus_bin(), &["once"], &pod_env(server.port(), &sa), Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let ca_file = sa.path().join("ca.crt");
    assert!(stderr.contains("TLS with https://127.0.0.1:"), "{stderr}");
    assert!(stderr.contains(&format!("the CA in {}", ca_file.display())), "{stderr}");
    assert!(server.requests().is_empty(), "no request may pass an unverified connection");
}

#[test]
fn a_certificate_from_an_unknown_ca_is_refused() {
    let server = FakeApiServer::start(TOKEN);
    let other = pki::generate("some-other-ca", &["127.0.0.1"]);
    once_fails_with_tls_error(&server, &other.ca_pem);
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let server =
        FakeApiServer::start_with_pki(TOKEN, pki::generate("right-ca", &["10.96.0.1", "kubernetes.default.svc"]));
    let ca = server.pki.ca_pem.clone();
    once_fails_with_tls_error(&server, &ca);
}
