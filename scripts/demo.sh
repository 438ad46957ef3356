#!/usr/bin/env bash
# opstatus's main job on this machine, with no cluster needed: bring up a
# real local control plane (etcd + kube-apiserver on loopback), install the
# manifests/ RBAC, run opstatus "as in a pod" for a few heartbeats, show the
# result the way a user would look at it, then stop everything it started.
#
#   scripts/demo.sh [SECONDS]     (default 12)
set -euo pipefail
cd "$(dirname "$0")/.."
run_for=${1:-12}

scripts/control-plane.sh build >/dev/null
cargo build --locked --release --quiet
bin=$PWD/target/release/opstatus

state=$(mktemp -d "${TMPDIR:-/tmp}/opstatus-demo.XXXXXX")
agent_pid=""
cleanup() {
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
  scripts/control-plane.sh stop "$state/control-plane" || true
  rm -rf "$state"
}
trap cleanup EXIT

scripts/control-plane.sh start "$state/control-plane" --watch-pid $$
# shellcheck disable=SC1091
. "$state/control-plane/env"
k() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }
ns=kube9-system

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

k create namespace "$ns" >/dev/null
mkdir -p "$state/overlay"
printf 'namespace: %s\nresources:\n- %s\n' "$ns" \
  "$(realpath --relative-to="$state/overlay" manifests/base)" > "$state/overlay/kustomization.yaml"
step "kubectl apply -k manifests/base (namespace $ns)"
k kustomize "$state/overlay" | k apply -f -

# What kubelet would mount into the pod: a bound token, the CA, the namespace.
sa=$state/serviceaccount
mkdir -p "$sa"
k create token opstatus -n "$ns" --duration=10m --audience=https://kubernetes.default.svc > "$sa/token"
cp "$CA_CERT" "$sa/ca.crt"
printf '%s' "$ns" > "$sa/namespace"

step "opstatus run --interval 5s   (for ${run_for}s, as in a pod)"
KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$APISERVER_PORT \
  OPSTATUS_SERVICE_ACCOUNT_DIR=$sa OPSTATUS_OPERATOR_VERSION=1.0.0 \
  "$bin" run --interval 5s &
agent_pid=$!
sleep "$run_for"

step "kubectl -n $ns get configmap kube9-operator-status -o yaml"
k -n "$ns" get configmap kube9-operator-status -o yaml
step "opstatus get"
"$bin" get --kubeconfig "$KUBECONFIG" --namespace "$ns"
step "opstatus get -o json"
"$bin" get --kubeconfig "$KUBECONFIG" --namespace "$ns" -o json

kill -TERM "$agent_pid"
wait "$agent_pid" || true
agent_pid=""
