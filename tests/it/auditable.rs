//! Scanners can see what is inside the scratch image: each static binary
//! carries its dependency list the way Rust distributions ship it
//! (cargo-auditable's `.dep-v0` section: zlib-compressed JSON), which
//! trivy, grype and syft read from a binary when there is no package
//! database. Read back here from each built binary, and checked against
//! Cargo.lock.

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use support::arch::{ALL, Elf};
use support::control_plane::ROOT;

/// zlib inflate, by python3 (scripts/cross-setup.sh installs it): a
/// decompressor crate would be a dev-dependency for this one test.
fn inflate(compressed: &[u8]) -> Vec<u8> {
    let mut child = Command::new("python3")
        .args(["-c", "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/cross-setup.sh installs it)");
    child.stdin.take().unwrap().write_all(compressed).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "not zlib data: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// name → versions, from Cargo.lock.
fn locked() -> BTreeMap<String, Vec<String>> {
    let lock = std::fs::read_to_string(format!("{ROOT}/Cargo.lock")).unwrap();
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().trim_matches('"').to_string())
        };
        found.entry(field("name = ").unwrap()).or_default().push(field("version = ").unwrap());
    }
    found
}

#[test]
fn each_static_binary_embeds_its_dependency_list_for_scanners() {
    let locked = locked();
    for arch in ALL {
        let bin = arch.bin();
        let bytes = std::fs::read(&bin).unwrap();
        let elf = Elf::parse(&bytes).unwrap();
        let section = elf.section(&bytes, ".dep-v0").unwrap_or_else(|| {
            panic!(
                "{}: no .dep-v0 section: build with `cargo auditable build` (scripts/static-build.sh)",
                bin.display()
            )
        });
        let deps: Value = serde_json::from_slice(&inflate(section)).expect("the dependency list is JSON");
        let packages = deps["packages"].as_array().expect("packages");
        let version = |name: &str| {
            packages.iter().find(|p| p["name"] == name).and_then(|p| p["version"].as_str()).map(str::to_string)
        };

        let root = packages.iter().find(|p| p["root"] == true).expect("the root package");
        assert_eq!(
            (root["name"].as_str(), root["version"].as_str()),
            (Some("opstatus"), Some(env!("CARGO_PKG_VERSION")))
        );
        // What runs is listed at its locked version (ring and rustls are what
        // a scanner most needs to see) ...
        for name in ["ring", "rustls", "ureq", "serde_json", "mio", "signal-hook", "env_logger", "log", "httpdate"] {
            let v = version(name).unwrap_or_else(|| panic!("{}: {name} missing from the list", arch.label));
            assert_eq!(Some(&vec![v.clone()]), locked.get(name), "{}: {name} {v}", arch.label);
        }
        // ... every entry is a locked package, and test-only crates are not in it.
        for p in packages {
            let (name, v) = (p["name"].as_str().unwrap(), p["version"].as_str().unwrap());
            if p["source"] == "crates.io" {
                assert!(
                    locked.get(name).is_some_and(|vs| vs.iter().any(|l| l == v)),
                    "{name} {v} is not in Cargo.lock"
                );
            }
        }
        assert!(version("rcgen").is_none(), "{}: a dev-dependency is listed", arch.label);
        println!(
            "{}: .dep-v0 {} bytes compressed, {} packages (opstatus {})",
            arch.label,
            section.len(),
            packages.len(),
            env!("CARGO_PKG_VERSION")
        );
    }
}
