#!/usr/bin/env bash
# Checks scripts/release.sh end to end, as CI runs it: installs what the
# release needs, releases the checkout twice and checks what dist/ holds.
#
#   scripts/release-check.sh            (after scripts/static-build.sh, whose binaries it reuses)
#
# - reproducible: the second run writes the same bytes (SHA256SUMS equal);
# - `sha256sum -c SHA256SUMS` verifies;
# - each SBOM lists exactly the crates `cargo tree -e normal,no-proc-macro
#   --target TARGET` lists, and only crates the binary's own .dep-v0 names;
# - the provenance names this checkout's commit and tree, Cargo.lock's
#   digest and every file of dist/ with its digest, and the image index;
# - the image index: three platforms, the org.opencontainers.image.*
#   annotations (revision = this commit, created = its time); each
#   platform's binary, taken out of its layer, says its version: amd64
#   natively, arm64 and armv7 under qemu-user (scripts/cross-setup.sh
#   installs qemu-user-static);
# - signed with a GPG key made here (containers/image simple signing,
#   `skopeo standalone-sign`), verified, and refused once the manifest is
#   changed or for another key.
# The real node's test (tests/e2e/node_release.rs) then pushes the archive
# to the node's loopback registry and runs it as the quick start's image.
# Prints the index digest and the times of both runs. Exit 0 all checked, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "release-check: $*" >&2; exit 1; }

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v skopeo >/dev/null || need+=(skopeo)
command -v gpg >/dev/null || need+=(gpg)
command -v jq >/dev/null || need+=(jq)
if [ "${#need[@]}" -gt 0 ]; then
  echo "release-check: installing ${need[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
scripts/cross-setup.sh >&2 # qemu-user-static, the toolchains

version=$(cargo metadata --locked --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "opstatus") | .version')
revision=$(git rev-parse HEAD)
commit_time=$(git log -1 --format=%ct HEAD)
dirty=()
[ -z "$(git status --porcelain)" ] || dirty=(--allow-dirty)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export GNUPGHOME=$work/gnupg
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key "opstatus release check <release-check@opstatus.invalid>" ed25519 sign never 2>/dev/null
key=$(gpg --batch --with-colons --list-secret-keys | awk -F: '/^fpr:/ {print $10; exit}')

run() {
  local started=$SECONDS
  OPSTATUS_SIGN_KEY=$key scripts/release.sh "$version" "${dirty[@]}" >&2
  echo $((SECONDS - started))
}
first_seconds=$(run)
cp -r dist "$work/first"
second_seconds=$(run)
for f in dist/*; do
  name=${f#dist/}
  [ "$name" = "opstatus-$version.oci.sig" ] && continue # a signature carries its time
  cmp -s "$f" "$work/first/$name" || fail "$name differs between two runs from $revision"
done
(cd dist && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not verify"
listed=$(cut -d' ' -f3 dist/SHA256SUMS | sort | tr '\n' ' ')
expected=$(cd dist && ls | grep -v -e '^SHA256SUMS$' -e '\.sig$' | sort | tr '\n' ' ')
[ "$listed" = "$expected" ] || fail "SHA256SUMS lists $listed, dist/ holds $expected"

# The SBOMs: exactly cargo tree's crates; none the binary's list lacks.
for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf; do
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
tree=$(GIT_INDEX_FILE=$work/index git add -A && GIT_INDEX_FILE=$work/index git write-tree)
jq -e --arg rev "$revision" --arg tree "$tree" --arg lock "$(sha256sum Cargo.lock | cut -d' ' -f1)" '
  ._type == "https://in-toto.io/Statement/v1" and .predicateType == "https://slsa.dev/provenance/v1"
  and .predicate.buildDefinition.externalParameters.source.revision == $rev
  and any(.predicate.buildDefinition.resolvedDependencies[]; .digest.gitCommit == $rev and .digest.gitTree == $tree)
  and any(.predicate.buildDefinition.resolvedDependencies[]; .name == "Cargo.lock" and .digest.sha256 == $lock)
  and any(.predicate.buildDefinition.resolvedDependencies[]; (.name // "") | startswith("rustc ("))' "$statement" >/dev/null ||
  fail "$statement does not name commit $revision, tree $tree, Cargo.lock and the toolchains"
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
  echo "release-check: $platform: the image's /opstatus says \"$said\"" >&2
done

# The signature: made with the key above, verified; refused for a changed
# manifest and for another key.
signature=dist/opstatus-$version.oci.sig
skopeo standalone-verify "$index" "opstatus:$version" "$key" "$signature" >&2 || fail "the signature does not verify"
printf ' ' | cat "$index" - >"$work/changed-index"
! skopeo standalone-verify "$work/changed-index" "opstatus:$version" "$key" "$signature" >/dev/null 2>&1 ||
  fail "the signature verifies a changed index"
gpg --batch --quiet --passphrase '' --quick-gen-key "someone else <other@opstatus.invalid>" ed25519 sign never 2>/dev/null
other=$(gpg --batch --with-colons --list-secret-keys | awk -F: '/^fpr:/ {print $10}' | grep -v "$key" | head -1)
! skopeo standalone-verify "$index" "opstatus:$version" "$other" "$signature" >/dev/null 2>&1 ||
  fail "the signature verifies for another key"

echo "release-check: opstatus $version from $revision: image index $index_digest; reproducible (two runs, same bytes); release.sh took ${first_seconds} s, then ${second_seconds} s"
