#!/usr/bin/env bash
# A real single-node Kubernetes cluster on loopback, beside the control plane
# of scripts/control-plane.sh: kube-controller-manager, kube-scheduler and
# kubelet v1.20.2 built from the same Debian `kubernetes` source as its
# kube-apiserver, Debian's containerd and runc, a registry on 127.0.0.1
# (Debian's docker-registry), and a pause image built from the source.
#
#   node.sh install              install the Debian packages it needs (idempotent)
#   node.sh build                install, then build kube-apiserver (if not yet),
#                                kubelet, kube-scheduler and kube-controller-manager
#                                (one `go build`) and the pause image once into
#                                the cache; prints the cache directory
#   node.sh up DIR [--watch-pid PID]
#                                start everything with its state in DIR; waits for
#                                the node to be Ready; writes DIR/env
#   node.sh down DIR             stop what `up DIR` started, by PID, and clean up
#                                (mounts, cgroups, what kubelet wrote outside DIR)
#   node.sh available            exit 0 when `up` can run here (root, packages
#                                installed, binaries built), else say why
#   node.sh connects DIR         every inet/inet6 connect kubelet and containerd
#                                made (traced), one a line; fails if one left
#                                loopback
#
# Which Kubernetes: OPSTATUS_KUBE_VERSION, as for scripts/control-plane.sh.
# Unset or 1.20: the v1.20.2 built here. bin-dir: kubelet, kube-scheduler,
# kube-controller-manager (and the control plane) from OPSTATUS_KUBE_BIN_DIR
# (default ../shared/k8s/v1.36.2: v1.36.2, which runs native sidecars); what
# a current kubelet needs beyond v1.20 here: shared/k8s/v1.36.2/README.md.
# The pause image is the one `build` makes, for both.
#
# DIR/env (KEY=VALUE lines) tells tests and scripts: KUBECONFIG,
# APISERVER_PORT, REGISTRY (127.0.0.1:PORT, plain http), CONTAINERD_SOCK,
# KUBELET_LOG, KUBELET_PORT (its HTTPS API), WEBHOOK_PORT (the admission
# webhook below), AUDIT_LOG, NODE_VERSION.
#
# What makes it fit this machine (Debian 12 VM, root, cgroup v1, no
# CAP_SYS_RESOURCE, no network but Debian's archive), and why: shared/node/README.md.
# - Nothing leaves loopback. kubelet is the node 127.0.0.1
#   (--hostname-override; --node-ip refuses loopback), its cloud credential
#   lookup is off (AWS_EC2_METADATA_DISABLED), it adds no iptables chains
#   (makeIPTablesUtilChains: false), and kubelet and containerd run under
#   strace so that `connects` can show where they connected.
# - kubelet takes no anonymous request (any local user could otherwise
#   exec into the node's containers): clients authenticate with the control
#   plane's CA or a token, and the API server authorises them (Webhook
#   mode); the API server reaches it with its client certificate
#   (control-plane.sh) and verifies its serving certificate.
# - There is no pod network: the CNI config is loopback-only (it makes the
#   runtime report NetworkReady). A mutating admission webhook
#   (scripts/lib/node-webhook.py) puts every Pod on the host's network the
#   way a pod network would let it reach the API server and be probed: it
#   sets hostNetwork, points KUBERNETES_SERVICE_HOST/PORT at the API server,
#   and gives each port the Pod uses (containerPorts and numeric probe
#   ports) a free port on 127.0.0.1, rewriting `:PORT` in the containers'
#   args, command and env to `127.0.0.1:FREE` (so `--listen=:8090` listens on
#   loopback only, and two replicas on this one node do not collide). The
#   mapping is in the Pod's annotation `node.opstatus.test/ports`.
# - containerd has its own socket, root and state under DIR, with
#   restrict_oom_score_adj (runc may not lower oom_score_adj here); kubelet
#   has its own root and cgroup root. kubelet v1.20 still writes
#   /var/log/pods and /var/lib/kubelet/device-plugins: `down` removes what
#   this node wrote there.
#
# Every process started is recorded in DIR/pids ("name pid") and stopped by
# that PID; `up --watch-pid PID` also starts a watchdog that runs `down DIR`
# and removes DIR when PID exits, so a test run leaves nothing behind, also
# when it is killed.
set -euo pipefail

readonly REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf 'node: [%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=scripts/lib/kube-source.sh
. "$REPO_ROOT/scripts/lib/kube-source.sh"

readonly CONTROL_PLANE="$REPO_ROOT/scripts/control-plane.sh"
readonly NODE_CACHE="$KUBE_BUILD_DIR"
readonly NODE_PACKAGES=(containerd runc containernetworking-plugins buildah docker-registry strace
  gcc libc6-dev python3 openssl curl)
readonly KUBE_FLAVOR="${OPSTATUS_KUBE_VERSION:-1.20}"

# Sets KUBELET, SCHEDULER, CONTROLLER_MANAGER to the binaries `up` runs.
resolve_node_binaries() {
  case "$KUBE_FLAVOR" in
    1.20)
      KUBELET=$NODE_CACHE/kubelet SCHEDULER=$NODE_CACHE/kube-scheduler
      CONTROLLER_MANAGER=$NODE_CACHE/kube-controller-manager ;;
    bin-dir)
      KUBELET=$("$CONTROL_PLANE" binary kubelet)
      SCHEDULER=$("$CONTROL_PLANE" binary kube-scheduler)
      CONTROLLER_MANAGER=$("$CONTROL_PLANE" binary kube-controller-manager) ;;
    *) die "OPSTATUS_KUBE_VERSION=$KUBE_FLAVOR: expected 1.20 or bin-dir" ;;
  esac
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

cmd_install() {
  apt_install "${NODE_PACKAGES[@]}"
  "$CONTROL_PLANE" install
}

# What `up` needs of the build: everything for v1.20, the pause image
# only for a node of OPSTATUS_KUBE_BIN_DIR's binaries.
node_built() {
  if [ "$KUBE_FLAVOR" = bin-dir ]; then kube_pause_built; else kube_node_built; fi
}

# kube-apiserver first (what needs only the control plane can start on it
# while the rest builds), then the node's binaries.
cmd_build() {
  cmd_install
  "$CONTROL_PLANE" install-build
  build_kube node
  echo "$NODE_CACHE"
}

# --- up -----------------------------------------------------------------

record() { echo "$1 $2" >> "$DIR/pids"; }
pid_of() { awk -v n="$1" '$1 == n {p=$2} END {print p}' "$DIR/pids" 2>/dev/null; }

# Starts "$@" under strace (inet connects only; children that exec are let
# go), records the traced process itself as NAME: stopping strace would
# detach it and leave it running.
start_traced() {
  local name=$1 log_file=$2 tracer child="" i
  shift 2
  strace -f -b execve -qq -e trace=connect -e signal=none -o "$DIR/log/$name.strace" "$@" >"$log_file" 2>&1 &
  tracer=$!
  # The traced child once it runs the program itself (before its exec it
  # is still a copy of strace): a stop or a liveness check by another PID
  # would miss it and leave it running.
  local program c
  program=$(basename "$(command -v "$1")")
  for i in $(seq 1 100); do
    for c in $(pgrep -P "$tracer" || true); do
      [ "$(basename "$(readlink "/proc/$c/exe" 2>/dev/null)")" = "$program" ] && child=$c
    done
    [ -n "$child" ] && break
    sleep 0.1
  done
  [ -n "$child" ] || die "$name did not start under strace (log: $log_file)"
  record "strace-$name" "$tracer"
  record "$name" "$child"
}

write_containerd_config() {
  mkdir -p "$DIR/containerd/certs.d/$REGISTRY" "$DIR/cni"
  cat > "$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # No CAP_SYS_RESOURCE here: runc may raise oom_score_adj but not lower it
  # to kubelet's -998 ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "$DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$DIR/containerd/certs.d"
EOF
  # Never run for host-network Pods; its presence makes NetworkReady true.
  echo '{"cniVersion":"0.4.0","name":"loopback-only","plugins":[{"type":"loopback"}]}' > "$DIR/cni/10-loopback.conflist"
  # The loopback registry speaks plain http.
  cat > "$DIR/containerd/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
}

start_containerd() {
  write_containerd_config
  start_traced containerd "$DIR/log/containerd.log" containerd --config "$DIR/containerd/config.toml"
  local i
  for i in $(seq 1 150); do
    ctr --address "$SOCK" version >/dev/null 2>&1 && break
    kill -0 "$(pid_of containerd)" 2>/dev/null || { tail -n 20 "$DIR/log/containerd.log" >&2; die "containerd exited"; }
    sleep 0.2
  done
  ctr --address "$SOCK" version >/dev/null 2>&1 || die "containerd not answering on $SOCK after 30 s"
  ctr --address "$SOCK" -n k8s.io images import "$NODE_CACHE/pause.tar" >/dev/null
}

start_registry() {
  mkdir -p "$DIR/registry/data"
  printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n' \
    "$DIR/registry/data" "$REGISTRY" > "$DIR/registry/config.yml"
  docker-registry serve "$DIR/registry/config.yml" >"$DIR/log/registry.log" 2>&1 &
  record docker-registry $!
  local i
  for i in $(seq 1 100); do
    curl -fsS --max-time 1 "http://$REGISTRY/v2/" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "the registry is not answering on $REGISTRY (log: $DIR/log/registry.log)"
}

# The webhook that puts Pods on the host network (see the header).
start_webhook() {
  local port w=$DIR/webhook
  port=$(free_port)
  mkdir -p "$w"
  (
    cd "$w"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=node-webhook-ca" -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout tls.key -out tls.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' > tls.ext
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile tls.ext -out tls.crt 2>/dev/null
  )
  WEBHOOK_PORT=$port
  python3 "$REPO_ROOT/scripts/lib/node-webhook.py" --port "$port" --cert "$w/tls.crt" --key "$w/tls.key" \
    --apiserver-port "$APISERVER_PORT" >"$DIR/log/webhook.log" 2>&1 &
  record webhook $!
  local i
  for i in $(seq 1 100); do
    curl -fsS --max-time 1 --cacert "$w/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  cat > "$w/config.yaml" <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: node-host-network
webhooks:
- name: host-network.node.opstatus.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  clientConfig:
    url: https://127.0.0.1:$port/mutate
    caBundle: $(base64 -w0 < "$w/ca.crt")
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], scope: Namespaced}
EOF
  kubectl --kubeconfig "$KUBECONFIG" apply -f "$w/config.yaml" >/dev/null
}

# What a current kubelet needs here beyond v1.20's configuration: to run on
# cgroup v1, its runtime endpoint in the configuration (the flag is gone),
# and its Pods' logs under DIR.
current_kubelet_config() {
  [ "$KUBE_FLAVOR" = 1.20 ] && return 0
  printf 'failCgroupV1: false\ncontainerRuntimeEndpoint: unix://%s\npodLogsDir: %s\n' "$SOCK" "$DIR/pod-logs"
}

# kubelet's serving certificate, for 127.0.0.1, from the control plane's CA.
make_kubelet_serving_cert() {
  local pki=$DIR/kubelet/pki
  mkdir -p "$pki"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$pki/serving.key" -out "$pki/serving.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$pki/serving.ext"
  openssl x509 -req -in "$pki/serving.csr" -CA "$DIR/cp/ca.crt" -CAkey "$DIR/cp/ca.key" \
    -CAcreateserial -CAserial "$pki/ca.srl" -days 2 -extfile "$pki/serving.ext" -out "$pki/serving.crt" 2>/dev/null
}

write_kubelet_config() {
  cat > "$DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(free_port)
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
failSwapOn: false
$(current_kubelet_config)
# Else kubelet adds KUBE-FIREWALL and KUBE-MARK-* chains to the host's iptables.
makeIPTablesUtilChains: false
# No anonymous request: a client shows the control plane's client
# certificate (the API server's for logs and exec) or a token, and the API
# server says what it may do (SubjectAccessReview).
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $DIR/cp/ca.crt}
authorization: {mode: Webhook}
# Served with a certificate of the control plane's CA, which the API server
# verifies (--kubelet-certificate-authority).
tlsCertFile: $DIR/kubelet/pki/serving.crt
tlsPrivateKeyFile: $DIR/kubelet/pki/serving.key
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
resolvConf: /etc/resolv.conf
# Ready 2 s after the runtime is, instead of 10.
nodeStatusUpdateFrequency: 2s
EOF
}

start_kubelet() {
  local d
  # kubelet's Pods live under a cgroup root of this node's own, made beforehand.
  for d in cpu cpuacct cpuset memory devices freezer blkio pids hugetlb net_cls perf_event systemd; do
    [ -d "/sys/fs/cgroup/$d" ] && mkdir -p "/sys/fs/cgroup/$d/$CGROUP_ROOT"
  done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$CGROUP_ROOT/cpuset.mems"
  mkdir -p "$DIR/kubelet"
  KUBELET_PORT=$(free_port)
  make_kubelet_serving_cert
  write_kubelet_config
  # --hostname-override=127.0.0.1: the node's name and address (an IP given
  # as the hostname is taken as its address), so that probes and the API
  # server's calls to kubelet stay on loopback. AWS_EC2_METADATA_DISABLED:
  # a kubelet built with the in-tree ECR credential provider asks
  # 169.254.169.254 at start (the v1.20 build here leaves it out, with
  # `providerless`; a kubelet from OPSTATUS_KUBE_BIN_DIR may have it).
  # --containerd: cAdvisor's socket (else /run/containerd/containerd.sock,
  # another containerd's).
  local runtime=()
  [ "$KUBE_FLAVOR" = 1.20 ] && runtime=(--container-runtime=remote --container-runtime-endpoint="unix://$SOCK")
  AWS_EC2_METADATA_DISABLED=true start_traced kubelet "$DIR/log/kubelet.log" \
    "$KUBELET" --config="$DIR/kubelet-config.yaml" --kubeconfig="$KUBECONFIG" \
    --root-dir="$DIR/kubelet" --cert-dir="$DIR/kubelet/pki" ${runtime[@]+"${runtime[@]}"} --containerd="$SOCK" \
    --hostname-override=127.0.0.1 --v="${OPSTATUS_KUBELET_V:-3}"
}

wait_node_ready() {
  local i ready=""
  for i in $(seq 1 240); do
    ready=$(kubectl --kubeconfig "$KUBECONFIG" get node 127.0.0.1 \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
    [ "$ready" = True ] && break
    kill -0 "$(pid_of kubelet)" 2>/dev/null || { tail -n 30 "$DIR/log/kubelet.log" >&2; die "kubelet exited"; }
    sleep 0.5
  done
  [ "$ready" = True ] || { tail -n 30 "$DIR/log/kubelet.log" >&2; die "node not Ready after 120 s (log: $DIR/log/kubelet.log)"; }
  # Pods need their namespace's ServiceAccount token (kube-controller-manager).
  for i in $(seq 1 120); do
    kubectl --kubeconfig "$KUBECONFIG" -n default get serviceaccount default >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "kube-controller-manager made no default ServiceAccount in 60 s (log: $DIR/log/kcm.log)"
}

cmd_up() {
  local watch_pid=""
  DIR=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --watch-pid) watch_pid=$2; shift 2 ;;
      *) DIR=$1; shift ;;
    esac
  done
  [ -n "$DIR" ] || die "usage: node.sh up DIR [--watch-pid PID]"
  node_built || die "no node binaries in $NODE_CACHE: run 'scripts/node.sh build' first"
  resolve_node_binaries
  [ "$(id -u)" -eq 0 ] || die "kubelet and containerd need root"
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  if [ -f "$DIR/pids" ]; then
    local n p
    while read -r n p; do
      ! kill -0 "$p" 2>/dev/null || die "$n ($p) of a previous 'up $DIR' still runs: 'node.sh down $DIR' first"
    done < "$DIR/pids"
  fi
  local started=$SECONDS
  mkdir -p "$DIR/log"
  : > "$DIR/pids"
  SOCK=$DIR/containerd.sock
  REGISTRY=127.0.0.1:$(free_port)
  CGROUP_ROOT=opstatus-node-$(basename "$DIR")
  echo "$CGROUP_ROOT" > "$DIR/cgroup-root"
  # What existed before kubelet: `down` removes only what this node made.
  for p in /var/lib/kubelet /var/log/pods /var/log/containers /run/containerd; do
    [ -e "$p" ] && echo "$p"
  done > "$DIR/preexisting"

  if [ -n "$watch_pid" ]; then
    # Detached from our stdout so callers reading it do not wait for it.
    setsid nohup bash -c '
      while kill -0 "$1" 2>/dev/null && [ -f "$2/pids" ]; do sleep 1; done
      [ -f "$2/pids" ] && "$0" down "$2"
      rm -rf --one-file-system "$2"
    ' "$0" "$watch_pid" "$DIR" >/dev/null 2>&1 &
  fi

  # A failed start takes down what it started.
  # shellcheck disable=SC2064
  trap "[ -f '$DIR/env' ] || { log 'up failed: stopping what started'; '$0' down '$DIR' || true; }" EXIT
  rm -f "$DIR/env"
  start_containerd
  start_registry
  log "containerd and registry ($REGISTRY) up"
  "$CONTROL_PLANE" start "$DIR/cp" >/dev/null
  cp_env() { sed -n "s/^$1=//p" "$DIR/cp/env"; }
  KUBECONFIG=$(cp_env KUBECONFIG) APISERVER_PORT=$(cp_env APISERVER_PORT)
  APISERVER_URL=$(cp_env APISERVER_URL) AUDIT_LOG=$(cp_env AUDIT_LOG)
  export KUBECONFIG
  start_webhook
  # v1.20's insecure ports are off with --port=0; later versions have none.
  local insecure=()
  [ "$KUBE_FLAVOR" = 1.20 ] && insecure=(--port=0)
  "$CONTROLLER_MANAGER" --kubeconfig="$KUBECONFIG" --leader-elect=false ${insecure[@]+"${insecure[@]}"} \
    --bind-address=127.0.0.1 --secure-port="$(free_port)" \
    --service-account-private-key-file="$DIR/cp/sa.key" --root-ca-file="$DIR/cp/ca.crt" \
    --use-service-account-credentials=true --controllers='*,-nodeipam' >"$DIR/log/kcm.log" 2>&1 &
  record kube-controller-manager $!
  "$SCHEDULER" --kubeconfig="$KUBECONFIG" --leader-elect=false ${insecure[@]+"${insecure[@]}"} \
    --bind-address=127.0.0.1 --secure-port="$(free_port)" >"$DIR/log/scheduler.log" 2>&1 &
  record kube-scheduler $!
  start_kubelet
  wait_node_ready
  local node_version
  node_version=$(kubectl --kubeconfig "$KUBECONFIG" get node 127.0.0.1 -o 'jsonpath={.status.nodeInfo.kubeletVersion}')
  cat > "$DIR/env" <<EOF
KUBECONFIG=$KUBECONFIG
APISERVER_PORT=$APISERVER_PORT
AUDIT_LOG=$AUDIT_LOG
REGISTRY=$REGISTRY
CONTAINERD_SOCK=$SOCK
KUBELET_LOG=$DIR/log/kubelet.log
KUBELET_PORT=$KUBELET_PORT
WEBHOOK_PORT=$WEBHOOK_PORT
NODE_VERSION=$node_version
EOF
  log "node 127.0.0.1 Ready in $((SECONDS - started)) s: kubelet $node_version, API server $APISERVER_URL, registry $REGISTRY, state in $DIR"
}

# --- down ---------------------------------------------------------------

# Running, and not a zombie waiting for init (which reaps it in its own time).
alive() {
  kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

stop_pid() {
  local pid=$1 i
  [ -n "$pid" ] || return 0
  alive "$pid" || return 0
  kill "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    alive "$pid" || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

was_preexisting() { grep -qx "$1" "$DIR/preexisting" 2>/dev/null; }

cmd_down() {
  DIR=${1:?usage: node.sh down DIR}
  [ -f "$DIR/pids" ] || { log "nothing started in $DIR"; return 0; }
  DIR=$(cd "$DIR" && pwd)
  SOCK=$DIR/containerd.sock
  local name t
  # kubelet first, so that it restarts nothing; then the Pods' containers.
  for name in kubelet strace-kubelet kube-scheduler kube-controller-manager webhook docker-registry; do
    stop_pid "$(pid_of "$name")"
  done
  # Whatever still runs with this node's configuration (a traced process
  # whose PID was not recorded because it never got that far), by its PID.
  local stray
  for stray in $(pgrep -f -- "--config=$DIR/" || true); do stop_pid "$stray"; done
  if alive "$(pid_of containerd)"; then
    local c=(ctr --address "$SOCK" -n k8s.io)
    for t in $("${c[@]}" tasks ls -q 2>/dev/null); do "${c[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    for t in $(seq 1 50); do [ -z "$("${c[@]}" tasks ls -q 2>/dev/null | head -n 1)" ] && break; "${c[@]}" tasks ls -q 2>/dev/null | while read -r x; do "${c[@]}" tasks delete "$x" >/dev/null 2>&1 || true; done; sleep 0.1; done
    for t in $("${c[@]}" containers ls -q 2>/dev/null); do "${c[@]}" containers delete "$t" >/dev/null 2>&1 || true; done
  fi
  stop_pid "$(pid_of containerd)"
  stop_pid "$(pid_of strace-containerd)"
  [ -d "$DIR/cp" ] && "$CONTROL_PLANE" stop "$DIR/cp" || true
  # Mounts under DIR (Pods' volumes, containers' root filesystems), deepest first.
  { grep -F " $DIR/" /proc/self/mounts || true; } | awk '{print $2}' | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # The node's cgroups, children first.
  local root d uid
  root=$(cat "$DIR/cgroup-root" 2>/dev/null || true)
  if [ -n "$root" ]; then
    for d in /sys/fs/cgroup/*/"$root"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
  fi
  # What kubelet v1.20 wrote outside its root: its Pods' logs, and the
  # device-plugin socket.
  for d in "$DIR"/kubelet/pods/*; do
    [ -d "$d" ] || continue
    uid=$(basename "$d")
    rm -rf /var/log/pods/*_"$uid"
    find /var/log/containers -maxdepth 1 -lname "/var/log/pods/*_$uid/*" -delete 2>/dev/null || true
  done
  was_preexisting /var/lib/kubelet || rm -rf /var/lib/kubelet
  for d in /var/log/pods /var/log/containers /run/containerd/s /run/containerd; do
    was_preexisting "$d" || rmdir "$d" 2>/dev/null || true
  done
  mv "$DIR/pids" "$DIR/pids.stopped"
  log "down: $DIR"
}

# --- connects -----------------------------------------------------------

# The inet/inet6 connects of the traced processes, as "NAME ADDRESS PORT";
# fails when one went elsewhere than 127.0.0.0/8 or ::1.
cmd_connects() {
  DIR=${1:?usage: node.sh connects DIR}
  local f name off=0 line
  for f in "$DIR"/log/*.strace; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .strace)
    while IFS= read -r line; do
      echo "$name $line"
      case "$line" in
        127.*|::1\ *|::ffff:127.*) ;;
        *) off=1 ;;
      esac
    done < <(sed -n \
      -e 's/.*sa_family=AF_INET, sin_port=htons(\([0-9]*\)), sin_addr=inet_addr("\([^"]*\)").*/\2 \1/p' \
      -e 's/.*sa_family=AF_INET6, sin6_port=htons(\([0-9]*\)),.*inet_pton(AF_INET6, "\([^"]*\)".*/\2 \1/p' "$f")
  done
  [ "$off" -eq 0 ] || { log "a connect left loopback (above)"; return 1; }
}

cmd_available() {
  [ "$(id -u)" -eq 0 ] || { log "not root: kubelet and containerd need root"; return 1; }
  [ -z "$(missing_packages "${NODE_PACKAGES[@]}")" ] || { log "packages missing: run 'scripts/node.sh install'"; return 1; }
  node_built || { log "no node binaries in $NODE_CACHE: run 'scripts/node.sh build'"; return 1; }
}

case "${1:-}" in
  install) cmd_install ;;
  available) cmd_available ;;
  build) cmd_build ;;
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down "$@" ;;
  connects) shift; cmd_connects "$@" ;;
  *) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
