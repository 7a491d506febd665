/**
 * `assay bundle export RUN_ID -o FILE`: a run's events, each with its inclusion proof against one signed checkpoint,
 * and the claim they support in a signed DSSE envelope (docs/bundle-format.md). Written to `FILE.partial` and renamed
 * into place when complete, so a reader never sees half a bundle. Events are read and written one batch at a time.
 */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { canonicalJson, type Ledger, type JsonObject, type SigningKey } from '@assay/ledger';
import { recordOf, runStatusView, type RunEventRecord } from '@assay/run';
import { parseCid } from '@assay/snapshots';
import { TAR_END, tarHeader, tarPadding } from '@assay/containers';
import {
  BUNDLE_FORMAT,
  claimOf,
  contentDigest,
  contentLine,
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
  readonly progress?: (done: number, total: number) => void;
}

export interface ExportResult {
  readonly path: string;
  readonly events: number;
  readonly treeSize: number;
  readonly bytes: number;
  readonly claim: ResultClaim;
  readonly contentDigest: string;
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

  // One checkpoint covering every chosen event; every proof is against it.
  const cp = await ledger.checkpoint();
  const manifest: BundleManifest = {
    format: BUNDLE_FORMAT,
    origin: checkpointOrigin(cp.note),
    run: o.run,
    events: chosen.length,
    treeSize: cp.treeSize,
    streams: [...wanted.seen].sort(),
    snapshots: 'none',
    logs: 'none',
  };

  const partial = `${o.out}.partial`;
  const fd = openSync(partial, 'w', 0o644);
  let bytes = 0;
  const put = (b: Buffer | string) => {
    const buf = typeof b === 'string' ? Buffer.from(b) : b;
    writeSync(fd, buf);
    bytes += buf.length;
  };
  const entry = (name: string, content: Buffer) => {
    put(tarHeader({ path: name, type: 'file', mode: 0o644, size: content.length }));
    put(content);
    put(tarPadding(content.length));
  };
  try {
    const lines: string[] = [];
    const manifestBytes = Buffer.from(canonicalJson(manifest as unknown as JsonObject));
    entry(ENTRY.manifest, manifestBytes);
    lines.push(contentLine(ENTRY.manifest, manifestBytes));
    const checkpointBytes = Buffer.from(cp.note);
    entry(ENTRY.checkpoint, checkpointBytes);
    lines.push(contentLine(ENTRY.checkpoint, checkpointBytes));
    // events.jsonl: its size must be in the header before its content, so it is built first (bounded by LIMITS).
    const evLines: Buffer[] = [];
    let done = 0;
    for (const e of chosen) {
      const proof = await ledger.inclusionProof(e.position);
      evLines.push(Buffer.from(eventLine(e.bytes, proof.proof)));
      o.progress?.(++done, chosen.length);
    }
    const eventsBytes = Buffer.concat(evLines);
    entry(ENTRY.events, eventsBytes);
    lines.push(contentLine(ENTRY.events, eventsBytes));

    const content = contentDigest(lines);
    const snapshot = claim.snapshot ? { cid: claim.snapshot, sha256: Buffer.from(parseCid(claim.snapshot).multihash.digest).toString('hex') } : null;
    const payload = Buffer.from(canonicalJson(statementOf(claim, content, snapshot)));
    const dsse: DsseEnvelope = {
      payloadType: DSSE_PAYLOAD_TYPE,
      payload: payload.toString('base64'),
      signatures: [{ keyid: o.publisher.signer, sig: Buffer.from(o.publisher.sign(pae(DSSE_PAYLOAD_TYPE, payload))).toString('base64') }],
    };
    entry(ENTRY.statement, Buffer.from(canonicalJson(dsse as unknown as JsonObject)));
    put(TAR_END);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(partial, o.out);
    return { path: o.out, events: chosen.length, treeSize: cp.treeSize, bytes, claim, contentDigest: content };
  } catch (e) {
    try {
      closeSync(fd);
    } catch {
      /* already closed */
    }
    rmSync(partial, { force: true });
    throw e;
  }
}

function checkpointOrigin(note: string): string {
  return note.slice(0, note.indexOf('\n'));
}
