/**
 * `assay bundle export RUN_ID -o FILE`: a run's events, each with its inclusion proof against one signed checkpoint,
 * and the claim they support in a signed DSSE envelope (docs/bundle-format.md). Written to `FILE.partial` and renamed
 * into place when complete, so a reader never sees half a bundle. Events are read and written one batch at a time.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { canonicalJson, type Ledger, type JsonObject, type SigningKey } from '@assay/ledger';
import { recordOf, runStatusView, type RunEventRecord } from '@assay/run';
import { parseCid } from '@assay/snapshots';
import { TAR_END, tarHeader, tarPadding } from '@assay/containers';
import {
  BUNDLE_FORMAT,
  claimOf,
  contentDigest,
  contentLine,
  contentLineOf,
  snapshotRootsFor,
  type SnapshotMode,
  DSSE_PAYLOAD_TYPE,
  ENTRY,
  eventLine,
  pae,
  statementOf,
  type BundleManifest,
  type DsseEnvelope,
  type ResultClaim,
} from '../domain/bundle-format';
import { bundleError } from '../bundles.errors';
import { bundleStreamsOf } from '../domain/bundle-streams';

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
}

export interface ExportResult {
  readonly path: string;
  readonly events: number;
  readonly treeSize: number;
  readonly bytes: number;
  readonly claim: ResultClaim;
  readonly contentDigest: string;
  readonly snapshotRoots: readonly string[];
}

export async function exportBundle(ledger: Ledger, o: ExportOptions): Promise<ExportResult> {
  // Which events: one scan of the log picks the streams the run's claim depends on.
  const chosen: Array<{ position: number; bytes: Uint8Array }> = [];
  const runEvents: RunEventRecord[] = [];
  const wanted = bundleStreamsOf(o.run);
  for await (const batch of ledger.store.readAll({ fromPosition: 0, batchSize: 1000 })) {
    for (const e of batch) {
      const rec = recordOf(e);
      if (!wanted.accepts(rec)) continue;
      chosen.push({ position: e.position, bytes: e.bytes });
      if (rec.stream === `run-${o.run}` || rec.stream.startsWith('judge-')) runEvents.push(rec);
    }
  }
  if (!runEvents.some((e) => e.stream === `run-${o.run}`)) throw bundleError('BUNDLE_RUN_NOT_FOUND', `no run ${o.run} in this ledger`, { run: o.run });
  const view = runStatusView(o.run, runEvents);
  const started = runEvents.find((e) => e.type === 'RunStarted')?.data as { taskDigest: string; fingerprint: string; model?: string; selection: JsonObject };
  const claim0 = claimOf(view, {
    taskDigest: started.taskDigest,
    fingerprint: started.fingerprint,
    model: started.model ?? null,
    selection: started.selection,
  });
  if (!claim0) throw bundleError('BUNDLE_RUN_NOT_ENDED', `run ${o.run} has not ended (no RunCompleted): there is no result to claim yet`, { run: o.run });
  const completed = runEvents.find((e) => e.type === 'RunCompleted')?.data as { bestSnapshot: string | null };
  const claim: ResultClaim = { ...claim0, snapshot: completed.bestSnapshot };

  const mode: SnapshotMode = o.snapshots ?? 'none';
  const snapshotRoots = snapshotRootsFor(
    mode,
    runEvents.filter((e) => e.stream === `run-${o.run}`),
  );
  if (snapshotRoots.length > 0 && !o.writeCar) throw bundleError('BUNDLE_BAD_OPTION', `--snapshots ${mode} needs the snapshot store`);

  // One checkpoint covering every chosen event; every proof is against it.
  const cp = await ledger.checkpoint();
  const manifest: BundleManifest = {
    format: BUNDLE_FORMAT,
    origin: checkpointOrigin(cp.note),
    run: o.run,
    events: chosen.length,
    treeSize: cp.treeSize,
    streams: [...wanted.seen].sort(),
    snapshots: mode,
    snapshotRoots,
    logs: 'none',
  };

  const partial = `${o.out}.partial`;
  const carFile = `${o.out}.car.partial`;
  const fd = openSync(partial, 'w', 0o644);
  let bytes = 0;
  const put = (b: Buffer | string) => {
    const buf = typeof b === 'string' ? Buffer.from(b) : b;
    writeSync(fd, buf);
    bytes += buf.length;
  };
  const lines: string[] = [];
  const entry = (name: string, content: Buffer) => {
    put(tarHeader({ path: name, type: 'file', mode: 0o644, size: content.length }));
    put(content);
    put(tarPadding(content.length));
    lines.push(contentLine(name, content));
  };
  /** An entry streamed from a file (a snapshot CAR may be larger than memory). */
  const fileEntry = (name: string, file: string) => {
    const size = statSync(file).size;
    put(tarHeader({ path: name, type: 'file', mode: 0o644, size }));
    const hash = createHash('sha256');
    const src = openSync(file, 'r');
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (let at = 0; at < size;) {
        const n = readSync(src, buf, 0, Math.min(buf.length, size - at), at);
        if (n <= 0) throw new Error(`${file} shrank while it was copied into the bundle`);
        hash.update(buf.subarray(0, n));
        put(buf.subarray(0, n));
        at += n;
      }
    } finally {
      closeSync(src);
    }
    put(tarPadding(size));
    lines.push(contentLineOf(name, size, hash.digest('hex')));
  };
  try {
    entry(ENTRY.manifest, Buffer.from(canonicalJson(manifest as unknown as JsonObject)));
    entry(ENTRY.checkpoint, Buffer.from(cp.note));
    // events.jsonl: its size must be in the header before its content, so it is built first (bounded by LIMITS).
    const evLines: Buffer[] = [];
    let done = 0;
    for (const e of chosen) {
      const proof = await ledger.inclusionProof(e.position);
      evLines.push(Buffer.from(eventLine(e.bytes, proof.proof)));
      o.progress?.(++done, chosen.length);
    }
    entry(ENTRY.events, Buffer.concat(evLines));
    if (snapshotRoots.length > 0) {
      await (o.writeCar as NonNullable<ExportOptions['writeCar']>)(snapshotRoots, carFile);
      fileEntry(ENTRY.snapshots, carFile);
      rmSync(carFile, { force: true });
    }

    const content = contentDigest(lines);
    const snapshot = claim.snapshot ? { cid: claim.snapshot, sha256: Buffer.from(parseCid(claim.snapshot).multihash.digest).toString('hex') } : null;
    const payload = Buffer.from(canonicalJson(statementOf(claim, content, snapshot)));
    const dsse: DsseEnvelope = {
      payloadType: DSSE_PAYLOAD_TYPE,
      payload: payload.toString('base64'),
      signatures: [{ keyid: o.publisher.signer, sig: Buffer.from(o.publisher.sign(pae(DSSE_PAYLOAD_TYPE, payload))).toString('base64') }],
    };
    const statement = Buffer.from(canonicalJson(dsse as unknown as JsonObject));
    put(tarHeader({ path: ENTRY.statement, type: 'file', mode: 0o644, size: statement.length }));
    put(statement);
    put(tarPadding(statement.length));
    put(TAR_END);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(partial, o.out);
    return { path: o.out, events: chosen.length, treeSize: cp.treeSize, bytes, claim, contentDigest: content, snapshotRoots };
  } catch (e) {
    try {
      closeSync(fd);
    } catch {
      /* already closed */
    }
    rmSync(partial, { force: true });
    rmSync(carFile, { force: true });
    throw e;
  }
}

function checkpointOrigin(note: string): string {
  return note.slice(0, note.indexOf('\n'));
}
