#!/bin/bash
# Hidden tests of gemm-fp16. Runs in the Judge as root with /workspace (the submission) read-only. The Judge's runner
# (/opt/assay-gemm: judge.py, policy.py, harness.cu, gemm.h) comes from the task's clean image, never from Work.
# The kernel is compiled and run only as the unprivileged candidate user (run-as-candidate). judge.py writes
# /logs/verifier/reward.json, or infrastructure-error.txt when the GPU or driver failed.
set -u
exec python3 -I /opt/assay-gemm/judge.py
