//! Which credentials opstatus acts with, said at start and in `/status`:
//! what RBAC allows them is what opstatus can do, so an admin checking
//! permissions by hand must know whose to check. A kubeconfig comes first,
//! even in a pod (controller-runtime's order); the in-cluster service
//! account is named from its token's claims, which decide nothing else.

use crate::support;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::http::{agent_with_endpoint, get};
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end};

/// Unpadded base64url, as a JWT's parts are.
fn base64url(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut s = String::new();
    for chunk in data.chunks(3) {
        let n = chunk.iter().fold(0u32, |a, &b| (a << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            s.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    s
}

/// A projected service-account token's shape (the signature is not
/// checked by opstatus; the fake API server takes the token as given).
fn token(namespace: &str, name: &str) -> String {
    let claims = serde_json::json!({
        "aud": ["https://kubernetes.default.svc"],
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": "0c1d"}},
    });
    format!("{}.{}.c2lnbmF0dXJl", base64url(br#"{"alg":"RS256"}"#), base64url(claims.to_string().as_bytes()))
}

#[test]
fn the_service_account_is_named_at_start_and_in_status_never_the_token() {
    let token = token("ops", "opstatus-sa");
    let server = FakeApiServer::start(&token);
    let sa = ServiceAccountDir::new(&token, &server.pki.ca_pem, "ops");
    let (agent, addr) = agent_with_endpoint(&server, &sa, "/readyz");
    let said = format!(
        "Kubernetes credentials: service account ops/opstatus-sa (in-cluster, token in {})",
        sa.path().display()
    );
    assert!(agent.logged(&said), "{}", agent.stderr());
    let (code, body, _) = get(addr, "/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(status["credentials"].as_str().unwrap().starts_with("service account ops/opstatus-sa"), "{status}");
    let signature = token.rsplit('.').next().unwrap();
    assert!(!agent.stderr().contains(signature) && !body.contains(signature), "the token is never shown");
}

/// `KUBECONFIG` beside the pod's service-account variables: the kubeconfig
/// is used, and the start line says so, naming its context and user.
#[test]
fn a_kubeconfig_beside_the_service_account_is_named_with_its_context_and_user() {
    const TOKEN: &str = "kubeconfig-admin-token";
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(&token("ops", "opstatus"), &server.pki.ca_pem, "ops");
    let dir = TempDir::new("credential-source");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &server.pki.ca_pem).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let text = format!(
        "current-context: admin@lab\nclusters:\n- name: lab\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
         contexts:\n- name: admin@lab\n  context: {{cluster: lab, user: cluster-admin, namespace: ops}}\n\
         users:\n- name: cluster-admin\n  user: {{token: {TOKEN}}}\n",
        server.url(),
        ca.display()
    );
    std::fs::write(&kubeconfig, text).unwrap();
    let mut env = pod_env(server.port(), &sa);
    env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    let out = run_to_end(&opstatus_bin(), &["once"], &env, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let said = format!(
        "Kubernetes credentials: kubeconfig {}, context \"admin@lab\", user \"cluster-admin\" (not the pod's service \
         account: a kubeconfig comes first)",
        kubeconfig.display()
    );
    assert!(stderr.contains(&said), "{stderr}");
    assert!(!stderr.contains(TOKEN), "{stderr}");
}
