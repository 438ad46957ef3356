//! Build script: the static (musl) release binaries, which the scratch
//! images hold under a 2 MiB budget, are linked without unwind tables
//! (`build/no-unwind-tables.ld`, and no `.eh_frame_hdr`). With
//! `panic = "abort"` nothing unwinds: the tables serve only a backtrace,
//! and a panic still prints its message before it aborts. Their code is
//! laid out with the functions a steady opstatus runs first
//! (`build/text-order.ld`, written by `bench/text_order.py`), so that the
//! code it never runs shares no page with them and is not mapped: the
//! steady RSS ([footprint](docs/footprint.md)). Other builds (tests, the
//! dynamic binary) keep the tables and the compiler's order.

fn main() {
    println!("cargo:rerun-if-changed=build/no-unwind-tables.ld");
    println!("cargo:rerun-if-changed=build/text-order.ld");
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "musl");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if musl && release {
        let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{root}/build/no-unwind-tables.ld");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-eh-frame-hdr");
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{root}/build/text-order.ld");
    }
}
