//! End to end on a real node: the release's OCI archive
//! (`dist/opstatus-VERSION.oci.tar`, written by `scripts/release.sh`;
//! `scripts/release-check.sh` runs it first) copied into the node's
//! loopback registry with skopeo, all three platforms, as docs/install.md
//! says ("Or load the release archive"), and run as the quick start's
//! image: kubelet pulls the amd64 image from the index, starts it, and the
//! Pod is Ready with the status written.

use crate::support;

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::control_plane::{ROOT, unique_namespace};
use support::node::{container_status, shared};

/// The digest of the image index the archive names for `version`.
fn archive_index_digest(archive: &str, version: &str) -> String {
    let out = Command::new("tar").args(["-xOf", archive, "index.json"]).output().expect("tar");
    assert!(out.status.success(), "{archive}: {}", String::from_utf8_lossy(&out.stderr));
    let index: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = index["manifests"]
        .as_array()
        .and_then(|m| m.iter().find(|e| e["annotations"]["org.opencontainers.image.ref.name"] == version));
    entry.unwrap_or_else(|| panic!("{archive} names no {version}: {index}"))["digest"].as_str().unwrap().to_string()
}

#[test]
fn e2e_node_the_release_archive_runs_as_the_quick_starts_image() {
    let version = env!("CARGO_PKG_VERSION");
    let archive = format!("{ROOT}/dist/opstatus-{version}.oci.tar");
    assert!(
        std::path::Path::new(&archive).exists(),
        "{archive} is missing: run scripts/release-check.sh (or scripts/release.sh {version}) first"
    );
    let index_digest = archive_index_digest(&archive, version);
    let node = shared();
    let cp = node.cp();
    let repository = format!("{}/team/opstatus-release", node.registry());
    let copied = Command::new("skopeo")
        .args(["copy", "--quiet", "--all", "--dest-tls-verify=false"])
        .arg(format!("oci-archive:{archive}:{version}"))
        .arg(format!("docker://{repository}:{version}"))
        .stdin(Stdio::null())
        .output()
        .expect("skopeo (scripts/release-check.sh installs it)");
    assert!(copied.status.success(), "skopeo copy: {}", String::from_utf8_lossy(&copied.stderr));
    // The registry holds the index as it was released: same digest.
    let inspected = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false"])
        .arg(format!("docker://{repository}:{version}"))
        .output()
        .expect("skopeo");
    assert!(inspected.status.success(), "{}", String::from_utf8_lossy(&inspected.stderr));
    let pushed = format!("sha256:{}", sha256_hex(&inspected.stdout));
    assert_eq!(pushed, index_digest, "the registry's index is not the archive's");

    // The quick start's Deployment, its image the release's.
    let ns = unique_namespace("node-release");
    cp.create_namespace(&ns);
    cp.apply_base_manifests(&ns);
    let image = format!("{repository}:{version}");
    let deployment = std::fs::read_to_string(format!("{ROOT}/manifests/examples/quick-start/deployment.yaml"))
        .unwrap()
        .replace(&format!("image: opstatus:{version}"), &format!("image: {image}"));
    assert!(deployment.contains(&image), "{deployment}");
    cp.kubectl_stdin_ok(&["-n", &ns, "apply", "-f", "-"], Some(&deployment));
    let pod = node.wait_ready(&ns, "app.kubernetes.io/name=opstatus", 1, Duration::from_secs(180)).remove(0);
    let opstatus = container_status(&pod, "opstatus");
    assert_eq!(opstatus["image"], image, "{opstatus}");
    assert!(opstatus["state"]["running"].is_object(), "{opstatus}");
    let image_id = opstatus["imageID"].as_str().unwrap_or_default();
    let doc = cp.status_document(&ns, "kube9-operator-status").expect("the status");
    assert_eq!(doc["health"].as_str(), Some("healthy"), "{doc}");
    println!(
        "e2e node release (kubelet {}): the archive's index {index_digest} copied to {repository}, pulled as \
         {image_id}, Ready and healthy",
        node.version()
    );
}

/// SHA-256 of `bytes`, hex, by sha256sum (coreutils): what a registry's
/// digest of the same bytes is.
fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("sha256sum");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}
