# shellcheck shell=bash
# Shared by scripts/control-plane.sh (kube-apiserver) and scripts/node.sh
# (kubelet, kube-scheduler, kube-controller-manager): Debian's `kubernetes`
# source package, unpacked and patched so that Go 1.19 builds and runs it,
# and the apt helpers both scripts install with. The caller defines log()
# and die() before sourcing this file.
#
# Why each step is needed: shared/REAL_APISERVER.md.

readonly KUBE_DEB_VERSION="1.20.5+really1.20.2"
readonly KUBE_GIT_VERSION="v1.20.2"
readonly CACHE_ROOT="${OPSTATUS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opstatus}"
readonly GO_BIN_DIR="/usr/lib/go-1.19/bin"
readonly BUILD_PACKAGES=(golang-1.19-go golang-github-modern-go-reflect2-dev dpkg-dev)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing_packages() {
  local pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      echo "$pkg"
    fi
  done
}

apt_updated=0
apt_install() {
  local missing
  missing=$(missing_packages "$@")
  [ -n "$missing" ] || return 0
  log "installing: $(echo $missing)"
  if [ "$apt_updated" -eq 0 ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

enable_deb_src() {
  local src=/etc/apt/sources.list.d/opstatus-deb-src.sources
  [ -f "$src" ] && return 0
  [ -f /etc/apt/sources.list.d/debian.sources ] || die "no /etc/apt/sources.list.d/debian.sources to derive a deb-src entry from"
  # The same suites as the machine's binary packages, for source packages.
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | as_root tee "$src" >/dev/null
  as_root apt-get update -qq
  apt_updated=1
}

# Unpacks Debian's kubernetes source into WORK/gopath/src/k8s.io/kubernetes,
# ready to build in GOPATH mode, and exports the Go environment for it
# (GOPATH, GO111MODULE=off, GOCACHE under WORK, Go 1.19 first on PATH).
# Prints the tree's path.
unpack_kube_source() {
  local work=$1
  # Only the tree's path goes to stdout.
  apt_install "${BUILD_PACKAGES[@]}" >&2
  enable_deb_src >&2
  (cd "$work" && apt-get source --download-only -qq kubernetes >/dev/null 2>&1)
  local orig
  orig=$(ls "$work"/kubernetes_*.orig.tar.gz 2>/dev/null | head -n 1)
  [ -n "$orig" ] || die "apt-get source kubernetes gave no .orig.tar.gz"
  case "$orig" in
    *"$KUBE_DEB_VERSION"*) ;;
    *) die "expected kubernetes source $KUBE_DEB_VERSION, got $(basename "$orig")" ;;
  esac

  local tree="$work/gopath/src/k8s.io/kubernetes"
  mkdir -p "$tree"
  tar -xzf "$orig" -C "$tree" --strip-components=1

  # Go >= 1.18 crashes the vendored reflect2 1.0.1 at run time: use Debian's 1.0.2.
  rm -rf "$tree/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$tree/vendor/github.com/modern-go/reflect2"
  echo "$tree"
}

# The Go environment for building a tree unpacked under WORK. The build
# cache is kept in the cache directory and shared by the builds of
# kube-apiserver and the node's binaries: they compile most of the same
# packages (client-go, apimachinery, the API types), so the second build
# takes a fraction of the first. Go trims entries unused for five days.
kube_go_env() {
  local work=$1
  export GOPATH="$work/gopath" GO111MODULE=off GOFLAGS= GOCACHE="$CACHE_ROOT/go-build" PATH="$GO_BIN_DIR:$PATH"
}

# -ldflags that set the version the binaries report (GOPATH mode's path).
kube_ldflags() {
  local v=k8s.io/kubernetes/vendor/k8s.io/component-base/version
  echo "-s -w -X $v.gitVersion=$KUBE_GIT_VERSION -X $v.gitMajor=1 -X $v.gitMinor=20"
}
