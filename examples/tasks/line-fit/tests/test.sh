#!/bin/bash
# Hidden tests of line-fit. Runs in the Judge as root, with /workspace (the submission) read-only and these files in
# /tests (mode 0700: only root can read them). The candidate's fit.py runs through run-as-candidate, as an
# unprivileged user who can reach neither /tests nor /logs/verifier; see docs/judge.md.
set -u
exec python3 /tests/score.py
