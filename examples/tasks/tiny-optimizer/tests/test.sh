#!/bin/bash
# Hidden checks of tiny-optimizer. Runs in the Judge as root, with /workspace (the submission) read-only and the
# hidden tests at /tests (0700 root). score.py keeps data, trainer and evaluation in this trusted process and runs
# the candidate's optimizer.py as the unprivileged candidate user; it writes /logs/verifier/reward.json.
set -u
mkdir -p /logs/verifier

# The one place that says how candidate code is started: Assay's run-as-candidate (task-runtime/judge/), baked into
# every judge image. Never run candidate code directly from this script.
RUN_AS_CANDIDATE=/usr/local/bin/run-as-candidate

if [ ! -x "$RUN_AS_CANDIDATE" ]; then
  echo "tiny-optimizer: $RUN_AS_CANDIDATE is missing; refusing to run candidate code as root" >&2
  exit 2
fi
# -I: isolated mode, so nothing in the working directory (the candidate's snapshot) can shadow a module.
exec python3 -I /tests/score.py --workspace /workspace --out /logs/verifier --runner "$RUN_AS_CANDIDATE" --cwd /tmp
