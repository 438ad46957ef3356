#!/usr/bin/env bash
# Builds the static binary the scratch image holds:
# target/x86_64-unknown-linux-musl/release/opstatus. Installs the musl
# target and Debian's musl-tools (ring's C parts need a musl C compiler)
# when missing. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly TARGET=x86_64-unknown-linux-musl

if ! rustup target list --installed | grep -qx "$TARGET"; then
  rustup target add "$TARGET" >&2
fi
if ! dpkg-query -W -f='${Status}' musl-tools 2>/dev/null | grep -q 'install ok installed'; then
  if [ "$(id -u)" -eq 0 ]; then apt-get update -qq && apt-get install -y -qq musl-tools >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq musl-tools >/dev/null; fi
fi
cargo build --locked --release --target "$TARGET" >&2
echo "$PWD/target/$TARGET/release/opstatus"
