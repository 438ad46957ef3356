#!/usr/bin/env bash
# Installs what the three static binaries need to build and to be tested
# (idempotent; Debian 12, root or sudo):
#
# - Debian packages: musl-tools (x86_64's C compiler for ring), the glibc
#   cross compilers and their libc headers for aarch64 and armhf (see
#   .cargo/config.toml for why glibc compilers build musl binaries),
#   qemu-user-static (the arm binaries run under it in the tests), binutils
#   (objcopy reads the embedded dependency list back).
# - Rust targets. armv7-unknown-linux-musleabihf has no rust-std in the
#   Rust 1.95.0 release (`available = false` in channel-rust-1.95.0.toml,
#   and in every later channel checked, up to nightly) but 1.94.1 ships
#   it, so that one target builds with the 1.94.1 toolchain
#   (`cargo +1.94.1 ...`; rust-version is 1.88, so nothing is lost).
# - cargo-auditable (from crates.io), which embeds the dependency list in
#   each binary for trivy/grype/syft.
#
#   scripts/cross-setup.sh            install everything
#   scripts/cross-setup.sh packages   only the Debian packages
#   scripts/cross-setup.sh toolchain TARGET   print the toolchain for TARGET
set -euo pipefail
cd "$(dirname "$0")/.."

readonly TARGETS=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf)
readonly ARMV7_TOOLCHAIN=1.94.1
readonly CARGO_AUDITABLE_VERSION=0.7.7
readonly PACKAGES=(
  musl-tools
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
  qemu-user-static binutils python3
)

# The toolchain that builds TARGET: the default one, except for armv7.
toolchain_for() {
  case "$1" in
    armv7-unknown-linux-musleabihf) echo "$ARMV7_TOOLCHAIN" ;;
    *) rustup show active-toolchain | cut -d' ' -f1 ;;
  esac
}

if [ "${1:-}" = toolchain ]; then
  toolchain_for "${2:?usage: cross-setup.sh toolchain TARGET}"
  exit 0
fi

log() { printf 'cross-setup: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "${1:-}" != packages ] || exit 0

for target in "${TARGETS[@]}"; do
  toolchain=$(toolchain_for "$target")
  if ! rustup toolchain list | grep -q "^$toolchain"; then
    log "installing toolchain $toolchain"
    rustup toolchain install "$toolchain" --profile minimal >&2
  fi
  if ! rustup +"$toolchain" target list --installed | grep -qx "$target"; then
    log "adding target $target to $toolchain"
    rustup +"$toolchain" target add "$target" >&2
  fi
done

# (`cargo auditable --version` is cargo's own version: ask cargo install.)
if ! cargo install --list | grep -qx "cargo-auditable v$CARGO_AUDITABLE_VERSION:"; then
  log "installing cargo-auditable $CARGO_AUDITABLE_VERSION"
  cargo install --quiet --locked --version "$CARGO_AUDITABLE_VERSION" cargo-auditable >&2
fi
