#!/usr/bin/env bash
# opstatus's main job on this machine, with no cluster needed.
#
# Where the real node can run (root, `scripts/node.sh build` done, the musl
# target installed): a real single-node cluster on loopback
# (`scripts/node.sh`), opstatus's scratch image built with buildah and
# pushed to its registry, the README's quick start applied, and kubelet
# running, probing and stopping the Pod: `kubectl get pods`, kubelet's probe
# results, `opstatus get`, and the final status once kubelet stopped it.
#
# Elsewhere: a real local control plane (etcd + kube-apiserver on
# loopback), the manifests/ RBAC, and opstatus run "as in a pod" for a few
# heartbeats. Either way it stops everything it started.
#
#   scripts/demo.sh [SECONDS]     (default 12)
#   OPSTATUS_DEMO_POD=0           the "as in a pod" demo even where the node can run
set -euo pipefail
cd "$(dirname "$0")/.."
run_for=${1:-12}

scripts/control-plane.sh build >/dev/null
cargo build --locked --release --quiet
bin=$PWD/target/release/opstatus

state=$(mktemp -d "${TMPDIR:-/tmp}/opstatus-demo.XXXXXX")
agent_pid=""
node_up=0
cleanup() {
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
  [ "$node_up" = 1 ] && scripts/node.sh down "$state/node" || true
  scripts/control-plane.sh stop "$state/control-plane" || true
  rm -rf --one-file-system "$state"
}
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
ns=kube9-system

# --- A real Pod on a real node --------------------------------------------
pod_demo() {
  local musl=x86_64-unknown-linux-musl
  cargo build --locked --release --quiet --target "$musl"
  mkdir -p target/platforms/amd64
  ln -f "target/$musl/release/opstatus" target/platforms/amd64/opstatus
  scripts/node.sh up "$state/node" --watch-pid $$
  node_up=1
  # shellcheck disable=SC1091
  . "$state/node/env"
  export KUBECONFIG
  local image=$REGISTRY/team/opstatus version
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
  local store=(buildah --storage-driver vfs --root "$state/buildah/root" --runroot "$state/buildah/runroot")
  step "buildah build --target prebuilt -t $image:$version . && buildah push $image:$version"
  "${store[@]}" build --quiet --platform linux/amd64 --build-arg SOURCE_URL= --target prebuilt -f Containerfile \
    -t "$image:$version" . >/dev/null
  "${store[@]}" push --quiet --tls-verify=false "$image:$version"
  mkdir -p "$state/my-opstatus"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\nimages:\n- {name: opstatus, newName: %s}\n' \
    "$(realpath --relative-to="$state/my-opstatus" manifests/examples/quick-start)" "$image" \
    > "$state/my-opstatus/kustomization.yaml"
  step "kubectl apply -k my-opstatus   (the README's quick start; IMAGE=$image)"
  kubectl apply -k "$state/my-opstatus"
  step "kubectl -n $ns rollout status deployment/opstatus --timeout=2m"
  kubectl -n "$ns" rollout status deployment/opstatus --timeout=2m
  sleep "$run_for"
  step "kubectl -n $ns get pods -o wide"
  kubectl -n "$ns" get pods -o wide
  local pod
  pod=$(kubectl -n "$ns" get pods -o jsonpath='{.items[0].metadata.name}')
  step "kubelet's probes of $pod (its log), and the Pod's events"
  grep -E "probe for \"${pod}_" "$KUBELET_LOG" | sed 's/^[^]]*] //' | tail -n 4 || true
  kubectl -n "$ns" get events --field-selector "involvedObject.name=$pod" \
    -o custom-columns=REASON:.reason,FROM:.source.component,MESSAGE:.message
  step "opstatus get"
  "$bin" get --kubeconfig "$KUBECONFIG"
  step "kubectl -n $ns scale deployment/opstatus --replicas=0   (kubelet's SIGTERM: the final status)"
  kubectl -n "$ns" scale deployment/opstatus --replicas=0 >/dev/null
  kubectl -n "$ns" wait --for=delete "pod/$pod" --timeout=90s >/dev/null || true
  "$bin" get --kubeconfig "$KUBECONFIG" -o json
}

if [ "${OPSTATUS_DEMO_POD:-1}" = 1 ] && scripts/node.sh available 2>/dev/null &&
  rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
  pod_demo
  exit 0
fi
echo "demo: no real node here (scripts/node.sh available says why): opstatus runs \"as in a pod\"" >&2

# --- "As in a pod", beside a bare control plane ---------------------------
scripts/control-plane.sh start "$state/control-plane" --watch-pid $$
# shellcheck disable=SC1091
. "$state/control-plane/env"
k() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }

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
