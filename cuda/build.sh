#!/usr/bin/env bash
# Compiles every CUDA source of Assay with nvcc, warnings as errors:
#   probe/gpu_probe.cu                       -> gpu-probe
#   gemm-fp16/environment/runner/harness.cu  -> linked with each kernel below into gemm-<name>
#   gemm-fp16/environment/runner/selftest.cu, gemm-fp16/environment/workspace/kernels/*.cu,
#   gemm-fp16/solution/kernels/*.cu, check/*.cu (the runner's self-test kernel, the starting kernel, the solution, the
#   check kernels and the cuBLAS vendor GEMM)
# Usage: bash cuda/build.sh [--out DIR] [--arch sm_90a|native|...]   (default: a temporary directory, sm_90a)
# nvcc: the one on PATH, else $CUDA_HOME/bin/nvcc (CUDA_HOME defaults to /usr/local/cuda).
# Where nvcc is absent it says so and exits 0: machines without the CUDA toolkit skip the compile, they do not fail.
# A source that does not compile, or warns, fails the script (exit 1) naming it.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT=""
ARCH="sm_90a"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    *) echo "cuda/build.sh: unknown argument $1 (expected --out DIR, --arch ARCH)" >&2; exit 2 ;;
  esac
done
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
NVCC="$(command -v nvcc || true)"
[ -n "$NVCC" ] || { [ -x "$CUDA_HOME/bin/nvcc" ] && NVCC="$CUDA_HOME/bin/nvcc"; } || true
if [ -z "$NVCC" ]; then
  echo "cuda/build.sh: skipped the CUDA compile: nvcc not found on PATH or in $CUDA_HOME/bin (install the CUDA toolkit to compile cuda/)"
  exit 0
fi
if [ -z "$OUT" ]; then
  OUT="$(mktemp -d)"
  trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT/obj"
FLAGS=(-O3 -std=c++17 -lineinfo --expt-relaxed-constexpr -arch="$ARCH" -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror)
RUNNER="$HERE/gemm-fp16/environment/runner"
compile() { # name, source, extra flags...
  local name="$1" src="$2"
  shift 2
  if ! "$NVCC" "${FLAGS[@]}" -I "$RUNNER" "$@" -c -o "$OUT/obj/$name.o" "$src" 2>"$OUT/obj/$name.log"; then
    echo "cuda/build.sh: ${src#"$HERE"/} does not compile for $ARCH:" >&2
    cat "$OUT/obj/$name.log" >&2
    exit 1
  fi
  if [ -s "$OUT/obj/$name.log" ]; then cat "$OUT/obj/$name.log" >&2; fi
}
link() { # binary, objects..., -- libs
  local bin="$1"
  shift
  "$NVCC" -arch="$ARCH" -o "$OUT/$bin" "$@" || { echo "cuda/build.sh: linking $bin failed" >&2; exit 1; }
}
t0=$(date +%s)
echo "cuda/build.sh: nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), -arch=$ARCH, into $OUT"
compile gpu-probe "$HERE/probe/gpu_probe.cu"
link gpu-probe "$OUT/obj/gpu-probe.o"
compile harness "$RUNNER/harness.cu"
n=2
for src in "$RUNNER/selftest.cu" "$HERE"/gemm-fp16/environment/workspace/kernels/*.cu "$HERE"/gemm-fp16/solution/kernels/*.cu "$HERE"/check/*.cu; do
  name="$(basename "$src" .cu)"
  compile "kernel-$name" "$src"
  link "gemm-$name" "$OUT/obj/harness.o" "$OUT/obj/kernel-$name.o" -ldl
  n=$((n + 1))
done
echo "cuda/build.sh: compiled $n CUDA sources for $ARCH without warnings in $(($(date +%s) - t0)) s"
