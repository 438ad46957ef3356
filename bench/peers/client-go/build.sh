#!/usr/bin/env bash
# Builds the client-go informer peer (informer.go) against the client-go
# and apimachinery vendored in Debian's `kubernetes` source package (the
# one scripts/control-plane.sh builds kube-apiserver from): GOPATH mode,
# Go 1.19 from Debian, nothing from a module proxy. Prints the binary's
# path; cached by the source version and informer.go's hash.
#
#   bench/peers/client-go/build.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${OPSTATUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opstatus}"
go_bin=/usr/lib/go-1.19/bin
[ -x "$go_bin/go" ] || { echo "no Go 1.19 at $go_bin: run scripts/control-plane.sh build first" >&2; exit 1; }
out="$cache/client-go-informer-$(sha256sum "$here/informer.go" | cut -c1-12)"
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
src="$cache/kubernetes-source"
mkdir -p "$src"
orig=$(ls "$src"/kubernetes_*.orig.tar.gz 2>/dev/null | head -n 1 || true)
if [ -z "$orig" ]; then
  # deb-src entries: scripts/control-plane.sh build enables them.
  (cd "$src" && apt-get source --download-only -qq kubernetes >/dev/null 2>&1)
  orig=$(ls "$src"/kubernetes_*.orig.tar.gz | head -n 1)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/opstatus-informer-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree="$work/gopath/src/k8s.io/kubernetes"
mkdir -p "$tree"
# Only what client-go needs: the vendor tree and the staging repositories
# it links to.
tar -xzf "$orig" -C "$tree" --strip-components=1 --wildcards '*/vendor/*' '*/staging/src/k8s.io/*'
# Go >= 1.18 crashes the vendored reflect2 1.0.1 at run time: Debian's 1.0.2.
if [ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ]; then
  rm -rf "$tree/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$tree/vendor/github.com/modern-go/reflect2"
fi
mkdir -p "$tree/opstatus-bench-informer"
cp "$here/informer.go" "$tree/opstatus-bench-informer/main.go"
(
  cd "$tree"
  export GOPATH="$work/gopath" GO111MODULE=off GOFLAGS= GOCACHE="$cache/go-build-cache" PATH="$go_bin:$PATH"
  go build -o "$work/informer" -ldflags "-s -w" ./opstatus-bench-informer
)
mv "$work/informer" "$out"
echo "$out"
