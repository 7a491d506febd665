#!/usr/bin/env bash
# The GEMM task's GPU check, for a machine with one NVIDIA GPU and the CUDA toolkit (a few minutes on an H100/H200):
#   1. builds every CUDA source (cuda/build.sh) and prints the GPU probe (model, clocks, driver, CUDA);
#   2. judges, with the task's own Judge (judge.py: policy, build, five repeats in fresh processes, gates, median):
#      the starting kernel (tiled), the task's solution (the WMMA tensor-core kernel), a deliberately wrong kernel and a
#      policy-breaking one;
#   3. times the vendor GEMM (cuBLAS cublasGemmEx through the same runner, harness.cu + check/vendor_cublas.cu) under
#      the same protocol in the same run: five fresh processes, the median;
#   4. prints TFLOP/s, each kernel's ratio to the vendor GEMM and the GPU model, and writes them to
#      $OUT/gpu-check.json (OUT defaults to a temporary directory).
# Exit status: 0 when every kernel got the verdict it should (tiled and wmma measured, wrong and breach 0) and the
# vendor GEMM was measured; 1 otherwise; 4 when there is no GPU or no nvcc (nothing to measure).
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
echo "== build (-arch=$ARCH)"
bash "$HERE/build.sh" --out "$OUT/bin" --arch "$ARCH"
echo "== GPU"
"$OUT/bin/gpu-probe" | tee "$OUT/gpu-probe.jsonl"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv | tee "$OUT/clocks.csv"

judge() { # name, kernel source
  local name="$1" src="$2" ws="$OUT/ws-$1"
  rm -rf "$ws" && mkdir -p "$ws/kernels" "$OUT/judge-$name"
  cp "$src" "$ws/kernels/$name.cu"
  echo "$name" >"$ws/JUDGE_VERSION"
  echo "== judge $name"
  python3 -I "$RUNNER/judge.py" --workspace "$ws" --out "$OUT/judge-$name" --build-dir "$OUT/build-$name" \
    --as-candidate none --repeats "$REPEATS" --size "$SIZE" | tee "$OUT/judge-$name.log"
}
judge tiled "$HERE/gemm-fp16/environment/workspace/kernels/tiled.cu"
judge wmma "$HERE/gemm-fp16/solution/kernels/wmma.cu"
judge wrong "$HERE/check/wrong.cu"
judge breach "$HERE/check/breach.cu"

echo "== vendor GEMM (cuBLAS through the runner)"
python3 -I - "$RUNNER" "$OUT" "$OUT/bin/gemm-vendor_cublas" "$REPEATS" "$SIZE" <<'PY'
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

python3 -I - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
vendor = json.load(open(os.path.join(out, "vendor.json")))["tflops_median"]
gpu = json.loads(open(os.path.join(out, "gpu-probe.jsonl")).readline())
rows, ok = [], True
expect = {"tiled": "measured", "wmma": "measured", "wrong": "wrong_result", "breach": "policy"}
for name, want in expect.items():
    reward = json.load(open(os.path.join(out, "judge-%s" % name, "reward.json")))
    report = json.load(open(os.path.join(out, "judge-%s" % name, "gemm-report.json")))
    got = report.get("candidate_fault", {}).get("kind", "measured")
    ok = ok and got == want
    rows.append({"kernel": name, "reward": reward["reward"], "verdict": got, "expected": want,
                 "ratio_to_vendor": reward["reward"] / vendor if vendor else None})
summary = {"gpu": gpu, "vendor_tflops": vendor, "kernels": rows, "ok": ok}
json.dump(summary, open(os.path.join(out, "gpu-check.json"), "w"), indent=1)
print("== figures on %s (cc %s, SM clock %s MHz, driver %s, runtime %s)" % (gpu["model"], gpu["cc"], gpu["sm_clock_mhz"], gpu["driver"], gpu["runtime"]))
print("%-8s %12s %10s   %s" % ("kernel", "TFLOP/s", "/ vendor", "verdict"))
for r in rows:
    print("%-8s %12.2f %10.3f   %s%s" % (r["kernel"], r["reward"], r["ratio_to_vendor"] or 0, r["verdict"], "" if r["verdict"] == r["expected"] else "  (expected %s)" % r["expected"]))
print("%-8s %12.2f %10.3f   measured (cuBLAS cublasGemmEx, FP16 in/out, FP32 compute)" % ("vendor", vendor, 1.0))
print("figures in %s/gpu-check.json" % out)
sys.exit(0 if ok else 1)
PY
