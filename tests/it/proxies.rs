//! Proxies, as corporate laptops and egress-controlled clusters reach
//! anything: a kubeconfig cluster's `proxy-url` carries `get` and `run` to
//! the API server; `HTTPS_PROXY` (`HTTP_PROXY` for `http://`) carries
//! kube9-server and `--watch-url` unless `NO_PROXY` names the host or it
//! is loopback; the environment never carries the API server's traffic. A
//! loopback CONNECT proxy stands in for the corporate one; names resolve
//! to 127.0.0.1 in opstatus's own mount namespace (`with_hosts`), so no
//! DNS query leaves the machine.

use crate::support;
use crate::support::run_args::Run;

use std::time::Duration;
use support::connect_proxy::{ConnectProxy, with_hosts};
use support::fake_apiserver::FakeApiServer;
use support::fake_kube9::{self, Answer, FakeKube9};
use support::http::FakeOperator;
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end, wait_for};

const TOKEN: &str = "sa-token-for-proxy-tests";
const KEY: &str = "kdy_test_0123456789abcdefPROXY";

/// A kubeconfig for `server` (its URL's host replaced by `host`), trusting
/// its CA, with `extra` lines added to the cluster.
fn kubeconfig(dir: &TempDir, server: &FakeApiServer, host: &str, extra: &str) -> String {
    let url = format!("https://{host}:{}", server.port());
    support::token_kubeconfig(dir, &url, &server.pki.ca_pem, TOKEN, extra).display().to_string()
}

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn get_and_run_reach_the_api_server_through_a_kubeconfigs_proxy_url() {
    let server = FakeApiServer::start(TOKEN);
    let proxy = ConnectProxy::start();
    let dir = TempDir::new("proxy-url");
    let path = kubeconfig(&dir, &server, "127.0.0.1", &format!("    proxy-url: {}\n", proxy.url("user:s3cret@")));
    let out = run_to_end(&opstatus_bin(), &["get", "--kubeconfig", &path], &[], Duration::from_secs(20));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.starts_with("Mode:"), "{stdout}");
    let tunnels = proxy.tunnels();
    let target = format!("127.0.0.1:{}", server.port());
    assert!(!tunnels.is_empty(), "get went through the proxy");
    for tunnel in &tunnels {
        assert_eq!(tunnel.target, target);
        // Basic, user:s3cret.
        assert_eq!(tunnel.authorization.as_deref(), Some("Basic dXNlcjpzM2NyZXQ="));
    }

    let agent = Run::every("1s").flag("--kubeconfig", &path).start(&opstatus_bin(), &[]);
    let patches = || server.requests().iter().filter(|r| r.method == "PATCH").count();
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || (patches() >= 3).then_some(()))
        .unwrap_or_else(|| panic!("three heartbeats through the proxy:\n{}", agent.stderr()));
    drop(agent);
    // Every connection the API server accepted came through a tunnel.
    assert_eq!(server.connections(), proxy.tunnels().len(), "{:?}", proxy.tunnels());
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn the_environments_proxy_never_carries_the_api_servers_traffic() {
    let pki = support::pki::generate("proxy-env-ca", &["apiserver.opstatus.test"]);
    let server = FakeApiServer::start_with_pki(TOKEN, pki);
    let proxy = ConnectProxy::start();
    let dir = TempDir::new("proxy-env-api");
    let path = kubeconfig(&dir, &server, "apiserver.opstatus.test", "");
    let bin = with_hosts(dir.path(), &opstatus_bin(), &["apiserver.opstatus.test"]);
    let proxied = env(&[("HTTPS_PROXY", &proxy.url("")), ("HTTP_PROXY", &proxy.url(""))]);
    let out = run_to_end(&bin, &["get", "--kubeconfig", &path], &proxied, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!server.requests().is_empty());
    assert!(proxy.tunnels().is_empty(), "{:?}", proxy.tunnels());
}

#[test]
fn kube9_server_goes_through_https_proxy_unless_no_proxy_names_it() {
    for no_proxy in ["", "localhost,.opstatus.test"] {
        let api = FakeApiServer::start(TOKEN);
        let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
        let kube9 =
            FakeKube9::start(Answer::Registered { cluster_id: "cls_proxy".into(), status_interval_seconds: 60 });
        let proxy = ConnectProxy::start();
        let dir = TempDir::new("proxy-kube9");
        let (key, ca) = (dir.path().join("api-key"), dir.path().join("kube9-ca.crt"));
        std::fs::write(&key, KEY).unwrap();
        std::fs::write(&ca, &kube9.pki.ca_pem).unwrap();
        let bin = with_hosts(dir.path(), &opstatus_bin(), &[fake_kube9::NAME]);
        let mut vars = pod_env(api.port(), &sa);
        vars.extend(env(&[("HTTPS_PROXY", &proxy.url("")), ("NO_PROXY", no_proxy)]));
        let agent = Run::every("60s").checks("1s").pro(&key, &kube9.url_named(), &ca).start(&bin, &vars);
        let registered = || api.status_document("ops", "kube9-operator-status").filter(|s| s["registered"] == true);
        wait_for(Duration::from_secs(20), Duration::from_millis(50), registered)
            .unwrap_or_else(|| panic!("NO_PROXY={no_proxy:?}: never registered:\n{}", agent.stderr()));
        assert_eq!(kube9.requests().len(), 1, "NO_PROXY={no_proxy:?}");
        let targets: Vec<String> = proxy.tunnels().into_iter().map(|t| t.target).collect();
        match no_proxy {
            // kube9-server through the proxy; the API server (a Service
            // address in a cluster) never.
            "" => assert_eq!(targets, [format!("{}:{}", fake_kube9::NAME, kube9.url().rsplit(':').next().unwrap())]),
            _ => assert!(targets.is_empty(), "NO_PROXY={no_proxy:?}: {targets:?}"),
        }
    }
}

#[test]
fn a_watch_url_goes_through_http_proxy_unless_it_is_loopback() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let operator = FakeOperator::start();
    let proxy = ConnectProxy::start();
    let dir = TempDir::new("proxy-watch");
    let bin = with_hosts(dir.path(), &opstatus_bin(), &["operator.opstatus.test"]);
    let named = operator.url().replace("127.0.0.1", "operator.opstatus.test");
    let mut vars = pod_env(api.port(), &sa);
    vars.extend(env(&[("HTTP_PROXY", &proxy.url("")), ("HTTPS_PROXY", &proxy.url(""))]));
    let run = Run::every("60s").checks("1s").flag("--watch-url", operator.url()).flag("--watch-url", &named);
    let agent = run.start(&bin, &vars);
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || (operator.answers() >= 6).then_some(()))
        .unwrap_or_else(|| panic!("six checks:\n{}", agent.stderr()));
    let failed: Vec<String> = support::problems_logged(&agent.stderr()).into_iter().map(String::from).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let targets: Vec<String> = proxy.tunnels().into_iter().map(|t| t.target).collect();
    // The operator closes each connection: one tunnel per check of the name.
    assert!(targets.len() >= 2, "{targets:?}");
    assert!(targets.iter().all(|t| *t == format!("operator.opstatus.test:{}", operator.addr.port())), "{targets:?}");
}

#[test]
fn a_proxy_variable_that_is_no_http_proxy_is_refused_at_start_unshown() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    for (var, flag, url) in [
        ("HTTPS_PROXY", "--server-url", "https://api.kube9.example"),
        ("HTTP_PROXY", "--watch-url", "http://operator.example:8081/healthz"),
    ] {
        let mut vars = pod_env(api.port(), &sa);
        vars.extend(env(&[(var, "socks5://user:s3cret@proxy.example:1080"), ("KUBE9_API_KEY", KEY)]));
        let out = run_to_end(&opstatus_bin(), &["once", flag, url], &vars, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {stderr}");
        assert!(
            stderr.contains(&format!("{var}: \"socks5://***@proxy.example:1080\" is not an http:// proxy")),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{stderr}");
    }
    assert!(api.requests().is_empty(), "nothing was sent");
}
