#!/bin/bash
# Hidden checks of data-contract. Runs in the Judge as root with /workspace (the submission) read-only. No
# candidate code runs: check.py only reads the dataset, defensively (no symlinks, bounded size, strict JSON).
set -u
mkdir -p /logs/verifier
# -I: isolated mode, so nothing in the working directory (the candidate's snapshot) can shadow a module.
exec python3 -I /tests/check.py --dataset /workspace/dataset.jsonl --out /logs/verifier
