#!/usr/bin/env bash
# Builds the static (musl) binaries the scratch images hold, one target at a
# time (the machine is small), after scripts/cross-setup.sh has installed
# the compilers, targets and cargo-auditable. Prints each binary's path, one
# a line, in the order of the arguments.
#
#   scripts/static-build.sh            all three: x86_64, aarch64, armv7
#   scripts/static-build.sh TARGET...  only these
#
# Each is `cargo auditable build --release --target TARGET`: a plain cargo
# build (linkers and C compilers come from .cargo/config.toml) that also
# embeds the dependency list (section .dep-v0) for image scanners.
# Each binary is also linked as target/platforms/PLATFORM/opstatus (amd64,
# arm64, armv7: TARGETARCH and TARGETVARIANT run together), where the
# Containerfile's offline path finds it for `--platform`.
# Where build.rs links the binary with build/text-order.ld (the code a
# steady agent runs first: the idle RSS), it also has the linker write the
# link map beside it (opstatus.map); this fails the build when the list no
# longer names enough of the functions linked, or the linker did not apply
# it, and says how to fix it (`python3 bench/text_order.py --check`).
# OPSTATUS_BUILD_TIMES=FILE appends "TARGET SECONDS" per build to FILE.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=("$@")
[ "${#targets[@]}" -gt 0 ] ||
  targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf)

scripts/cross-setup.sh
for target in "${targets[@]}"; do
  toolchain=$(scripts/cross-setup.sh toolchain "$target")
  started=$(date +%s)
  cargo +"$toolchain" auditable build --locked --release --target "$target" >&2
  if [ -n "${OPSTATUS_BUILD_TIMES:-}" ]; then
    echo "$target $(($(date +%s) - started))" >>"$OPSTATUS_BUILD_TIMES"
  fi
  map="target/$target/release/opstatus.map"
  if [ -e "$map" ]; then
    python3 bench/text_order.py --check "$map" || exit 1
  fi
  case "$target" in
    x86_64-*) platform=amd64 ;;
    aarch64-*) platform=arm64 ;;
    armv7-*) platform=armv7 ;;
  esac
  mkdir -p "target/platforms/$platform"
  ln -f "target/$target/release/opstatus" "target/platforms/$platform/opstatus"
  echo "$PWD/target/$target/release/opstatus"
done
