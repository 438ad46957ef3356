#!/usr/bin/env bash
# The footprint benchmark (not a test): opstatus beside a kubectl apply loop
# and the official Python client, against a real kube-apiserver on loopback.
# Installs what it needs (the control plane build, the static binary, a
# virtualenv with the pinned Python client in the cache directory) and
# prints a Markdown table. Takes about 6 minutes.
#
#   scripts/bench.sh [--runs 3] [--heartbeats 30]
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${OPSTATUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opstatus}"

scripts/control-plane.sh build >/dev/null
bin=$(scripts/static-build.sh)
venv="$cache/bench-venv-$(sha256sum bench/requirements.txt | cut -c1-12)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements.txt
fi
exec python3 bench/bench.py --opstatus "$bin" --python "$venv/bin/python" "$@"
