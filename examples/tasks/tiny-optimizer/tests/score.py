"""Hidden scorer of tiny-optimizer. Runs as root inside the Judge (started by test.sh with `python3 -I`).

The trusted side (this process) generates the data, computes every loss and gradient and evaluates on hidden
validation data. The candidate's optimizer.py runs in a separate process as the unprivileged candidate user (through
the runner given with --runner, run-as-candidate in the Judge) and sees only parameters and gradients, through a
pipe:

    trusted -> candidate   one header line of JSON: {"shapes": [[4, 8], [8], [8, 1], [1]], "steps": 300}
    then, per step:
    trusted -> candidate   params then grads, float64 little-endian, concatenated in the order of `shapes`
    candidate -> trusted   the new params, same layout

A size for which the candidate fails (crash, short or malformed reply, non-finite numbers, timeout) scores the loss
at the initial parameters; so does a final loss above it. Writes <out>/reward.json:
{"val_loss": mean over sizes, "val_loss_<size>": ..., "failed_sizes": n}. Nothing about the hidden data is printed.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

SIZES = [("small", 4, 8), ("medium", 16, 32), ("large", 32, 64)]
STEPS = 300
BATCH = 64
N_TRAIN = 2048
N_VAL = 1024
# Hidden seeds: the public benchmark (/opt/tiny-optimizer/bench.py) uses others.
SEED = 0x5EED_7A11
VAL_SEED = 0x41D_DA7A
TIMEOUT_PER_SIZE_SEC = 60
STDERR_KEEP = 4096

# The candidate side, passed with `python3 -I -c`: it imports nothing from the workspace but optimizer.py.
DRIVER = r'''
import importlib.util, json, os, sys
proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(devnull, 0)
os.dup2(2, 1)  # the candidate's prints go to stderr, never into the protocol
import numpy as np

def read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = proto_in.read(n - len(buf))
        if not chunk:
            sys.exit(3)
        buf += chunk
    return bytes(buf)

line = bytearray()
while not line.endswith(b"\n"):
    c = proto_in.read(1)
    if not c:
        sys.exit(3)
    line += c
    if len(line) > 4096:
        sys.exit(3)
header = json.loads(line)
shapes = [tuple(s) for s in header["shapes"]]
sizes = [int(np.prod(s)) for s in shapes]
total = sum(sizes)
spec = importlib.util.spec_from_file_location("optimizer", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
opt = module.Optimizer([tuple(s) for s in shapes])

def split(flat):
    out, at = [], 0
    for s, n in zip(shapes, sizes):
        out.append(flat[at:at + n].reshape(s).copy())
        at += n
    return out

for _ in range(header["steps"]):
    flat = np.frombuffer(read_exact(16 * total), dtype="<f8")
    params, grads = split(flat[:total]), split(flat[total:])
    new = opt.step(params, grads)
    if not isinstance(new, (list, tuple)) or len(new) != len(shapes):
        sys.stderr.write("step() must return a list of %d arrays\n" % len(shapes))
        sys.exit(4)
    parts = []
    for i, (a, s) in enumerate(zip(new, shapes)):
        a = np.asarray(a, dtype="<f8")
        if a.shape != s:
            sys.stderr.write("step() returned shape %s for parameter %d, expected %s\n" % (a.shape, i, s))
            sys.exit(4)
        parts.append(a.ravel())
    proto_out.write(np.concatenate(parts).astype("<f8").tobytes())
'''


def problem(d, h, seed, val_seed):
    """Training data, hidden validation data and initial parameters of one size (all deterministic)."""
    r = np.random.default_rng(seed)
    scales = np.logspace(-1, 1, d)  # features on very different scales: an ill-conditioned problem
    r.shuffle(scales)
    w1 = r.normal(0, 1 / np.sqrt(d), (d, h))
    b1 = r.normal(0, 0.5, h)
    w2 = r.normal(0, 1 / np.sqrt(h), (h, 1))
    b2 = r.normal(0, 0.1, 1)

    def draw(rng, n):
        z = rng.normal(0, 1, (n, d))
        y = np.tanh(z @ w1 + b1) @ w2 + b2 + rng.normal(0, 0.05, (n, 1))
        return z * scales, y

    x_train, y_train = draw(r, N_TRAIN)
    x_val, y_val = draw(np.random.default_rng(val_seed), N_VAL)
    ri = np.random.default_rng(seed + 7)
    params = [ri.normal(0, 1 / np.sqrt(d), (d, h)), np.zeros(h), ri.normal(0, 1 / np.sqrt(h), (h, 1)), np.zeros(1)]
    return x_train, y_train, x_val, y_val, params


def loss_and_grads(params, x, y):
    w1, b1, w2, b2 = params
    hidden = np.tanh(x @ w1 + b1)
    err = hidden @ w2 + b2 - y
    loss = 0.5 * float(np.mean(err ** 2))
    g_out = err / len(x)
    g_hidden = (g_out @ w2.T) * (1 - hidden ** 2)
    return loss, [x.T @ g_hidden, g_hidden.sum(0), hidden.T @ g_out, g_out.sum(0)]


class Candidate:
    """One candidate process behind a pipe, with a deadline and a bounded copy of its stderr."""

    def __init__(self, argv, cwd, timeout):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
        self.stderr = bytearray()
        self.timed_out = False
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        self._timer = threading.Timer(timeout, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _read_stderr(self):
        while True:
            chunk = self.proc.stderr.read(4096)
            if not chunk:
                return
            if len(self.stderr) < STDERR_KEEP:
                self.stderr += chunk[: STDERR_KEEP - len(self.stderr)]

    def _expire(self):
        self.timed_out = True
        self.proc.terminate()  # run-as-candidate kills every candidate process on SIGTERM

    def send(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.proc.stdout.read(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def close(self):
        self._timer.cancel()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drain.join(timeout=5)


def run_size(index, name, d, h, argv, cwd):
    x_train, y_train, x_val, y_val, params = problem(d, h, SEED + 1000 * index, VAL_SEED + 1000 * index)
    initial, _ = loss_and_grads(params, x_val, y_val)
    shapes = [p.shape for p in params]
    total = sum(p.size for p in params)
    batches = np.random.default_rng(SEED + 1000 * index + 3)
    cand = Candidate(argv, cwd, TIMEOUT_PER_SIZE_SEC)
    failure = None
    started = time.monotonic()
    try:
        cand.send((json.dumps({"shapes": [list(s) for s in shapes], "steps": STEPS}) + "\n").encode())
        for step in range(STEPS):
            idx = batches.integers(0, N_TRAIN, BATCH)
            _, grads = loss_and_grads(params, x_train[idx], y_train[idx])
            flat = np.concatenate([a.ravel() for a in params + grads]).astype("<f8")
            cand.send(flat.tobytes())
            reply = cand.recv(8 * total)
            if reply is None:
                failure = "the optimizer stopped answering at step %d" % step
                break
            new = np.frombuffer(reply, dtype="<f8")
            if not np.all(np.isfinite(new)):
                failure = "the optimizer returned non-finite parameters at step %d" % step
                break
            params, at = [], 0
            for s in shapes:
                n = int(np.prod(s))
                params.append(new[at : at + n].reshape(s).copy())
                at += n
    except (BrokenPipeError, OSError):
        failure = "the optimizer process ended early"
    finally:
        cand.close()
    if cand.timed_out:
        failure = "the optimizer took longer than %d s" % TIMEOUT_PER_SIZE_SEC
    elapsed = time.monotonic() - started
    final = initial
    if failure is None:
        final, _ = loss_and_grads(params, x_val, y_val)
        if not np.isfinite(final) or final > initial:
            final = initial
    if cand.stderr:
        text = cand.stderr.decode("utf-8", "replace").rstrip()
        print("  optimizer stderr (%s, first %d bytes):\n    %s" % (name, STDERR_KEEP, text.replace("\n", "\n    ")))
    status = "failed: " + failure if failure else "ok"
    print("size %-6s (d=%d, h=%d): initial val loss %.6f, final %.6f, %.1f s, %s" % (name, d, h, initial, final, elapsed, status))
    return final, failure is not None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runner", default="none", help="path of run-as-candidate, or 'none' to run the candidate directly (local tests)")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--cwd", default="/tmp")
    a = ap.parse_args()
    optimizer = os.path.join(os.path.abspath(a.workspace), "optimizer.py")
    candidate = [a.python, "-I", "-c", DRIVER, optimizer]
    if a.runner != "none":
        candidate = [a.runner, "--timeout", str(TIMEOUT_PER_SIZE_SEC + 5), "--cwd", a.cwd, "--"] + candidate
    rewards = {}
    losses = []
    failed = 0
    for i, (name, d, h) in enumerate(SIZES):
        loss, bad = run_size(i, name, d, h, candidate, a.cwd)
        rewards["val_loss_" + name] = loss
        losses.append(loss)
        failed += int(bad)
    rewards["val_loss"] = float(np.mean(losses))
    rewards["failed_sizes"] = failed
    print("val_loss (mean of %d sizes, lower is better): %.6f" % (len(SIZES), rewards["val_loss"]))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "reward.json"), "w") as f:
        json.dump(rewards, f, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
