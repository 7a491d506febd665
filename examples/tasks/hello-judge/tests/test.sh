#!/bin/bash
# Hidden checks for hello-judge. Runs in the Judge with /workspace (the submission) read-only and tests/ at /tests.
# Writes /logs/verifier/reward.json: {"reward": passed/total, "passed": n, "total": m}. A submission that does not
# even import scores 0: that is the candidate's failure, not the verifier's.
set -u
mkdir -p /logs/verifier
exec python3 - <<'PY'
import importlib.util, json, sys

cases = [("Ada", "Hello, Ada!"), ("Grace", "Hello, Grace!"), ("Judge", "Hello, Judge!"), ("x", "Hello, x!")]
passed = 0
try:
    spec = importlib.util.spec_from_file_location("hello", "/workspace/hello.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, want in cases:
        try:
            if module.greet(name) == want:
                passed += 1
        except Exception as e:  # a crashing candidate fails that check
            print(f"greet({name!r}) raised {type(e).__name__}", file=sys.stderr)
except Exception as e:
    print(f"cannot import /workspace/hello.py: {type(e).__name__}: {e}", file=sys.stderr)

result = {"reward": passed / len(cases), "passed": passed, "total": len(cases)}
with open("/logs/verifier/reward.json", "w") as f:
    json.dump(result, f)
print(f"{passed}/{len(cases)} checks passed")
PY
