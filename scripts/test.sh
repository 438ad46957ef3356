#!/usr/bin/env bash
# The test command (README, .ci/run): on a fresh machine of this kind it
# installs what it needs (Debian packages; the kube-apiserver build, cached
# outside the repository), then runs formatting and lint checks, the unit
# and integration tests, and the end-to-end tests against the real API
# server. The end-to-end tests drive the release binary and the static one
# (the scratch check), so both are built first. A missing API server fails
# the end-to-end tests; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/control-plane.sh build >/dev/null
command -v kubectl >/dev/null || { echo "test.sh: kubectl is required" >&2; exit 1; }
scripts/static-build.sh >/dev/null
# The image check builds the Containerfile's offline path with buildah.
if ! command -v buildah >/dev/null; then
  sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  sudo_if_needed apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq buildah >/dev/null
fi

cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
cargo build --locked --release
# A short soak (60 heartbeats, six injected faults); the full one is 10,000.
scripts/soak.sh --heartbeats 60 --fault-every 10
cargo test --locked --no-fail-fast
