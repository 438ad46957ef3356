//! End to end, real kube-apiserver: a kubeconfig user that authenticates
//! with a client certificate (X.509 v3, issued by the API server's client
//! CA, key inline) writes the status ConfigMap under the base Role; a
//! kubeconfig cluster's `tls-server-name` is the name the server's
//! certificate is verified against.

use crate::support;

use std::path::Path;
use std::time::Duration;
use support::client_cert::{self, KeyType, Version};
use support::control_plane::{release_bin, shared};
use support::{TempDir, run_to_end};

#[test]
fn e2e_a_client_certificate_user_writes_the_status() {
    let cp = shared();
    let pod = cp.deploy("client-cert");
    let ns = &pod.namespace;
    let user = format!("cert-user-{ns}");
    // The control plane's one CA is also its --client-ca-file.
    let ca_cert = Path::new(cp.ca_path());
    let ca_key = ca_cert.with_file_name("ca.key");
    let dir = TempDir::new("e2e-client-cert");
    let issued = client_cert::issue(dir.path(), ca_cert, &ca_key, &user, KeyType::P256, Version::V3, "client");
    cp.kubectl_ok(&["-n", ns, "create", "rolebinding", "cert-user", "--role=opstatus-status-writer", "--user", &user]);
    let kubeconfig = dir.path().join("kubeconfig");
    let server = format!("https://127.0.0.1:{}", cp.port());
    std::fs::write(
        &kubeconfig,
        client_cert::kubeconfig(&server, &cp.ca_pem(), &user, &issued.cert_pem, &issued.key_pem),
    )
    .unwrap();

    let args = ["once", "--namespace", ns, "--kubeconfig", kubeconfig.to_str().unwrap()];
    let out = run_to_end(&release_bin(), &args, &[], Duration::from_secs(30));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let status = cp.status_document(ns, "kube9-operator-status").expect("the status ConfigMap was written");
    assert_eq!(status["health"], "healthy", "{status}");
    // The first look (a read, the apply that creates it) and the write, all
    // as the certificate's user.
    let events = cp.audit_events(&user);
    let calls: Vec<(&str, u16)> = events.iter().map(|e| (e.verb.as_str(), e.code)).collect();
    assert_eq!(calls, [("get", 404), ("patch", 201), ("patch", 200)], "{events:?}");
}

/// A kubeconfig's `tls-server-name` against the real API server, reached
/// at 127.0.0.1: its certificate names `kubernetes.default.svc`, so that
/// name verifies; a name the certificate does not hold fails verification
/// (exit 1), which shows the name is the one checked.
#[test]
fn e2e_a_kubeconfigs_tls_server_name_is_what_the_server_is_verified_as() {
    let cp = shared();
    let dir = support::TempDir::new("e2e-tls-server-name");
    let original = std::fs::read_to_string(cp.kubeconfig()).unwrap();
    let get_as = |name: &str| {
        let text = original.replacen("    server: ", &format!("    tls-server-name: {name}\n    server: "), 1);
        assert_ne!(text, original, "the kubeconfig has a cluster server line");
        let path = dir.path().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, text).unwrap();
        let args = ["get", "--kubeconfig", path.to_str().unwrap(), "--namespace", "default"];
        let out = run_to_end(&release_bin(), &args, &[], Duration::from_secs(30));
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (code, err) = get_as("kubernetes.default.svc");
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = get_as("not-the-apiserver.example");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not valid for name \"not-the-apiserver.example\""), "{err}");
}

/// An exec plugin that gives a client certificate (as Teleport's and
/// Pinniped's do): `once` writes the status with it; `run` takes one
/// without an expiry, and refuses at start, saying why, one that expires
/// (it cannot swap the certificate of its open connections), before any
/// request.
#[test]
fn e2e_an_exec_plugins_client_certificate_writes_the_status_and_run_refuses_one_that_expires() {
    let cp = shared();
    let pod = cp.deploy("exec-cert");
    let ns = &pod.namespace;
    let user = format!("exec-cert-user-{ns}");
    let ca_cert = Path::new(cp.ca_path());
    let ca_key = ca_cert.with_file_name("ca.key");
    let dir = TempDir::new("e2e-exec-cert");
    let issued = client_cert::issue(dir.path(), ca_cert, &ca_key, &user, KeyType::P256, Version::V3, "client");
    cp.kubectl_ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "exec-cert-user",
        "--role=opstatus-status-writer",
        "--user",
        &user,
    ]);
    let credential = |expires: &str| {
        let status = serde_json::json!({"clientCertificateData": issued.cert_pem, "clientKeyData": issued.key_pem,
            "expirationTimestamp": expires});
        serde_json::json!({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": status})
    };
    let kubeconfig = dir.path().join("kubeconfig");
    let with_cert = client_cert::kubeconfig(&format!("https://127.0.0.1:{}", cp.port()), &cp.ca_pem(), &user, "", "");
    let user_block = with_cert.split("  user:\n").nth(1).unwrap().split("contexts:").next().unwrap().to_string();
    let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: ./credential.sh\n";
    std::fs::write(&kubeconfig, with_cert.replace(&user_block, exec)).unwrap();
    let plugin = |expires: &str| {
        std::fs::write(dir.path().join("credential.json"), credential(expires).to_string()).unwrap();
        std::fs::write(dir.path().join("credential.sh"), "#!/bin/sh\ncat \"$(dirname \"$0\")/credential.json\"\n")
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path().join("credential.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
    let kubeconfig = kubeconfig.to_str().unwrap();

    plugin("2099-01-01T00:00:00Z");
    let out = run_to_end(
        &release_bin(),
        &["once", "--namespace", ns, "--kubeconfig", kubeconfig],
        &env,
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(cp.status_document(ns, "kube9-operator-status").unwrap()["health"], "healthy");
    assert!(cp.audit_events(&user).iter().any(|e| e.verb == "patch" && e.code < 300), "written as {user}");

    let args = ["run", "--namespace", ns, "--kubeconfig", kubeconfig, "--identity", "laptop"];
    let before = cp.audit_events(&user).len();
    let out = run_to_end(&release_bin(), &args, &env, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "gives a client certificate that expires, until 2099-01-01T00:00:00Z: `opstatus run` cannot renew"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("PRIVATE KEY"), "{stderr}");
    assert_eq!(cp.audit_events(&user).len(), before, "refused before any request");

    plugin("");
    let agent = support::RunningAgent::start(&release_bin(), &args, &env);
    let said = "(exec plugin \"";
    assert!(
        agent.logged_within(said, Duration::from_secs(20))
            && agent.logged_within("Status updated", Duration::from_secs(20)),
        "{}",
        agent.stderr()
    );
}
