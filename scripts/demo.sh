#!/usr/bin/env bash
# The quick-start demonstration: sets up Assay (npm dependencies, build) and runs a signed ledger end to end on the
# embedded SQLite default: keys, a realistic run's worth of events, a checkpoint, verification, an inclusion proof,
# then a tampered copy that the verifier catches, naming the bad event, and a forged best score: refused by the
# generic append, and, signed with the keys anyway, caught by the claims step. Then a real research run with Docker:
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

step "a research run: 5 rounds, one rule violation, one refunded round (examples/ledger/sample-run.jsonl, as the run controller wrote it)"
# The run's events are signed by the run controller, the runtime and the Judge with their own keys: the generic
# `assay ledger append` refuses those types, so they are recorded the way those components record them.
node scripts/append-signed.js examples/ledger/sample-run.jsonl | sed -n '1,5p;$p' | sed '5s/.*/  .../'
REWARD_POS="$(node -e '
const Database = require("better-sqlite3");
const db = new Database(process.argv[1] + "/ledger/ledger.db", { readonly: true });
const row = db.prepare("SELECT position FROM events WHERE stream = ? AND type = ?").get("judge-r-20261202-0001-2", "RewardRecorded");
db.close();
if (!row) throw new Error("demo: the sample run has no reward for round 2");
console.log(row.position);
' "$ASSAY_HOME")"

step "assay ledger checkpoint"
assay ledger checkpoint

step "assay ledger verify"
assay ledger verify

step "assay ledger prove $REWARD_POS   (inclusion proof of round 2's reward against the signed checkpoint)"
assay ledger prove "$REWARD_POS"

TAMPERED="$(dirname "$ASSAY_HOME")/tampered"
rm -rf "$TAMPERED"
cp -r "$ASSAY_HOME" "$TAMPERED"
step "tampering with a copy: the validation loss of round 2 (position $REWARD_POS) is lowered to 0.001, and its stored hash recomputed"
node -e '
const Database = require("better-sqlite3");
const { createHash } = require("node:crypto");
const pos = Number(process.argv[2]);
const db = new Database(process.argv[1] + "/ledger/ledger.db");
const row = db.prepare("SELECT bytes FROM events WHERE position = ?").get(pos);
const text = row.bytes.toString("utf8");
const forged = text.replace(/"primaryScore":[0-9.]+/, "\"primaryScore\":0.001");
if (forged === text) throw new Error("demo: position " + pos + " is not the reward event it should be");
db.prepare("UPDATE events SET bytes = ?, hash = ? WHERE position = ?").run(Buffer.from(forged), createHash("sha256").update(forged).digest(), pos);
db.close();
console.log("position " + pos + " now reads: " + forged.slice(0, 160) + "...");
' "$TAMPERED" "$REWARD_POS"

step "ASSAY_HOME=$TAMPERED assay ledger verify"
set +e
ASSAY_HOME="$TAMPERED" node bin/assay.js ledger verify
code=$?
set -e
if [ "$code" -ne 5 ]; then
  echo "demo: expected the tampered copy to fail verification with exit code 5, got $code" >&2
  exit 1
fi
printf '\nThe original verifies; the tampered copy fails at the forged event (exit code %s).\n' "$code"

FORGED_RUN='{"run":"fake","status":"completed","bestRound":1,"bestScore":1e-7,"bestSnapshot":"bafyfake"}'
step "assay ledger append --stream run-fake --type RunCompleted --data '$FORGED_RUN'   (a best score with no run behind it)"
set +e
assay ledger append --stream run-fake --type RunCompleted --data "$FORGED_RUN"
code=$?
set -e
if [ "$code" -ne 6 ]; then
  echo "demo: expected the generic append to refuse RunCompleted with exit code 6, got $code" >&2
  exit 1
fi

FORGED="$(dirname "$ASSAY_HOME")/forged"
rm -rf "$FORGED"
cp -r "$ASSAY_HOME" "$FORGED"
step "a forger holding the controller key signs the same RunCompleted into a copy (scripts/append-signed.js)"
printf '{"stream":"run-fake","type":"RunCompleted","data":%s}\n' "$FORGED_RUN" > "$(dirname "$ASSAY_HOME")/forged.jsonl"
ASSAY_HOME="$FORGED" node scripts/append-signed.js "$(dirname "$ASSAY_HOME")/forged.jsonl"

step "ASSAY_HOME=$FORGED assay ledger verify   (every signature is good; the claim does not follow from the events)"
set +e
ASSAY_HOME="$FORGED" node bin/assay.js ledger verify | tee "$(dirname "$ASSAY_HOME")/forged.verify"
code=${PIPESTATUS[0]}
set -e
if [ "$code" -ne 5 ] || ! grep -q 'FAILED in step "claims"' "$(dirname "$ASSAY_HOME")/forged.verify"; then
  echo "demo: expected the forged copy to fail the claims step with exit code 5, got $code" >&2
  exit 1
fi
printf '\nThe forged best score is refused by the generic append and, signed anyway, fails the claims step (exit code %s). State: %s\n' "$code" "$ASSAY_HOME"

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
