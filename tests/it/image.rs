//! The container image, built from the Containerfile's offline path (the
//! `prebuilt` target: the static binary already built, nothing pulled) with
//! buildah, which needs no daemon. It must hold only `/opstatus`, run as
//! 65532, and start opstatus; and the multi-arch index built from the three
//! static binaries must hold one such image per platform.

use crate::support;

use serde_json::Value;
use std::process::Command;
use support::TempDir;
use support::arch::ALL;
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
    // No stand-in address: the source is the builder's to give (below).
    assert_eq!(config["Labels"]["org.opencontainers.image.source"], "");
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
    assert_eq!(
        size,
        std::fs::metadata(static_bin()).unwrap().len(),
        "the image holds another binary than {}: run scripts/static-build.sh (it stages target/platforms/)",
        static_bin().display()
    );
    assert!(listing.starts_with("-rwxr-xr-x"), "{listing}");
}

/// The source label the index is built with (`--build-arg`, as
/// docs/install.md has the user give it).
const SOURCE_URL: &str = "https://git.example/team/opstatus";

/// The multi-arch image index, assembled offline the way docs/install.md
/// says: one `--platform` build of the `prebuilt` target per static binary,
/// each added to a manifest list, pushed as an OCI archive and read back.
#[test]
fn the_multi_arch_index_holds_one_scratch_image_per_platform() {
    let storage = TempDir::new("index");
    let s = storage.path();
    buildah(s, &["manifest", "create", "opstatus:index"]);
    for arch in ALL {
        arch.assert_static_within_budget(); // Fails clearly when missing or stale.
        let platform =
            format!("linux/{}{}", arch.oci_arch, arch.oci_variant.map(|v| format!("/{v}")).unwrap_or_default());
        let tag = format!("opstatus:{}", arch.label);
        buildah(
            s,
            &[
                "build",
                "--quiet",
                "--platform",
                &platform,
                "--target",
                "prebuilt",
                "--build-arg",
                &format!("SOURCE_URL={SOURCE_URL}"),
                "-f",
                "Containerfile",
                "-t",
                &tag,
                ".",
            ],
        );
        buildah(s, &["manifest", "add", "opstatus:index", &format!("containers-storage:localhost/{tag}")]);
    }
    let archive = s.join("index.tar");
    buildah(
        s,
        &["manifest", "push", "--quiet", "--all", "opstatus:index", &format!("oci-archive:{}", archive.display())],
    );
    let oci = s.join("oci");
    std::fs::create_dir(&oci).unwrap();
    assert!(Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&oci).status().unwrap().success());
    let blob_path =
        |digest: &Value| oci.join("blobs/sha256").join(digest.as_str().unwrap().trim_start_matches("sha256:"));
    let blob =
        |digest: &Value| -> Value { serde_json::from_slice(&std::fs::read(blob_path(digest)).unwrap()).unwrap() };

    // index.json names the image index (the manifest list) ...
    let top: Value = serde_json::from_slice(&std::fs::read(oci.join("index.json")).unwrap()).unwrap();
    let index = match top["manifests"][0]["mediaType"].as_str() {
        Some("application/vnd.oci.image.index.v1+json") => blob(&top["manifests"][0]["digest"]),
        _ => top.clone(),
    };
    let manifests = index["manifests"].as_array().expect("an image index");
    assert_eq!(manifests.len(), 3, "three platforms: {index}");
    // ... and each platform's image is the scratch image of its binary.
    for arch in ALL {
        let entry = manifests
            .iter()
            .find(|m| m["platform"]["architecture"] == arch.oci_arch)
            .unwrap_or_else(|| panic!("no {} image in {index}", arch.oci_arch));
        assert_eq!(entry["platform"]["os"], "linux");
        assert_eq!(entry["platform"]["variant"].as_str(), arch.oci_variant, "{}", arch.label);
        let manifest = blob(&entry["digest"]);
        let config = blob(&manifest["config"]["digest"]);
        assert_eq!((config["os"].as_str(), config["architecture"].as_str()), (Some("linux"), Some(arch.oci_arch)));
        assert_eq!(config["variant"].as_str(), arch.oci_variant, "{}: the config names the variant", arch.label);
        assert_eq!(config["config"]["User"], "65532:65532", "{}: non-root", arch.label);
        assert_eq!(config["config"]["Entrypoint"], serde_json::json!(["/opstatus"]));
        let labels = &config["config"]["Labels"];
        assert_eq!(labels["org.opencontainers.image.version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
        assert_eq!(labels["org.opencontainers.image.source"], SOURCE_URL, "{labels}");
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{}: one layer", arch.label);

        // The layer holds exactly this architecture's binary, byte for byte.
        let unpacked = s.join(format!("layer-{}", arch.label));
        std::fs::create_dir(&unpacked).unwrap();
        let layer = blob_path(&layers[0]["digest"]);
        let listing = Command::new("tar").arg("-tf").arg(&layer).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&listing.stdout).trim(), "opstatus", "{}", arch.label);
        assert!(Command::new("tar").arg("-xf").arg(&layer).arg("-C").arg(&unpacked).status().unwrap().success());
        let inside = std::fs::read(unpacked.join("opstatus")).unwrap();
        assert!(
            inside == std::fs::read(arch.bin()).unwrap(),
            "{}: the image holds another binary than {}: run scripts/static-build.sh (it stages target/platforms/)",
            arch.label,
            arch.bin().display()
        );
        println!(
            "image index: linux/{} {:?}: one layer, /opstatus {} bytes, user 65532",
            arch.oci_arch,
            arch.oci_variant,
            inside.len()
        );
    }
}
