#!/usr/bin/env bash
# Follows docs/install.md's "Verify a release" as written, as a platform team
# would: its `sh` blocks, in order, by bash (errexit, pipefail, each command
# traced), in a directory holding the release's files and a KEYS with the
# release key, VERSION, FINGERPRINT and IMAGE set, and nothing else of this
# environment. Then four releases that must fail, each at the step the docs
# say catches it:
#   - a changed binary                  sha256sum -c: FAILED
#   - a changed SHA256SUMS (the sums of the changed binary)
#                                       gpg --verify: BAD signature
#   - SHA256SUMS signed by another key, that key in KEYS too
#                                       no VALIDSIG line for the pinned fingerprint
#   - the image pushed under another name, its signatures moved along
#                                       skopeo: Signature for identity ... is not accepted
#
#   scripts/release/consumer-check.sh DIST VERSION IMAGE FINGERPRINT
#
# GNUPGHOME is the maker's keyring (the release key's public half becomes the
# consumer's KEYS; the other key is made there); SSL_CERT_FILE trusts IMAGE's
# registry (TLS, on loopback), as a real registry's certificate is trusted.
# Prints the passing run's transcript (each command after `+ `, as bash
# traces it, then what it printed). Exit 0 when the steps pass and each broken release fails where
# it should; 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$#" -eq 4 ] || { echo "usage: consumer-check.sh DIST VERSION IMAGE FINGERPRINT" >&2; exit 2; }
dist=$(realpath "$1") version=$2 image=$3 key=$4
fail() { echo "consumer-check: $*" >&2; exit 1; }

# The sh blocks of the section, dedented by their fence's indentation (as
# tests/support/markdown.rs reads them).
steps=$(python3 - docs/install.md "## Verify a release" <<'EOF'
import sys
text = open(sys.argv[1]).read()
section = text.split("\n" + sys.argv[2] + "\n", 1)[1].split("\n## ", 1)[0]
lines, out = iter(section.split("\n")), []
for line in lines:
    indent = len(line) - len(line.lstrip())
    if line.strip() == "```sh":
        for body in lines:
            if body.strip().startswith("```"):
                break
            out.append(body[indent:] if body[:indent].strip() == "" else body.lstrip())
print("\n".join(out))
EOF
)
[ -n "$steps" ] || fail "docs/install.md's \"Verify a release\" has no sh blocks"

work=$(mktemp -d)
cleanup() {
  for home in "$work"/*/keyring; do [ -d "$home" ] && GNUPGHOME=$home gpgconf --kill all 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# A consumer's directory: the release's files and KEYS.
prepare() {
  mkdir "$work/$1"
  cp "$dist"/* "$work/$1/"
  gpg --batch --armor --export "$key" >"$work/$1/KEYS"
}
# Runs the steps in the consumer directory $1 for IMAGE $2: exit status,
# and the transcript in $1.log.
follow() {
  local status=0
  (cd "$work/$1" && env -i HOME="$work/$1" PATH=/usr/bin:/bin LANG=C.UTF-8 SSL_CERT_FILE="$SSL_CERT_FILE" \
    VERSION="$version" FINGERPRINT="$key" IMAGE="$2" bash -euo pipefail -x -c "$steps") \
    >"$work/$1.log" 2>&1 || status=$?
  return "$status"
}
# The command a failed run stopped at: its last traced line.
stopped_at() { grep '^+ ' "$work/$1.log" | tail -n 1; }
# CASE TRACE TEXT: the run failed at a command matching TRACE, having printed TEXT.
must_fail() {
  local case=$1 trace=$2 text=$3
  ! follow "$case" "${4:-$image}" || fail "$case: the steps passed:"$'\n'"$(cat "$work/$case.log")"
  stopped_at "$case" | grep -q -- "$trace" && grep -qF -- "$text" "$work/$case.log" ||
    fail "$case: expected a failure at \`$trace\` saying \"$text\":"$'\n'"$(cat "$work/$case.log")"
  echo "consumer-check: $case: refused at \`$(stopped_at "$case" | cut -c3- | cut -c1-60)…\`: $(grep -F -m1 -- "$text" "$work/$case.log")" >&2
}

prepare release
follow release "$image" || fail "the documented steps fail on the release:"$'\n'"$(cat "$work/release.log")"
for said in "VALIDSIG" ": OK" "Writing manifest to image destination" "image: $image@sha256:"; do
  grep -qF -- "$said" "$work/release.log" || fail "the steps passed without printing \"$said\":"$'\n'"$(cat "$work/release.log")"
done
cat "$work/release.log"

binary=opstatus-$version-x86_64-unknown-linux-musl
prepare changed-binary
printf '\0' >>"$work/changed-binary/$binary"
must_fail changed-binary "sha256sum -c" "$binary: FAILED"

prepare changed-sums
printf '\0' >>"$work/changed-sums/$binary"
(cd "$work/changed-sums" && sha256sum -- $(cut -d' ' -f3 SHA256SUMS) >SHA256SUMS)
must_fail changed-sums "SHA256SUMS.asc\|VALIDSIG" "BAD signature"

prepare other-key
gpg --batch --quiet --passphrase '' --quick-gen-key "someone else <else@opstatus.invalid>" ed25519 sign never 2>/dev/null
other=$(gpg --batch --with-colons --list-secret-keys "someone else" 2>/dev/null | awk -F: '/^fpr:/ {print $10; exit}')
gpg --batch --yes --quiet --armor --local-user "$other" --detach-sign --output "$work/other-key/SHA256SUMS.asc" \
  "$work/other-key/SHA256SUMS"
gpg --batch --armor --export "$other" >>"$work/other-key/KEYS"
must_fail other-key "SHA256SUMS.asc\|VALIDSIG" "Good signature from \"someone else"

prepare other-name
renamed=${image%/*}/other
signatures=$work/other-name/opstatus-$version-image-signatures.tar
mkdir "$work/signatures"
tar -xf "$signatures" -C "$work/signatures"
for signed in "$work/signatures/${image#*/}"@*; do
  mkdir -p "$(dirname "$work/signatures/${renamed#*/}")"
  mv "$signed" "$work/signatures/${renamed#*/}@${signed##*@}"
done
tar -cf "$signatures" -C "$work/signatures" .
must_fail other-name "skopeo copy --policy" "Signature for identity $image:$version is not accepted" "$renamed"
