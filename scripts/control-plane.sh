#!/usr/bin/env bash
# A real Kubernetes control plane (etcd + kube-apiserver) on loopback: either
# v1.20.2 built offline from Debian's `kubernetes` source package (the
# default), or any version given as a directory of binaries.
#
#   control-plane.sh install     install the Debian packages it needs (idempotent)
#   control-plane.sh install-build   install also what `build` needs (Go 1.19,
#                                a deb-src entry for the source)
#   control-plane.sh build       install, then build kube-apiserver once into the
#                                cache (keyed by the Debian source version and
#                                the recipe); prints the binary's path
#   control-plane.sh built       exit 0 when `build` has nothing left to do
#   control-plane.sh prepare     with OPSTATUS_KUBE_VERSION=bin-dir: check the
#                                directory, decompress (once, into the cache) and
#                                verify its binaries; prints the kube-apiserver's
#   control-plane.sh version     the kube-apiserver version `start` would run
#   control-plane.sh binary NAME the verified path of another binary of
#                                OPSTATUS_KUBE_BIN_DIR (kubelet, for scripts/node.sh)
#   control-plane.sh start DIR   start etcd + kube-apiserver on free loopback
#                                ports with a fresh PKI in DIR; writes DIR/env
#   control-plane.sh stop DIR    stop what `start DIR` started, by PID
#   control-plane.sh stop-apiserver DIR      stop the API server only (an outage)
#   control-plane.sh start-apiserver DIR     start it again
#
# DIR/env (shell syntax, one KEY=VALUE per line) tells tests and scripts:
#   APISERVER_PORT, APISERVER_URL, ADMIN_TOKEN, CA_CERT, KUBECONFIG,
#   AUDIT_LOG, ETCD_PID, APISERVER_PID.
#
# `start --watch-pid PID` also starts a watchdog that stops the control plane
# when PID exits, so a test run that is killed leaves nothing behind.
#
# Which control plane (the same commands and DIR/env for both):
#   OPSTATUS_KUBE_VERSION=1.20 (default)   the Debian-built v1.20.2 (`build`)
#   OPSTATUS_KUBE_VERSION=bin-dir          kube-apiserver and etcd from
#       OPSTATUS_KUBE_BIN_DIR (default: ../shared/k8s/v1.36.2 beside the
#       repository). Each binary is NAME or NAME.xz (decompressed once into
#       the cache); its sha256 is checked against the directory's SHA256SUMS,
#       NAME.sha256 or README.md table ("| NAME | ... | <sha256> |") when one
#       is there (required for .xz). Official release binaries work: the
#       kubernetes-server tarball's kube-apiserver and etcd's release etcd.
# DIR/env also gets KUBE_FLAVOR (1.20 or bin-dir) and KUBE_GIT_VERSION (what
# /version answers).
#
# The recipe, and why each step is needed, is in shared/REAL_APISERVER.md
# (v1.20) and shared/k8s/v1.36.2/README.md.
set -euo pipefail

readonly REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf 'control-plane: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
# KUBE_DEB_VERSION, CACHE_ROOT, apt_install, unpack_kube_source, ...
# shellcheck source=scripts/lib/kube-source.sh
. "$REPO_ROOT/scripts/lib/kube-source.sh"

readonly APISERVER_BIN="$KUBE_BUILD_DIR/kube-apiserver"
readonly RUNTIME_PACKAGES=(etcd-server openssl)
readonly KUBE_FLAVOR="${OPSTATUS_KUBE_VERSION:-1.20}"
readonly DEFAULT_BIN_DIR="$REPO_ROOT/../shared/k8s/v1.36.2"
readonly BIN_DIR="${OPSTATUS_KUBE_BIN_DIR:-$DEFAULT_BIN_DIR}"

cmd_install() {
  apt_install "${RUNTIME_PACKAGES[@]}"
  command -v kubectl >/dev/null || apt_install kubernetes-client
}

cmd_build() {
  cmd_install
  build_kube apiserver
  echo "$APISERVER_BIN"
}

# What `build` needs besides the runtime: Go, and the source's deb-src
# entry (scripts/test.sh installs everything before its builds start, so
# that no two apt-get run at once).
cmd_install_build() {
  cmd_install
  apt_install "${BUILD_PACKAGES[@]}"
  enable_deb_src
}

# --- A control plane from a directory of binaries (OPSTATUS_KUBE_VERSION=bin-dir)

# What to provide, said whenever the directory cannot be used.
bin_dir_help() {
  cat >&2 <<EOF
control-plane: OPSTATUS_KUBE_VERSION=bin-dir needs a directory holding kube-apiserver
  and etcd for linux/amd64 (plain or .xz). Set OPSTATUS_KUBE_BIN_DIR to it, e.g. the
  official release binaries: kube-apiserver from kubernetes-server-linux-amd64.tar.gz
  (server/bin/) and etcd from etcd's release tarball, with a SHA256SUMS file
  (sha256sum output) or NAME.sha256 files beside them. The default,
  ../shared/k8s/v1.36.2 beside the repository ($DEFAULT_BIN_DIR), holds
  kube-apiserver v1.36.2 and etcd 3.6.13.
EOF
}

# The expected sha256 of the decompressed NAME, from the directory's
# SHA256SUMS, NAME.sha256 or README.md table; empty when none says.
expected_sha256() {
  local name=$1 sum=""
  if [ -f "$BIN_DIR/SHA256SUMS" ]; then
    sum=$(awk -v n="$name" '{f=$2; sub(/^\*/, "", f); sub(/.*\//, "", f)} f == n {print $1; exit}' "$BIN_DIR/SHA256SUMS")
  fi
  if [ -z "$sum" ] && [ -f "$BIN_DIR/$name.sha256" ]; then
    sum=$(awk '{print $1; exit}' "$BIN_DIR/$name.sha256")
  fi
  if [ -z "$sum" ] && [ -f "$BIN_DIR/README.md" ]; then
    sum=$(awk -F'|' -v n="$name" '{c=$2; gsub(/ /, "", c)} c == n {l=$(NF-1); gsub(/ /, "", l); print l; exit}' "$BIN_DIR/README.md")
  fi
  case "$sum" in
    "") ;;
    *[!0-9a-f]*) die "$BIN_DIR: the checksum given for $name is not a sha256: $sum" ;;
    *) [ "${#sum}" -eq 64 ] || die "$BIN_DIR: the checksum given for $name is not a sha256: $sum" ;;
  esac
  echo "$sum"
}

verify_sha256() {
  local file=$1 want=$2 got
  got=$(sha256sum "$file" | awk '{print $1}')
  [ "$got" = "$want" ] || die "$file: sha256 $got, expected $want (from $BIN_DIR)"
}

# Prints the path of a verified, runnable NAME from the directory.
bin_dir_binary() {
  local name=$1 sum out
  sum=$(expected_sha256 "$name")
  if [ -f "$BIN_DIR/$name.xz" ]; then
    [ -n "$sum" ] || { bin_dir_help; die "$BIN_DIR/$name.xz: no sha256 for $name in SHA256SUMS, $name.sha256 or README.md"; }
    out="$CACHE_ROOT/kube-bin/$sum/$name"
    if [ ! -x "$out" ]; then
      command -v xz >/dev/null || apt_install xz-utils
      log "decompressing $BIN_DIR/$name.xz into the cache (once)"
      mkdir -p "$(dirname "$out")"
      xz -dc "$BIN_DIR/$name.xz" > "$out.tmp.$$"
      verify_sha256 "$out.tmp.$$" "$sum"
      chmod 755 "$out.tmp.$$"
      mv "$out.tmp.$$" "$out"
    fi
    # The cache is keyed by the checksum and written only after it matched.
    echo "$out"
  elif [ -f "$BIN_DIR/$name" ]; then
    if [ -n "$sum" ]; then
      verify_sha256 "$BIN_DIR/$name" "$sum"
    else
      log "warning: no sha256 for $BIN_DIR/$name (SHA256SUMS, $name.sha256 or README.md): not verified"
    fi
    [ -x "$BIN_DIR/$name" ] || die "$BIN_DIR/$name is not executable"
    echo "$BIN_DIR/$name"
  else
    bin_dir_help
    die "no $name or $name.xz in OPSTATUS_KUBE_BIN_DIR=$BIN_DIR"
  fi
}

# Sets APISERVER and ETCD to the binaries the chosen control plane runs.
resolve_binaries() {
  case "$KUBE_FLAVOR" in
    1.20)
      APISERVER=$APISERVER_BIN
      [ -x "$APISERVER" ] || die "no kube-apiserver at $APISERVER: run 'scripts/control-plane.sh build' first"
      ETCD=$(command -v etcd) || die "etcd is not installed: run 'scripts/control-plane.sh install'"
      ;;
    bin-dir)
      if [ ! -d "$BIN_DIR" ]; then
        bin_dir_help
        die "OPSTATUS_KUBE_BIN_DIR=$BIN_DIR does not exist"
      fi
      APISERVER=$(bin_dir_binary kube-apiserver)
      ETCD=$(bin_dir_binary etcd)
      ;;
    *) die "OPSTATUS_KUBE_VERSION=$KUBE_FLAVOR: expected 1.20 (the Debian build) or bin-dir (OPSTATUS_KUBE_BIN_DIR)" ;;
  esac
}

cmd_prepare() {
  command -v openssl >/dev/null || cmd_install
  resolve_binaries
  echo "$APISERVER"
}

cmd_version() {
  resolve_binaries
  local v
  v=$("$APISERVER" --version 2>/dev/null | awk '{print $2}')
  if [ "$KUBE_FLAVOR" = 1.20 ]; then
    # Its /version answers v0.0.0-master+... (REAL_APISERVER.md); --version is right.
    echo "${v:-$KUBE_GIT_VERSION} (built from Debian's kubernetes $KUBE_DEB_VERSION)"
  else
    echo "${v:-unknown} ($APISERVER)"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

make_pki() {
  local dir=$1
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=opstatus-test-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
      -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    # The API server's client certificate towards kubelet (logs, exec):
    # kubelet takes no anonymous request (scripts/node.sh) and asks the API
    # server whether this user may (system:masters may).
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      -keyout kubelet-client.key -out kubelet-client.csr 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -out kubelet-client.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > admin.token
    printf '%s,admin,admin,system:masters\n' "$(cat admin.token)" > tokens.csv
    cat > audit-policy.yaml <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
YAML
  )
}

wait_ready() {
  local dir=$1 port=$2 pid=$3 i
  for i in $(seq 1 150); do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$dir/apiserver.log" >&2
      die "kube-apiserver exited during start (log: $dir/apiserver.log)"
    fi
    if [ -f "$dir/etcd.pid" ] && ! kill -0 "$(cat "$dir/etcd.pid")" 2>/dev/null; then
      tail -n 20 "$dir/etcd.log" >&2
      die "etcd exited (log: $dir/etcd.log)"
    fi
    if curl -fsS --max-time 1 --cacert "$dir/ca.crt" \
        -H "Authorization: Bearer $(cat "$dir/admin.token")" \
        "https://127.0.0.1:$port/readyz" 2>/dev/null | grep -q '^ok$'; then
      return 0
    fi
    sleep 0.2
  done
  die "kube-apiserver not ready after 30 s (log: $dir/apiserver.log)"
}

start_apiserver() {
  local dir=$1 port etcd_port
  port=$(sed -n 's/^APISERVER_PORT=//p' "$dir/env")
  etcd_port=$(cat "$dir/etcd.port")
  local extra=()
  # On loopback without nodes the v1.36 endpoints reconciler fails in a loop.
  [ "$(cat "$dir/flavor")" = 1.20 ] || extra+=(--endpoint-reconciler-type=none)
  "$(cat "$dir/apiserver.bin")" ${extra[@]+"${extra[@]}"} \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
    --tls-cert-file="$dir/apiserver.crt" --tls-private-key-file="$dir/apiserver.key" \
    --client-ca-file="$dir/ca.crt" --token-auth-file="$dir/tokens.csv" \
    --kubelet-client-certificate="$dir/kubelet-client.crt" --kubelet-client-key="$dir/kubelet-client.key" \
    --kubelet-certificate-authority="$dir/ca.crt" \
    --service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --api-audiences=https://kubernetes.default.svc \
    --authorization-mode=RBAC --service-cluster-ip-range=10.0.0.0/24 \
    --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/audit.log" \
    --audit-log-mode=blocking \
    >>"$dir/apiserver.log" 2>&1 &
  echo $! > "$dir/apiserver.pid"
  wait_ready "$dir" "$port" "$(cat "$dir/apiserver.pid")"
}

cmd_start() {
  local dir="" watch_pid=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --watch-pid) watch_pid=$2; shift 2 ;;
      *) dir=$1; shift ;;
    esac
  done
  [ -n "$dir" ] || die "usage: control-plane.sh start DIR [--watch-pid PID]"
  resolve_binaries
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # A restart (start-apiserver) runs the same binary as the first start.
  echo "$KUBE_FLAVOR" > "$dir/flavor"
  echo "$APISERVER" > "$dir/apiserver.bin"
  make_pki "$dir"

  local etcd_port peer_port port
  etcd_port=$(free_port); peer_port=$(free_port); port=$(free_port)
  echo "$etcd_port" > "$dir/etcd.port"
  local cluster_flags=()
  # etcd's own release needs the advertised URLs spelt out; the minimal etcd
  # beside kube-apiserver v1.36.2 takes only the four flags below and
  # advertises its client URL itself.
  if "$ETCD" --help 2>&1 | grep -q -- '-advertise-client-urls'; then
    cluster_flags=(--advertise-client-urls "http://127.0.0.1:$etcd_port"
      --initial-advertise-peer-urls "http://127.0.0.1:$peer_port"
      --initial-cluster "opstatus-test=http://127.0.0.1:$peer_port")
  fi
  # etcd's data on tmpfs where there is one: it is thrown away with the
  # control plane, and on disk every write waits for an fsync, which takes
  # seconds on a machine busy writing (builds beside the tests), long enough
  # for the API server's requests to time out.
  local etcd_data="$dir/etcd"
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    etcd_data=$(mktemp -d /dev/shm/opstatus-etcd.XXXXXX)
    echo "$etcd_data" > "$dir/etcd.data"
  fi
  "$ETCD" --data-dir "$etcd_data" --name opstatus-test \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    ${cluster_flags[@]+"${cluster_flags[@]}"} \
    >"$dir/etcd.log" 2>&1 &
  echo $! > "$dir/etcd.pid"

  cat > "$dir/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/ca.crt
users:
- name: admin
  user:
    token: $(cat "$dir/admin.token")
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
YAML
  cat > "$dir/env" <<ENV
APISERVER_PORT=$port
APISERVER_URL=https://127.0.0.1:$port
ADMIN_TOKEN=$(cat "$dir/admin.token")
CA_CERT=$dir/ca.crt
KUBECONFIG=$dir/kubeconfig
AUDIT_LOG=$dir/audit.log
ETCD_PID=$(cat "$dir/etcd.pid")
ENV
  start_apiserver "$dir"
  echo "APISERVER_PID=$(cat "$dir/apiserver.pid")" >> "$dir/env"
  local version
  version=$(curl -fsS --max-time 5 --cacert "$dir/ca.crt" -H "Authorization: Bearer $(cat "$dir/admin.token")" \
    "https://127.0.0.1:$port/version" | sed -n 's/^ *"gitVersion": *"\([^"]*\)".*/\1/p')
  printf 'KUBE_FLAVOR=%s\nKUBE_GIT_VERSION=%s\n' "$KUBE_FLAVOR" "$version" >> "$dir/env"

  if [ -n "$watch_pid" ]; then
    # Detached from our stdout so callers reading it do not wait for the watchdog.
    nohup bash -c '
      while kill -0 "$1" 2>/dev/null && [ -f "$2/env" ]; do sleep 1; done
      [ -f "$2/env" ] && exec "$0" stop "$2"
    ' "$0" "$watch_pid" "$dir" >/dev/null 2>&1 &
  fi
  log "ready: kube-apiserver $version ($KUBE_FLAVOR) at https://127.0.0.1:$port (etcd $etcd_port), state in $dir"
}

stop_pid_file() {
  local file=$1 pid i
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

cmd_stop() {
  local dir=${1:?usage: control-plane.sh stop DIR}
  stop_pid_file "$dir/apiserver.pid"
  stop_pid_file "$dir/etcd.pid"
  if [ -f "$dir/etcd.data" ]; then
    case $(cat "$dir/etcd.data") in /dev/shm/opstatus-etcd.*) rm -rf "$(cat "$dir/etcd.data")" ;; esac
    rm -f "$dir/etcd.data"
  fi
  rm -f "$dir/env"
}

# Stopping and starting the API server alone (etcd and the PKI stay) is how
# tests simulate an API server outage.
cmd_stop_apiserver() {
  stop_pid_file "${1:?usage: control-plane.sh stop-apiserver DIR}/apiserver.pid"
}

cmd_start_apiserver() {
  local dir=${1:?usage: control-plane.sh start-apiserver DIR}
  start_apiserver "$dir"
  sed -i "s/^APISERVER_PID=.*/APISERVER_PID=$(cat "$dir/apiserver.pid")/" "$dir/env"
}

case "${1:-}" in
  install) cmd_install ;;
  install-build) cmd_install_build ;;
  build) cmd_build ;;
  built) kube_apiserver_built ;;
  prepare) cmd_prepare ;;
  version) cmd_version ;;
  binary) shift; bin_dir_binary "${1:?usage: control-plane.sh binary NAME}" ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  stop-apiserver) shift; cmd_stop_apiserver "$@" ;;
  start-apiserver) shift; cmd_start_apiserver "$@" ;;
  *) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
