/**
 * Task templates for `assay task init DIR --from-template optimizer|dataset|kernel` (docs/task-format.md, "Authoring
 * a task"). Each is a small, CPU-only, deterministic task that validates, builds on the local base image and passes
 * `assay task check` as created: a task.toml listing every key Assay reads (the optional ones commented out), an
 * instruction, an environment/Dockerfile on `assay/base:bookworm`, a hidden scorer that runs candidate code only
 * through `run-as-candidate` and writes /logs/verifier/reward.json as root, and a reference solution/solve.sh.
 *
 * Pure: the files as plain data; the application layer (scaffold.ts) writes them.
 */

export const TASK_TEMPLATES = ['optimizer', 'dataset', 'kernel'] as const;
export type TaskTemplate = (typeof TASK_TEMPLATES)[number];

export interface TemplateFile {
  /** Path relative to the task directory, `/`-separated. */
  readonly path: string;
  readonly content: string;
  /** 0o755 for scripts, else 0o644. */
  readonly mode: number;
}

interface TemplateSpec {
  readonly description: string;
  readonly keywords: readonly string[];
  readonly metric: string;
  readonly direction: 'maximize' | 'minimize';
  /** The one file the candidate edits, under /workspace. */
  readonly file: string;
  readonly explanation: string;
  readonly instruction: string;
  readonly start: string;
  readonly solution: string;
  readonly score: string;
}

export function isTaskTemplate(s: string): s is TaskTemplate {
  return (TASK_TEMPLATES as readonly string[]).includes(s);
}

/** A task name (`org/name`) from a directory's base name: `local/<name>`, lower-cased, unsafe characters as `-`. */
export function taskNameFor(base: string): string {
  const slug = base
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .replace(/\.\.+/g, '.')
    .slice(0, 100)
    .replace(/[-._]+$/, '');
  return `local/${slug === '' ? 'task' : slug}`;
}

/** Every file of a new task made from `template`, named `name` (`org/name`). */
export function templateFiles(template: TaskTemplate, name: string): TemplateFile[] {
  const t = SPECS[template];
  return [
    { path: 'task.toml', content: renderTaskToml(name, t), mode: 0o644 },
    { path: 'instruction.md', content: t.instruction, mode: 0o644 },
    { path: 'environment/Dockerfile', content: DOCKERFILE, mode: 0o644 },
    { path: `environment/workspace/${t.file}`, content: t.start, mode: 0o644 },
    { path: 'tests/test.sh', content: TEST_SH, mode: 0o755 },
    { path: 'tests/score.py', content: t.score, mode: 0o644 },
    { path: 'solution/solve.sh', content: solveSh(t.file, t.solution), mode: 0o755 },
  ];
}

const DOCKERFILE = `# The Work image, and (plus one layer of Assay's judge runtime) every Judge's image. Built locally from the Assay base
# image (scripts/build-base-image.sh); no registry is contacted. Never COPY tests/ or solution/ here: this directory is
# the whole build context, and anything in the image is visible to the agent.
FROM assay/base:bookworm
WORKDIR /workspace
COPY workspace/ /workspace/
`;

const TEST_SH = `#!/bin/bash
# Hidden checks. The Judge runs this as root, in the workdir (the candidate's snapshot, read-only), with tests/ at
# /tests (0700 root). score.py keeps the hidden data and the scoring in this trusted process and runs the candidate's
# code only through run-as-candidate, as an unprivileged user who can reach neither /tests nor /logs/verifier; it
# writes /logs/verifier/reward.json. Root never imports anything from the workspace: python3 -I (isolated) puts
# neither the current directory nor PYTHON* variables on sys.path.
set -u
mkdir -p /logs/verifier
RUN_AS_CANDIDATE=/usr/local/bin/run-as-candidate
if [ ! -x "$RUN_AS_CANDIDATE" ]; then
  echo "$RUN_AS_CANDIDATE is missing; refusing to run candidate code as root" >&2
  exit 2
fi
exec python3 -I /tests/score.py --workspace /workspace --out /logs/verifier --runner "$RUN_AS_CANDIDATE"
`;

function solveSh(file: string, body: string): string {
  return `#!/bin/bash
# Reference solution (the oracle): \`assay task check\` runs it in a container of the Work image, in the workdir, with
# this directory at /solution (as Harbor's oracle agent does), then judges the resulting workspace.
set -euo pipefail
cat > /workspace/${file} <<'PY'
${body}PY
`;
}

/** What each scorer shares: running one candidate command and reading its answer as data. */
const SCORER_COMMON = String.raw`
def candidate_argv(runner, driver, target, timeout):
    """The candidate's side: python3 -I (nothing from the workspace but the target file), as the candidate user."""
    argv = ["/usr/bin/python3", "-I", "-c", driver, target]
    if runner != "none":  # "none": local tests only, never in a Judge
        argv = [runner, "--timeout", str(timeout), "--cwd", "/tmp", "--"] + argv
    return argv


def run_once(argv, payload, timeout):
    """Sends one JSON payload, returns (the last line printed, parsed as JSON, or None; a note on failure)."""
    try:
        p = subprocess.run(argv, input=json.dumps(payload).encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout + 15, cwd="/tmp")
    except subprocess.TimeoutExpired:
        return None, "timed out"
    lines = p.stdout.decode("utf-8", "replace").strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = p.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return None, "exit %d: %s" % (p.returncode, " | ".join(tail))
    try:
        return json.loads(lines[-1]), None
    except ValueError:
        return None, "the answer is not JSON"


def write_reward(out, rewards):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "reward.json"), "w") as f:
        json.dump(rewards, f, sort_keys=True)


def arguments():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runner", default="none")
    a = ap.parse_args()
    a.workspace = os.path.abspath(a.workspace)
    return a
`;

/** The candidate side of a one-shot scorer: reads one JSON payload, calls FUNC from the target file, prints JSON. */
function oneShotDriver(module: string, call: string): string {
  return String.raw`DRIVER = r'''
import importlib.util, json, os, sys
sys.dont_write_bytecode = True
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # the candidate's own prints go to stderr, never into the answer
payload = json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location("${module}", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
${call}
out.write(json.dumps(answer) + "\n")
out.flush()
'''
`;
}

const OPTIMIZER: TemplateSpec = {
  description: 'Make optimizer.py reach a lower loss on a hidden ill-conditioned quadratic in a fixed number of steps.',
  keywords: ['template', 'optimization'],
  metric: 'loss',
  direction: 'minimize',
  file: 'optimizer.py',
  explanation:
    'tests/score.py owns the objective (a quadratic with hidden centre and curvatures from 0.1 to 10) and computes every gradient; the candidate optimizer.py runs as the unprivileged candidate user (run-as-candidate) behind a pipe and only returns the next point. The reward is the final loss (minimize).',
  instruction: `# Optimizer

\`/workspace/optimizer.py\` defines the update rule of a first-order optimizer. It is run for 100 steps on a hidden
objective in 8 dimensions whose curvature differs by a factor of 100 between directions. Today it is plain gradient
descent with a step size of 0.01. Make it reach a **lower final loss** in the same number of steps.

Keep the interface:

\`\`\`python
class Optimizer:
    def __init__(self, dim):          # number of coordinates
        ...
    def step(self, x, grad):          # lists of floats: the current point and the gradient there
        return new_x                  # a list of dim finite floats
\`\`\`

It may use the Python standard library and keep state between calls. An optimizer that crashes, returns the wrong
length or non-finite numbers scores the loss at the starting point. Edit only \`/workspace/optimizer.py\`.
Submit with \`rsi-submit\`; each submission is scored by a fresh Judge (lower is better).
`,
  start: `"""The update rule, called once per step. Today: plain gradient descent."""


class Optimizer:
    def __init__(self, dim):
        self.lr = 0.01

    def step(self, x, grad):
        return [xi - self.lr * gi for xi, gi in zip(x, grad)]
`,
  solution: `"""Gradient descent with heavy-ball momentum and a larger, still stable step."""


class Optimizer:
    def __init__(self, dim):
        self.lr, self.beta = 0.15, 0.8
        self.v = [0.0] * dim

    def step(self, x, grad):
        self.v = [self.beta * v - self.lr * g for v, g in zip(self.v, grad)]
        return [xi + vi for xi, vi in zip(x, self.v)]
`,
  score: String.raw`"""Hidden scorer of the optimizer template. Runs as root in the Judge (python3 -I, from test.sh).

The objective, its centre and every gradient stay in this process; the candidate's Optimizer runs in one process as
the candidate user and exchanges one JSON line per step: {"x": [...], "grad": [...]} in, the new point out.
Writes <out>/reward.json: {"loss": final loss, "failed": 0 or 1}.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading

DIM = 8
STEPS = 100
TIMEOUT = 30
SEED = 0x0971  # hidden
SCALES = [10 ** (-1 + 2 * i / (DIM - 1)) for i in range(DIM)]  # curvatures 0.1 .. 10

DRIVER = r'''
import importlib.util, json, os, sys
sys.dont_write_bytecode = True
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
header = json.loads(sys.stdin.readline())
spec = importlib.util.spec_from_file_location("optimizer", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
opt = module.Optimizer(header["dim"])
while True:
    line = sys.stdin.readline()
    if not line:
        break
    msg = json.loads(line)
    new = [float(v) for v in opt.step(msg["x"], msg["grad"])]
    out.write(json.dumps(new) + "\n")
    out.flush()
'''
${SCORER_COMMON}

def loss(x, centre):
    return 0.5 * sum(a * (xi - ci) ** 2 for a, xi, ci in zip(SCALES, x, centre))


def main():
    a = arguments()
    rng = random.Random(SEED)
    centre = [rng.uniform(-3, 3) for _ in range(DIM)]
    x = [0.0] * DIM
    initial = loss(x, centre)
    argv = candidate_argv(a.runner, DRIVER, os.path.join(a.workspace, "optimizer.py"), TIMEOUT)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/tmp", text=True)
    timer = threading.Timer(TIMEOUT, proc.terminate)
    timer.start()
    failure = None
    try:
        proc.stdin.write(json.dumps({"dim": DIM}) + "\n")
        for step in range(STEPS):
            grad = [s * (xi - ci) for s, xi, ci in zip(SCALES, x, centre)]
            proc.stdin.write(json.dumps({"x": x, "grad": grad}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            new = json.loads(line) if line else None
            if not isinstance(new, list) or len(new) != DIM or not all(isinstance(v, (int, float)) and abs(v) < 1e12 for v in new):
                failure = "no valid point at step %d" % step
                break
            x = [float(v) for v in new]
    except (OSError, ValueError) as e:
        failure = "the optimizer stopped: %s" % type(e).__name__
    finally:
        timer.cancel()
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.kill()
        proc.wait()
    final = initial if failure else loss(x, centre)
    if not final <= initial:
        final = initial
    print("initial loss %.6f, final %.6f%s" % (initial, final, ", failed: " + failure if failure else ""))
    write_reward(a.out, {"loss": round(final, 12), "failed": 1 if failure else 0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
`,
};

const DATASET: TemplateSpec = {
  description: 'Edit the selection rule in select.py so that a model fitted to the kept rows predicts hidden clean data better.',
  keywords: ['template', 'data-selection'],
  metric: 'val_mse',
  direction: 'minimize',
  file: 'select.py',
  explanation:
    'tests/score.py generates a hidden training set with corrupted rows, asks the candidate keep(row) (run as the unprivileged candidate user) which rows to keep, fits a line to the kept rows itself and reports its mean squared error on hidden clean validation data (minimize).',
  instruction: `# Dataset selection

A line \`y = a*x + b\` is fitted (least squares) to a training set of 400 rows, then scored on clean held-out data.
About a third of the training rows were scraped from a bad source and carry wrong labels. \`/workspace/select.py\`
decides which rows are kept for the fit; today it keeps all of them. Make it keep the rows that give a **lower
validation error**.

Each row is a dictionary: \`{"x": float, "y": float, "quality": float in [0, 1], "source": "lab" | "web"}\`.

\`\`\`python
def keep(row) -> bool
\`\`\`

At least two rows must be kept; a selection that keeps fewer, crashes or does not return booleans scores as a fit
to nothing (predicting 0). Edit only \`/workspace/select.py\`. The score is the validation mean squared error (lower
is better); submit with \`rsi-submit\`.
`,
  start: `"""Which training rows the fit uses. Today: all of them."""


def keep(row):
    return True
`,
  solution: `"""Keep rows the annotators rated well: the corrupted ones have low quality scores."""


def keep(row):
    return row["quality"] >= 0.5
`,
  score: String.raw`"""Hidden scorer of the dataset template. Runs as root in the Judge (python3 -I, from test.sh).

The data is generated here with a hidden seed; the candidate's keep() sees the training rows only, in a process of
the candidate user, and answers one boolean per row. The fit and the validation stay in this process.
Writes <out>/reward.json: {"val_mse": ..., "kept": n, "failed": 0 or 1}.
"""
import argparse
import json
import os
import random
import subprocess
import sys

SEED = 0xDA7A  # hidden
N_TRAIN = 400
N_VAL = 200
TIMEOUT = 30

${oneShotDriver('select', 'answer = [bool(module.keep(dict(r))) for r in payload["rows"]]')}
${SCORER_COMMON}

def truth(x):
    return 3.0 * x + 2.0


def data(rng):
    rows = []
    for _ in range(N_TRAIN):
        x = rng.uniform(0, 10)
        if rng.random() < 0.33:
            rows.append({"x": x, "y": rng.uniform(-40, 40), "quality": rng.uniform(0, 0.45), "source": "web"})
        else:
            rows.append({"x": x, "y": truth(x) + rng.gauss(0, 0.5), "quality": rng.uniform(0.55, 1), "source": rng.choice(["lab", "web"])})
    val = []
    for _ in range(N_VAL):
        x = rng.uniform(0, 10)
        val.append((x, truth(x) + rng.gauss(0, 0.5)))
    return rows, val


def fit(points):
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0, my
    a = sum((x - mx) * (y - my) for x, y in points) / sxx
    return a, my - a * mx


def main():
    a = arguments()
    rows, val = data(random.Random(SEED))
    argv = candidate_argv(a.runner, DRIVER, os.path.join(a.workspace, "select.py"), TIMEOUT)
    answer, note = run_once(argv, {"rows": rows}, TIMEOUT)
    failure = note
    if failure is None and (not isinstance(answer, list) or len(answer) != len(rows) or not all(isinstance(k, bool) for k in answer)):
        failure = "keep() must answer one boolean per row"
    kept = [(r["x"], r["y"]) for r, k in zip(rows, answer) if k] if failure is None else []
    if failure is None and len(kept) < 2:
        failure = "fewer than two rows kept"
    slope, intercept = fit(kept) if failure is None else (0.0, 0.0)
    mse = sum((slope * x + intercept - y) ** 2 for x, y in val) / len(val)
    print("kept %d of %d rows, validation mse %.6f%s" % (len(kept), len(rows), mse, ", failed: " + failure if failure else ""))
    write_reward(a.out, {"val_mse": round(mse, 12), "kept": len(kept), "failed": 1 if failure else 0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
`,
};

const KERNEL: TemplateSpec = {
  description: 'Make the softmax kernel in kernel.py correct on every hidden input, including large ones.',
  keywords: ['template', 'kernel', 'numerics'],
  metric: 'reward',
  direction: 'maximize',
  file: 'kernel.py',
  explanation:
    'tests/score.py computes reference softmax values for hidden inputs itself and calls the candidate kernel (run as the unprivileged candidate user through run-as-candidate) on the same inputs; the reward is the fraction of inputs whose output matches to 1e-9 (maximize).',
  instruction: `# Softmax kernel

\`/workspace/kernel.py\` defines \`softmax(xs)\`: for a list of floats it must return the list
\`exp(x_i) / sum_j exp(x_j)\`. Today it computes exactly that, naively, and fails on inputs with large values.
Make it **correct on every input**: the hidden checks use lists of 1 to 64 values between -1000 and 1000.

\`\`\`python
def softmax(xs: list[float]) -> list[float]
\`\`\`

Pure Python (the standard library); an answer matches when every value is within 1e-9 of the reference. The reward
is the fraction of hidden inputs answered correctly. Edit only \`/workspace/kernel.py\`; submit with \`rsi-submit\`.
`,
  start: `"""softmax(xs): exp(x_i) / sum_j exp(x_j). Today: the textbook formula."""
import math


def softmax(xs):
    exps = [math.exp(x) for x in xs]
    total = sum(exps)
    return [e / total for e in exps]
`,
  solution: `"""softmax(xs), shifted by the maximum so that no exponential overflows."""
import math


def softmax(xs):
    m = max(xs)
    exps = [math.exp(x - m) for x in xs]
    total = sum(exps)
    return [e / total for e in exps]
`,
  score: String.raw`"""Hidden scorer of the kernel template. Runs as root in the Judge (python3 -I, from test.sh).

Each hidden input is answered by the candidate's softmax() in its own process of the candidate user (one process
for all inputs: an exception on one input fails that input only). References are computed here.
Writes <out>/reward.json: {"reward": passed/total, "passed": n, "total": m}.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys

SEED = 0x50F7  # hidden
TIMEOUT = 30

${oneShotDriver('kernel', 'answer = []\nfor xs in payload["cases"]:\n    try:\n        answer.append([float(v) for v in module.softmax(list(xs))])\n    except Exception as e:\n        print("softmax raised %s" % type(e).__name__, file=sys.stderr)\n        answer.append(None)')}
${SCORER_COMMON}

def reference(xs):
    m = max(xs)
    exps = [math.exp(x - m) for x in xs]
    total = math.fsum(exps)
    return [e / total for e in exps]


def cases(rng):
    out = []
    for i in range(16):
        n = rng.randint(1, 64)
        span = 5.0 if i % 2 == 0 else 1000.0
        out.append([rng.uniform(-span, span) for _ in range(n)])
    return out


def main():
    a = arguments()
    inputs = cases(random.Random(SEED))
    argv = candidate_argv(a.runner, DRIVER, os.path.join(a.workspace, "kernel.py"), TIMEOUT)
    answer, note = run_once(argv, {"cases": inputs}, TIMEOUT)
    if not isinstance(answer, list) or len(answer) != len(inputs):
        answer = [None] * len(inputs)
    passed = 0
    for xs, got in zip(inputs, answer):
        want = reference(xs)
        if isinstance(got, list) and len(got) == len(want) and all(isinstance(g, float) and abs(g - w) <= 1e-9 for g, w in zip(got, want)):
            passed += 1
    print("%d/%d inputs correct%s" % (passed, len(inputs), " (candidate failed: %s)" % note if note else ""))
    write_reward(a.out, {"reward": passed / len(inputs), "passed": passed, "total": len(inputs)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
`,
};

const SPECS: Readonly<Record<TaskTemplate, TemplateSpec>> = { optimizer: OPTIMIZER, dataset: DATASET, kernel: KERNEL };

const q = (s: string): string => JSON.stringify(s);

/** task.toml: the template's settings, and every other key Assay reads, commented out with its default. */
function renderTaskToml(name: string, t: TemplateSpec): string {
  return `# A task in the Harbor / OpenRSI Index format (docs/task-format.md). Every key Assay reads is listed; the commented
# ones show their defaults. \`assay task validate .\` checks this file; \`assay task check .\` judges the task.
schema_version = "1.4"
# source = "https://github.com/org/repo"          # provenance, never fetched

[task]
name = ${q(name)}
version = "0.1.0"
description = ${q(t.description)}
keywords = [${t.keywords.map(q).join(', ')}]
# authors = [{ name = "", email = "" }]

[metadata]
verification_explanation = ${q(t.explanation)}

# Judge settings (docs/judge.md): the snapshot rules are checked before anything runs; a broken rule scores 0.
[metadata.assay_judge]
# pids_limit = 1024
# writable_rootfs = false

[metadata.assay_judge.snapshot]
allowed_paths = [${q(t.file)}]
symlinks = "forbid"
max_files = 16
max_bytes = 1048576
# forbidden_paths = []
# max_file_bytes = 8589934592
# max_depth = 128

# What \`assay run\` lets the agent change (docs/run.md).
[metadata.assay_run]
editable_paths = [${q(t.file)}]

# GPUs each Judge needs; multi-node placement; data staged before a phase (docs/task-format.md).
[metadata.rsi_harness.verifier]
gpus = 0
# [metadata.rsi_harness]
# require_disjoint_phase_nodes = false
# assets = [{ path = "/data/x", phase = "work", kind = "file", min_bytes = 0, min_entries = 0 }]

# Run-level settings (the command line overrides them).
[metadata.assay]
primary_metric = ${q(t.metric)}
direction = ${q(t.direction)}
max_submissions = 10
cooldown_sec = 0
# time_budget_sec = 3600
# gpu_budget_sec = 3600                             # or gpu_budget_hours = 1
# pause_work_during_judge = false

# What \`assay task check\` accepts as "the same reward" over repeated Judges (absolute; default 0: identical).
[metadata.assay_check]
tolerance = 0

[environment]
os = "linux"
cpus = 1
memory_mb = 1024
storage_mb = 1024
gpus = 0
workdir = "/workspace"
network_mode = "no-network"
build_timeout_sec = 300
# gpu_types = ["H100"]
# allowed_hosts = []                                # with network_mode = "allowlist"
# docker_image = "my/local-image:tag"               # an image already in the local Docker daemon (never pulled)
# memory = "1G"                                     # Harbor's deprecated forms of memory_mb / storage_mb
# storage = "1G"
# allow_internet = false                            # Harbor's deprecated flag

[environment.env]
PYTHONDONTWRITEBYTECODE = "1"

[agent]
timeout_sec = 1800
network_mode = "no-network"
# user = "root"
# allowed_hosts = []

# [agent.env]

[verifier]
timeout_sec = 120
network_mode = "no-network"
environment_mode = "shared"
# user = "root"                                     # the Judge runs test.sh as root; other users are refused
# allowed_hosts = []

# [verifier.env]

# [solution.env]                                    # must stay empty
`;
}
