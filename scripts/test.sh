#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Linux machine with Node 20, then runs it:
# npm dependencies, Docker (Debian's docker.io and a running dockerd, installed when missing; needs root), the
# locally built base image, the build, 60 s of fuzzing the C envelope scanner (clang installed when missing), the CUDA
# compile (cuda/build.sh; skipped, saying so, where nvcc is absent), Chromium
# for the browser tests (installed when missing), type checks, lint and import boundaries, then every jest tier.
# The last line printed is jest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a!==20||b<19){console.error(`Assay needs Node 20.19 or later 20.x, this is ${process.version}`);process.exit(1)}'

echo "== npm ci"
npm ci --no-audit --no-fund --loglevel=error

echo "== docker and the base image"
bash scripts/ensure-docker.sh
bash scripts/build-base-image.sh

echo "== the CUDA image (assay/cuda:bookworm) where the CUDA toolkit is installed"
# The GEMM task's image: Debian packages with g++ (debootstrap, as the base image) and this machine's toolkit; its
# tests compile a kernel with the real nvcc inside a Judge. Without /usr/local/cuda those tests are skipped.
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  bash cuda/build-cuda-image.sh
else
  echo "no CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda}: not building assay/cuda:bookworm (the GEMM task's real-nvcc test is skipped)"
fi

echo "== build"
npm run --silent build

echo "== fuzz the C envelope scanner (libFuzzer, ASan, UBSan; 60 s)"
# clang (with libFuzzer's runtime) is installed from Debian when missing and this is root with apt-get; elsewhere a
# missing clang skips the fuzzing with a warning, except in CI (CI=true), where it fails.
if ! command -v clang >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang) >"${TMPDIR:-/tmp}/assay-clang-apt.log" 2>&1 ||
    { tail -n 20 "${TMPDIR:-/tmp}/assay-clang-apt.log" >&2; echo "apt-get install clang failed" >&2; }
fi
if command -v clang >/dev/null 2>&1; then
  bash scripts/fuzz-native.sh 60
elif [ "${CI:-}" = "true" ]; then
  echo "clang is missing and CI=true: the envelope scanner must be fuzzed in CI" >&2
  exit 1
else
  echo "warning: clang not found; not fuzzing the envelope scanner (apt-get install clang)" >&2
fi

echo "== compile the CUDA sources (nvcc, -arch=sm_90a, warnings as errors)"
# Every .cu of cuda/ (the GPU probe, the GEMM runner with each kernel, the cuBLAS vendor GEMM). There is no GPU here:
# this proves they compile for Hopper. Where nvcc is absent, cuda/build.sh says it skipped the compile.
bash cuda/build.sh

echo "== chromium for the web pages' browser tests"
# Debian's chromium, driven by playwright-core (tests/support/browser.ts), is installed when missing and this is root
# with apt-get; elsewhere the browser tests fail, naming what is missing (apt-get install chromium, or ASSAY_CHROMIUM).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >"${TMPDIR:-/tmp}/assay-chromium-apt.log" 2>&1 ||
    { tail -n 20 "${TMPDIR:-/tmp}/assay-chromium-apt.log" >&2; echo "apt-get install chromium failed" >&2; }
fi

echo "== typecheck, lint, import boundaries"
npm run --silent typecheck
npm run --silent lint

echo "== tests"
exec npx jest --ci --coverage --selectProjects unit int e2e
