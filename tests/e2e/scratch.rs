//! The scratch image's conditions, without a container engine: the static
//! binary alone in an empty root (no /etc, no /tmp, no shell, no libc, no
//! resolver), entered with chroot as uid 65532, against the real API server.
//! `--version`, `probe` and a real `once` and `run` must work there, for
//! each platform the images ship.
//!
//! The arm64 and armv7 binaries run under qemu-user. binfmt_misc is not
//! mounted on this machine (and registering handlers would change the
//! kernel for everyone on it), so the static emulator is copied into the
//! root as `/qemu` and the chroot runs `/qemu /opstatus ...`: the root then
//! holds the emulator too, itself static, so the check still proves that
//! opstatus needs nothing else from its filesystem.

use crate::support;

use std::os::unix::fs::{PermissionsExt, chown};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::TempDir;
use support::arch::{ARM64, ARMV7, Arch, X86_64};
use support::control_plane::shared;

const NOBODY: u32 = 65532;

/// Builds the root: `/opstatus` (and `/qemu` for a foreign binary), the
/// service-account files, and `/run` (the only writable directory, as an
/// emptyDir would be).
fn scratch_root(arch: &Arch, token: &str, ca: &str, namespace: &str) -> TempDir {
    let root = TempDir::new("scratch");
    let r = root.path();
    std::fs::set_permissions(r, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut files = vec![(arch.bin(), "opstatus")];
    files.extend(arch.emulator().map(|q| (q.to_path_buf(), "qemu")));
    for (from, to) in files {
        std::fs::copy(from, r.join(to)).unwrap();
        std::fs::set_permissions(r.join(to), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
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

fn in_scratch(arch: &Arch, root: &Path, port: u16, args: &[&str]) -> Command {
    // Absolute: the child's environment (and so PATH) is cleared.
    let mut c = Command::new("/usr/sbin/chroot");
    c.arg(format!("--userspec={NOBODY}:{NOBODY}")).arg(root);
    if arch.qemu.is_some() {
        c.arg("/qemu");
    }
    c.arg("/opstatus").args(args);
    c.env_clear()
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port.to_string())
        .stdin(Stdio::null());
    c
}

fn run(arch: &Arch, root: &Path, port: u16, args: &[&str]) -> Output {
    let out = in_scratch(arch, root, port, args).output().expect("chroot (the scratch check runs as root)");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
        "chroot needs root: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn e2e_scratch_static_binary_runs_alone_as_uid_65532() {
    scratch_check(&X86_64);
}

#[test]
fn e2e_scratch_arm64_binary_runs_alone_as_uid_65532_under_qemu() {
    scratch_check(&ARM64);
}

#[test]
fn e2e_scratch_armv7_binary_runs_alone_as_uid_65532_under_qemu() {
    scratch_check(&ARMV7);
}

fn scratch_check(arch: &Arch) {
    let size = arch.assert_static_within_budget();
    let cp = shared();
    let pod = cp.deploy(&format!("scratch-{}", arch.label.replace('_', "-")));
    let token = std::fs::read_to_string(pod.sa.path().join("token")).unwrap();
    let root = scratch_root(arch, &token, &cp.ca_pem(), &pod.namespace);
    let port = cp.port();
    let run = |args: &[&str]| run(arch, root.path(), port, args);

    let out = run(&["--version"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("opstatus {}", env!("CARGO_PKG_VERSION")));

    let out = run(&["probe", "--ready-file", "/run/ready"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("not ready: no readiness file /run/ready"));

    let out = run(&["once", "--operator-version", "3.1.4"]);
    assert!(out.status.success(), "once in scratch: {}", String::from_utf8_lossy(&out.stderr));
    let doc = cp.status_document(&pod.namespace, "kube9-operator-status").expect("written from scratch");
    assert_eq!((doc["version"].as_str(), doc["health"].as_str()), (Some("3.1.4"), Some("healthy")));

    // The agent, with its readiness file in the one writable directory.
    let mut agent = in_scratch(arch, root.path(), port, &["run", "--interval", "1s", "--ready-file", "/run/ready"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !root.path().join("run/ready").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run(&["probe", "--ready-file", "/run/ready"]);
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    Command::new("kill").arg("-TERM").arg(agent.id().to_string()).status().unwrap();
    let status = agent.wait().unwrap();
    assert_eq!(out.status.code(), Some(0), "probe in scratch: {line}");
    assert!(line.starts_with("ready: health=healthy"), "{line}");
    assert_eq!(status.code(), Some(0));
    assert!(!root.path().join("run/ready").exists(), "removed at exit");
    let how = if arch.qemu.is_some() { " under qemu-user" } else { "" };
    println!(
        "e2e scratch {}: static binary {size} bytes; --version, probe, once and run work as uid {NOBODY} in an \
         empty root{how}",
        arch.label
    );
}
