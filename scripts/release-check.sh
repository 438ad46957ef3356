#!/usr/bin/env bash
# Checks scripts/release.sh end to end, as CI runs it: installs what the
# release needs, makes a release key and a registry, releases the checkout
# twice and checks what dist/ holds, then verifies the release as a user
# would (scripts/release/consumer-check.sh).
#
#   scripts/release-check.sh            (after scripts/static-build.sh, whose binaries it reuses)
#
# - the release key: a GPG key made here; the registry: Debian's
#   docker-registry on a free 127.0.0.1 port, over TLS with a CA made here
#   (SSL_CERT_FILE trusts it, as a real registry's certificate is trusted),
#   so the docs' commands run as written; the image is published as
#   127.0.0.1:PORT/team/opstatus;
# - reproducible: the second run writes the same bytes but for the two
#   signatures (which carry their time);
# - SHA256SUMS lists every file but the signatures, and verifies;
# - each SBOM lists exactly the crates `cargo tree -e normal,no-proc-macro
#   --target TARGET` lists, and only crates the binary's own .dep-v0 names;
# - the provenance names this checkout's commit and tree, Cargo.lock's
#   digest, each target's `rustc -vV` and cargo as its toolchain prints them,
#   cargo-auditable's own version (the one scripts/cross-setup.sh installs),
#   the image's name, no local path as the source, every file of dist/ with
#   its digest, and the image index;
# - the image index: three platforms, the org.opencontainers.image.*
#   annotations (revision = this commit, created = its time); each
#   platform's binary, taken out of its layer, says its version: amd64
#   natively, arm64 and armv7 under qemu-user (scripts/cross-setup.sh
#   installs qemu-user-static); each of the four manifests' signature
#   verifies for the published name;
# - the manifests archive holds manifests/ as checked out, under
#   opstatus/; the rendered quick start is manifests/examples/quick-start
#   with the image pinned by digest;
# - docs/install.md's "Verify a release", as written, passes; it fails for
#   a changed binary, a changed SHA256SUMS, another key's signature and the
#   image under another name.
# The real node's test (tests/e2e/node_release.rs) then follows "Install
# from a release" with this dist/ on a real kubelet.
# Prints the consumer's transcript, the index digest and the times of both
# runs. Exit 0 all checked, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "release-check: $*" >&2; exit 1; }

need=()
for tool in buildah skopeo gpg jq openssl docker-registry; do
  command -v "$tool" >/dev/null || need+=("$([ "$tool" = gpg ] && echo gnupg || echo "$tool")")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "release-check: installing ${need[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
scripts/cross-setup.sh >&2 # qemu-user-static, the toolchains

version=$(cargo metadata --locked --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "opstatus") | .version')
revision=$(git rev-parse HEAD)
commit_time=$(git log -1 --format=%ct HEAD)
tree=$(scripts/release/inputs.py tree)
dirty=()
[ "$tree" = "$(git rev-parse 'HEAD^{tree}')" ] || dirty=(--allow-dirty)
work=$(mktemp -d)
registry_pid=""
cleanup() {
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  gpgconf --kill all 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

export GNUPGHOME=$work/gnupg
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key "opstatus release check <release-check@opstatus.invalid>" ed25519 sign never 2>/dev/null
key=$(gpg --batch --with-colons --list-secret-keys | awk -F: '/^fpr:/ {print $10; exit}')

# The registry: TLS with a CA of its own, on a free loopback port.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=release-check-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$work/registry.key" -out "$work/registry.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$work/registry.ext"
openssl x509 -req -days 2 -in "$work/registry.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -extfile "$work/registry.ext" -out "$work/registry.crt" 2>/dev/null
export SSL_CERT_FILE=$work/ca.crt
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/registry.yml" <<EOF
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $work/registry}}
http: {addr: 127.0.0.1:$port, tls: {certificate: $work/registry.crt, key: $work/registry.key}}
EOF
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 1 100); do
  curl -fs --cacert "$work/ca.crt" "https://127.0.0.1:$port/v2/" >/dev/null && break
  kill -0 "$registry_pid" 2>/dev/null || fail "the registry exited: $(cat "$work/registry.log")"
  sleep 0.1
done
curl -fs --cacert "$work/ca.crt" "https://127.0.0.1:$port/v2/" >/dev/null || fail "the registry is not answering on 127.0.0.1:$port"
image=127.0.0.1:$port/team/opstatus

run() {
  local started=$SECONDS
  OPSTATUS_IMAGE=$image OPSTATUS_SIGN_KEY=$key scripts/release.sh "$version" "${dirty[@]}" >&2
  echo $((SECONDS - started))
}
signatures="SHA256SUMS.asc opstatus-$version-image-signatures.tar"
first_seconds=$(run)
cp -r dist "$work/first"
second_seconds=$(run)
for f in dist/*; do
  name=${f#dist/}
  [[ " $signatures " == *" $name "* ]] && continue # a signature carries its time
  cmp -s "$f" "$work/first/$name" || fail "$name differs between two runs from $revision"
done
[ "$(ls "$work/first")" = "$(ls dist)" ] || fail "the two runs wrote other files: $(ls "$work/first") / $(ls dist)"
(cd dist && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not verify"
listed=$(cut -d' ' -f3 dist/SHA256SUMS | sort | tr '\n' ' ')
expected=$(cd dist && ls | grep -vx -e SHA256SUMS -e SHA256SUMS.asc -e "opstatus-$version-image-signatures.tar" | sort | tr '\n' ' ')
[ "$listed" = "$expected" ] || fail "SHA256SUMS lists $listed, dist/ holds $expected"

# The SBOMs: exactly cargo tree's crates; none the binary's list lacks.
targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf)
for target in "${targets[@]}"; do
  sbom=dist/opstatus-$version-$target.cdx.json
  jq -r '(.components + [.metadata.component])[] | "\(.name) v\(.version)"' "$sbom" | sort >"$work/sbom"
  cargo tree --locked -e normal,no-proc-macro --target "$target" --prefix none --format '{p}' |
    sed -E 's/ \(.*//' | sort -u >"$work/tree"
  diff "$work/tree" "$work/sbom" >&2 || fail "$sbom is not what cargo tree says is compiled for $target"
  jq -e --arg t "$target" '.metadata.component.properties[] | select(.name == "cdx:rust:target") | .value == $t' "$sbom" >/dev/null ||
    fail "$sbom does not name $target"
  scripts/release/release.py compare "$sbom" "dist/opstatus-$version-$target" >"$work/compare" || fail "$(cat "$work/compare")"
  echo "release-check: $target: $(wc -l <"$work/sbom") crates in the SBOM, as cargo tree; $(cat "$work/compare")" >&2
done

# The provenance.
statement=dist/opstatus-$version.intoto.json
jq -e --arg rev "$revision" --arg tree "$tree" --arg lock "$(sha256sum Cargo.lock | cut -d' ' -f1)" --arg image "$image" '
  ._type == "https://in-toto.io/Statement/v1" and .predicateType == "https://slsa.dev/provenance/v1"
  and .predicate.buildDefinition.externalParameters.source.revision == $rev
  and .predicate.buildDefinition.externalParameters.image == $image
  and any(.predicate.buildDefinition.resolvedDependencies[]; .digest.gitCommit == $rev and .digest.gitTree == $tree)
  and any(.predicate.buildDefinition.resolvedDependencies[]; .name == "Cargo.lock" and .digest.sha256 == $lock)' \
  "$statement" >/dev/null || fail "$statement does not name commit $revision, tree $tree, Cargo.lock and $image"
for target in "${targets[@]}"; do
  toolchain=$(scripts/cross-setup.sh toolchain "$target")
  jq -e --arg t "$target" --arg tc "$toolchain" --arg vv "$(rustc +"$toolchain" -vV)" --arg cargo "$(cargo +"$toolchain" --version)" '
    [.predicate.buildDefinition.resolvedDependencies[] | .annotations | select(.target? == $t)] as $found
    | ($vv | split("\n")) as $lines
    | ($found | length) == 1 and $found[0].toolchain == $tc and $found[0].cargo == $cargo
    and $found[0]["rustc -vV"].version == $lines[0]
    and all($lines[1:][] | select(contains(": ")); (split(": ") | .[0]) as $k | $found[0]["rustc -vV"][$k] == (.[($k | length) + 2:]))' \
    "$statement" >/dev/null || fail "$statement does not record $target's toolchain $toolchain as rustc -vV prints it"
done
auditable=$(sed -n 's/^readonly CARGO_AUDITABLE_VERSION=//p' scripts/cross-setup.sh)
jq -e --arg a "cargo-auditable $auditable" '.predicate.runDetails.builder.version["cargo-auditable"] == $a' "$statement" >/dev/null ||
  fail "$statement does not record cargo-auditable $auditable: $(jq -c .predicate.runDetails.builder.version "$statement")"
origin=$(git remote get-url origin 2>/dev/null || true)
source_uri=$(jq -r .predicate.buildDefinition.externalParameters.source.uri "$statement")
[ "$source_uri" = "$(scripts/release/inputs.py source "$origin" origin)" ] && [[ "$source_uri" != /* && "$source_uri" != file:* ]] ||
  fail "$statement names the source $source_uri for the origin remote"
while read -r digest name; do
  jq -e --arg n "$name" --arg d "$digest" 'any(.subject[]; .name == $n and .digest.sha256 == $d)' "$statement" >/dev/null ||
    fail "$statement has no subject $name $digest"
done < <(grep -v " opstatus-$version.intoto.json\$" dist/SHA256SUMS)

# The image.
oci=$work/oci
mkdir "$oci"
tar -xf "dist/opstatus-$version.oci.tar" -C "$oci"
blob() { echo "$oci/blobs/sha256/${1#sha256:}"; }
index_digest=$(jq -r --arg v "$version" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $v) | .digest' "$oci/index.json")
[ -n "$index_digest" ] || fail "the archive has no index named $version"
[ "sha256:$(sha256sum "$(blob "$index_digest")" | cut -d' ' -f1)" = "$index_digest" ] || fail "the index blob is not its digest"
jq -e --arg d "${index_digest#sha256:}" 'any(.subject[]; .digest.sha256 == $d)' "$statement" >/dev/null ||
  fail "the provenance does not name the image index $index_digest"
created=$(date -u -d "@$commit_time" +%Y-%m-%dT%H:%M:%SZ)
index=$(blob "$index_digest")
jq -e --arg rev "$revision" --arg v "$version" --arg c "$created" '.annotations as $a
  | $a["org.opencontainers.image.revision"] == $rev and $a["org.opencontainers.image.version"] == $v
  and $a["org.opencontainers.image.created"] == $c and $a["org.opencontainers.image.licenses"] == "Apache-2.0"
  and ($a | has("org.opencontainers.image.source"))
  and ([.manifests[].platform | "\(.os)/\(.architecture)\(if .variant then "/" + .variant else "" end)"]
       == ["linux/amd64", "linux/arm64", "linux/arm/v7"])' "$index" >/dev/null ||
  fail "the image index lacks its platforms or annotations: $(cat "$index")"
mkdir "$work/signatures"
tar -xf "dist/opstatus-$version-image-signatures.tar" -C "$work/signatures"
[ "$(find "$work/signatures" -type f | wc -l)" = 4 ] || fail "the image signatures: $(find "$work/signatures" -type f)"
for digest in "$index_digest" $(jq -r '.manifests[].digest' "$index"); do
  skopeo standalone-verify "$(blob "$digest")" "$image:$version" "$key" \
    "$work/signatures/${image#*/}@sha256=${digest#sha256:}/signature-1" >/dev/null ||
    fail "no signature of $digest for $image:$version"
done
for platform in linux/amd64 linux/arm64 linux/arm/v7; do
  manifest=$(blob "$(jq -r --arg p "$platform" '.manifests[] | select("\(.platform.os)/\(.platform.architecture)\(if .platform.variant then "/" + .platform.variant else "" end)" == $p) | .digest' "$index")")
  jq -e --arg rev "$revision" '.annotations["org.opencontainers.image.revision"] == $rev and (.layers | length) == 1' "$manifest" >/dev/null ||
    fail "$platform: the image manifest lacks the revision or has more than one layer"
  config=$(blob "$(jq -r .config.digest "$manifest")")
  jq -e --arg c "$created" '.created == $c and .config.User == "65532:65532" and .config.Entrypoint == ["/opstatus"]' "$config" >/dev/null ||
    fail "$platform: the image config: $(cat "$config")"
  root=$work/root-${platform//\//-}
  mkdir "$root"
  tar -xzf "$(blob "$(jq -r '.layers[0].digest' "$manifest")")" -C "$root"
  [ "$(ls -A "$root")" = opstatus ] || fail "$platform: the layer holds $(ls -A "$root")"
  case "$platform" in
    linux/amd64) said=$("$root/opstatus" --version) ;;
    linux/arm64) said=$(qemu-aarch64-static "$root/opstatus" --version) ;;
    linux/arm/v7) said=$(qemu-arm-static "$root/opstatus" --version) ;;
  esac
  [ "$said" = "opstatus $version" ] || fail "$platform: the image's binary says $said"
  echo "release-check: $platform: the image's /opstatus says \"$said\", signed for $image:$version" >&2
done

# The manifests: the tree as checked out; the quick start with the image pinned.
mkdir "$work/manifests"
tar -xzf "dist/opstatus-$version-manifests.tar.gz" -C "$work/manifests"
[ "$(ls "$work/manifests")" = opstatus ] && diff -r "$work/manifests/opstatus/manifests" manifests >&2 ||
  fail "opstatus-$version-manifests.tar.gz does not hold manifests/ as checked out, under opstatus/"
kubectl kustomize manifests/examples/quick-start | sed "s#image: opstatus:$version\$#image: $image@$index_digest#" >"$work/quick-start"
diff "$work/quick-start" <(grep -v '^#' "dist/opstatus-$version-quick-start.yaml") >&2 ||
  fail "opstatus-$version-quick-start.yaml is not the quick start with the image $image@$index_digest"

# As a user verifies it: docs/install.md's steps as written, and four
# broken releases they must refuse.
consumer_started=$SECONDS
scripts/release/consumer-check.sh dist "$version" "$image" "$key" >&2
echo "release-check: opstatus $version from $revision: image index $index_digest; reproducible (two runs, same bytes" \
  "but the signatures); release.sh took ${first_seconds} s, then ${second_seconds} s; the documented verification and" \
  "four broken releases $((SECONDS - consumer_started)) s"
