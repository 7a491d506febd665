#!/usr/bin/env bash
# Builds the Assay base image (assay/base:bookworm) from Debian packages, without any container registry:
# debootstrap a minimal Debian root filesystem from the Debian mirror this machine's apt already uses, add the
# packages in task-runtime/base-image/packages.txt, clean caches, then `docker import` the tree.
#
# Idempotent: the image is labelled with the SHA-256 of its recipe (recipe.conf, packages.txt and this script) and
# also tagged assay/base:recipe-<first 16 hex>; when an image with that label exists, nothing is rebuilt and the
# tag assay/base:bookworm is pointed at it.
#
# Usage: scripts/build-base-image.sh [--force] [--no-verify] [--recipe DIR]
#   --force      rebuild even when an image with the same recipe digest exists
#   --no-verify  skip the final `python3 -c 'import numpy'` check inside the image (network off)
#   --recipe DIR another recipe (recipe.conf + packages.txt) built the same way, e.g. cuda/image (assay/cuda-base:
#                bookworm: the base packages plus the host compiler nvcc needs); default task-runtime/base-image
# Environment (optional):
#   ASSAY_DEBIAN_MIRROR  Debian mirror URL (default: the first `deb` source for the suite's main component found in
#                        /etc/apt/sources.list and /etc/apt/sources.list.d/*.list|*.sources)
#   ASSAY_HOME           where the build record goes (default .assay in the repository root):
#                        $ASSAY_HOME/images/base-<suite>.json with the image id, recipe digest, size and build time
#   TMPDIR               the root filesystem is assembled under ${ASSAY_BUILD_DIR:-/var/tmp} (must allow devices)
# Needs root (debootstrap) and a Docker daemon (scripts/ensure-docker.sh is run first).
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RECIPE_DIR="$REPO/task-runtime/base-image"
SELF="$REPO/scripts/build-base-image.sh"
FORCE=false
VERIFY=true
while [ $# -gt 0 ]; do
  arg="$1"
  shift
  case "$arg" in
    --force) FORCE=true ;;
    --no-verify) VERIFY=false ;;
    --recipe)
      [ $# -gt 0 ] || { echo "build-base-image: --recipe needs a directory" >&2; exit 2; }
      RECIPE_DIR="$(cd "$1" && pwd)" || exit 2
      shift
      ;;
    -h | --help)
      sed -n '2,/^# Needs root/p' "$SELF"
      exit 0
      ;;
    *)
      echo "build-base-image: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

say() { printf 'build-base-image: %s\n' "$*"; }
die() {
  printf 'build-base-image: error: %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" = "0" ] || die "debootstrap needs root; run this script as root"
if [ ! -f "$RECIPE_DIR/recipe.conf" ] || [ ! -f "$RECIPE_DIR/packages.txt" ]; then die "recipe missing in $RECIPE_DIR"; fi

# --- recipe ------------------------------------------------------------------------------------------------------
conf() { # strict KEY=value reader: no shell evaluation of the file
  local key="$1" line value=""
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in "$key="*) value="${line#"$key="}" ;; esac
  done <"$RECIPE_DIR/recipe.conf"
  [ -n "$value" ] || die "recipe.conf has no value for '$key'"
  case "$value" in *[!A-Za-z0-9._:/,+-]*) die "recipe.conf: '$key' has unexpected characters: '$value'" ;; esac
  printf '%s' "$value"
}
SUITE="$(conf suite)"
VARIANT="$(conf variant)"
COMPONENTS="$(conf components)"
TAG="$(conf tag)"
REPOSITORY="${TAG%%:*}"

PACKAGES=""
while IFS= read -r line || [ -n "$line" ]; do
  line="${line%%#*}"
  line="$(printf '%s' "$line" | tr -d '[:space:]')"
  [ -z "$line" ] && continue
  case "$line" in *[!a-z0-9.+-]*) die "packages.txt: not a Debian package name: '$line'" ;; esac
  PACKAGES="${PACKAGES:+$PACKAGES,}$line"
done <"$RECIPE_DIR/packages.txt"
[ -n "$PACKAGES" ] || die "packages.txt lists no packages"

# The recipe digest covers every input that decides what goes into the image (not the mirror: see README).
RECIPE_DIGEST="sha256:$(
  for f in "$RECIPE_DIR/recipe.conf" "$RECIPE_DIR/packages.txt" "$SELF"; do
    printf '%s\0' "$(basename "$f")"
    sha256sum <"$f" | cut -d' ' -f1
  done | sha256sum | cut -d' ' -f1
)"
RECIPE_TAG="$REPOSITORY:recipe-${RECIPE_DIGEST#sha256:}"
RECIPE_TAG="${RECIPE_TAG:0:$((${#REPOSITORY} + 8 + 16))}"
LABEL_KEY="org.assay.base.recipe-digest"
RECORD_DIR="${ASSAY_HOME:-$REPO/.assay}/images"
RECORD="$RECORD_DIR/$(basename "$REPOSITORY")-$SUITE.json"

"$REPO/scripts/ensure-docker.sh"

write_record() { # $1 image id, $2 build seconds (or null), $3 mirror (or empty)
  local id="$1" secs="$2" mirror="$3" size
  size="$(docker image inspect --format '{{.Size}}' "$id")"
  mkdir -p "$RECORD_DIR"
  printf '{"tag":"%s","recipeTag":"%s","imageId":"%s","recipeDigest":"%s","sizeBytes":%s,"buildSeconds":%s,"mirror":"%s","recordedAt":"%s"}\n' \
    "$TAG" "$RECIPE_TAG" "$id" "$RECIPE_DIGEST" "$size" "$secs" "$mirror" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$RECORD.tmp"
  mv "$RECORD.tmp" "$RECORD"
  say "image $TAG = $id ($((size / 1024 / 1024)) MiB), recipe $RECIPE_DIGEST; recorded in $RECORD"
}

verify() {
  $VERIFY || return 0
  local out
  out="$(docker run --rm --network none "$TAG" python3 -c 'import numpy; print(numpy.__version__)')" ||
    die "verification failed: python3 cannot import numpy in $TAG"
  say "verified: python3 + numpy $out run in $TAG with --network none"
}

existing="$(docker image inspect --format "{{index .Config.Labels \"$LABEL_KEY\"}}|{{.Id}}" "$RECIPE_TAG" 2>/dev/null || true)"
if ! $FORCE && [ "${existing%%|*}" = "$RECIPE_DIGEST" ]; then
  id="${existing#*|}"
  docker tag "$id" "$TAG"
  say "up to date: $RECIPE_TAG already built from this recipe; $TAG points at it"
  prev_secs=null
  prev_mirror=""
  if [ -f "$RECORD" ] && grep -q "\"imageId\":\"$id\"" "$RECORD"; then
    prev_secs="$(sed -n 's/.*"buildSeconds":\([0-9null]*\).*/\1/p' "$RECORD")"
    prev_mirror="$(sed -n 's/.*"mirror":"\([^"]*\)".*/\1/p' "$RECORD")"
  fi
  write_record "$id" "${prev_secs:-null}" "$prev_mirror"
  verify
  echo "$id"
  exit 0
fi

# --- mirror --------------------------------------------------------------------------------------------------------
find_mirror() { # prints the first URI serving "$SUITE" with component main, from apt's own configuration
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # one-line style: deb [options] URI suite component...
    awk -v suite="$SUITE" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        uri = $i; s = $(i + 1)
        if (s != suite) next
        for (j = i + 2; j <= NF; j++) if ($j == "main") { print uri; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 style: stanzas separated by blank lines, fields Types / URIs / Suites / Components
    awk -v suite="$SUITE" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && (" " comps " ") ~ / main / && uris != "") {
          split(uris, u, " "); print u[1]; found = 1; exit
        }
        types = uris = suites = comps = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        line = $0; key = tolower(line); sub(/:.*/, "", key); val = line; sub(/^[^:]*:[ \t]*/, "", val)
        if (key == "types") types = val; else if (key == "uris") uris = val
        else if (key == "suites") suites = val; else if (key == "components") comps = val
      }
      END { if (!found) flush() }' "$f"
  done
}
MIRROR="${ASSAY_DEBIAN_MIRROR:-$(find_mirror | head -n 1)}"
[ -n "$MIRROR" ] || die "no Debian mirror for '$SUITE main' in /etc/apt/sources.list(.d); set ASSAY_DEBIAN_MIRROR"
case "$MIRROR" in http://* | https://* | file:/*) ;; *) die "unsupported mirror URL '$MIRROR' (http, https or file only)" ;; esac

if ! command -v debootstrap >/dev/null 2>&1; then
  say "debootstrap not found: installing it with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null; } ||
    die "could not install debootstrap"
fi
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$KEYRING" ] || die "Debian archive keyring $KEYRING missing (apt-get install debian-archive-keyring); refusing an unverified bootstrap"

# --- build ---------------------------------------------------------------------------------------------------------
BUILD_PARENT="${ASSAY_BUILD_DIR:-/var/tmp}"
WORK="$(mktemp -d "$BUILD_PARENT/assay-base.XXXXXX")"
ROOTFS="$WORK/rootfs"
cleanup() {
  # debootstrap mounts proc/sys inside the tree; a failed run can leave them behind. Unmount deepest first.
  if [ -d "$ROOTFS" ]; then
    awk -v r="$ROOTFS" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | while IFS= read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

START="$(date +%s)"
say "debootstrap --variant=$VARIANT $SUITE from $MIRROR with $PACKAGES (log: $WORK/debootstrap.log)"
if ! debootstrap --variant="$VARIANT" --components="$COMPONENTS" --include="$PACKAGES" --keyring="$KEYRING" \
  "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
  tail -n 30 "$WORK/debootstrap.log" >&2 || true
  [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" >&2
  die "debootstrap failed (last lines above)"
fi
say "debootstrap done in $(($(date +%s) - START))s; cleaning"

# Minimal: no package caches, lists, logs, docs or man pages; no machine identity baked in.
chroot "$ROOTFS" apt-get clean
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/debconf/*-old \
  "$ROOTFS"/var/lib/dpkg/*-old "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
  "$ROOTFS"/usr/share/locale/* "$ROOTFS"/var/cache/ldconfig/aux-cache "$ROOTFS"/debootstrap "$ROOTFS"/tmp/* \
  "$ROOTFS"/var/tmp/*
find "$ROOTFS/var/log" -type f -exec truncate -s 0 {} +
: >"$ROOTFS/etc/machine-id"
rm -f "$ROOTFS/etc/hostname" "$ROOTFS/etc/resolv.conf"
# Docker supplies /etc/hosts, /etc/hostname and /etc/resolv.conf at run time; apt inside the image needs the mirror.
printf 'deb %s %s %s\n' "$MIRROR" "$SUITE" "${COMPONENTS//,/ }" >"$ROOTFS/etc/apt/sources.list"

say "docker import as $RECIPE_TAG"
id="$(tar --numeric-owner --xattrs --acls -C "$ROOTFS" -c . | docker import \
  --change "LABEL $LABEL_KEY=$RECIPE_DIGEST" \
  --change "LABEL org.assay.base.suite=$SUITE" \
  --change "LABEL org.assay.base.packages=$PACKAGES" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --message "assay base image: debootstrap $VARIANT $SUITE + $PACKAGES" \
  - "$RECIPE_TAG")"
docker tag "$id" "$TAG"
SECS="$(($(date +%s) - START))"
say "built in ${SECS}s"
write_record "$id" "$SECS" "$MIRROR"
verify
echo "$id"
