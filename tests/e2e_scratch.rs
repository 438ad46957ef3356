//! The scratch image's conditions, without a container engine: the static
//! binary alone in an empty root (no /etc, no /tmp, no shell, no libc, no
//! resolver), entered with chroot as uid 65532, against the real API server.
//! `--version`, `probe` and a real `once` and `run` must work there.

mod support;

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::TempDir;
use support::control_plane::{shared, static_bin};

const NOBODY: u32 = 65532;
const BUDGET: u64 = 2 * 1024 * 1024;

/// Builds the root: `/opstatus`, the service-account files, and `/run`
/// (the only writable directory, as an emptyDir would be).
fn scratch_root(token: &str, ca: &str, namespace: &str) -> TempDir {
    let root = TempDir::new("scratch");
    let r = root.path();
    std::fs::set_permissions(r, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(static_bin(), r.join("opstatus")).unwrap();
    std::fs::set_permissions(r.join("opstatus"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sa = r.join("var/run/secrets/kubernetes.io/serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    for (name, contents) in [("token", token), ("ca.crt", ca), ("namespace", namespace)] {
        std::fs::write(sa.join(name), contents).unwrap();
    }
    std::fs::create_dir(r.join("run")).unwrap();
    chown(r.join("run"), Some(NOBODY), Some(NOBODY)).unwrap();
    for dir in [
        "var",
        "var/run",
        "var/run/secrets",
        "var/run/secrets/kubernetes.io",
        "var/run/secrets/kubernetes.io/serviceaccount",
    ] {
        std::fs::set_permissions(r.join(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    root
}

fn in_scratch(root: &Path, port: u16, args: &[&str]) -> Command {
    // Absolute: the child's environment (and so PATH) is cleared.
    let mut c = Command::new("/usr/sbin/chroot");
    c.arg(format!("--userspec={NOBODY}:{NOBODY}")).arg(root).arg("/opstatus").args(args);
    c.env_clear()
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port.to_string())
        .stdin(Stdio::null());
    c
}

fn run(root: &Path, port: u16, args: &[&str]) -> Output {
    let out = in_scratch(root, port, args).output().expect("chroot (the scratch check runs as root)");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "chroot needs root: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn e2e_scratch_static_binary_runs_alone_as_uid_65532() {
    let size = std::fs::metadata(static_bin()).unwrap().len();
    assert!(size <= BUDGET, "the static binary is {size} bytes, over the 2 MiB budget");
    let cp = shared();
    let pod = cp.deploy("scratch");
    let token = std::fs::read_to_string(pod.sa.path().join("token")).unwrap();
    let root = scratch_root(&token, &cp.ca_pem(), &pod.namespace);
    let port = cp.port();

    let out = run(root.path(), port, &["--version"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("opstatus {}", env!("CARGO_PKG_VERSION")));

    let out = run(root.path(), port, &["probe", "--ready-file", "/run/ready"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("not ready: no readiness file /run/ready"));

    let out = run(root.path(), port, &["once", "--operator-version", "3.1.4"]);
    assert!(out.status.success(), "once in scratch: {}", String::from_utf8_lossy(&out.stderr));
    let doc = cp.status_document(&pod.namespace, "kube9-operator-status").expect("written from scratch");
    assert_eq!((doc["version"].as_str(), doc["health"].as_str()), (Some("3.1.4"), Some("healthy")));

    // The agent, with its readiness file in the one writable directory.
    let mut agent = in_scratch(root.path(), port, &["run", "--interval", "1s", "--ready-file", "/run/ready"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !root.path().join("run/ready").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run(root.path(), port, &["probe", "--ready-file", "/run/ready"]);
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    Command::new("kill").arg("-TERM").arg(agent.id().to_string()).status().unwrap();
    let status = agent.wait().unwrap();
    assert_eq!(out.status.code(), Some(0), "probe in scratch: {line}");
    assert!(line.starts_with("ready: health=healthy"), "{line}");
    assert_eq!(status.code(), Some(0));
    assert!(!root.path().join("run/ready").exists(), "removed at exit");
    println!(
        "e2e scratch: static binary {size} bytes; --version, probe, once and run work as uid {NOBODY} in an empty root"
    );
}
