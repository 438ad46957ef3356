#!/usr/bin/env bash
# Writes a release of opstatus into dist/, reproducibly: two runs from the
# same commit write the same bytes (docs/install.md, "Releases").
#
#   scripts/release.sh VERSION [--allow-dirty]
#
# VERSION must be Cargo.toml's (the version the binary says); a tree with
# uncommitted changes is refused unless --allow-dirty (then the provenance
# says so and names the tree actually built). dist/ then holds:
#
#   opstatus-VERSION-TARGET            the three static binaries (scripts/static-build.sh)
#   opstatus-VERSION-TARGET.cdx.json   each one's CycloneDX SBOM, checked against its .dep-v0
#   opstatus-VERSION.oci.tar           the multi-arch OCI image (linux/amd64, arm64, arm/v7),
#                                      an OCI archive: `skopeo copy --all oci-archive:...:VERSION docker://...`
#   opstatus-VERSION.intoto.json       an in-toto statement with SLSA provenance v1 of all of the above
#   SHA256SUMS                         `sha256sum -c SHA256SUMS` in dist/
#
# OPSTATUS_SOURCE_URL: the repository's address for the image's
# org.opencontainers.image.source and the provenance (default: the `origin`
# remote, without credentials; empty when there is none).
# OPSTATUS_SIGN_KEY=FINGERPRINT: also sign the image index's manifest, for the
# image reference OPSTATUS_SIGN_IDENTITY (default opstatus:VERSION), with
# that GPG key, a containers/image "simple signing" signature
# (`skopeo standalone-sign`), written as opstatus-VERSION.oci.sig beside the
# rest (a signature carries its time: it is not covered by SHA256SUMS).
#
# What is pinned for reproducibility: every timestamp is SOURCE_DATE_EPOCH,
# the commit's time (buildah --timestamp: image config, history and layer
# file times; the SBOM's; the archive's entries); the archive's entries are
# sorted, owned by 0:0 with fixed modes; the image index and all JSON are
# written with sorted keys; buildah adds no identity label (it would name
# buildah's version); the provenance has no start or finish time.
# Exit codes: 0 written, 1 a step failed, 2 usage.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/release.sh VERSION [--allow-dirty]" >&2; exit 2; }
version=""
allow_dirty=false
for arg in "$@"; do
  case "$arg" in
    --allow-dirty) allow_dirty=true ;;
    -*) usage ;;
    *) [ -z "$version" ] || usage; version=$arg ;;
  esac
done
[ -n "$version" ] || usage
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "release.sh: $version is not a version (1.2.3)" >&2; exit 2; }
crate_version=$(cargo metadata --locked --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "opstatus") | .version')
[ "$version" = "$crate_version" ] || { echo "release.sh: Cargo.toml says $crate_version, not $version: the binary would say another version" >&2; exit 2; }
for tool in buildah jq python3 git tar sha256sum; do
  command -v "$tool" >/dev/null || { echo "release.sh: $tool is missing (scripts/release-check.sh installs what it needs)" >&2; exit 1; }
done

revision=$(git rev-parse HEAD)
dirty=false
[ -z "$(git status --porcelain)" ] || dirty=true
if $dirty && ! $allow_dirty; then
  echo "release.sh: the tree has uncommitted changes; commit them, or --allow-dirty to release the tree as it is" >&2
  exit 2
fi
# The tree actually built: tracked and untracked files, not ignored ones.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
index=$work/index
GIT_INDEX_FILE=$index git add -A
tree=$(GIT_INDEX_FILE=$index git write-tree)
# Not exported: cc's build scripts rebuild ring when it changes, and the
# binaries are the ones scripts/static-build.sh builds without it.
source_date_epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct "$revision")}
unset SOURCE_DATE_EPOCH
created=$(date -u -d "@$source_date_epoch" +%Y-%m-%dT%H:%M:%SZ)
source_url=${OPSTATUS_SOURCE_URL-$(git remote get-url origin 2>/dev/null || true)}
# No user name or password in a published object.
source_url=$(printf '%s' "$source_url" | sed -E 's#^([a-z+]+://)[^/@]*@#\1#')
licenses=$(cargo metadata --locked --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "opstatus") | .license')

targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf)
platforms=(linux/amd64 linux/arm64 linux/arm/v7)
mapfile -t binaries < <(scripts/static-build.sh "${targets[@]}")

rm -rf dist
mkdir dist
for i in "${!targets[@]}"; do
  cp "${binaries[$i]}" "dist/opstatus-$version-${targets[$i]}"
  # The build's own account of what it compiled for the target (all fresh:
  # static-build.sh just built it the same way).
  cargo +"$(scripts/cross-setup.sh toolchain "${targets[$i]}")" auditable build --locked --release \
    --target "${targets[$i]}" --message-format=json >"$work/${targets[$i]}.artifacts.json"
  scripts/release/release.py sbom "${targets[$i]}" "$version" "$source_date_epoch" "$work/${targets[$i]}.artifacts.json" \
    >"dist/opstatus-$version-${targets[$i]}.cdx.json"
  scripts/release/release.py compare "dist/opstatus-$version-${targets[$i]}.cdx.json" "dist/opstatus-$version-${targets[$i]}" >&2
done

# The image: one buildah build of the Containerfile's `prebuilt` stage per
# platform (from the binaries static-build.sh staged), each pushed into one
# OCI layout; the index over the three is written here, where its
# annotations and order are ours to fix.
annotations=(
  "org.opencontainers.image.title=opstatus"
  "org.opencontainers.image.source=$source_url"
  "org.opencontainers.image.revision=$revision"
  "org.opencontainers.image.version=$version"
  "org.opencontainers.image.licenses=$licenses"
  "org.opencontainers.image.created=$created"
)
build_flags=()
for a in "${annotations[@]}"; do build_flags+=(--annotation "$a" --label "$a"); done
bah() { buildah --storage-driver vfs --root "$work/root" --runroot "$work/runroot" "$@"; }
layout=$work/layout
entries=()
for platform in "${platforms[@]}"; do
  tag=opstatus:${platform//\//-}
  bah build --quiet --platform "$platform" --target prebuilt --timestamp "$source_date_epoch" \
    --identity-label=false --omit-history --build-arg "SOURCE_URL=$source_url" "${build_flags[@]}" \
    -f Containerfile -t "$tag" . >/dev/null
  bah push --quiet --format oci "$tag" "oci:$layout:${platform//\//-}" >&2
  digest=$(jq -r --arg ref "${platform//\//-}" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $ref) | .digest' "$layout/index.json")
  size=$(stat -c %s "$layout/blobs/sha256/${digest#sha256:}")
  IFS=/ read -r os arch variant <<<"$platform"
  entries+=("$(jq -cn --arg d "$digest" --argjson s "$size" --arg os "$os" --arg arch "$arch" --arg v "${variant:-}" \
    '{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s,
      platform: ({os: $os, architecture: $arch} + (if $v == "" then {} else {variant: $v} end))}')")
done
image_index=$(printf '%s\n' "${entries[@]}" | jq -cS --slurp --args \
  '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: .,
    annotations: ($ARGS.positional | map(split("=") | {(.[0]): (.[1:] | join("="))}) | add)}' "${annotations[@]}")
printf '%s' "$image_index" >"$work/index-blob"
index_digest=sha256:$(sha256sum "$work/index-blob" | cut -d' ' -f1)
mv "$work/index-blob" "$layout/blobs/sha256/${index_digest#sha256:}"
jq -cnS --arg d "$index_digest" --argjson s "${#image_index}" --arg v "$version" \
  '{schemaVersion: 2, manifests: [{mediaType: "application/vnd.oci.image.index.v1+json", digest: $d, size: $s,
    annotations: {"org.opencontainers.image.ref.name": $v}}]}' >"$layout/index.json"
tar --sort=name --mtime="@$source_date_epoch" --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX \
  --format=ustar -C "$layout" -cf "dist/opstatus-$version.oci.tar" oci-layout index.json blobs

# The provenance: what was built, from what, with what.
toolchains=$(for t in "${targets[@]}"; do
  tc=$(scripts/cross-setup.sh toolchain "$t")
  printf '%s\t%s\n' "rustc ($t)" "$(rustc +"$tc" --version)"
done | jq -Rn '[inputs | split("\t") | {(.[0]): .[1]}] | add')
tools=$(jq -n --arg cargo "$(cargo --version)" --arg auditable "$(cargo auditable --version 2>/dev/null || true)" \
  --arg buildah "$(buildah --version)" --arg tar "$(tar --version | head -1)" \
  '{cargo: $cargo, "cargo-auditable": $auditable, buildah: $buildah, tar: $tar}')
subjects=$(cd dist && sha256sum -- * | jq -Rn '[inputs | capture("(?<d>[0-9a-f]{64})  (?<n>.*)") | {name: .n, digest: {sha256: .d}}]')
subjects=$(jq -n --argjson s "$subjects" --arg d "${index_digest#sha256:}" --arg v "$version" \
  '$s + [{name: ("opstatus@" + $v + " (image index)"), digest: {sha256: $d}}]')
jq -n --arg version "$version" --arg revision "$revision" --arg tree "$tree" --argjson dirty "$dirty" \
  --arg source_uri "$source_url" --arg sde "$source_date_epoch" \
  --arg lock "$(sha256sum Cargo.lock | cut -d' ' -f1)" --argjson toolchains "$toolchains" --argjson tools "$tools" \
  --argjson subjects "$subjects" --args \
  '{version: $version, revision: $revision, tree: $tree, dirty: $dirty, source_uri: $source_uri,
    source_date_epoch: $sde, cargo_lock: $lock, toolchains: $toolchains, tools: $tools, subjects: $subjects,
    targets: $ARGS.positional}' "${targets[@]}" >"$work/facts.json"
scripts/release/release.py provenance "$work/facts.json" >"dist/opstatus-$version.intoto.json"

(cd dist && sha256sum -- * >"$work/SHA256SUMS" && mv "$work/SHA256SUMS" SHA256SUMS)

if [ -n "${OPSTATUS_SIGN_KEY:-}" ]; then
  skopeo standalone-sign "$layout/blobs/sha256/${index_digest#sha256:}" "${OPSTATUS_SIGN_IDENTITY:-opstatus:$version}" "$OPSTATUS_SIGN_KEY" \
    --output "dist/opstatus-$version.oci.sig"
fi
echo "release.sh: dist/ for opstatus $version from $revision$($dirty && echo ' (uncommitted changes)'), image index $index_digest" >&2
