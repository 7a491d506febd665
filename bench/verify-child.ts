/**
 * The timed half of `npm run bench:verify`, in a fresh process as `assay verify FILE` runs: loads the verifier, then
 * times verifyBundle on the file (streamed from disk) and prints {ms, verdict, steps} as one JSON line.
 * Usage: node dist/bench/verify-child.js FILE TRUSTED_KEY_TEXT
 */
import { createReadStream } from 'node:fs';
import { verifyBundle } from '@assay/bundles';
import { runClaimRules } from '@assay/run';

async function main(): Promise<void> {
  const [file, key] = process.argv.slice(2) as [string, string];
  const t = performance.now();
  const v = await verifyBundle(createReadStream(file, { highWaterMark: 1 << 20 }), { trustedKeys: [key], claims: runClaimRules() });
  const ms = performance.now() - t;
  process.stdout.write(`${JSON.stringify({ ms, verdict: v.verdict, failure: v.failure, steps: v.steps.map((s) => `${s.name} ${s.checked}`).join(', ') })}\n`);
}

void main();
