#!/usr/bin/env bash
# The test command (README, .ci/run): on a fresh machine of this kind it
# installs what it needs (Debian packages; the Kubernetes v1.20 build,
# cached outside the repository), then runs formatting and lint checks, the
# unit and integration tests, and the end-to-end tests against the real API
# server and the real node. The end-to-end tests drive the static binaries
# the image ships, so they are built first. A missing API server or node
# fails the end-to-end tests; nothing is skipped. The Rust builds start from
# the last run's target/ (kept in the same cache), so a warm run compiles
# only opstatus itself.
#
# The v1.20 build (kube-apiserver, then kubelet, kube-scheduler and
# kube-controller-manager: about 320 CPU-seconds of Go on a fresh machine,
# 3 minutes when it has both cores; a few seconds once cached) runs in the
# background from the start; what does not need it goes on meanwhile (the
# Rust builds and checks, the unit and in-process tests, the v1.36 runs,
# whose binaries are given), and what needs it waits for it, at most
# OPSTATUS_KUBE_BUILD_TIMEOUT seconds (3000). A failed build fails the run
# with its log.
#
# What runs side by side once the x86_64 binary and the tests are built
# (most of an end-to-end test is waiting for heartbeats, API servers and
# kubelets; each run has its own kube-apiserver and etcd on free loopback
# ports); the nodes, the longest, first, and the v1.20 run and the release
# check once the arm64 and armv7 binaries are built too:
#   here             unit and in-process tests
#   older            the v1.20 end-to-end tests but the real-node ones (once
#                    its kube-apiserver is built)
#   current          the end-to-end tests again on v1.36 (the modules below)
#   soak             a short soak on v1.20
#   release          the release check (scripts/release-check.sh)
#   nodes            the real-node tests on v1.36 (once the pause image is
#                    built), then on v1.20 (once its node is built and the
#                    release check, whose release node_release installs, ended):
#                    one node at a time (kubelet v1.20 shares
#                    /var/lib/kubelet/device-plugins and /var/log/pods with
#                    any other kubelet here)
# The other runs' output is kept apart and printed after this one's.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's start, in seconds since the script began, so a slow run shows
# where its time went.
phase() { echo "test.sh: [${SECONDS}s] $*"; }
failed=0

phase "install the Debian packages"
# All of them before any build starts, so that no two apt-get run at once.
scripts/control-plane.sh install-build >/dev/null
scripts/node.sh install
scripts/cross-setup.sh packages
# The image check builds the Containerfile's offline path with buildah; the
# monitoring kit's tests run promtool and a real Prometheus (Debian's
# prometheus package has both).
missing=()
command -v buildah >/dev/null || missing+=(buildah)
# The release check (scripts/release-check.sh) signs with gpg, copies with
# skopeo, reads JSON with jq, and serves the release's image over TLS from a
# docker-registry (node.sh installs it) with a certificate openssl makes.
for tool in skopeo gpg jq openssl; do command -v "$tool" >/dev/null || missing+=("$tool"); done
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  sudo_if_needed apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v kubectl >/dev/null || { echo "test.sh: kubectl is required" >&2; exit 1; }

# --- The v1.20 build, in the background ------------------------------------
# `node.sh build` builds kube-apiserver first (moved into the cache as soon
# as it is linked), then the node's binaries. It runs in a session of its
# own, so that a run that stops early stops the whole build by its group,
# and at a lower priority: the tests beside it measure time (heartbeats,
# deadlines), the build only needs the CPU they leave.
phase "start the Kubernetes v1.20 build (in the background)"
kube_build_log=$(mktemp)
kube_build_pid_file=$(mktemp)
kube_build_status=$(mktemp) # its exit status, once it ended
(
  set +e
  setsid bash -c 'echo "$$" >"$1"; exec nice -n 10 scripts/node.sh build' _ "$kube_build_pid_file" >"$kube_build_log" 2>&1
  echo "$?" >"$kube_build_status"
) &
kube_build_runner=$!
kube_build_deadline=$(($(date +%s) + ${OPSTATUS_KUBE_BUILD_TIMEOUT:-3000}))
stop_kube_build() {
  local pid
  pid=$(cat "$kube_build_pid_file" 2>/dev/null || true)
  if [ -n "$pid" ] && [ ! -s "$kube_build_status" ]; then
    kill -- "-$pid" 2>/dev/null || true
  fi
}
trap stop_kube_build EXIT
kube_built() {
  case "$1" in
    apiserver) scripts/control-plane.sh built ;;
    node) OPSTATUS_KUBE_VERSION=1.20 scripts/node.sh available 2>/dev/null ;;
    pause) OPSTATUS_KUBE_VERSION=bin-dir scripts/node.sh available 2>/dev/null ;;
  esac
}
# Waits until the build has made WHAT (apiserver, node, pause: the image
# a node of the v1.36 binaries needs); fails when the
# build failed or is not done by the deadline (its log is printed at the end).
wait_for_kube() {
  local what=$1
  until kube_built "$what"; do
    if [ -s "$kube_build_status" ]; then
      kube_built "$what" && break
      echo "test.sh: the Kubernetes v1.20 build failed (exit $(cat "$kube_build_status")): no $what (its log is printed at the end)" >&2
      return 1
    fi
    if [ "$(date +%s)" -ge "$kube_build_deadline" ]; then
      echo "test.sh: the Kubernetes v1.20 build made no $what within ${OPSTATUS_KUBE_BUILD_TIMEOUT:-3000} s: stopping it (its log is printed at the end)" >&2
      stop_kube_build
      return 1
    fi
    sleep 5
  done
  case "$what" in
    apiserver) phase "kube-apiserver v1.20 is built" ;;
    node) phase "kubelet, kube-scheduler and kube-controller-manager v1.20 are built" ;;
    pause) phase "the pause image is built" ;;
  esac
}

# --- The Rust build cache ----------------------------------------------------
# A fresh clone has no target/: it starts from the last run's, kept in the
# cache directory beside the v1.20 build (OPSTATUS_CACHE_DIR), so only this
# checkout's own crate is compiled again (cargo's fingerprints tell what
# changed). The copy is saved again once this run's builds are done.
cache_root="${OPSTATUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opstatus}"
cargo_cache="$cache_root/cargo-target"
if [ ! -e target ] && [ -d "$cargo_cache" ]; then
  phase "the Rust build cache ($cargo_cache)"
  cp -a "$cargo_cache" target.from-cache && mv target.from-cache target
fi
# Replaces the cache with this checkout's target/ (one run at a time; a
# copy, then a rename, so no run ever starts from half a copy).
save_cargo_cache() {
  mkdir -p "$cache_root"
  (
    flock 9
    rm -rf "$cargo_cache.new" "$cargo_cache.old"
    cp -a target "$cargo_cache.new"
    [ ! -e "$cargo_cache" ] || mv "$cargo_cache" "$cargo_cache.old"
    mv "$cargo_cache.new" "$cargo_cache"
    rm -rf "$cargo_cache.old"
  ) 9>"$cache_root/cargo-target.lock"
}

# The checks that fail fastest first: a format or lint error fails the run
# in its first minute, before the static builds.
phase "fmt, clippy"
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings

# The end-to-end tests drive the static x86_64 binary, the one the image
# ships (OPSTATUS_BIN; without it they take `cargo build --release`'s). The
# arm64 and armv7 ones are built once the runs that need only it started.
phase "static binary (x86_64)"
scripts/static-build.sh x86_64-unknown-linux-musl >/dev/null
export OPSTATUS_BIN=$PWD/target/x86_64-unknown-linux-musl/release/opstatus
# Three test binaries: the library's unit tests, `tests/it` (in-process)
# and `tests/e2e` (real API server; one control plane per Kubernetes
# version and test process, shared by the tests that do not disturb it;
# one node per test process for the node_* tests).
phase "build the tests"
cargo test --locked --no-run
e2e_bin=$(cargo test --locked --no-run --message-format=json --test e2e |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
[ -x "$e2e_bin" ] || { echo "test.sh: no e2e test binary ($e2e_bin)" >&2; exit 1; }
# The real-node modules (tests/e2e/node_*.rs).
mapfile -t node_modules < <("$e2e_bin" --list | sed -n 's/^\(node_[a-z0-9_]*\)::.*: test$/\1/p' | sort -u)
[ "${#node_modules[@]}" -gt 0 ] || { echo "test.sh: found no node_* tests in $e2e_bin" >&2; exit 1; }

# End-to-end tests wait far more than they compute: more of them at once.
e2e_threads=${OPSTATUS_E2E_THREADS:-6}
# The e2e binary on FLAVOR (1.20 or bin-dir) with ARGS (filters); says how
# long it took.
# Each run also says which of its tests took longest (scripts/lib/test-times.py
# works that out from the time each line was printed), so a slow CI run shows
# where its time went.
run_e2e() {
  local label=$1 flavor=$2 started status=0 stamped listed
  shift 2
  started=$(date +%s)
  stamped=$(mktemp) listed=$(mktemp)
  echo "test.sh: $label"
  OPSTATUS_KUBE_VERSION=$flavor "$e2e_bin" --test-threads="$e2e_threads" "$@" 2>&1 |
    python3 -u -c 'import sys, time
with open(sys.argv[1], "w") as stamped:
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        stamped.write(f"{time.time():.3f} {line}")' "$stamped" || status=1
  echo "test.sh: $label: $(($(date +%s) - started)) s$([ "$status" -eq 0 ] || echo ', FAILED')"
  if "$e2e_bin" --list "$@" >"$listed" 2>/dev/null; then
    echo "test.sh: $label: its slowest tests"
    scripts/lib/test-times.py "$e2e_threads" "$listed" "$stamped" 2>&1 | sed -n "1,8p;9,\${\$p}" || true
  fi
  rm -f "$stamped" "$listed"
  return "$status"
}

# The modules that run again on the current version (the long, purely
# timing ones and those about the image rather than the API server stay on
# v1.20).
current_modules=(heartbeat rbac_revoked token_rotation apiserver_restart operator_condition
  cluster_operator manifests component publisher probe_standby events readiness_outage monitoring
  foreign_writer watch_container quick_start probe_unreadable probe_first_list first_hour get client_certificate
  kept_connection operator_starting probe_cache_list olm_kube9 inertia leader_service pod_deleted
  condition_metrics get_exec handover_writer kubebuilder_layout silent_leader status_deleted)
# Every real-node module runs on both nodes: v1.20's and the current one's
# (kubelet, scheduler and controller-manager from the same directory),
# where the native sidecar runs.

# --- The end-to-end tests again on a current Kubernetes ----------------------
# The modules above again on the kube-apiserver + etcd (and the node's
# binaries) of OPSTATUS_KUBE_BIN_DIR (default ../shared/k8s/v1.36.2 beside
# the repository: v1.36.2). A missing directory fails here with what to
# provide. OPSTATUS_SKIP_CURRENT_KUBE=1 skips these runs out loud on a
# developer's machine; never in CI.
current=1
if [ "${OPSTATUS_SKIP_CURRENT_KUBE:-}" = 1 ] && [ "${CI:-}" != true ]; then
  echo "test.sh: SKIPPED the end-to-end tests on a current kube-apiserver (OPSTATUS_SKIP_CURRENT_KUBE=1)" >&2
  current=
else
  OPSTATUS_KUBE_VERSION=bin-dir scripts/control-plane.sh prepare >/dev/null
  current_version=$(OPSTATUS_KUBE_VERSION=bin-dir scripts/control-plane.sh version | cut -d' ' -f1)
fi

phase "start the end-to-end runs on v1.20 and v1.36 and the soak (in the background)"
# Each run says which Kubernetes it wants; the soak's is v1.20.
export OPSTATUS_KUBE_VERSION=
lanes=() lane_pids=() lane_logs=()
start_lane() {
  local log
  log=$(mktemp)
  lanes+=("$1") lane_logs+=("$log")
  shift
  ("$@") >"$log" 2>&1 &
  lane_pids+=($!)
}
# Filters match parts of test names: `quick_start::` alone would also run
# `node_quick_start::`.
skip_nodes=()
for m in "${node_modules[@]}"; do skip_nodes+=(--skip "$m::"); done
# The longest tests (each minutes of a big list, an API server restart or a
# control plane of its own; each run below names its slowest, see
# `scripts/lib/test-times.py`) in a test process of
# their own beside the others': libtest starts tests in name order, so in
# one process `probe_first_list` started minutes in and set the run's end.
first_modules=(apiserver_restart cluster_operator probe_first_list probe_scale probe_watch)
# LABEL FLAVOR MODULE...: the given modules (all but the nodes' when none)
# in two processes at once, the longest ones and the others.
run_e2e_split() {
  local label=$1 flavor=$2 m status=0 first=() others=() skip_first=()
  shift 2
  for m in "${first_modules[@]}"; do
    if [ "$#" -eq 0 ] || [[ " $* " == *" $m "* ]]; then first+=("$m::"); fi
    skip_first+=(--skip "$m::")
  done
  for m in "$@"; do [[ " ${first_modules[*]} " == *" $m "* ]] || others+=("$m::"); done
  if [ "${#first[@]}" -gt 0 ]; then
    run_e2e "$label (the longest)" "$flavor" "${first[@]}" "${skip_nodes[@]}" &
    local first_pid=$!
  fi
  run_e2e "$label" "$flavor" "${others[@]}" "${skip_first[@]}" "${skip_nodes[@]}" || status=1
  if [ -n "${first_pid:-}" ]; then wait "$first_pid" || status=1; fi
  return "$status"
}
lane_current() {
  run_e2e_split "end-to-end tests on kube-apiserver $current_version" bin-dir "${current_modules[@]}"
}
lane_older() {
  wait_for_kube apiserver || return 1
  run_e2e_split "end-to-end tests on v1.20 (but the real node's)" ""
}
lane_nodes() {
  local status=0 waited=0 rest=()
  # The v1.36 node needs only the pause image from the v1.20 build; the
  # v1.20 node needs its kubelet, kube-scheduler and kube-controller-manager.
  wait_for_kube pause || return 1
  # On a machine shared with other checkouts, OPSTATUS_NODE_LOCK=FILE
  # keeps to one node at a time across them (flock on FILE).
  if [ -n "${OPSTATUS_NODE_LOCK:-}" ]; then
    phase "waiting for the node lock $OPSTATUS_NODE_LOCK"
    exec {node_lock_fd}>>"$OPSTATUS_NODE_LOCK"
    flock "$node_lock_fd"
  fi
  for m in "${node_modules[@]}"; do [ "$m" = node_release ] || rest+=("$m::"); done
  if [ -n "$current" ]; then
    run_nodes "real-node tests on $current_version (but node_release)" bin-dir "${rest[@]}" || status=1
  fi
  # node_release installs the release check's release: once that check ended.
  until [ -s "$release_ended" ] || [ "$waited" -ge 1800 ]; do sleep 5 && waited=$((waited + 5)); done
  wait_for_kube node || return 1
  run_nodes "real-node tests on v1.20" "" "${node_modules[@]/%/::}" || status=1
  if [ -n "$current" ]; then
    run_nodes "real-node tests on $current_version: node_release" bin-dir node_release:: || status=1
  fi
  return "$status"
}
# A node test run without the lock's descriptor: the lock is this script's,
# and a process the tests leave behind must not hold it.
run_nodes() {
  if [ -n "${node_lock_fd:-}" ]; then run_e2e "$@" {node_lock_fd}>&-; else run_e2e "$@"; fi
}

# The release, twice from this checkout (the static binaries above reused):
# reproducible, checksums, SBOMs, provenance, signatures, each platform's
# image run, then docs/install.md's "Verify a release" as written and four
# broken releases it must refuse. It writes its exit status to
# $release_ended when it ends.
release_ended=$(mktemp)
lane_release() {
  local status=0
  scripts/release-check.sh || status=$?
  echo "$status" >"$release_ended"
  return "$status"
}

# A short soak (60 heartbeats, six injected faults; the full one is 10,000).
lane_soak() {
  wait_for_kube apiserver || return 1
  scripts/soak.sh --heartbeats 60 --fault-every 10
}
# Both end-to-end runs at once: they wait for heartbeats, API servers and
# watches far more than they compute, and their tests judge time by order
# and count (tests/support assert_cadence), not by a latency a busy machine
# misses.
# The real nodes first, the longest: their tests allow for a busy machine
# where kubelet does (a probe that only ran out of its second, an operator
# that starts slowly) and judge opstatus by its answers.
start_lane nodes lane_nodes
[ -z "$current" ] || start_lane current lane_current
start_lane soak lane_soak
# The v1.20 run (its `arch` tests run the arm64 and armv7 binaries under
# qemu-user) and the release check (all three) once those are built.
phase "static binaries (arm64, armv7)"
scripts/static-build.sh aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf >/dev/null
start_lane older lane_older
start_lane release lane_release
# Every build of the run is done: the cache for the next one.
save_cargo_cache &
cache_saver=$!

phase "unit and in-process tests"
# The in-process tests wait on sockets and clocks more than they compute.
cargo test --locked --no-fail-fast --lib --bins --test it -- --test-threads="$e2e_threads" || failed=1

for i in "${!lanes[@]}"; do
  phase "waiting for the ${lanes[$i]} run"
  wait "${lane_pids[$i]}" || { echo "test.sh: the ${lanes[$i]} run failed" >&2; failed=1; }
  cat "${lane_logs[$i]}"
  rm -f "${lane_logs[$i]}"
done
rm -f "$release_ended"
wait "$cache_saver" || echo "test.sh: could not save the Rust build cache in $cargo_cache (the next run builds from scratch)" >&2

# The build's status is written when it ends: wait for it (a build stopped
# at its deadline ends too).
wait "$kube_build_runner" || true
if [ "$(cat "$kube_build_status")" != 0 ]; then
  echo "test.sh: the Kubernetes v1.20 build did not succeed; its log (last 300 lines):" >&2
  tail -n 300 "$kube_build_log" >&2
  failed=1
fi
rm -f "$kube_build_log" "$kube_build_pid_file" "$kube_build_status"
phase "done (failed=$failed)"
exit "$failed"
