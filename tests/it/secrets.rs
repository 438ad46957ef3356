//! Tokens never reach the logs, even at RUST_LOG=trace (where the HTTP
//! library's wire dump would print the Authorization header).

use crate::support;

use std::time::Duration;
use support::fake_apiserver::{FakeApiServer, Fault};
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "secret-token-that-must-never-be-logged-4f2a9c";

#[test]
fn trace_logging_keeps_the_token_out() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    server.push_faults([Fault::Status { code: 401, retry_after: None }]);
    let mut env = pod_env(server.port(), &sa);
    env.push(("RUST_LOG".into(), "trace".into()));
    for _ in 0..2 {
        let out = run_to_end(&opstatus_bin(), &["once"], &env, Duration::from_secs(20));
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(all.contains("TRACE") || all.contains("DEBUG"), "trace logging is on:\n{all}");
        assert!(!all.contains(TOKEN), "the token leaked:\n{all}");
        assert!(!all.contains(&TOKEN[..16]), "part of the token leaked:\n{all}");
    }
    assert!(server.requests().iter().all(|r| r.authorization.as_deref() == Some(&format!("Bearer {TOKEN}")[..])));
}
