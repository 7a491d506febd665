#!/usr/bin/env bash
# The quick-start demonstration: sets up Assay (npm dependencies, build) and runs a signed ledger end to end on the
# embedded SQLite default: keys, a realistic run's worth of events, a checkpoint, verification, an inclusion proof,
# then a tampered copy that the verifier catches, naming the bad event. Then a real research run with Docker:
# `assay run examples/tasks/tiny-optimizer --agent reference` (Docker and the base image are set up first; that
# needs root, or a daemon that already answers and the image already built), its rounds and selected best, and a
# final `assay ledger verify`.
#
#   ASSAY_DEMO_SKIP_RUN=1 bash scripts/demo.sh   the ledger part only (no Docker)
#
#   bash scripts/demo.sh            state goes to a fresh directory under /tmp (printed)
#   ASSAY_HOME=dir bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a!==20||b<19){console.error(`Assay needs Node 20.19 or later 20.x, this is ${process.version}`);process.exit(1)}'

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "== installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "== building"
npm run --silent build

HOME_DIR="${ASSAY_HOME:-$(mktemp -d /tmp/assay-demo.XXXXXX)/home}"
export ASSAY_HOME="$HOME_DIR"
assay() { node bin/assay.js "$@"; }
step() { printf '\n== %s\n' "$*"; }

step "assay ledger init   (ASSAY_HOME=$ASSAY_HOME)"
assay ledger init

step "assay ledger append --file examples/ledger/sample-run.jsonl   (a research run: 4 rounds, one rule violation)"
assay ledger append --file examples/ledger/sample-run.jsonl | sed -n '1,5p;$p' | sed '5s/.*/  .../'

step "assay ledger checkpoint"
assay ledger checkpoint

step "assay ledger verify"
assay ledger verify

step "assay ledger prove 22   (inclusion proof of one event against the signed checkpoint)"
assay ledger prove 22

TAMPERED="$(dirname "$ASSAY_HOME")/tampered"
rm -rf "$TAMPERED"
cp -r "$ASSAY_HOME" "$TAMPERED"
step "tampering with a copy: the validation loss of round 2 (position 22) is lowered to 0.001, and its stored hash recomputed"
node -e '
const Database = require("better-sqlite3");
const { createHash } = require("node:crypto");
const db = new Database(process.argv[1] + "/ledger/ledger.db");
const row = db.prepare("SELECT bytes FROM events WHERE position = 22").get();
const text = row.bytes.toString("utf8");
const forged = text.replace(/"primaryScore":[0-9.]+/, "\"primaryScore\":0.001");
if (forged === text) throw new Error("demo: position 22 is not the reward event it should be");
db.prepare("UPDATE events SET bytes = ?, hash = ? WHERE position = 22").run(Buffer.from(forged), createHash("sha256").update(forged).digest());
db.close();
console.log("position 22 now reads: " + forged.slice(0, 160) + "...");
' "$TAMPERED"

step "ASSAY_HOME=$TAMPERED assay ledger verify"
set +e
ASSAY_HOME="$TAMPERED" node bin/assay.js ledger verify
code=$?
set -e
if [ "$code" -ne 5 ]; then
  echo "demo: expected the tampered copy to fail verification with exit code 5, got $code" >&2
  exit 1
fi
printf '\nThe original verifies; the tampered copy fails at the forged event (exit code %s). State: %s\n' "$code" "$ASSAY_HOME"

if [ "${ASSAY_DEMO_SKIP_RUN:-0}" = "1" ]; then
  exit 0
fi

step "Docker and the base image (scripts/ensure-docker.sh, scripts/build-base-image.sh; no registry is contacted)"
if [ "$(id -u)" = "0" ]; then
  bash scripts/ensure-docker.sh
  bash scripts/build-base-image.sh
elif ! docker info >/dev/null 2>&1 || ! docker image inspect assay/base:bookworm >/dev/null 2>&1; then
  echo "demo: the research run needs Docker and assay/base:bookworm; run this script as root to set them up" >&2
  exit 1
fi

step "assay run examples/tasks/tiny-optimizer --agent reference   (Work container, a fresh Judge per submission)"
assay run examples/tasks/tiny-optimizer --agent reference

step "assay ledger verify   (the demo ledger, now with the research run's events)"
assay ledger verify
printf '\nState: %s (the run: %s/runs)\n' "$ASSAY_HOME" "$ASSAY_HOME"
