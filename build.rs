//! Build script: how the static binaries (`crt-static`: the musl targets
//! the scratch images hold under a 2 MiB budget) are linked.
//!
//! - Without unwind tables (`build/no-unwind-tables.ld`, and no
//!   `.eh_frame_hdr`), in the release profile, which sets `panic = "abort"`:
//!   nothing unwinds, the tables serve only a backtrace, and a panic still
//!   prints its message before it aborts. (Cargo's `CARGO_CFG_PANIC` does
//!   not follow the profile's `panic`, so the profile is what is asked.)
//! - On the targets where it cuts the idle RSS (`TEXT_ORDER_ARCHES`), with
//!   the functions a steady opstatus runs first (`build/text-order.ld`,
//!   written by `bench/text_order.py`), so that the code it never runs
//!   shares no page with them and is not mapped ([footprint](docs/footprint.md)).
//!   The list's `INSERT BEFORE .text` needs GNU ld or lld: a build asked to
//!   link with gold or mold stops here and says so. The link map is
//!   written beside the binary (`target/TARGET/PROFILE/opstatus.map`);
//!   `scripts/static-build.sh` reads it and fails when the list names too
//!   few of the functions linked (`bench/text_order.py --check`).
//!
//! Other builds (tests, the dynamic binary) keep the tables and the
//! compiler's order. `OPSTATUS_TEXT_ORDER=off` links without the list, to
//! measure what it is worth.

use std::env::var;
use std::path::{Path, PathBuf};

/// `CARGO_CFG_TARGET_ARCH` of the targets whose idle RSS the list cuts,
/// measured at the 60 s default (docs/footprint.md, "Steady RSS").
const TEXT_ORDER_ARCHES: &[&str] = &["x86_64"];

fn main() {
    println!("cargo:rerun-if-changed=build/no-unwind-tables.ld");
    println!("cargo:rerun-if-changed=build/text-order.ld");
    println!("cargo:rerun-if-env-changed=OPSTATUS_TEXT_ORDER");
    let static_crt = var("CARGO_CFG_TARGET_FEATURE").is_ok_and(|f| f.split(',').any(|f| f == "crt-static"));
    if !static_crt {
        if var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "musl") {
            println!(
                "cargo:warning=a musl build without crt-static in its flags: linked with the unwind tables and \
                 without build/text-order.ld (.cargo/config.toml says +crt-static; RUSTFLAGS replaces it)"
            );
        }
        return;
    }
    let root = var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    if var("PROFILE").is_ok_and(|p| p == "release") {
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{root}/build/no-unwind-tables.ld");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-eh-frame-hdr");
    }
    let map = link_map();
    let pays = var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| TEXT_ORDER_ARCHES.contains(&arch.as_str()));
    let wanted = var("OPSTATUS_TEXT_ORDER").map_or(true, |v| v != "off");
    if !(pays && wanted) {
        // No list, nothing to check: a map of an earlier build must not
        // stand in for this one's.
        let _ = std::fs::remove_file(&map);
        return;
    }
    if let Some(linker) = linker_without_insert() {
        panic!(
            "build/text-order.ld needs GNU ld or lld (its `INSERT BEFORE .text`); this build links with {linker}. \
             Link the static binaries with GNU ld (the default of the C compilers .cargo/config.toml names) or \
             lld, or set OPSTATUS_TEXT_ORDER=off for a build without the list (its idle RSS is higher: \
             docs/footprint.md)"
        );
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-T,{root}/build/text-order.ld");
    println!("cargo:rustc-link-arg-bins=-Wl,-Map={}", map.display());
}

/// `target/TARGET/PROFILE/opstatus.map`: beside the binary. `OUT_DIR` is
/// `target/TARGET/PROFILE/build/opstatus-HASH/out`.
fn link_map() -> PathBuf {
    let out = PathBuf::from(var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile_dir = out.ancestors().nth(3).map_or_else(|| out.clone(), Path::to_path_buf);
    profile_dir.join("opstatus.map")
}

/// gold or mold, when the flags cargo passes to rustc or the linker it
/// resolved for the target (`.cargo/config.toml`, `CARGO_TARGET_…_LINKER`)
/// ask for one of them: neither links with `INSERT BEFORE` (gold cannot
/// parse the script; mold stops at `SECTIONS`, an unknown token to it), and
/// neither says why.
fn linker_without_insert() -> Option<String> {
    let flags = var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let linker = var("RUSTC_LINKER").unwrap_or_default();
    let said = flags.split('\x1f').chain([linker.as_str()]);
    said.into_iter().find_map(|word| {
        let word = word.rsplit('/').next().unwrap_or(word);
        ["fuse-ld=gold", "fuse-ld=mold", "ld.gold", "ld.mold", "mold"]
            .iter()
            .any(|bad| word.ends_with(bad))
            .then(|| word.to_string())
    })
}
