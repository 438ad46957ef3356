# shellcheck shell=bash
# Shared by scripts/control-plane.sh (kube-apiserver) and scripts/node.sh
# (kubelet, kube-scheduler, kube-controller-manager): Debian's `kubernetes`
# source package, unpacked and patched so that Go 1.19 builds and runs it,
# the build of the four v1.20 binaries into the cache (`build_kube`), and
# the apt helpers both scripts install with. The caller defines log() and
# die() before sourcing this file.
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
# packages (client-go, apimachinery, the API types),
# so the second build takes a fraction of the first. -trimpath is what
# lets them share it: without it Go keys each package by its absolute
# directory, and every build unpacks into a fresh WORK. Go trims entries
# unused for five days.
# The build tags leave out what a loopback node never uses, Kubernetes's
# own way (hack/verify-typecheck-providerless.sh): `providerless` the
# in-tree cloud providers, their volume plugins and kubelet's cloud
# credential lookups (the AWS, Azure, GCE, OpenStack and vSphere SDKs:
# about a third of the build's CPU, 470 → 320 s, and kube-apiserver's
# binary 110 → 61 MB); `dockerless` kubelet's dockershim (the node's
# runtime is containerd).
kube_go_env() {
  local work=$1
  export GOPATH="$work/gopath" GO111MODULE=off GOFLAGS="-trimpath -tags=providerless,dockerless" \
    GOCACHE="$CACHE_ROOT/go-build" PATH="$GO_BIN_DIR:$PATH"
}

# -ldflags that set the version the binaries report (GOPATH mode's path);
# -s -w: no symbol table or DWARF (a faster link, a smaller cache).
kube_ldflags() {
  local v=k8s.io/kubernetes/vendor/k8s.io/component-base/version
  echo "-s -w -X $v.gitVersion=$KUBE_GIT_VERSION -X $v.gitMajor=1 -X $v.gitMinor=20"
}

# Prints the Go import paths of every directory holding a `+k8s:openapi-gen=`
# tag, as openapi-gen wants them. Written so that no command's status can
# abort the caller under `set -e` (see REAL_APISERVER.md step 4).
openapi_packages() {
  local dir
  find . -path ./vendor -prune -o -path './_*' -prune -o -path './.*' -prune -o -name '*.go' -print \
    | xargs -r dirname | sort -u | while read -r dir; do
      if grep -qs -- '+k8s:openapi-gen=' "$dir"/*.go; then
        dir=${dir#./}
        case "$dir" in
          staging/src/k8s.io/code-generator*|staging/src/k8s.io/sample-apiserver*) continue ;;
          staging/src/*) echo "k8s.io/kubernetes/vendor/${dir#staging/src/}" ;;
          *) echo "k8s.io/kubernetes/$dir" ;;
        esac
      fi
    done
  return 0
}

readonly NODE_BINARIES=(kubelet kube-scheduler kube-controller-manager)
readonly PAUSE_IMAGE="localhost/pause:3.4"

# Builds into DIR what is missing of: with `node`, the pause image first
# (static, FROM scratch, from the same source: seconds, and a node of
# another version's binaries needs only it); kube-apiserver (openapi-gen
# first: its definitions are generated, not shipped); then, with `node`,
# the node's three binaries in one `go build` (they share most packages).
# Each file is moved into DIR as soon as it is made, so that what needs
# only part of it can start while the rest builds.
build_kube_recipe() {
  local dir=$1 want_node=$2 work tree f
  work=$(mktemp -d "${TMPDIR:-/tmp}/opstatus-kube-build.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  tree=$(unpack_kube_source "$work")
  kube_go_env "$work"
  mkdir -p "$work/out" "$dir"
  if [ "$want_node" = node ] && [ ! -e "$dir/pause.tar" ]; then
    gcc -Os -Wall -static -DVERSION=v3.4-opstatus -o "$work/pause" "$tree/build/pause/linux/pause.c"
    printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$work/Containerfile.pause"
    local buildah_store=(buildah --storage-driver vfs --root "$work/buildah/root" --runroot "$work/buildah/runroot")
    (cd "$work" && "${buildah_store[@]}" build --quiet -f Containerfile.pause -t "$PAUSE_IMAGE" . >/dev/null)
    "${buildah_store[@]}" push --quiet "$PAUSE_IMAGE" "oci-archive:$work/out/pause.tar:$PAUSE_IMAGE"
    "${buildah_store[@]}" rm --all >/dev/null 2>&1 || true
    mv "$work/out/pause.tar" "$dir/pause.tar.tmp"
    mv "$dir/pause.tar.tmp" "$dir/pause.tar"
    log "built the pause image into $dir"
  fi
  if [ ! -x "$dir/kube-apiserver" ]; then
    log "building kube-apiserver $KUBE_GIT_VERSION from Debian source $KUBE_DEB_VERSION (about 2 minutes of both cores, once)"
    (
      cd "$tree"
      go build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
      local packages
      packages=$(openapi_packages | paste -sd, -)
      [ -n "$packages" ] || die "found no +k8s:openapi-gen packages"
      "$work/openapi-gen" -i "$packages" -p k8s.io/kubernetes/pkg/generated/openapi \
        -O zz_generated.openapi -h hack/boilerplate/boilerplate.generatego.txt \
        -r "$work/openapi-report.txt" >/dev/null
      go build -o "$work/out/kube-apiserver" -ldflags "$(kube_ldflags)" ./cmd/kube-apiserver
    )
    mv "$work/out/kube-apiserver" "$dir/kube-apiserver.tmp"
    mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
    log "built $dir/kube-apiserver"
  fi
  [ "$want_node" = node ] || return 0
  local missing=0
  for f in "${NODE_BINARIES[@]}"; do [ -x "$dir/$f" ] || missing=1; done
  [ "$missing" -eq 1 ] || return 0
  log "building ${NODE_BINARIES[*]} $KUBE_GIT_VERSION (about a minute after kube-apiserver, once)"
  (cd "$tree" && go build -o "$work/out/" -ldflags "$(kube_ldflags)" \
    ./cmd/kubelet ./cmd/kube-scheduler ./cmd/kube-controller-manager)
  for f in "${NODE_BINARIES[@]}"; do
    mv "$work/out/$f" "$dir/$f.tmp"
    mv "$dir/$f.tmp" "$dir/$f"
  done
  log "built ${NODE_BINARIES[*]} into $dir"
}

# The cache directory of the v1.20 binaries: keyed by the Debian source
# version and by the recipe itself (the functions above as bash prints
# them, so without comments), so that a changed recipe builds anew rather
# than reusing binaries built another way.
readonly KUBE_BUILD_DIR="$CACHE_ROOT/kube-build/$KUBE_DEB_VERSION-$(
  declare -f unpack_kube_source kube_go_env kube_ldflags openapi_packages build_kube_recipe |
    cat - <(printf '%s\n' "${NODE_BINARIES[@]}" "$PAUSE_IMAGE" "${BUILD_PACKAGES[@]}") |
    sha256sum | cut -c1-12)"

kube_apiserver_built() { [ -x "$KUBE_BUILD_DIR/kube-apiserver" ]; }
kube_node_built() {
  local b
  for b in "${NODE_BINARIES[@]}" pause.tar; do [ -e "$KUBE_BUILD_DIR/$b" ] || return 1; done
}
kube_pause_built() { [ -e "$KUBE_BUILD_DIR/pause.tar" ]; }

# Builds what is missing of kube-apiserver (`build_kube apiserver`) or of
# kube-apiserver and the node's binaries (`build_kube node`) into
# KUBE_BUILD_DIR, one build at a time on this machine: a second caller
# waits (at most an hour) for the first, then finds the binaries there.
build_kube() {
  local what=$1
  if kube_apiserver_built && { [ "$what" = apiserver ] || kube_node_built; }; then
    return 0
  fi
  mkdir -p "$CACHE_ROOT"
  (
    flock -w 3600 9 || die "another build of the v1.20 binaries held $CACHE_ROOT/kube-build.lock for an hour"
    if kube_apiserver_built && { [ "$what" = apiserver ] || kube_node_built; }; then
      exit 0
    fi
    build_kube_recipe "$KUBE_BUILD_DIR" "$what"
  ) 9>"$CACHE_ROOT/kube-build.lock"
}
