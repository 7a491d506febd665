"""Scores /workspace/fit.py on the hidden data sets of cases.json; writes /logs/verifier/reward.json.

Candidate code runs only through run-as-candidate (unprivileged, a timeout, no inherited files); its output is
parsed as untrusted text. A crash, a timeout or unparsable output fails that case, not the verifier.
"""
import json
import math
import random
import subprocess
import sys

CASES = json.load(open("/tests/cases.json"))
TOLERANCE = 1e-6


def points(case):
    rng = random.Random(case["seed"])
    out = []
    for i in range(case["n"]):
        x = rng.uniform(-100, 100)
        out.append((x, case["slope"] * x + case["intercept"] + rng.gauss(0, case["noise"])))
    return out


def exact(pts):
    n = len(pts)
    mx = math.fsum(p[0] for p in pts) / n
    my = math.fsum(p[1] for p in pts) / n
    sxx = math.fsum((p[0] - mx) ** 2 for p in pts)
    sxy = math.fsum((p[0] - mx) * (p[1] - my) for p in pts)
    slope = sxy / sxx
    return slope, my - slope * mx


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(1.0, abs(b))


passed = 0
for i, case in enumerate(CASES["cases"]):
    pts = points(case)
    data = "".join("%r,%r\n" % p for p in pts).encode()
    try:
        r = subprocess.run(["run-as-candidate", "--timeout", "20", "python3", "/workspace/fit.py"],
                           input=data, stdout=subprocess.PIPE, timeout=30)
        words = r.stdout.decode("utf-8", "replace").split()
        got = (float(words[0]), float(words[1])) if r.returncode == 0 and len(words) == 2 else None
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        got = None
    want = exact(pts)
    ok = got is not None and all(math.isfinite(g) for g in got) and close(got[0], want[0]) and close(got[1], want[1])
    passed += ok
    print("case %d: %s" % (i + 1, "pass" if ok else "fail"), file=sys.stderr)

total = len(CASES["cases"])
json.dump({"reward": passed / total, "passed": passed, "total": total}, open("/logs/verifier/reward.json", "w"))
print("%d/%d cases passed" % (passed, total))
