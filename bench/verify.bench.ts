/**
 * `npm run bench:verify`: `assay verify` of a result bundle against what the hardware's primitives can do for the same
 * work, in one run.
 *
 * The bundle: a run of `--rounds` rounds (default 1,700: 10,205 events) recorded by the real run service on a
 * real SQLite ledger, its Judge a scripted fake, and its snapshot (every round submits the same workspace) of
 * `--mb` MB of random files (default 200), carried in the bundle's CAR. The figure is the time verifyBundle takes on
 * the file. The baseline ("the bound") is the raw work no verifier can skip, measured here on the same bytes:
 * Ed25519 verification of every event's signature (node:crypto), and SHA-256 of every byte of the bundle. The ratio
 * bound / figure is how close the verifier comes to it (target at least 0.75). The bound is one thread's work; the
 * verifier spreads the signature arithmetic over worker threads (one per core but one), so on more cores it can pass 1.
 * ASSAY_BENCH_KEEP=FILE keeps a copy of the bundle (for profiling `assay verify` on it).
 */
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { copyFileSync, createReadStream, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { randomIds, systemClock, ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome, nodeEd25519, parseEnvelope, parseVerifierKey, type SigningKey, initLedgerHome } from '@assay/ledger';
import {
  buildRunRules,
  FakeJudge,
  LedgerRunLedger,
  SubmissionService,
  taskIdOf,
  tokenSha256,
  type Snapshotter,
  type WorkspaceChange,
  type WorkspaceSnapshot,
} from '@assay/run';
import { parseCid, SnapshotHome } from '@assay/snapshots';
import { exportBundle } from '@assay/bundles';
import { arg, fmt, now, report } from './bench-util';

/** Every round submits the same workspace: the big snapshot made once. */
class FixedSnapshotter implements Snapshotter {
  constructor(private readonly s: WorkspaceSnapshot) {}
  async snapshot(): Promise<WorkspaceSnapshot> {
    return this.s;
  }
  async *changes(): AsyncIterable<WorkspaceChange> {}
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function main(): Promise<void> {
  const rounds = arg('rounds', 1700);
  const mb = arg('mb', 200);
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-verify-'));
  try {
    const home = join(dir, 'home');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.bench/verify' });

    // the workspace: `mb` MB of random files, snapshotted into the home's store
    let t = now();
    const ws = join(dir, 'ws');
    mkdirSync(ws);
    const fileMb = 8;
    for (let i = 0; i * fileMb < mb; i++) writeFileSync(join(ws, `data-${i}.bin`), randomBytes(Math.min(fileMb, mb - i * fileMb) * 1024 * 1024));
    const store = new SnapshotHome(home);
    const snap = await store.create(ws, { previous: null, label: null });
    await store.close();
    process.stdout.write(`snapshot: ${mb} MB, ${snap.files} files, ${snap.rootCid} (${fmt((now() - t) / 1000, 1)} s)\n`);

    // the run: the real run service on the SQLite ledger, a scripted Judge
    t = now();
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    const ledger = new LedgerRunLedger(h.ledger);
    const ids = new SequentialIds('b0000000-0000-4000-8000');
    const clock = new ManualClock('2026-12-03T09:00:00.000Z');
    const scores = Array.from({ length: rounds }, (_, i) => ({ status: 'completed' as const, rewards: { loss: 1 / (1 + ((i * 7919) % rounds)) } }));
    const judge = new FakeJudge((stream, events, expected) => ledger.appendTo(stream, events, expected), ids, scores);
    const snapshotter = new FixedSnapshotter({
      root: snap.rootCid,
      files: snap.files,
      bytes: snap.bytes,
      durationMs: 1,
      policyDigest: `sha256:${'3'.repeat(64)}`,
      source: ws,
      flagged: [],
    });
    const token = 'bench-token';
    const { protocol, selection } = buildRunRules({
      settings: { primaryMetric: 'loss', direction: 'minimize', maxSubmissions: rounds, cooldownSec: 0, timeBudgetSec: null, gpuBudgetSec: null },
      agentTimeoutSec: null,
      editablePaths: null,
      tokenSha256: tokenSha256(token),
      fingerprintInput: null,
    });
    const run = 'bench-verify';
    const svc = await new SubmissionService({ run, ledger, snapshotter, judge, clock, ids }).start({
      run,
      task: taskIdOf('bench/verify'),
      taskDigest: `sha256:${'4'.repeat(64)}`,
      agent: 'bench',
      model: null,
      fingerprint: `sha256:${'5'.repeat(64)}`,
      protocol,
      selection,
    });
    const auth = { authorization: `Bearer ${token}`, hasBody: false, hasQuery: false };
    for (let i = 0; i < rounds; i++) {
      clock.advance(1000);
      await svc.submit(auth);
    }
    await svc.complete();
    const key = h.ledger.key('controller') as SigningKey;
    process.stdout.write(`run: ${rounds} rounds, ${await h.db.events.size()} events in the ledger (${fmt((now() - t) / 1000, 1)} s)\n`);

    // the bundle
    t = now();
    const file = join(dir, 'run.bundle');
    const exported = await exportBundle(h.ledger, {
      run,
      out: file,
      publisher: key,
      snapshots: 'best',
      writeCar: async (roots, out) => {
        const s = new SnapshotHome(home);
        try {
          await s.exportCar(
            roots.map((r) => parseCid(r)),
            out,
          );
        } finally {
          await s.close();
        }
      },
    });
    await h.close();
    const size = statSync(file).size;
    if (process.env.ASSAY_BENCH_KEEP) copyFileSync(file, process.env.ASSAY_BENCH_KEEP);
    process.stdout.write(`bundle: ${exported.events} events, ${fmt(size / 1024 / 1024, 1)} MB (export ${fmt((now() - t) / 1000, 1)} s)\n`);

    // the figure: verification of the file, streamed from disk, in a fresh process (as `assay verify` runs); the
    // median of three
    const verifyRuns: number[] = [];
    for (let i = 0; i < 3; i++) {
      const child = spawnSync(process.execPath, [join(__dirname, 'verify-child.js'), file, key.publicKeyText], { encoding: 'utf8' });
      const line = child.stdout.trim().split('\n').pop() ?? '';
      const v = (line.startsWith('{') ? JSON.parse(line) : null) as { ms: number; verdict: string; failure: unknown; steps: string } | null;
      if (!v || v.verdict !== 'valid') throw new Error(`the bench bundle did not verify: ${line || child.stderr}`);
      if (i === 0) process.stdout.write(`verify: ${v.steps}\n`);
      verifyRuns.push(v.ms);
    }
    const verifyMs = median(verifyRuns);

    // the bound: every event's Ed25519 signature, and SHA-256 of every byte of the bundle
    const envelopes = readFileSync(file)
      .toString('latin1')
      .split('\n')
      .filter((l) => l.startsWith('{"envelope":"') || l.includes('{"envelope":"'))
      .map((l) => Buffer.from(JSON.parse(l.slice(l.indexOf('{"envelope":"'))).envelope, 'base64'));
    const parsed = envelopes.map((w) => parseEnvelope(w));
    const keys = new Map<string, Uint8Array>();
    for (const p of parsed)
      if (p.envelope.type === 'KeyRegistered') keys.set(p.envelope.data.keyId as string, parseVerifierKey(p.envelope.data.publicKey as string).publicKey);
    // the bound, also the median of three
    let ok = 0;
    const sigRuns: number[] = [];
    const shaRuns: number[] = [];
    for (let i = 0; i < 3; i++) {
      t = now();
      ok = 0;
      for (const p of parsed) if (nodeEd25519.verify(keys.get(p.envelope.signer) as Uint8Array, p.signing, p.signature)) ok++;
      sigRuns.push(now() - t);
      t = now();
      const hash = createHash('sha256');
      for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
      hash.digest();
      shaRuns.push(now() - t);
    }
    if (ok !== parsed.length) throw new Error(`baseline: ${parsed.length - ok} of ${parsed.length} signatures did not verify`);
    const sigMs = median(sigRuns);
    const shaMs = median(shaRuns);
    const bound = sigMs + shaMs;
    process.stdout.write(
      `bound: Ed25519 verify of ${parsed.length} signatures ${fmt(sigMs)} ms + SHA-256 of ${fmt(size / 1024 / 1024, 1)} MB ${fmt(shaMs)} ms = ${fmt(bound)} ms\n`,
    );
    const met = report([
      {
        name: 'assay verify (bundle)',
        figure: (parsed.length / verifyMs) * 1000,
        baseline: (parsed.length / bound) * 1000,
        unit: 'events/s',
        target: 0.75,
        baselineName: 'the bound: raw Ed25519 + SHA-256 of the same work',
      },
    ]);
    process.stdout.write(`verify: ${fmt(verifyMs)} ms; bound ${fmt(bound)} ms; ratio bound/verify ${(bound / verifyMs).toFixed(3)}\n`);
    if (!met) process.exitCode = 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();
