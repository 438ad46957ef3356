//! Files from outside (token, kubeconfig, API key file) that are not what
//! they should be: a device, a FIFO, a huge file. Each is refused by name,
//! without blocking the loop or filling memory.

use crate::support;
use crate::support::run_args::Run;

use std::path::Path;
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::fake_kube9::{Answer, FakeKube9};
use support::{RunningAgent, ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end, wait_for};

const TOKEN: &str = "sa-token-for-credential-file-tests";

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

#[test]
fn dev_zero_as_the_token_is_refused_at_start_naming_the_file() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let token = sa.path().join("token");
    std::fs::remove_file(&token).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &token).unwrap();
    let start = Instant::now();
    let out = run_to_end(&opstatus_bin(), &["once"], &pod_env(server.port(), &sa), Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("token file {} is a character device, not a regular file", token.display())),
        "{stderr}"
    );
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert!(server.requests().is_empty(), "no request with a refused token");
}

#[test]
fn a_kubeconfig_over_its_limit_is_named() {
    let dir = TempDir::new("huge-kubeconfig");
    let path = dir.path().join("kubeconfig");
    let mut text = String::from("current-context: c\n");
    while text.len() <= 4 * 1024 * 1024 {
        text.push_str("# padding padding padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&path, text).unwrap();
    let out =
        run_to_end(&opstatus_bin(), &["get", "--kubeconfig", path.to_str().unwrap()], &[], Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("kubeconfig {} is larger than 4 MiB (the limit for a kubeconfig)", path.display())),
        "{stderr}"
    );
}

#[test]
fn a_fifo_as_the_api_key_file_does_not_stop_the_heartbeat() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let kube9 = FakeKube9::start(Answer::Registered { cluster_id: "cls_fifo".into(), status_interval_seconds: 60 });
    let dir = TempDir::new("fifo-key");
    let ca = dir.path().join("kube9-ca.crt");
    std::fs::write(&ca, &kube9.pki.ca_pem).unwrap();
    let key = dir.path().join("api-key");
    mkfifo(&key);
    let url = kube9.url();
    let mut agent =
        Run::every("1s").checks("1s").pro(&key, &url, &ca).start(&opstatus_bin(), &pod_env(api.port(), &sa));
    // The API key is read on every check: each would hang on the FIFO.
    let heartbeats = || api.requests().into_iter().filter(|r| r.method == "PATCH").count();
    let beats = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        let n = heartbeats();
        (n >= 5).then_some(n)
    });
    assert!(beats.is_some(), "heartbeats stopped at {}:\n{}", heartbeats(), agent.stderr());
    assert!(agent.exited().is_none(), "opstatus exited:\n{}", agent.stderr());
    let refused = format!("API key file {} is a FIFO, not a regular file", key.display());
    assert!(agent.logged(&refused), "{}", agent.stderr());
    assert!(kube9.requests().is_empty(), "no registration without a key");
}

#[test]
fn a_token_file_turned_into_a_fifo_is_refused_on_re_read_and_the_loop_goes_on() {
    let api = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &api.pki.ca_pem, "ops");
    let args = ["run", "--interval", "1s", "--check-interval", "1s"];
    let mut agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env(api.port(), &sa));
    assert!(api.wait_status_configmap(Duration::from_secs(20)).is_some(), "no first heartbeat:\n{}", agent.stderr());
    // The next request is a 401, which makes opstatus re-read the token at
    // once: from a FIFO that no one writes.
    let fifo = sa.path().join("token.fifo");
    mkfifo(&fifo);
    std::fs::rename(&fifo, sa.path().join("token")).unwrap();
    api.set_token("a-token-opstatus-does-not-have");
    let before = api.requests().len();
    let more = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        (api.requests().len() >= before + 3).then_some(())
    });
    assert!(more.is_some(), "requests stopped at {}:\n{}", api.requests().len(), agent.stderr());
    assert!(agent.exited().is_none(), "opstatus exited:\n{}", agent.stderr());
    let refused = format!("token file {} is a FIFO, not a regular file", sa.path().join("token").display());
    assert!(agent.logged(&refused), "{}", agent.stderr());
}

/// A kubeconfig for the fake API server at 127.0.0.1 that trusts `ca_pem`
/// (in `dir`), with `extra` lines added to the cluster.
fn kubeconfig_with(dir: &TempDir, server: &FakeApiServer, ca_pem: &str, extra: &str) -> std::path::PathBuf {
    support::token_kubeconfig(dir, &server.url(), ca_pem, TOKEN, extra)
}

/// `tls-server-name`: the API server reached at 127.0.0.1 with a
/// certificate that names only `apiserver.cluster.example` is verified
/// against that name; without it (or with another name) the certificate
/// does not match, and nothing is read. The handshake asks for that name
/// (SNI). The name replaces only the name:
/// a certificate for it from another CA is refused all the same.
#[test]
fn a_kubeconfigs_tls_server_name_is_what_the_certificate_is_verified_against() {
    let pki = support::pki::generate("tls-server-name-ca", &["apiserver.cluster.example"]);
    let server = FakeApiServer::start_with_pki(TOKEN, pki);
    let dir = TempDir::new("tls-server-name");
    let get_trusting = |ca_pem: &str, extra: &str| {
        let path = kubeconfig_with(&dir, &server, ca_pem, extra);
        let out =
            run_to_end(&opstatus_bin(), &["get", "--kubeconfig", path.to_str().unwrap()], &[], Duration::from_secs(20));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let get = |extra: &str| get_trusting(&server.pki.ca_pem, extra);
    let (code, stdout, stderr) = get("    tls-server-name: apiserver.cluster.example\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("Mode:"), "{stdout}");
    // The handshake asks for that name too (SNI), as client-go's does: a
    // front end that routes by name reaches the right API server.
    let asked: Vec<Option<String>> = server.requests().into_iter().map(|r| r.server_name).collect();
    assert!(!asked.is_empty() && asked.iter().all(|n| n.as_deref() == Some("apiserver.cluster.example")), "{asked:?}");
    for extra in ["", "    tls-server-name: other.cluster.example\n"] {
        let (code, _, stderr) = get(extra);
        assert_eq!(code, Some(1), "{extra:?}: {stderr}");
        assert!(stderr.contains("certificate") && stderr.contains("not valid for name"), "{extra:?}: {stderr}");
    }
    let stranger = support::pki::generate("another-ca", &["apiserver.cluster.example"]);
    let (code, _, stderr) = get_trusting(&stranger.ca_pem, "    tls-server-name: apiserver.cluster.example\n");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
}
