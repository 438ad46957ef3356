#!/usr/bin/env bash
# Writes a signed release of opstatus into dist/, reproducibly: two runs from
# the same commit write the same bytes but for the two signatures, which
# carry their time (docs/install.md, "Releases").
#
#   OPSTATUS_IMAGE=registry.example/team/opstatus OPSTATUS_SIGN_KEY=FINGERPRINT \
#     scripts/release.sh VERSION [--allow-dirty] [--dry-run]
#
# VERSION must be Cargo.toml's (the version the binary says).
# OPSTATUS_IMAGE (required): the name the image is published under, its
#   registry and path without a tag. The image signature's identity is
#   OPSTATUS_IMAGE:VERSION, the name a policy.json `signedBy` rule matches;
#   the rendered quick start pulls OPSTATUS_IMAGE@DIGEST.
# OPSTATUS_SIGN_KEY (required): the release key's fingerprint (a secret key
#   in gpg's keyring): it signs SHA256SUMS and the image.
# OPSTATUS_SOURCE_URL: the repository's address for the image's
#   org.opencontainers.image.source and the provenance (default: the
#   `origin` remote's; a local path is no address, and is left out).
#   User names, passwords, queries and fragments are never published: an
#   address that cannot be reduced to a host and a path is refused.
# SOURCE_DATE_EPOCH: every time the release records (default: the commit's
#   time); whole seconds as `date +%s` prints them, not after now.
# --allow-dirty: release a tree that differs from the commit (the provenance
#   says so and names the tree built). What is compared is what a build here
#   reads (scripts/release/inputs.py tree): tracked files as they are on disk
#   (an assume-unchanged or skip-worktree entry too) and untracked files but
#   those the repository's .gitignore files ignore (hidden from `git status`
#   by status.showUntrackedFiles=no or .git/info/exclude, they count).
# --dry-run: check all of the above, print what the release would say, build
#   nothing.
#
# dist/ then holds:
#   opstatus-VERSION-TARGET            the three static binaries (scripts/static-build.sh)
#   opstatus-VERSION-TARGET.cdx.json   each one's CycloneDX SBOM, checked against its .dep-v0
#   opstatus-VERSION.oci.tar           the multi-arch OCI image (linux/amd64, arm64, arm/v7),
#                                      an OCI archive: `skopeo copy --all oci-archive:...:VERSION docker://...`
#   opstatus-VERSION-manifests.tar.gz  manifests/ of the tree built, as opstatus/manifests/
#   opstatus-VERSION-quick-start.yaml  manifests/examples/quick-start rendered, the image OPSTATUS_IMAGE@DIGEST
#   opstatus-VERSION.intoto.json       an in-toto statement with SLSA provenance v1 of all of the above
#   SHA256SUMS                         every file above: `sha256sum -c SHA256SUMS` in dist/
#   SHA256SUMS.asc                     SHA256SUMS signed by the release key (`gpg --verify`)
#   opstatus-VERSION-image-signatures.tar
#                                      the image's containers/image "simple signing" signatures
#                                      for OPSTATUS_IMAGE:VERSION (the index and each platform's
#                                      manifest), as a lookaside directory holds them
#
# What is pinned for reproducibility: every timestamp is SOURCE_DATE_EPOCH
# (buildah --timestamp: image config, history and layer file times; the
# SBOM's; the archives' entries); the archives' entries are sorted, owned by
# 0:0 with fixed modes, gzip records no name or time; the image index and all
# JSON are written with sorted keys; buildah adds no identity label (it would
# name buildah's version); the provenance has no start or finish time.
# Exit codes: 0 written (or checked), 1 a step failed, 2 usage or an input refused.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

usage() { echo "usage: OPSTATUS_IMAGE=NAME OPSTATUS_SIGN_KEY=FINGERPRINT scripts/release.sh VERSION [--allow-dirty] [--dry-run]" >&2; exit 2; }
refuse() { echo "release.sh: $*" >&2; exit 2; }
version=""
allow_dirty=false
dry_run=false
for arg in "$@"; do
  case "$arg" in
    --allow-dirty) allow_dirty=true ;;
    --dry-run) dry_run=true ;;
    -*) usage ;;
    *) [ -z "$version" ] || usage; version=$arg ;;
  esac
done
[ -n "$version" ] || usage
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || refuse "$version is not a version (1.2.3)"
for tool in buildah skopeo gpg kubectl jq python3 git tar gzip sha256sum; do
  command -v "$tool" >/dev/null || { echo "release.sh: $tool is missing (scripts/release-check.sh installs what it needs)" >&2; exit 1; }
done
crate_version=$(cargo metadata --locked --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "opstatus") | .version')
[ "$version" = "$crate_version" ] || refuse "Cargo.toml says $crate_version, not $version: the binary would say another version"
inputs=scripts/release/inputs.py

revision=$(git rev-parse --verify 'HEAD^{commit}')
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  source_date_epoch=$("$inputs" epoch "$SOURCE_DATE_EPOCH" SOURCE_DATE_EPOCH " (unset, the commit's time is taken)")
else
  source_date_epoch=$("$inputs" epoch "$(git log -1 --format=%ct "$revision")" "the time of commit $revision" \
    ": set SOURCE_DATE_EPOCH to the release's time")
fi
# Not exported: cc's build scripts rebuild ring when it changes, and the
# binaries are the ones scripts/static-build.sh builds without it.
unset SOURCE_DATE_EPOCH
created=$(date -u -d "@$source_date_epoch" +%Y-%m-%dT%H:%M:%SZ)

[ -n "${OPSTATUS_IMAGE:-}" ] || refuse "OPSTATUS_IMAGE is not set: the name the image is published under, without a tag" \
  "(registry.example/team/opstatus); the image signature names it, and policy.json rules match it"
image=$("$inputs" image "$OPSTATUS_IMAGE")
[ -n "${OPSTATUS_SIGN_KEY:-}" ] || refuse "OPSTATUS_SIGN_KEY is not set: the release key's fingerprint (docs/install.md, \"The release key\")"
key=$(printf '%s' "$OPSTATUS_SIGN_KEY" | tr -d ' ' | tr a-f A-F)
[[ "$key" =~ ^([0-9A-F]{40}|[0-9A-F]{64})$ ]] || refuse "OPSTATUS_SIGN_KEY is not a key's full fingerprint (40 hex digits: gpg --fingerprint)"
gpg --batch --list-secret-keys -- "$key" >/dev/null 2>&1 || refuse "gpg has no secret key $key${GNUPGHOME:+ in $GNUPGHOME}"
if ! gpg --batch --with-colons --show-keys KEYS 2>/dev/null | grep -q "^fpr:::::::::$key:"; then
  echo "release.sh: note: $key is not in KEYS: users cannot verify this release with the repository's keys" >&2
fi

if [ -n "${OPSTATUS_SOURCE_URL+set}" ]; then
  source_url=$("$inputs" source "$OPSTATUS_SOURCE_URL" OPSTATUS_SOURCE_URL)
  [ -n "$source_url" ] || [ -z "$OPSTATUS_SOURCE_URL" ] || refuse "OPSTATUS_SOURCE_URL is a local path, not an address others can reach"
elif origin=$(git remote get-url origin 2>/dev/null); then
  source_url=$("$inputs" source "$origin" "the origin remote's URL (or set OPSTATUS_SOURCE_URL)")
  [ -n "$source_url" ] || echo "release.sh: note: the origin remote is a local path: the release names no source address (OPSTATUS_SOURCE_URL sets one)" >&2
else
  source_url=""
fi

# The tree built against the commit's.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$("$inputs" tree)
dirty=false
if [ "$tree" != "$(git rev-parse "$revision^{tree}")" ]; then
  dirty=true
  changed=$(git diff-tree -r --no-renames --name-status "$revision^{tree}" "$tree" | head -n 20 | sed 's/^/  /')
  $allow_dirty || refuse "the files a build here reads differ from commit $revision (git status may not show" \
    "them: assume-unchanged, skip-worktree, hidden untracked files); commit them, or --allow-dirty to release them" \
    "as they are:"$'\n'"$changed"
fi

licenses=$(cargo metadata --locked --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "opstatus") | .license')

if $dry_run; then
  printf '%s\n' "version: $version" "revision: $revision" "tree: $tree" "uncommitted changes: $dirty" \
    "SOURCE_DATE_EPOCH: $source_date_epoch ($created)" "source: ${source_url:-(none)}" \
    "image: $image:$version" "release key: $key"
  exit 0
fi

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
reproducible_tar() { tar --sort=name --mtime="@$source_date_epoch" --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX --format=ustar "$@"; }
reproducible_tar -C "$layout" -cf "dist/opstatus-$version.oci.tar" oci-layout index.json blobs

# The manifests, from the tree built (whatever manifests/ holds there), as
# opstatus/manifests/: where the docs' overlays find them
# (../opstatus/manifests/...); and the quick start rendered from them, its
# image pinned by the index's digest.
mkdir -p "$work/src/opstatus" "$work/src/quick-start"
git archive --format=tar "$tree" manifests | tar -xf - -C "$work/src/opstatus"
reproducible_tar -C "$work/src" -cf - opstatus | gzip -n -9 >"dist/opstatus-$version-manifests.tar.gz"
cat >"$work/src/quick-start/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../opstatus/manifests/examples/quick-start]
images:
- {name: opstatus, newName: $image, digest: $index_digest}
EOF
{
  echo "# opstatus $version: manifests/examples/quick-start, the image pinned by digest"
  echo "# (kubectl apply -f this file; docs/install.md, \"Install from a release\")"
  kubectl kustomize "$work/src/quick-start"
} >"dist/opstatus-$version-quick-start.yaml"
grep -qF "image: $image@$index_digest" "dist/opstatus-$version-quick-start.yaml" ||
  { echo "release.sh: the rendered quick start does not name $image@$index_digest" >&2; exit 1; }

# The provenance: what was built, from what, with what. Each target's
# toolchain as `rustc -vV` of the toolchain that built it; cargo-auditable's
# own version (`cargo auditable --version` prints cargo's), as cargo install
# records it for the binary on the PATH.
toolchains=$(for t in "${targets[@]}"; do
  tc=$(scripts/cross-setup.sh toolchain "$t")
  jq -n --arg target "$t" --arg toolchain "$tc" --arg vv "$(rustc +"$tc" -vV)" --arg cargo "$(cargo +"$tc" --version)" \
    '{target: $target, toolchain: $toolchain, cargo: $cargo,
      rustc: ($vv | split("\n") | {version: .[0]} + (.[1:] | map(select(contains(": ")) | capture("(?<k>[^:]+): (?<v>.*)") | {(.k): .v}) | add))}'
done | jq -s .)
auditable=$(command -v cargo-auditable)
[ "$auditable" = "${CARGO_HOME:-$HOME/.cargo}/bin/cargo-auditable" ] ||
  { echo "release.sh: cargo-auditable on the PATH ($auditable) is not the one cargo install records" >&2; exit 1; }
auditable_version=$(cargo install --list | sed -n 's/^cargo-auditable v\(.*\):$/\1/p')
[ -n "$auditable_version" ] || { echo "release.sh: cargo install --list names no cargo-auditable" >&2; exit 1; }
tools=$(jq -n --arg auditable "cargo-auditable $auditable_version" --arg buildah "$(buildah --version)" \
  --arg tar "$(tar --version | head -1)" --arg gzip "$(gzip --version | head -1)" \
  --arg kubectl "$(kubectl version --client | paste -sd ' ' -)" \
  '{"cargo-auditable": $auditable, buildah: $buildah, tar: $tar, gzip: $gzip, "kubectl (kustomize)": $kubectl}')
subjects=$(cd dist && sha256sum -- * | jq -Rn '[inputs | capture("(?<d>[0-9a-f]{64})  (?<n>.*)") | {name: .n, digest: {sha256: .d}}]')
subjects=$(jq -n --argjson s "$subjects" --arg d "${index_digest#sha256:}" --arg v "$version" \
  '$s + [{name: ("opstatus@" + $v + " (image index)"), digest: {sha256: $d}}]')
jq -n --arg version "$version" --arg revision "$revision" --arg tree "$tree" --argjson dirty "$dirty" \
  --arg source_uri "$source_url" --arg image "$image" --arg sde "$source_date_epoch" \
  --arg lock "$(sha256sum Cargo.lock | cut -d' ' -f1)" --argjson toolchains "$toolchains" --argjson tools "$tools" \
  --argjson subjects "$subjects" --args \
  '{version: $version, revision: $revision, tree: $tree, dirty: $dirty, source_uri: $source_uri, image: $image,
    source_date_epoch: $sde, cargo_lock: $lock, toolchains: $toolchains, tools: $tools, subjects: $subjects,
    targets: $ARGS.positional}' "${targets[@]}" >"$work/facts.json"
scripts/release/release.py provenance "$work/facts.json" >"dist/opstatus-$version.intoto.json"

(cd dist && sha256sum -- * >"$work/SHA256SUMS" && mv "$work/SHA256SUMS" SHA256SUMS)

# The signatures (each carries its time: outside SHA256SUMS). The image's:
# one per manifest a pull reads, the index and each platform's (a runtime
# checks the platform image it pulls), each for OPSTATUS_IMAGE:VERSION, laid
# out as containers/image's lookaside storage reads them
# (REPOSITORY@sha256=DIGEST/signature-1, REPOSITORY the name without its
# registry).
gpg --quiet --yes --armor --local-user "$key" --detach-sign --output dist/SHA256SUMS.asc dist/SHA256SUMS
for digest in "$index_digest" $(jq -r '.manifests[].digest' "$layout/blobs/sha256/${index_digest#sha256:}"); do
  signed=$work/signatures/${image#*/}@sha256=${digest#sha256:}
  mkdir -p "$signed"
  skopeo standalone-sign "$layout/blobs/sha256/${digest#sha256:}" "$image:$version" "$key" --output "$signed/signature-1"
done
reproducible_tar -C "$work/signatures" -cf "dist/opstatus-$version-image-signatures.tar" --format=gnu .
echo "release.sh: dist/ for opstatus $version from $revision$($dirty && echo ' (uncommitted changes)'):" \
  "image index $index_digest, signed for $image:$version by $key; $((SECONDS - started)) s" >&2
