/**
 * `assay rejudge`: a third party holding the full task (hidden tests included) judges a published bundle's frozen
 * snapshot again and records what it found (docs/rejudge.md). Pure orchestration over injected ports, in this order,
 * each step refusing before the next one starts:
 *
 *   1. verify    the bundle, offline, against the keys the rejudger trusts (verifyBundle): not `valid` → refused
 *   2. task      the task directory's digest must be the claim's `taskDigest` (the same hidden tests, the same image
 *                recipe): otherwise refused
 *   3. snapshot  the claimed snapshot into the rejudger's store: from the bundle's own snapshots.car (streamed out of
 *                the archive to a temporary file, never held), else from `--car FILE`, else already in the store
 *   4. judge     N fresh Judges of that snapshot, under the claim's primary metric
 *   5. record    a RejudgeCompleted event (stream `rejudge-<id>`) in the rejudger's own ledger, and the report
 *
 * Nothing is recorded when a step before 5 refuses. The arithmetic (median, spread, delta, verdict) is
 * `rejudgeVerdict`, pure.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { IdGenerator } from '@assay/core';
import type { JsonObject } from '@assay/ledger';
import { bundleError } from '../bundles.errors';
import { ENTRY, type ResultClaim } from '../domain/bundle-format';
import {
  MAX_REJUDGE_REPEAT,
  REJUDGE_EVENT,
  REJUDGE_STREAM_PREFIX,
  rejudgeEventData,
  rejudgeVerdict,
  type RejudgeScore,
  type RejudgeVerdict,
} from '../domain/rejudge-report';
import type { BundleVerdict } from './verify-bundle';

/** Where the judged snapshot came from. */
export type SnapshotSource = 'bundle' | 'car' | 'store';

export interface RejudgeReport {
  readonly bundle: { readonly digest: string; readonly run: string };
  readonly task: { readonly name: string; readonly digest: string };
  readonly snapshot: { readonly cid: string; readonly source: SnapshotSource };
  readonly round: number | null;
  readonly metric: string | null;
  readonly direction: string | null;
  readonly recordedScore: number | null;
  readonly repeat: number;
  readonly scores: readonly RejudgeScore[];
  readonly median: number | null;
  readonly spread: number | null;
  readonly delta: number | null;
  readonly tolerance: number;
  /** Where the tolerance came from: `--tolerance`, the task's `[metadata.assay_check] tolerance`, or the default 0. */
  readonly toleranceFrom: 'option' | 'task' | 'default';
  readonly verdict: RejudgeVerdict;
  readonly event: { readonly stream: string; readonly position: number; readonly id: string };
}

/** A task directory as the rejudger compiled it. */
export interface CompiledTask {
  readonly name: string;
  /** The whole directory's digest, as RunStarted's `taskDigest` records it. */
  readonly digest: string;
  /** `[metadata.assay_check] tolerance` when the task states one, else null. */
  readonly tolerance: number | null;
}

export interface RejudgePorts {
  /** The bundle's bytes, from the start, each time it is called (read twice: verified, then the CAR streamed out). */
  readBundle(): AsyncIterable<Uint8Array>;
  /** verifyBundle with the rejudger's trusted keys and the run's claim rules. */
  verify(source: AsyncIterable<Uint8Array>): Promise<BundleVerdict>;
  /** Validates and digests the task directory (no Docker). */
  compileTask(): Promise<CompiledTask>;
  /** Opens what the following ports need (the ledger with its keys, the snapshot store); checks the signing key. */
  prepare(): Promise<void>;
  hasSnapshot(cid: string): Promise<boolean>;
  /** Imports a CAR file into the store, every block checked against its CID; returns its roots. */
  importCar(file: string): Promise<{ readonly roots: readonly string[] }>;
  /** N fresh Judges of the snapshot, one after the other, under the primary metric (null: the task's). */
  judge(cid: string, n: number, metric: string | null): Promise<RejudgeScore[]>;
  /** Appends one event to the rejudger's ledger, signed by its controller key. */
  record(stream: string, id: string, type: string, data: JsonObject): Promise<{ readonly position: number }>;
  readonly ids: IdGenerator;
  /** Where the CAR entry is written while it is imported (a fresh directory is made inside, removed after). */
  readonly tempDir: string;
  /** One line per step, for the text output. */
  readonly note?: (line: string) => void;
}

export interface RejudgeOptions {
  readonly repeat: number;
  /** null: the task's tolerance, else 0. */
  readonly tolerance: number | null;
  /** `--car FILE`: the snapshot's blocks when the bundle carries none. */
  readonly carFile: string | null;
}

const NO_SNAPSHOT_HINT =
  'ask the publisher for a bundle exported with --snapshots best (or all), or for a CAR of the snapshot (`assay snapshot export CID -o FILE`) and pass it with --car FILE';

export async function rejudge(p: RejudgePorts, o: RejudgeOptions): Promise<RejudgeReport> {
  if (!Number.isSafeInteger(o.repeat) || o.repeat < 1 || o.repeat > MAX_REJUDGE_REPEAT)
    throw bundleError('BUNDLE_BAD_OPTION', `--repeat must be an integer from 1 to ${MAX_REJUDGE_REPEAT}, got ${o.repeat}`);
  if (o.tolerance !== null && (!Number.isFinite(o.tolerance) || o.tolerance < 0))
    throw bundleError('BUNDLE_BAD_OPTION', `--tolerance must be a finite number >= 0, got ${o.tolerance}`);
  const note = p.note ?? (() => undefined);

  // 1. verify
  const hash = createHash('sha256');
  const source = p.readBundle();
  const v = await p.verify(
    (async function* () {
      for await (const chunk of source) {
        hash.update(chunk);
        yield chunk;
      }
    })(),
  );
  const bundleDigest = `sha256:${hash.digest('hex')}`;
  if (v.verdict !== 'valid' || v.claim === null) {
    const f = v.failure;
    const why = f ? `step ${f.step}: ${f.code}: ${f.message}` : 'no claim';
    if (v.verdict === 'cannot_check')
      throw bundleError('BUNDLE_REJUDGE_CANNOT_CHECK', `the bundle could not be checked (${why}); nothing was judged or recorded`, { failure: f });
    throw bundleError('BUNDLE_REJUDGE_INVALID', `the bundle is invalid (${why}); nothing was judged or recorded`, { failure: f });
  }
  if (v.kind !== 'run')
    throw bundleError(
      'BUNDLE_REJUDGE_NOT_RUN_BUNDLE',
      `the bundle is a re-judge report (${v.rejudge}), not a run's result bundle: re-judge the result bundle it names; nothing was judged or recorded`,
    );
  const claim = v.claim as unknown as ResultClaim;
  note(`verified  ${bundleDigest}: run ${claim.run}, ${v.events} events`);
  if (claim.snapshot === null || claim.claimedScore === null)
    throw bundleError('BUNDLE_REJUDGE_NOTHING_TO_JUDGE', `run ${claim.run} (${claim.status}) selected no round: there is no snapshot or score to re-judge`);

  // 2. task
  const task = await p.compileTask();
  if (task.digest !== claim.taskDigest)
    throw bundleError(
      'BUNDLE_REJUDGE_TASK_MISMATCH',
      `the task directory's digest is ${task.digest}, the claim's task digest is ${claim.taskDigest}: it is not the task run ${claim.run} was judged with; nothing was judged or recorded`,
      { taskDigest: task.digest, claimedTaskDigest: claim.taskDigest },
    );
  note(`task      ${task.name}: ${task.digest} (the claim's)`);

  // 3. snapshot
  await p.prepare();
  const cid = claim.snapshot;
  let from: SnapshotSource;
  const tmp = await mkdtemp(join(p.tempDir, 'assay-rejudge-'));
  try {
    const carFile = join(tmp, 'snapshots.car');
    if (await extractBundleCar(p.readBundle(), carFile)) {
      from = 'bundle';
      const r = await p.importCar(carFile);
      if (!r.roots.includes(cid))
        throw bundleError(
          'BUNDLE_REJUDGE_SNAPSHOT_MISSING',
          `the bundle's snapshots.car does not hold the selected snapshot ${cid} (roots ${r.roots.join(', ')})`,
        );
    } else if (o.carFile !== null) {
      from = 'car';
      const r = await p.importCar(o.carFile);
      if (!r.roots.includes(cid) && !(await p.hasSnapshot(cid)))
        throw bundleError(
          'BUNDLE_REJUDGE_SNAPSHOT_MISSING',
          `--car ${o.carFile} does not hold the selected snapshot ${cid} (its roots: ${r.roots.join(', ') || 'none'})`,
        );
    } else if (await p.hasSnapshot(cid)) from = 'store';
    else throw bundleError('BUNDLE_REJUDGE_SNAPSHOT_MISSING', `the bundle carries no snapshots and ${cid} is not in this home's store: ${NO_SNAPSHOT_HINT}`);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  note(`snapshot  ${cid} (${from === 'bundle' ? "from the bundle's snapshots.car" : from === 'car' ? `from ${o.carFile}` : 'already in the store'})`);

  // 4. judge
  const scores = await p.judge(cid, o.repeat, claim.metric);
  const tolerance = o.tolerance ?? task.tolerance ?? 0;
  const toleranceFrom = o.tolerance !== null ? 'option' : task.tolerance !== null ? 'task' : 'default';
  const a = rejudgeVerdict(claim.claimedScore, scores, tolerance);

  // 5. record
  const id = p.ids.next();
  const stream = `${REJUDGE_STREAM_PREFIX}${id}`;
  const data = rejudgeEventData({ claim, bundleDigest, scores, tolerance, ...a });
  const { position } = await p.record(stream, id, REJUDGE_EVENT, data);
  return {
    bundle: { digest: bundleDigest, run: claim.run },
    task: { name: task.name, digest: task.digest },
    snapshot: { cid, source: from },
    round: claim.round,
    metric: claim.metric,
    direction: claim.direction,
    recordedScore: claim.claimedScore,
    repeat: o.repeat,
    scores,
    median: a.median,
    spread: a.spread,
    delta: a.delta,
    tolerance,
    toleranceFrom,
    verdict: a.verdict,
    event: { stream, position, id },
  };
}

const BLOCK = 512;
/** More entries than any bundle version has: an archive that goes on is not read to its end. */
const MAX_ENTRIES = 16;

/**
 * Streams a bundle's `assay-bundle/snapshots.car` entry to `file` (created, never overwritten); false when the bundle
 * carries none. The archive's entries come in a fixed order (docs/bundle-format.md, "The file"), the CAR after the
 * events (and the logs, when carried) and before the statement: headers are read one after the other, the entries
 * before the CAR skipped, the CAR written chunk by chunk as it arrives; reading
 * stops after it. Only the ustar name and size fields are read: the bundle was verified, and the CAR's blocks are
 * checked again against their CIDs when they are imported.
 */
export async function extractBundleCar(source: AsyncIterable<Uint8Array>, file: string): Promise<boolean> {
  const it = source[Symbol.asyncIterator]();
  let buf: Buffer = Buffer.alloc(0);
  let done = false;
  const more = async (): Promise<boolean> => {
    if (done) return false;
    const r = await it.next();
    if (r.done) {
      done = true;
      return false;
    }
    buf = buf.length === 0 ? Buffer.from(r.value) : Buffer.concat([buf, r.value]);
    return true;
  };
  const take = async (n: number): Promise<Buffer> => {
    while (buf.length < n) if (!(await more())) throw bundleError('BUNDLE_UNREADABLE', 'the bundle ended inside an entry');
    const out = buf.subarray(0, n);
    buf = buf.subarray(n);
    return out;
  };
  /** Passes `n` bytes to `sink` as they arrive (never more than one chunk held). */
  const pass = async (n: number, sink: ((b: Buffer) => Promise<void>) | null): Promise<void> => {
    let left = n;
    while (left > 0) {
      if (buf.length === 0 && !(await more())) throw bundleError('BUNDLE_UNREADABLE', 'the bundle ended inside an entry');
      const part = buf.subarray(0, Math.min(left, buf.length));
      buf = buf.subarray(part.length);
      left -= part.length;
      if (sink) await sink(part);
    }
  };
  try {
    // every entry before the CAR is skipped, whatever it is (a later version's optional entries included)
    for (let i = 0; i < MAX_ENTRIES; i++) {
      const header = await take(BLOCK);
      if (header.every((b) => b === 0)) return false;
      const name = header.subarray(0, 100).toString('latin1').replace(/\0.*$/s, '');
      const m = /^([0-7]{11})\0$/.exec(header.subarray(124, 136).toString('latin1'));
      if (!m) throw bundleError('BUNDLE_UNREADABLE', `the header of ${name} has no valid size field`);
      const size = parseInt(m[1] as string, 8);
      const padded = Math.ceil(size / BLOCK) * BLOCK;
      if (name === ENTRY.statement) return false;
      if (name !== ENTRY.snapshots) {
        await pass(padded, null);
        continue;
      }
      const fh = await open(file, 'wx', 0o600);
      try {
        await pass(size, async (b) => {
          await fh.write(b);
        });
        await fh.sync();
      } finally {
        await fh.close();
      }
      return true;
    }
    return false;
  } finally {
    await it.return?.();
  }
}
