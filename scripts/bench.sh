#!/usr/bin/env bash
# The footprint benchmark (not a test): opstatus beside a kubectl apply loop
# and the official Python client, against a real kube-apiserver on loopback.
# Installs what it needs (the control plane build, the static binaries, a
# virtualenv with the pinned Python client in the cache directory) and
# prints Markdown tables: at a 1 s interval (3 runs of 30 heartbeats), then
# at 1 s, 30 s and 60 s with all three tools at once (30 heartbeats at 1 s,
# 5 at 30 s and 60 s, 5 runs each), with the instructions table before it.
# Takes about 70 minutes (--repeat 1: about 25).
#
#   scripts/bench.sh [--runs 3] [--heartbeats 30] [--long-heartbeats 5]
#                    [--default-intervals 1,30,60] [--also before=PATH]
#
# Only the real-intervals table, at the intervals given (--repeat: runs per
# interval, 5 by default, the tools' start order rotated between runs; each
# cell the median of the runs' medians, with their least and most), and
# before it, with 1 s among the intervals, user-space instructions per
# steady heartbeat at 1 s under `valgrind --tool=callgrind` (3 runs of 20
# heartbeats; --instructions-only: that table alone, about 5 minutes):
#
#   scripts/bench.sh --intervals 30,60 [--no-kubectl] [--repeat 5] [--shipped]
#                    [--also LABEL=PATH [--also-env LABEL=VAR=VALUE]]
#
# --shipped runs every opstatus as the shipped sidecar does
# (manifests/components/opstatus): --watch-url (an operator endpoint served
# by the benchmark, keeping its connections), --listen, --ready-file. The
# footprint's figures: --intervals 60 --no-kubectl --no-peers
# --long-heartbeats 5 --repeat 3 --shipped (docs/footprint.md).
#   scripts/bench.sh --intervals 1 --instructions-only --no-kubectl
#                    [--instruction-runs 3] [--instruction-heartbeats 20]
#                    [--callgrind-out DIR]
#
# The real-intervals table also runs the peers of bench/peers (a dev-only
# Cargo project, not part of the workspace; built here, release profile):
# kube-rs doing the same server-side apply ("kube-rs"), and the floor, a
# bare rustls connection writing one pre-serialised PATCH per heartbeat
# ("floor"). --no-peers leaves them out.
#
# The probe-scale mode instead (bench/probe_scale.py: OLM probes over
# 1,000 and 10,000 Foos by default, opstatus beside a kube-rs reflector and a
# client-go informer of bench/peers, all at once; about 15 minutes, and
# 15 more for --scales 1000,10000,50000):
#
#   scripts/bench.sh --probe-scale [--scales 1000,10000] [--window 120]
#                    [--flips 6] [--no-peers]
#
# The timings mode (bench/timings.py, about a minute): the first status
# write after the start, the heartbeat gaps at 1 s and a probe's answer
# time, per run; the latencies the tests leave to this benchmark, as they
# judge time by order and count:
#
#   scripts/bench.sh --timings [--runs 3] [--heartbeats 20] [--probes 200]
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${OPSTATUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opstatus}"

scripts/control-plane.sh build >/dev/null
if [ "${1:-}" = --timings ]; then
  shift
  bin=$(scripts/static-build.sh x86_64-unknown-linux-musl)
  exec python3 bench/timings.py --opstatus "$bin" "$@"
fi
# All three static binaries (x86_64, arm64, armv7, in that order): the
# benchmark runs the x86_64 one and prints the sizes of all three, and the
# arm64 one's RSS under qemu-user.
mapfile -t bins < <(scripts/static-build.sh)
bin=${bins[0]}
if [ "${1:-}" = --probe-scale ]; then
  shift
  peers=()
  if [[ " $* " != *" --no-peers "* ]]; then
    cargo build --quiet --release --manifest-path bench/peers/Cargo.toml --bin kube-reflector
    peers=(--peer kube-rs=bench/peers/target/release/kube-reflector
           --peer client-go="$(bench/peers/client-go/build.sh)")
  fi
  args=()
  for a in "$@"; do [ "$a" = --no-peers ] || args+=("$a"); done
  exec python3 bench/probe_scale.py --opstatus "$bin" "${peers[@]}" "${args[@]}"
fi
peers=()
if [[ " $* " != *" --no-peers "* ]]; then
  cargo build --quiet --release --manifest-path bench/peers/Cargo.toml
  peers=(--peer kube-rs=bench/peers/target/release/kube-writer --peer floor=bench/peers/target/release/floor-writer)
fi
args=()
for a in "$@"; do [ "$a" = --no-peers ] || args+=("$a"); done
set -- "${args[@]}"
venv="$cache/bench-venv-$(sha256sum bench/requirements.txt | cut -c1-12)"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements.txt
fi
exec python3 bench/bench.py --opstatus "$bin" --python "$venv/bin/python" "${peers[@]}" \
  --static x86_64="${bins[0]}" --static arm64="${bins[1]}" --static armv7="${bins[2]}" \
  --qemu-arm64 /usr/bin/qemu-aarch64-static "$@"
