#!/usr/bin/env bash
# The soak (not a unit test): the static opstatus against a real
# kube-apiserver for many heartbeats at 1 s, with a fault every
# --fault-every heartbeats (API server restart, token rotation, RBAC revoked
# then restored). Prints a summary; exits non-zero on an exit of opstatus,
# an unrecovered fault, or growth of its anonymous memory. The full run is 10,000 heartbeats
# (2.8 hours); scripts/test.sh runs a short one.
#
#   scripts/soak.sh [--heartbeats 10000] [--fault-every 180]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/control-plane.sh build >/dev/null
bin=$(scripts/static-build.sh x86_64-unknown-linux-musl)
exec python3 bench/soak.py --opstatus "$bin" "$@"
