/**
 * `assay bundle export RUN_ID -o FILE`: a run's events, each with its inclusion proof against one signed checkpoint,
 * and the claim they support in a signed DSSE envelope (docs/bundle-format.md), written by BundleWriter (whole, then
 * renamed into place).
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson, type Ledger, type JsonObject, type SigningKey } from '@assay/ledger';
import { recordedJudgeLogs, recordedTranscripts, recordOf, type RunEventRecord } from '@assay/run';
import { REDACTION_RULES, redactLog } from '../domain/log-redaction';
import { parseCid } from '@assay/snapshots';
import {
  BUNDLE_FORMAT,
  LIMITS,
  logLine,
  type LogMode,
  snapshotRootsFor,
  type SnapshotMode,
  ENTRY,
  statementOf,
  type BundleManifest,
  type ResultClaim,
  dependencyStreamsOf,
  supportedClaim,
  type StartedData,
} from '../domain/bundle-format';
import { bundleError } from '../bundles.errors';
import { bundleStreamsOf } from '../domain/bundle-streams';
import { BundleWriter, openOwnCheckpoint, provedEvents } from './bundle-writer';

export interface ExportOptions {
  readonly run: string;
  readonly out: string;
  /** Signs the DSSE envelope (the controller key, or a key of the publisher role). */
  readonly publisher: SigningKey;
  /** Which snapshots' blocks to carry (default none). Not none needs `writeCar`. */
  readonly snapshots?: SnapshotMode;
  /** Writes a CAR v1 of these roots (in this order) to a file (the snapshot store's export). */
  readonly writeCar?: (roots: readonly string[], file: string) => Promise<void>;
  readonly progress?: (done: number, total: number) => void;
  /**
   * The checkpoint every proof is against: a note this ledger's controller key signed, kept with any witnesses'
   * cosignature lines (`<home>/ledger/checkpoint.cosigned`). Default: one signed now. Only events it covers are
   * carried, so it must have been signed after the run ended.
   */
  readonly checkpoint?: string;
  /** Which logs to carry (default none). Not none needs `runDir`. */
  readonly logs?: LogMode;
  /** The run's directory (`<home>/runs/<run>`): `agent/session-<n>.log`, `logs/round-<n>.log`. */
  readonly runDir?: string;
  /**
   * `--task DIR`: writes a CAR of the task directory's snapshot to a file, its `tests/` and `solution/` withheld
   * (WITHHELD_TASK_ENTRIES), and returns its root, which must be the run's task digest.
   */
  readonly writeTaskCar?: (file: string) => Promise<{ readonly root: string }>;
  /** For `--logs redacted`: this machine's host names (the `host` rule). */
  readonly hostnames?: readonly string[];
}

export interface ExportResult {
  readonly path: string;
  readonly events: number;
  readonly treeSize: number;
  readonly bytes: number;
  readonly claim: ResultClaim;
  readonly contentDigest: string;
  readonly snapshotRoots: readonly string[];
  /** Logs carried (0 for --logs none). */
  readonly logs: number;
}

export async function exportBundle(ledger: Ledger, o: ExportOptions): Promise<ExportResult> {
  // Logs first: publishing them redacted records LogRedacted events, which the checkpoint must then cover.
  const logMode: LogMode = o.logs ?? 'none';
  const logs = logMode === 'none' ? [] : await collectLogs(ledger, o, logMode);

  // The checkpoint: the bundle is the log as that checkpoint signs it, whatever is appended meanwhile.
  const note = o.checkpoint ?? (await ledger.checkpoint()).note;
  const cp = openOwnCheckpoint(ledger, note);

  // Which events: one scan of the log up to the checkpoint picks the streams the run's claim depends on.
  // Dependency streams (the task's registration and baselines, image builds) mostly come before RunStarted: they are
  // held as candidates (few) and picked once the run's events say which task and images it used.
  const chosen: Array<{ position: number; bytes: Uint8Array }> = [];
  const runEvents: RunEventRecord[] = [];
  const candidates: Array<{ rec: RunEventRecord; bytes: Uint8Array }> = [];
  const wanted = bundleStreamsOf(o.run);
  for await (const batch of ledger.store.readAll({ fromPosition: 0, toPosition: cp.treeSize, batchSize: 1000 })) {
    for (const e of batch) {
      const rec = recordOf(e);
      if (!wanted.accepts(rec)) {
        // dependency streams, and standalone Judges (a baseline's repeats): few next to a run's events
        if (/^(task|baseline|image)-/.test(rec.stream) || (rec.stream.startsWith('judge-') && !('run' in rec.data))) candidates.push({ rec, bytes: e.bytes });
        continue;
      }
      chosen.push({ position: e.position, bytes: e.bytes });
      if (rec.stream === `run-${o.run}` || rec.stream.startsWith('judge-')) runEvents.push(rec);
    }
  }
  const deps = dependencyStreamsOf(
    runEvents,
    candidates.map((c) => c.rec),
  );
  const depEvents = candidates.filter((c) => deps.has(c.rec.stream));
  for (const c of depEvents) chosen.push({ position: c.rec.position, bytes: c.bytes });
  chosen.sort((a, b) => a.position - b.position);
  if (!runEvents.some((e) => e.stream === `run-${o.run}`)) throw bundleError('BUNDLE_RUN_NOT_FOUND', `no run ${o.run} in this ledger`, { run: o.run });
  const started = runEvents.find((e) => e.type === 'RunStarted')?.data as unknown as StartedData;
  const claim = supportedClaim(
    o.run,
    runEvents,
    [...runEvents, ...depEvents.map((c) => c.rec)].sort((a, b) => a.position - b.position),
    true,
  );
  if (!claim)
    throw bundleError(
      'BUNDLE_RUN_NOT_ENDED',
      o.checkpoint !== undefined
        ? `the checkpoint (tree size ${cp.treeSize}) was signed before run ${o.run} ended: have a newer checkpoint cosigned (assay ledger checkpoint --witness...), or export without it`
        : `run ${o.run} has not ended (no RunCompleted): there is no result to claim yet`,
      { run: o.run },
    );

  const mode: SnapshotMode = o.snapshots ?? 'none';
  const snapshotRoots = snapshotRootsFor(
    mode,
    runEvents.filter((e) => e.stream === `run-${o.run}`),
  );
  if (snapshotRoots.length > 0 && !o.writeCar) throw bundleError('BUNDLE_BAD_OPTION', `--snapshots ${mode} needs the snapshot store`);

  const manifest: BundleManifest = {
    format: BUNDLE_FORMAT,
    origin: cp.origin,
    run: o.run,
    events: chosen.length,
    treeSize: cp.treeSize,
    streams: [...wanted.seen, ...deps].sort(),
    snapshots: mode,
    snapshotRoots,
    logs: logMode,
    task: o.writeTaskCar ? 'public' : 'none',
  };

  const carFile = `${o.out}.car.partial`;
  const taskFile = `${o.out}.task.partial`;
  const w = new BundleWriter(o.out);
  try {
    w.entry(ENTRY.manifest, Buffer.from(canonicalJson(manifest as unknown as JsonObject)));
    w.entry(ENTRY.checkpoint, Buffer.from(note));
    // events.jsonl: its size must be in the header before its content, so it is built first (bounded by LIMITS).
    w.entry(ENTRY.events, await provedEvents(ledger, cp, chosen, o.progress));
    if (logMode !== 'none') w.entry(ENTRY.logs, Buffer.from(logs.map((l) => logLine(l.log, l.content)).join('')));
    if (o.writeTaskCar) {
      const { root } = await o.writeTaskCar(taskFile);
      if (root !== started.taskDigest)
        throw bundleError(
          'BUNDLE_TASK_MISMATCH',
          `the task directory's digest is ${root}, run ${o.run} recorded ${started.taskDigest}: it is not the task the run was judged with`,
          { taskDigest: root, runTaskDigest: started.taskDigest },
        );
      w.fileEntry(ENTRY.task, taskFile);
      rmSync(taskFile, { force: true });
    }
    if (snapshotRoots.length > 0) {
      await (o.writeCar as NonNullable<ExportOptions['writeCar']>)(snapshotRoots, carFile);
      w.fileEntry(ENTRY.snapshots, carFile);
      rmSync(carFile, { force: true });
    }
    const content = w.contentDigest();
    const snapshot = claim.snapshot ? { cid: claim.snapshot, sha256: Buffer.from(parseCid(claim.snapshot).multihash.digest).toString('hex') } : null;
    w.finish(statementOf(claim, content, snapshot), o.publisher);
    return { path: o.out, events: chosen.length, treeSize: cp.treeSize, bytes: w.bytes, claim, contentDigest: content, snapshotRoots, logs: logs.length };
  } catch (e) {
    w.abort();
    rmSync(carFile, { force: true });
    rmSync(taskFile, { force: true });
    throw e;
  }
}

/**
 * The run's recorded logs (every transcript session the ledger has a digest for, every round's Judge log), read from
 * the run directory and checked against the recorded digests: a file that is missing or differs is not published.
 * Redacted: each copy under `assay-redact/1`, linked to its original by a LogRedacted event (recorded once; an
 * export against a given checkpoint cannot record, so it needs them recorded already).
 */
async function collectLogs(ledger: Ledger, o: ExportOptions, mode: Exclude<LogMode, 'none'>): Promise<Array<{ log: string; content: Buffer }>> {
  if (!o.runDir) throw bundleError('BUNDLE_BAD_OPTION', `--logs ${mode} needs the run's directory`);
  const wanted: Array<{ log: string; file: string; digest: string }> = [];
  for (const [session, d] of [...(await recordedTranscripts(ledger, o.run))].sort((a, b) => a[0] - b[0]))
    wanted.push({ log: `transcript/session-${session}`, file: join(o.runDir, 'agent', `session-${session}.log`), digest: d.digest });
  for (const [round, d] of [...(await recordedJudgeLogs(ledger, o.run))].sort((a, b) => a[0] - b[0]))
    wanted.push({ log: `judge/round-${round}`, file: join(o.runDir, 'logs', `round-${round}.log`), digest: d.digest });
  const existing = new Set<string>();
  if (mode === 'redacted')
    for await (const e of ledger.store.readStream(`redaction-${o.run}`)) {
      const d = recordOf(e).data as { log?: unknown; original?: unknown; redacted?: unknown; rules?: unknown };
      if (e.type === 'LogRedacted') existing.add(`${String(d.log)} ${String(d.original)} ${String(d.redacted)} ${String(d.rules)}`);
    }
  const out: Array<{ log: string; content: Buffer }> = [];
  const toRecord: JsonObject[] = [];
  let total = 0;
  for (const w of wanted) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(w.file);
    } catch (e) {
      throw bundleError(
        'BUNDLE_LOG_MISSING',
        `${w.log}: cannot read ${w.file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); the ledger records its digest ${w.digest}`,
        {
          log: w.log,
        },
      );
    }
    const got = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    if (got !== w.digest)
      throw bundleError('BUNDLE_LOG_MISMATCH', `${w.log}: ${w.file} has digest ${got}, the ledger recorded ${w.digest}: it changed after it was recorded`, {
        log: w.log,
      });
    let content = bytes;
    if (mode === 'redacted') {
      const r = redactLog(bytes, { hostnames: o.hostnames ?? [] });
      content = r.bytes;
      const redacted = `sha256:${createHash('sha256').update(content).digest('hex')}`;
      if (!existing.has(`${w.log} ${w.digest} ${redacted} ${REDACTION_RULES}`))
        toRecord.push({ run: o.run, log: w.log, original: w.digest, redacted, rules: REDACTION_RULES, replaced: r.total });
    }
    total += Math.ceil(content.length / 3) * 4 + 200;
    if (total > LIMITS.logsBytes)
      throw bundleError('BUNDLE_BAD_OPTION', `the run's logs are more than ${LIMITS.logsBytes} bytes in a bundle; export with --logs none`);
    out.push({ log: w.log, content });
  }
  if (toRecord.length > 0) {
    if (o.checkpoint !== undefined)
      throw bundleError(
        'BUNDLE_LOGS_NOT_RECORDED',
        `${toRecord.length} redacted log(s) have no LogRedacted event before the given checkpoint: export once without it to record them, have a newer checkpoint cosigned, then export against that`,
      );
    await ledger.append(
      `redaction-${o.run}`,
      toRecord.map((data) => ({ type: 'LogRedacted', data })),
      'any',
    );
  }
  return out;
}
