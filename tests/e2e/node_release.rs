//! End to end on a real node: a release installed as docs/install.md's
//! "Install from a release" says, its `sh` blocks run as written by bash in
//! a directory holding the release's files, with a laptop's kubeconfig
//! (the admin's) and nothing else of this environment: the rendered quick
//! start applied unchanged, the rollout awaited, the release's x86_64
//! binary installed as `opstatus`, and `opstatus get` saying `operated`.
//!
//! The release is the one `scripts/release-check.sh` made (`dist/`), which
//! verified it as "Verify a release" says; its image was published as
//! `127.0.0.1:PORT/team/opstatus` in the check's registry, gone by now. As a
//! cluster whose registry serves another host's name (a pull-through
//! mirror), the node's registry holds the archive under the same path
//! (copied with skopeo over plain HTTP, as "Or load the release archive"
//! says) and containerd is told it serves the published host (a
//! `hosts.toml` in its `certs.d`). kubelet pulls `IMAGE@DIGEST`: the
//! registry's log shows the index fetched by that digest, and the Pod runs
//! that image.

use crate::quick_start::{script, section_blocks};
use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use support::TempDir;
use support::control_plane::{ROOT, shared_status_namespaces};
use support::node::{container_status, shared};

/// The digest of the image index the archive names for `version`.
fn archive_index_digest(archive: &Path, version: &str) -> String {
    let out = Command::new("tar").arg("-xOf").arg(archive).arg("index.json").output().expect("tar");
    assert!(out.status.success(), "{}: {}", archive.display(), String::from_utf8_lossy(&out.stderr));
    let index: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = index["manifests"]
        .as_array()
        .and_then(|m| m.iter().find(|e| e["annotations"]["org.opencontainers.image.ref.name"] == version));
    entry.unwrap_or_else(|| panic!("{} names no {version}: {index}", archive.display()))["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

/// skopeo with `args`; its stdout, or the test fails with its stderr.
fn skopeo(args: &[&str]) -> Vec<u8> {
    let out = Command::new("skopeo")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("skopeo (scripts/release-check.sh installs it)");
    assert!(out.status.success(), "skopeo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn e2e_node_a_release_installs_by_the_docs_and_pulls_its_image_by_digest() {
    let version = env!("CARGO_PKG_VERSION");
    let dist = Path::new(ROOT).join("dist");
    let rendered = dist.join(format!("opstatus-{version}-quick-start.yaml"));
    assert!(
        rendered.exists(),
        "{} is missing: run scripts/release-check.sh (or scripts/release.sh {version}) first",
        rendered.display()
    );
    let archive = dist.join(format!("opstatus-{version}.oci.tar"));
    let index_digest = archive_index_digest(&archive, version);
    // The image the rendered manifest pulls: the published name, pinned.
    let manifest = std::fs::read_to_string(&rendered).unwrap();
    let images: Vec<&str> = manifest.lines().filter_map(|l| l.trim().strip_prefix("image: ")).collect();
    assert_eq!(images.len(), 1, "{manifest}");
    let (published, digest) = images[0].split_once('@').expect("an image pinned by digest");
    assert_eq!(digest, index_digest, "the rendered quick start pins another image than the archive's");
    let (published_host, path) = published.split_once('/').unwrap();

    let node = shared();
    let cp = node.cp();
    let _kube9_system = shared_status_namespaces();
    // The node's registry holds the archive under the published path, and
    // serves the published host's name for containerd.
    let mirrored = format!("{}/{path}", node.registry());
    let dest = format!("docker://{mirrored}:{version}");
    skopeo(&[
        "copy",
        "--quiet",
        "--all",
        "--dest-tls-verify=false",
        &format!("oci-archive:{}:{version}", archive.display()),
        &dest,
    ]);
    let served = skopeo(&["inspect", "--raw", "--tls-verify=false", &format!("docker://{mirrored}@{digest}")]);
    assert_eq!(format!("sha256:{}", sha256_hex(&served)), digest, "the registry's index is not the archive's");
    let hosts = node.dir().join("containerd/certs.d").join(published_host);
    std::fs::create_dir_all(&hosts).unwrap();
    let registry = node.registry();
    std::fs::write(
        hosts.join("hosts.toml"),
        format!(
            "server = \"http://{registry}\"\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
        ),
    )
    .unwrap();
    let registry_log = node.dir().join("log/registry.log");
    let logged_before = std::fs::read_to_string(&registry_log).unwrap_or_default().len();

    // The docs' commands, as written, in a directory of the release's files.
    let blocks = section_blocks("docs/install.md", "## Install from a release");
    let commands = script(&blocks);
    assert!(commands.contains("kubectl apply -f \"opstatus-$VERSION-quick-start.yaml\""), "{commands}");
    assert_eq!(commands.trim().lines().last(), Some("opstatus get"), "the last step is `opstatus get`");
    let expected = blocks.last().filter(|(info, _)| info.is_empty()).expect("the section ends with what get shows");
    let laptop = TempDir::new("release-laptop");
    for entry in std::fs::read_dir(&dist).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), laptop.path().join(entry.file_name())).unwrap();
    }
    let home = laptop.path().display().to_string();
    let started = Instant::now();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &commands])
        .current_dir(laptop.path())
        .env_clear()
        .env("HOME", &home)
        .env("PATH", format!("{home}/.local/bin:/usr/bin:/bin"))
        .env("KUBECONFIG", cp.kubeconfig())
        .env("VERSION", version)
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    let took = started.elapsed();
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the documented commands failed:\n{commands}\nstdout: {shown}\nstderr: {}\nkubelet events:\n{}",
        String::from_utf8_lossy(&out.stderr),
        node.events_text("kube9-system")
    );
    for line in expected.1.lines().filter(|l| !l.trim().is_empty()) {
        assert!(shown.lines().any(|l| l == line), "the docs promise {line:?}; the commands printed:\n{shown}");
    }

    // kubelet ran the pinned image, pulled by its digest from the node's registry.
    let pods = node.pods("kube9-system", "app.kubernetes.io/name=opstatus");
    assert_eq!(pods.len(), 1, "{pods:?}");
    let opstatus = container_status(&pods[0], "opstatus");
    // Pulled by digest alone, containerd names the image by its repository digest.
    assert_eq!(opstatus["imageID"], images[0], "{opstatus}");
    assert_eq!(opstatus["ready"], true, "{opstatus}");
    let pulled = std::fs::read_to_string(&registry_log).unwrap_or_default();
    let fetch = format!("/v2/{path}/manifests/{digest}");
    assert!(
        pulled[logged_before..].contains(&fetch),
        "the registry's log has no {fetch}:\n{}",
        &pulled[logged_before..]
    );
    let doc = cp.status_document("kube9-system", "kube9-operator-status").expect("the status");
    assert_eq!(doc["health"].as_str(), Some("healthy"), "{doc}");
    crate::node_quick_start::leave_the_status_to_nobody(cp, "kube9-system", "opstatus");
    std::fs::remove_dir_all(&hosts).unwrap();
    println!(
        "e2e node release (kubelet {}): docs/install.md's \"Install from a release\" ran as written in {:.1} s; \
         kubelet pulled {} from the node's registry; `opstatus get` from the release's binary showed\n{shown}",
        node.version(),
        took.as_secs_f64(),
        images[0],
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
