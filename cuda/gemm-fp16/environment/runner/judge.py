"""The Judge of the FP16 GEMM task (run by test.sh as root inside the Judge container).

  1. policy: the submission's allowed surface and its kernel sources (policy.py); a breach scores 0;
  2. build: the kernel JUDGE_VERSION names, compiled with the runner (harness.cu) and the runner's gemm.h, by this
     script's nvcc command and flags (never the candidate's build files), as the unprivileged candidate user;
  3. five repeats, each a fresh runner process (run as the candidate user) with a fresh seed and nonce: correctness
     gates, then the timed calls (harness.cu has the protocol);
  4. the reward: the median TFLOP/s of the five repeats.

Outcomes:
  - measured: reward.json {"reward": median TFLOP/s, ...};
  - candidate fault (policy breach, does not compile, wrong result, kernel error, crash, timeout, forged or missing
    result line): reward.json {"reward": 0.0, "candidate_fault": 1, ...} and the reason on stdout;
  - infrastructure fault (no GPU, driver error, no nvcc, the runner's own allocation failed, each confirmed by the
    runner failing the same way with its own trusted self-test kernel): no reward,
    /logs/verifier/infrastructure-error.txt with the reason, exit status 4: the harness records
    infrastructure_error and the controller refunds the round.
A details file, /logs/verifier/gemm-report.json, holds every repeat's figures, the GPU model, clocks and build target.
"""
import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import policy  # noqa: E402

RESULT_MARK = "ASSAY-GEMM-RESULT "
MEAN_REL_ERR_MAX = 1e-3
MAX_REL_ERR_MAX = 1e-2
TFLOPS_PLAUSIBLE_MAX = 5000.0
# Hopper (compute capability 9.0) gets sm_90a (wgmma, setmaxnreg); any other GPU the portable fallback: PTX for
# compute_80, compiled by the driver for the GPU at hand.
HOPPER_ARCH = ["-arch=sm_90a"]
FALLBACK_ARCH = ["-gencode", "arch=compute_80,code=compute_80"]
NVCC_FLAGS = ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr"]


class CandidateFault(Exception):
    def __init__(self, kind, reason):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class InfrastructureFault(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description="Judge of the FP16 GEMM task")
    p.add_argument("--workspace", default="/workspace")
    p.add_argument("--out", default="/logs/verifier")
    p.add_argument("--build-dir", default="/tmp/gemm-build")
    p.add_argument("--nvcc", default=None, help="default: nvcc on PATH, else /usr/local/cuda/bin/nvcc")
    p.add_argument("--nvidia-smi", default="nvidia-smi")
    p.add_argument("--as-candidate", default="run-as-candidate",
                   help="the command that runs candidate code unprivileged; 'none' runs it directly (tests only)")
    p.add_argument("--arch", default="auto", help="auto, sm_90a or fallback")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--size", type=int, default=4096, help="M = N = K")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--build-timeout", type=int, default=300)
    p.add_argument("--repeat-timeout", type=int, default=120)
    return p.parse_args(argv)


def candidate_cmd(args, timeout, argv):
    if args.as_candidate == "none":
        return argv
    return [args.as_candidate, "--timeout", str(timeout), "--cwd", args.build_dir, "--"] + argv


def find_nvcc(args):
    for c in ([args.nvcc] if args.nvcc else [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise InfrastructureFault("nvcc not found (the Judge image needs the CUDA toolkit)")


def gpu_info(args):
    """(model, compute capability) of the GPU the Judge was given, from nvidia-smi."""
    try:
        r = subprocess.run([args.nvidia_smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InfrastructureFault("no GPU: nvidia-smi could not run (%s)" % e)
    first = r.stdout.decode("utf-8", "replace").strip().split("\n")[0]
    parts = [x.strip() for x in first.split(",")]
    if r.returncode != 0 or len(parts) < 3 or not parts[0]:
        err = r.stderr.decode("utf-8", "replace").strip().split("\n")[0]
        raise InfrastructureFault("no GPU: nvidia-smi exited with status %d (%s)" % (r.returncode, (err or first)[:300]))
    return {"model": parts[0][:200], "cc": parts[1][:16], "driver": parts[2][:32]}


def arch_flags(args, gpu):
    choice = args.arch if args.arch != "auto" else ("sm_90a" if gpu["cc"] == "9.0" else "fallback")
    return choice, (HOPPER_ARCH if choice == "sm_90a" else FALLBACK_ARCH)


def fresh_dir(path, mode):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    os.chmod(path, mode)
    return path


def copy_runner(d):
    """The runner's own sources into a build directory: harness.cu (as assay_harness.cu) and gemm.h."""
    shutil.copyfile(os.path.join(HERE, "harness.cu"), os.path.join(d, "assay_harness.cu"))
    shutil.copyfile(os.path.join(HERE, "gemm.h"), os.path.join(d, "gemm.h"))


def runner_args(args, seed, warmup, calls, samples):
    return ["--seed", seed, "--m", str(args.size), "--n", str(args.size), "--k", str(args.size),
            "--warmup", str(warmup), "--calls", str(calls), "--samples", str(samples)]


def build(args, kernel, nvcc, flags):
    """Compiles kernels/<kernel>.cu with the runner, as the candidate user; returns the runner binary.

    The build directory holds copies of the selected kernel and the candidate's headers (NAME.cuh) and then the
    runner's own harness.cu and gemm.h (a candidate file cannot take their place: policy allows only NAME.cu and
    NAME.cuh, and these are copied last). The Judge's root has no CAP_CHOWN, so the directory is made writable for the compiler (0777) and the
    binary is then copied into a directory only root can write (<build>-bin, 0755): what runs the five repeats is
    never a file the candidate user could change between them."""
    d = fresh_dir(args.build_dir, 0o777)
    for name in sorted(os.listdir(os.path.join(args.workspace, "kernels"))):
        src = os.path.join(args.workspace, "kernels", name)
        wanted = name == kernel + ".cu" or name.endswith(".cuh")  # what the policy checked
        if wanted and policy.SOURCE_NAME_RE.match(name) and os.path.isfile(src) and not os.path.islink(src):
            shutil.copyfile(src, os.path.join(d, name))
    copy_runner(d)
    out = os.path.join(d, "gemm-runner")
    cmd = [nvcc] + NVCC_FLAGS + flags + ["-o", out, "assay_harness.cu", kernel + ".cu"]
    try:
        r = subprocess.run(candidate_cmd(args, args.build_timeout, cmd), cwd=d, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=args.build_timeout + 30)
    except subprocess.TimeoutExpired:
        raise CandidateFault("build_timeout", "the kernel did not compile within %d s" % args.build_timeout)
    if r.returncode == 127:
        raise InfrastructureFault("nvcc could not be started (status 127)")
    if r.returncode != 0 or not os.path.isfile(out) or os.path.islink(out):
        log = r.stdout.decode("utf-8", "replace")
        lines = [ln for ln in log.split("\n") if ln.strip()][:12]
        raise CandidateFault("build_failed", "kernels/%s.cu does not compile (nvcc status %d):\n  %s"
                             % (kernel, r.returncode, "\n  ".join(ln[:300] for ln in lines)))
    runner = os.path.join(fresh_dir(d.rstrip("/") + "-bin", 0o755), "gemm-runner")
    shutil.copyfile(out, runner)
    os.chmod(runner, 0o755)
    return runner


def parse_result(stdout, nonce):
    """The one result line carrying this repeat's nonce; a second one, or one with another nonce, is forged."""
    found = None
    for ln in stdout.decode("utf-8", "replace").split("\n"):
        if not ln.startswith(RESULT_MARK):
            continue
        rest = ln[len(RESULT_MARK):]
        got_nonce, _, body = rest.partition(" ")
        if got_nonce != nonce or found is not None:
            raise CandidateFault("forged_result", "a result line the runner did not write")
        found = body
    if found is None:
        raise CandidateFault("no_result", "the runner wrote no result line")
    try:
        res = json.loads(found)
    except ValueError:
        raise CandidateFault("forged_result", "a result line that is not the runner's JSON")
    if not isinstance(res, dict):
        raise CandidateFault("forged_result", "a result line that is not the runner's JSON")
    return res


def num(res, key):
    v = res.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise CandidateFault("forged_result", "the result line lacks %s" % key)
    return float(v)


def gate(res):
    """Correctness gates: every element written, mean and max relative error, every timed call's samples."""
    unwritten = num(res, "unwritten")
    if unwritten > 0:
        raise CandidateFault("wrong_result", "%d output elements left unwritten (still the poison value)" % unwritten)
    mean, mx = num(res, "mean_rel_err"), num(res, "max_rel_err")
    if not mean <= MEAN_REL_ERR_MAX:
        raise CandidateFault("wrong_result", "mean relative error %.3e over the bound %.0e" % (mean, MEAN_REL_ERR_MAX))
    if not mx <= MAX_REL_ERR_MAX:
        raise CandidateFault("wrong_result", "max relative error %.3e over the bound %.0e" % (mx, MAX_REL_ERR_MAX))
    if num(res, "sample_unwritten") > 0 or not num(res, "sample_max_rel_err") <= MAX_REL_ERR_MAX:
        raise CandidateFault("wrong_result", "a timed call's output was wrong (sampled elements: max relative error "
                             "%.3e, %d unwritten)" % (num(res, "sample_max_rel_err"), num(res, "sample_unwritten")))
    tflops = num(res, "tflops")
    if not 0 < tflops <= TFLOPS_PLAUSIBLE_MAX:
        raise CandidateFault("implausible_timing", "%.1f TFLOP/s is not a plausible measurement" % tflops)
    return tflops


def build_selftest(args, nvcc, flags):
    """The runner with its own trusted kernel (selftest.cu), compiled as root into a root-only directory."""
    d = fresh_dir(args.build_dir.rstrip("/") + "-selftest", 0o755)
    copy_runner(d)
    shutil.copyfile(os.path.join(HERE, "selftest.cu"), os.path.join(d, "selftest.cu"))
    out = os.path.join(d, "gemm-runner")
    try:
        r = subprocess.run([nvcc] + NVCC_FLAGS + flags + ["-o", out, "assay_harness.cu", "selftest.cu"], cwd=d,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.build_timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InfrastructureFault("the runner's self-test did not build (%s)" % e)
    if r.returncode != 0:
        raise InfrastructureFault("the runner's self-test did not build: %s"
                                  % r.stdout.decode("utf-8", "replace").strip().split("\n")[0][:300])
    return out


def run_runner(args, runner, argv_tail, nonce):
    return subprocess.run(candidate_cmd(args, args.repeat_timeout, [runner] + argv_tail), input=(nonce + "\n").encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=args.repeat_timeout + (30 if args.as_candidate != "none" else 0))


def infrastructure_or_candidate(args, i, err, build_ctx):
    """A repeat ended with the runner's infrastructure status (4). Kernel code ran in that process and could have
    caused it (a kernel launched before main() leaves a sticky error that the runner's own first call reports), so
    the runner is tried again with its trusted self-test kernel: the same failure is the infrastructure's, none is
    the candidate's."""
    reason = "repeat %d: %s" % (i, err or "the runner reported an infrastructure fault")
    nvcc, flags = build_ctx
    selftest = build_selftest(args, nvcc, flags)
    try:
        r = run_runner(args, selftest, runner_args(args, secrets.token_hex(8), 0, 1, 16), secrets.token_hex(16))
    except subprocess.TimeoutExpired:
        raise InfrastructureFault(reason + "; the runner's self-test timed out too")
    if r.returncode == 4:
        raise InfrastructureFault(reason + "; the runner's self-test failed too")
    raise CandidateFault("kernel_error", reason + "; the runner's self-test kernel ran fine (status %d), so this "
                         "kernel caused it" % r.returncode)


def repeat(args, runner, i, build_ctx=None):
    nonce = secrets.token_hex(16)
    tail = runner_args(args, secrets.token_hex(8), args.warmup, args.calls, args.samples)
    try:
        r = run_runner(args, runner, tail, nonce)
    except subprocess.TimeoutExpired:
        raise CandidateFault("timeout", "repeat %d ran past %d s" % (i, args.repeat_timeout))
    err = r.stderr.decode("utf-8", "replace").strip().split("\n")[-1][:400]
    if r.returncode == 4:
        if build_ctx is None:  # the runner's own trusted kernel (the vendor GEMM of check-on-gpu.sh)
            raise InfrastructureFault("repeat %d: %s" % (i, err or "the runner reported an infrastructure fault"))
        infrastructure_or_candidate(args, i, err, build_ctx)
    if r.returncode == 3:
        raise CandidateFault("kernel_error", "repeat %d: %s" % (i, err or "the kernel raised a CUDA error"))
    if r.returncode == 124:
        raise CandidateFault("timeout", "repeat %d ran past %d s" % (i, args.repeat_timeout))
    if r.returncode > 128 or r.returncode < 0:
        sig = r.returncode - 128 if r.returncode > 128 else -r.returncode
        raise CandidateFault("crash", "repeat %d: the runner died of signal %d" % (i, sig))
    if r.returncode != 0:
        raise CandidateFault("crash", "repeat %d: the runner exited with status %d (%s)" % (i, r.returncode, err))
    res = parse_result(r.stdout, nonce)
    res["tflops_gated"] = gate(res)
    return res


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def judge(args):
    os.makedirs(args.out, exist_ok=True)  # /logs/verifier in the Judge; any directory when an agent runs it in Work
    report = {"size": args.size, "repeats": []}
    try:
        kernel, breaches = policy.check_submission(args.workspace)
        if breaches:
            raise CandidateFault("policy", "the submission breaks the source policy:\n  " + "\n  ".join(breaches[:40]))
        report["kernel"] = kernel
        nvcc = find_nvcc(args)
        gpu = gpu_info(args)
        report["gpu"] = gpu
        target, flags = arch_flags(args, gpu)
        report["target"] = target
        print("kernel %s on %s (compute capability %s), built for %s" % (kernel, gpu["model"], gpu["cc"], target))
        runner = build(args, kernel, nvcc, flags)
        for i in range(1, args.repeats + 1):
            res = repeat(args, runner, i, (nvcc, flags))
            report["repeats"].append(res)
            print("repeat %d: %.2f TFLOP/s (mean %.4f ms over %d calls; mean rel err %.2e, max %.2e)"
                  % (i, res["tflops_gated"], num(res, "mean_ms"), args.calls, num(res, "mean_rel_err"),
                     num(res, "max_rel_err")))
    except InfrastructureFault as e:
        reason = str(e)
        print("infrastructure fault (no reward; the round is refunded): " + reason)
        report["infrastructure_fault"] = reason
        write_json(os.path.join(args.out, "gemm-report.json"), report)
        with open(os.path.join(args.out, "infrastructure-error.txt"), "w") as f:
            f.write(reason + "\n")
        return 4
    except CandidateFault as e:
        print("candidate fault (%s): %s" % (e.kind, e.reason))
        print("reward 0.0")
        report["candidate_fault"] = {"kind": e.kind, "reason": e.reason}
        write_json(os.path.join(args.out, "gemm-report.json"), report)
        write_json(os.path.join(args.out, "reward.json"), {"reward": 0.0, "tflops_median": 0.0, "candidate_fault": 1})
        return 0
    figures = [r["tflops_gated"] for r in report["repeats"]]
    med = statistics.median(figures)
    report["tflops_median"] = med
    write_json(os.path.join(args.out, "gemm-report.json"), report)
    write_json(os.path.join(args.out, "reward.json"), {
        "reward": round(med, 4), "tflops_median": round(med, 4), "tflops_min": round(min(figures), 4),
        "tflops_max": round(max(figures), 4), "candidate_fault": 0,
    })
    print("median of %d repeats: %.2f TFLOP/s (min %.2f, max %.2f)" % (len(figures), med, min(figures), max(figures)))
    print("reward %.4f" % med)
    return 0


if __name__ == "__main__":
    sys.exit(judge(parse_args(sys.argv[1:])))
