#!/bin/bash
# Hidden checks for hello-judge. Runs in the Judge as root with /workspace (the submission) read-only and tests/ at
# /tests. The candidate's code is imported and called only through run-as-candidate (docs/judge.md), as an
# unprivileged user who can reach neither /tests nor /logs/verifier; this script, as root, turns what the candidate
# printed into /logs/verifier/reward.json: {"reward": passed/total, "passed": n, "total": m}. A submission that does
# not even import scores 0: that is the candidate's failure, not the verifier's.
# Root never runs or imports anything from /workspace: its Python runs isolated (-I: no current directory, no
# script directory and no PYTHON* variables on sys.path), so a json.py in the submission is just a file.
set -u
mkdir -p /logs/verifier
if ! command -v run-as-candidate >/dev/null; then
  echo "run-as-candidate is missing: refusing to run candidate code as root" >&2
  exit 3
fi
# The candidate side: import hello.py, call greet() on each name, print one JSON object.
answers=$(run-as-candidate --timeout 20 --cwd /workspace -- python3 -c '
import importlib.util, json, sys
names = sys.argv[1:]
out = {}
try:
    spec = importlib.util.spec_from_file_location("hello", "/workspace/hello.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for n in names:
        try:
            out[n] = module.greet(n)
        except Exception as e:
            print(f"greet({n!r}) raised {type(e).__name__}", file=sys.stderr)
except Exception as e:
    print(f"cannot import /workspace/hello.py: {type(e).__name__}: {e}", file=sys.stderr)
print(json.dumps(out))
' Ada Grace Judge x | tail -n 1)
# The verifier side, as root: only the last line the candidate printed is read, as data.
ANSWERS="$answers" exec python3 -I - <<'PY'
import json, os
cases = [("Ada", "Hello, Ada!"), ("Grace", "Hello, Grace!"), ("Judge", "Hello, Judge!"), ("x", "Hello, x!")]
try:
    answers = json.loads(os.environ.get("ANSWERS", "") or "{}")
    if not isinstance(answers, dict):
        answers = {}
except ValueError:
    answers = {}
passed = sum(1 for name, want in cases if answers.get(name) == want)
result = {"reward": passed / len(cases), "passed": passed, "total": len(cases)}
with open("/logs/verifier/reward.json", "w") as f:
    json.dump(result, f)
print(f"{passed}/{len(cases)} checks passed")
PY
