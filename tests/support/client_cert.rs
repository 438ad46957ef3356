//! Client certificates issued with openssl, the way an admin issues them
//! for a kubeconfig user, and the kubeconfig that carries them inline.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// The key a client certificate is issued for.
#[derive(Clone, Copy, Debug)]
pub enum KeyType {
    Rsa,
    P256,
    /// A curve rustls (with ring) cannot sign with.
    P521,
}

/// X.509 version of the issued certificate: `openssl x509 -req` issues v1
/// unless extensions are given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V3,
}

pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).stdin(Stdio::null()).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A fresh CA in `dir` (`ca.crt`, `ca.key`).
pub fn make_ca(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=test-client-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
}

/// A certificate for `user` (the CN, which kube-apiserver takes as the user
/// name) signed by `ca_cert`/`ca_key`; files are made in `dir` under `label`.
pub fn issue(
    dir: &Path,
    ca_cert: &Path,
    ca_key: &Path,
    user: &str,
    key: KeyType,
    version: Version,
    label: &str,
) -> Issued {
    let key_file = format!("{label}.key");
    let csr = format!("{label}.csr");
    let cert = format!("{label}.crt");
    let newkey: &[&str] = match key {
        KeyType::Rsa => &["-newkey", "rsa:2048"],
        KeyType::P256 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        KeyType::P521 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521"],
    };
    let subject = format!("/CN={user}");
    let mut args = vec!["req", "-nodes", "-subj", &subject, "-keyout", &key_file, "-out", &csr];
    args.extend_from_slice(newkey);
    openssl(dir, &args);
    let ext = format!("{label}.ext");
    std::fs::write(dir.join(&ext), "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")
        .unwrap();
    let (ca_cert, ca_key) = (ca_cert.to_str().unwrap(), ca_key.to_str().unwrap());
    // A serial of its own, not `-CAcreateserial`: tests issuing from one
    // CA at once would share its serial file, and one of them read it half
    // written ("Unable to load number from ca.srl").
    static ISSUED: AtomicU64 = AtomicU64::new(0);
    let serial = format!("{}", (u64::from(std::process::id()) << 20) + ISSUED.fetch_add(1, Ordering::Relaxed) + 1);
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        ca_cert,
        "-CAkey",
        ca_key,
        "-set_serial",
        &serial,
        "-days",
        "1",
        "-out",
        &cert,
    ];
    if version == Version::V3 {
        args.extend_from_slice(&["-extfile", &ext]);
    }
    openssl(dir, &args);
    Issued {
        cert_pem: std::fs::read_to_string(dir.join(&cert)).unwrap(),
        key_pem: std::fs::read_to_string(dir.join(&key_file)).unwrap(),
    }
}

/// A kubeconfig whose current context is `user` with the certificate and
/// key inline (`client-certificate-data`, `client-key-data`).
pub fn kubeconfig(server: &str, ca_pem: &str, user: &str, cert_pem: &str, key_pem: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\n\
         users:\n- name: {user}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n\
         contexts:\n- name: test\n  context: {{cluster: test, user: {user}}}\ncurrent-context: test\n",
        base64(ca_pem),
        base64(cert_pem),
        base64(key_pem)
    )
}

/// One line of standard base64, by `openssl base64 -A`.
fn base64(text: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("openssl")
        .args(["base64", "-A"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "openssl base64");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
