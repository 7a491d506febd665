#!/usr/bin/env bash
# The GEMM task's GPU check, for a machine with one NVIDIA GPU and the CUDA toolkit (a few minutes on an H100/H200):
#   1. builds every CUDA source (cuda/build.sh) and prints the GPU probe (model, clocks, driver, CUDA);
#   2. judges, with the task's own Judge (judge.py: policy, build, five repeats in fresh processes, gates, median):
#      the starting kernel (tiled), the task's solution (the WMMA tensor-core kernel), a deliberately wrong kernel, a
#      policy-breaking one and four hostile ones that pass the policy (cuda/check/: an illegal address, a kernel that
#      never ends, one that computes only the first call, one that leaves a sticky CUDA error from a static
#      initializer to buy a refund);
#   3. times the vendor GEMM (cuBLAS cublasGemmEx through the same runner, harness.cu + check/vendor_cublas.cu) under
#      the same protocol in the same run: five fresh processes, the median;
#   4. prints TFLOP/s, each kernel's ratio to the vendor GEMM and the GPU model, and writes them to
#      $OUT/gpu-check.json (OUT defaults to a temporary directory).
# Exit status: 0 when every kernel got the verdict it should (tiled and wmma measured; wrong, breach, oob, hang, stale
# and sticky 0 with the reason each is built to provoke) and the vendor GEMM was measured; 1 otherwise; 4 when there
# is no GPU or no nvcc (nothing to measure).
# Run from anywhere: bash cuda/check-on-gpu.sh   (REPEATS=5 and SIZE=4096 by default)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RUNNER="$HERE/gemm-fp16/environment/runner"
OUT="${OUT:-$(mktemp -d)}"
REPEATS="${REPEATS:-5}"
SIZE="${SIZE:-4096}"
mkdir -p "$OUT"
command -v nvidia-smi >/dev/null || { echo "check-on-gpu: no nvidia-smi: this machine has no NVIDIA driver" >&2; exit 4; }
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "check-on-gpu: no nvcc: install the CUDA toolkit (/usr/local/cuda)" >&2; exit 4; }
CC="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' ')"
ARCH=sm_90a
[ "$CC" = "9.0" ] || ARCH=compute_80 # the runner's portable fallback (PTX, compiled by the driver)
# cuBLAS for the vendor GEMM (loaded with dlopen): the linker's cache, else the toolkit's lib64, else the NVIDIA wheels
# of the python3 on PATH (nvidia-cublas installs libcublas.so.N under site-packages/nvidia/)
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  CUBLAS="$(find /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib \
    $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [p for p in sys.path if p.endswith("-packages")]))' 2>/dev/null) \
    -maxdepth 5 -name 'libcublas.so*' 2>/dev/null | head -1 || true)"
  if [ -n "$CUBLAS" ]; then
    export LD_LIBRARY_PATH="$(dirname "$CUBLAS")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "check-on-gpu: cuBLAS from $CUBLAS"
  else
    echo "check-on-gpu: cuBLAS not found; the vendor GEMM will not be measured" >&2
  fi
fi
echo "== build (-arch=$ARCH)"
bash "$HERE/build.sh" --out "$OUT/bin" --arch "$ARCH"
echo "== GPU"
"$OUT/bin/gpu-probe" | tee "$OUT/gpu-probe.jsonl" || echo "check-on-gpu: gpu-probe failed (exit $?)" >&2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee "$OUT/clocks.csv"

judge() { # name, kernel source, judge.py options...
  local name="$1" src="$2" ws="$OUT/ws-$1"
  shift 2
  rm -rf "$ws" && mkdir -p "$ws/kernels" "$OUT/judge-$name"
  cp "$src" "$ws/kernels/$name.cu"
  echo "$name" >"$ws/JUDGE_VERSION"
  echo "== judge $name"
  python3 -I "$RUNNER/judge.py" --workspace "$ws" --out "$OUT/judge-$name" --build-dir "$OUT/build-$name" \
    --as-candidate none --repeats "$REPEATS" --size "$SIZE" "$@" | tee "$OUT/judge-$name.log" ||
    echo "check-on-gpu: the Judge of $name exited with status ${PIPESTATUS[0]}" >&2
}
judge tiled "$HERE/gemm-fp16/environment/workspace/kernels/tiled.cu"
judge wmma "$HERE/gemm-fp16/solution/kernels/wmma.cu"
judge wrong "$HERE/check/wrong.cu"
judge breach "$HERE/check/breach.cu"
judge oob "$HERE/check/oob.cu"
judge hang "$HERE/check/hang.cu" --repeat-timeout 20
judge stale "$HERE/check/stale.cu"
judge sticky "$HERE/check/sticky.cu"

echo "== vendor GEMM (cuBLAS through the runner)"
if python3 -I - "$RUNNER" "$OUT" "$OUT/bin/gemm-vendor_cublas" "$REPEATS" "$SIZE" <<'PY'
import json, os, statistics, sys
runner_dir, out, binary, repeats, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, runner_dir)
import judge  # the Judge's own repeat(): same process protocol, nonce, gates and timing as a candidate's kernel
args = judge.parse_args(["--as-candidate", "none", "--size", size, "--build-dir", os.path.dirname(binary)])
figures = []
for i in range(1, repeats + 1):
    res = judge.repeat(args, binary, i)
    figures.append(res["tflops_gated"])
    print("repeat %d: %.2f TFLOP/s (mean rel err %.2e)" % (i, res["tflops_gated"], res["mean_rel_err"]))
json.dump({"tflops_median": statistics.median(figures), "figures": figures}, open(os.path.join(out, "vendor.json"), "w"))
print("median %.2f TFLOP/s" % statistics.median(figures))
PY
then :; else echo "check-on-gpu: the vendor GEMM was not measured" >&2; fi

python3 -I - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]


def load(*path):
    try:
        with open(os.path.join(out, *path)) as f:
            return json.load(f) if path[-1].endswith(".json") else json.loads(f.readline())
    except (OSError, ValueError):
        return None


vendor = (load("vendor.json") or {}).get("tflops_median")
gpu = load("gpu-probe.jsonl") or (load("judge-tiled", "gemm-report.json") or {}).get("gpu") or {}
rows, ok = [], vendor is not None
expect = {"tiled": "measured", "wmma": "measured", "wrong": "wrong_result", "breach": "policy",
          "oob": "kernel_error", "hang": "timeout", "stale": "wrong_result", "sticky": "kernel_error"}
for name, want in expect.items():
    reward = load("judge-%s" % name, "reward.json")
    report = load("judge-%s" % name, "gemm-report.json") or {}
    if reward is None:
        got = "infrastructure_error" if "infrastructure_fault" in report else "no_verdict"
    else:
        got = report.get("candidate_fault", {}).get("kind", "measured")
    ok = ok and got == want
    tflops = reward["reward"] if reward else 0.0
    rows.append({"kernel": name, "reward": tflops, "verdict": got, "expected": want,
                 "ratio_to_vendor": tflops / vendor if vendor else None})
summary = {"gpu": gpu, "vendor_tflops": vendor, "kernels": rows, "ok": ok}
with open(os.path.join(out, "gpu-check.json"), "w") as f:
    json.dump(summary, f, indent=1)
print("== figures on %s (cc %s, SM clock %s MHz, driver %s, runtime %s)" % (
    gpu.get("model"), gpu.get("cc"), gpu.get("sm_clock_mhz"), gpu.get("driver"), gpu.get("runtime")))
print("%-8s %12s %10s   %s" % ("kernel", "TFLOP/s", "/ vendor", "verdict"))
for r in rows:
    print("%-8s %12.2f %10.3f   %s%s" % (r["kernel"], r["reward"], r["ratio_to_vendor"] or 0, r["verdict"],
                                        "" if r["verdict"] == r["expected"] else "  (expected %s)" % r["expected"]))
if vendor is None:
    print("vendor   not measured")
else:
    print("%-8s %12.2f %10.3f   measured (cuBLAS cublasGemmEx, FP16 in/out, FP32 compute)" % ("vendor", vendor, 1.0))
print("figures in %s/gpu-check.json" % out)
sys.exit(0 if ok else 1)
PY
