#!/usr/bin/env bash
# Builds assay/cuda:bookworm, the image GPU tasks (cuda/gemm-fp16) build FROM: assay/cuda-base:bookworm (Assay's base
# image recipe plus g++, the host compiler nvcc needs: scripts/build-base-image.sh --recipe cuda/image, from Debian's
# packages) plus this host's CUDA toolkit at /usr/local/cuda, copied in; no registry is contacted.
# The GPU driver (libcuda) is not in the image: the NVIDIA Container Toolkit mounts the host's into each container
# that is given a GPU.
#
# Idempotent: the image is labelled with the toolkit's version and a SHA-256 over this script and its base image's
# id; when assay/cuda:bookworm already carries both, nothing is rebuilt.
# Usage: bash cuda/build-cuda-image.sh [--force]     (CUDA_HOME overrides /usr/local/cuda)
# Needs root and a Docker daemon (as scripts/build-base-image.sh does).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$REPO/cuda/build-cuda-image.sh"
TAG="assay/cuda:bookworm"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
FORCE=false
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=true ;;
    *) echo "build-cuda-image: unknown argument '$arg' (expected --force)" >&2; exit 2 ;;
  esac
done
say() { printf 'build-cuda-image: %s\n' "$*"; }
die() { printf 'build-cuda-image: error: %s\n' "$*" >&2; exit 1; }

[ -x "$CUDA_HOME/bin/nvcc" ] || die "no CUDA toolkit at $CUDA_HOME (nvcc missing); install it or set CUDA_HOME"
bash "$REPO/scripts/build-base-image.sh" --recipe "$REPO/cuda/image" | sed 's/^/  /'
BASE_ID="$(docker image inspect -f '{{.Id}}' assay/cuda-base:bookworm)" || die "assay/cuda-base:bookworm was not built"
VERSION="$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
[ -n "$VERSION" ] || die "cannot read the toolkit version from $CUDA_HOME/bin/nvcc --version"
RECIPE="$(printf '%s %s' "$(sha256sum "$SELF" | cut -c1-64)" "$BASE_ID" | sha256sum | cut -c1-64)"
have="$(docker image inspect -f '{{index .Config.Labels "org.assay.cuda-version"}} {{index .Config.Labels "org.assay.cuda-recipe"}}' "$TAG" 2>/dev/null || true)"
if [ "$FORCE" = false ] && [ "$have" = "$VERSION $RECIPE" ]; then
  say "$TAG is up to date (CUDA $VERSION)"
  exit 0
fi
CTX="$(mktemp -d "${TMPDIR:-/var/tmp}/assay-cuda-XXXXXX")"
trap 'rm -rf "$CTX"' EXIT
say "copying the CUDA $VERSION toolkit from $(readlink -f "$CUDA_HOME") ($(du -shL "$CUDA_HOME" | cut -f1))"
cp -a "$(readlink -f "$CUDA_HOME")" "$CTX/cuda"
cat >"$CTX/Dockerfile" <<DOCKERFILE
FROM assay/cuda-base:bookworm
COPY cuda/ /usr/local/cuda/
ENV PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# compute for CUDA, utility for nvidia-smi; which GPUs a container sees is its device request alone
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL org.assay.cuda-version="$VERSION" org.assay.cuda-recipe="$RECIPE"
DOCKERFILE
say "building $TAG"
docker build -q -t "$TAG" "$CTX" >"$CTX/build.log" 2>&1 || { cat "$CTX/build.log" >&2; die "docker build failed"; }
say "built $TAG ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1 / 1e6}'), CUDA $VERSION)"
