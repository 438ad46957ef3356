//! End to end, real kube-apiserver: a password in a URL (a kubeconfig's
//! `server`, `--watch-url`, `--server-url`) is refused at start, exit 2,
//! and shown nowhere; the same configuration without it works. Before the
//! fix, the kubeconfig's password was sent as Basic auth and echoed in
//! every error message.

use crate::support;

use std::time::Duration;
use support::TempDir;
use support::control_plane::{release_bin, shared, unique_namespace};
use support::run_to_end;

#[test]
fn e2e_urls_with_passwords_are_refused_and_never_shown() {
    let cp = shared();
    let ns = unique_namespace("url-credentials");
    cp.create_namespace(&ns);
    let good = std::fs::read_to_string(cp.kubeconfig()).unwrap();
    let server = format!("server: https://127.0.0.1:{}", cp.port());
    assert!(good.contains(&server), "the kubeconfig names {server}");
    let dir = TempDir::new("url-credentials");
    let with_password = dir.path().join("kubeconfig");
    let bad = good.replace(&server, &format!("server: https://admin:secret@127.0.0.1:{}", cp.port()));
    std::fs::write(&with_password, bad).unwrap();

    let get = |kubeconfig: &str, extra: &[&str], env: &[(String, String)]| {
        let args = [&["once", "--kubeconfig", kubeconfig, "--namespace", &ns][..], extra].concat();
        run_to_end(&release_bin(), &args, env, Duration::from_secs(30))
    };
    // The control: the same kubeconfig without a password writes the status.
    let out = get(cp.kubeconfig(), &[], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let key = [("KUBE9_API_KEY".to_string(), "kdy_test_e2eurl123".to_string())];
    let cases: [(&str, &[&str], &str); 3] = [
        (with_password.to_str().unwrap(), &[], "server \"https://***@127.0.0.1:"),
        (cp.kubeconfig(), &["--watch-url", "http://op:secret@127.0.0.1:8081/healthz"], "--watch-url"),
        (cp.kubeconfig(), &["--server-url", "https://user:secret@api.kube9.dev"], "--server-url"),
    ];
    for (kubeconfig, extra, names) in cases {
        let out = get(kubeconfig, extra, &key);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(names) && stderr.contains("holds a user name or password"), "{extra:?}: {stderr}");
        assert!(!stderr.contains("secret") && !stdout.contains("secret"), "{extra:?}: {stderr}");
    }
}
