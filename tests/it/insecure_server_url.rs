//! An `http://` kube9-server sends the API key in clear: refused unless the
//! user opts in (tests/config_errors.rs), and with the opt-in, warned about
//! at start while registration goes ahead.

use crate::support;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, pod_env, wait_for};

const TOKEN: &str = "sa-token-for-insecure-server-url";

#[test]
fn an_http_server_url_with_the_opt_in_runs_and_warns_at_start() {
    // A port with nothing behind it: the registration is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    for opt_in in [("--allow-insecure-server-url", None), ("", Some(("OPSTATUS_ALLOW_INSECURE_SERVER_URL", "true")))] {
        let api = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
        let mut env = pod_env(api.port(), &sa);
        env.push(("KUBE9_API_KEY".into(), "kdy_test_insecure123".into()));
        env.extend(opt_in.1.map(|(k, v)| (k.to_string(), v.to_string())));
        let mut args = vec!["run", "--interval", "60s", "--check-interval", "1s", "--server-url", &url];
        args.extend([opt_in.0].into_iter().filter(|a| !a.is_empty()));
        let agent = RunningAgent::start(&opstatus_bin(), &args, &env);
        let status = wait_for(Duration::from_secs(10), Duration::from_millis(20), || {
            api.status_document("ops", "kube9-operator-status")
                .filter(|s| s["error"] == "Failed to connect to kube9-server: connection refused")
        });
        assert!(status.is_some(), "{opt_in:?}: registration not attempted\n{}", agent.stderr());
        let warning = format!(
            "kube9-server {url} is plain http:// (--allow-insecure-server-url): the API key is sent unencrypted"
        );
        let log = agent.stderr();
        assert!(log.lines().any(|l| l.contains(" WARN ") && l.contains(&warning)), "{opt_in:?}: no warning\n{log}");
        assert!(!log.contains("kdy_test_insecure123"));
    }
}
