//! The container image, built from the Containerfile's offline path (the
//! `prebuilt` target: the static binary already built, nothing pulled) with
//! buildah, which needs no daemon. It must hold only `/opstatus`, run as
//! 65532, and start opstatus.

mod support;

use serde_json::Value;
use std::process::Command;
use support::TempDir;
use support::control_plane::{ROOT, static_bin};

fn buildah(storage: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("buildah")
        .args(["--storage-driver", "vfs", "--root"])
        .arg(storage.join("root"))
        .arg("--runroot")
        .arg(storage.join("runroot"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("buildah (scripts/test.sh installs it)");
    assert!(out.status.success(), "buildah {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_scratch_image_holds_only_the_static_binary_and_runs_as_65532() {
    static_bin(); // Fails with a clear message when it is missing or stale.
    let storage = TempDir::new("image");
    buildah(
        storage.path(),
        &["build", "--quiet", "--target", "prebuilt", "-f", "Containerfile", "-t", "opstatus:test", "."],
    );
    let inspect: Value =
        serde_json::from_str(&buildah(storage.path(), &["inspect", "--type", "image", "opstatus:test"])).unwrap();
    let config = &inspect["OCIv1"]["config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Entrypoint"], serde_json::json!(["/opstatus"]));
    assert_eq!(config["Cmd"], serde_json::json!(["run"]));
    assert_eq!(config["Labels"]["org.opencontainers.image.title"], "opstatus");
    assert_eq!(config["Labels"]["org.opencontainers.image.version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(inspect["OCIv1"]["rootfs"]["diff_ids"].as_array().unwrap().len(), 1, "one layer");

    // The layer's contents: the binary and nothing else.
    let archive = storage.path().join("image.tar");
    buildah(storage.path(), &["push", "--quiet", "opstatus:test", &format!("oci-archive:{}", archive.display())]);
    let unpacked = storage.path().join("oci");
    std::fs::create_dir(&unpacked).unwrap();
    assert!(Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&unpacked).status().unwrap().success());
    let index: Value = serde_json::from_slice(&std::fs::read(unpacked.join("index.json")).unwrap()).unwrap();
    let blob = |digest: &str| unpacked.join("blobs/sha256").join(digest.trim_start_matches("sha256:"));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(blob(index["manifests"][0]["digest"].as_str().unwrap())).unwrap())
            .unwrap();
    let layer = blob(manifest["layers"][0]["digest"].as_str().unwrap());
    let listing = Command::new("tar").arg("-tvf").arg(&layer).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    let entries: Vec<&str> = listing.lines().map(|l| l.split_whitespace().last().unwrap_or_default()).collect();
    assert_eq!(entries, ["opstatus"], "{listing}");
    let size: u64 = listing.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(size, std::fs::metadata(static_bin()).unwrap().len());
    assert!(listing.starts_with("-rwxr-xr-x"), "{listing}");
}
