/**
 * `assay bundle export-rejudge ID -o FILE`: a re-judge report's own bundle (docs/bundle-format.md, "Re-judge report
 * bundles"). The rejudger's ledger is the source: its key streams and `rejudge-<id>` (one RejudgeCompleted), each
 * event with its inclusion proof against one checkpoint the rejudger's controller key signed, and a statement whose
 * predicate is the report's data as recorded, signed by the rejudger's controller or publisher key. Anyone holding
 * the rejudger's root public key checks it with `assay verify`, offline.
 */
import { canonicalJson, type JsonObject, type Ledger, type SigningKey } from '@assay/ledger';
import { recordOf } from '@assay/run';
import { parseCid } from '@assay/snapshots';
import { ENTRY, REJUDGE_BUNDLE_FORMAT, rejudgeStatementOf, type RejudgeBundleManifest } from '../domain/bundle-format';
import { rejudgeBundleStreamsOf } from '../domain/bundle-streams';
import { REJUDGE_EVENT, REJUDGE_STREAM_PREFIX, rejudgeReportProblem } from '../domain/rejudge-report';
import { bundleError } from '../bundles.errors';
import { BundleWriter, openOwnCheckpoint, provedEvents } from './bundle-writer';

export interface ExportRejudgeOptions {
  /** The re-judging's id (`assay rejudge` prints it; its stream is `rejudge-<id>`). */
  readonly rejudge: string;
  readonly out: string;
  /** Signs the DSSE envelope (the controller key, or a key of the publisher role). */
  readonly publisher: SigningKey;
  /** The checkpoint to prove against (a cosigned one); default: one signed now. */
  readonly checkpoint?: string;
}

export interface ExportRejudgeResult {
  readonly path: string;
  readonly events: number;
  readonly treeSize: number;
  readonly bytes: number;
  readonly contentDigest: string;
  /** The RejudgeCompleted data, as the statement's predicate carries it. */
  readonly report: JsonObject;
}

export async function exportRejudgeBundle(ledger: Ledger, o: ExportRejudgeOptions): Promise<ExportRejudgeResult> {
  const note = o.checkpoint ?? (await ledger.checkpoint()).note;
  const cp = openOwnCheckpoint(ledger, note);
  const stream = `${REJUDGE_STREAM_PREFIX}${o.rejudge}`;
  const chosen: Array<{ position: number; bytes: Uint8Array }> = [];
  const reports: Array<{ id: string; type: string; data: JsonObject }> = [];
  const wanted = rejudgeBundleStreamsOf(o.rejudge);
  for await (const batch of ledger.store.readAll({ fromPosition: 0, toPosition: cp.treeSize, batchSize: 1000 })) {
    for (const e of batch) {
      const rec = recordOf(e);
      if (!wanted.accepts(rec)) continue;
      chosen.push({ position: e.position, bytes: e.bytes });
      if (rec.stream === stream) reports.push({ id: rec.id, type: rec.type, data: rec.data as JsonObject });
    }
  }
  if (reports.length === 0)
    throw bundleError(
      'BUNDLE_REJUDGE_NOT_FOUND',
      o.checkpoint !== undefined
        ? `no re-judging ${o.rejudge} at or before the given checkpoint (tree size ${cp.treeSize}) of this ledger`
        : `no re-judging ${o.rejudge} in this ledger (assay rejudge prints the id; its stream is ${stream})`,
      { rejudge: o.rejudge },
    );
  const report = reports[0] as { id: string; type: string; data: JsonObject };
  // what verify will refuse is refused here, with the same words
  const problem =
    reports.length !== 1 || report.type !== REJUDGE_EVENT || report.id !== o.rejudge
      ? `${stream} is not one RejudgeCompleted with id ${o.rejudge}`
      : rejudgeReportProblem(report.data);
  if (problem)
    throw bundleError('BUNDLE_REJUDGE_NOT_REPORT', `re-judging ${o.rejudge} cannot be published as a report bundle: ${problem}`, { rejudge: o.rejudge });

  const manifest: RejudgeBundleManifest = {
    format: REJUDGE_BUNDLE_FORMAT,
    origin: cp.origin,
    rejudge: o.rejudge,
    events: chosen.length,
    treeSize: cp.treeSize,
    streams: [...wanted.seen].sort(),
  };
  const w = new BundleWriter(o.out);
  try {
    w.entry(ENTRY.manifest, Buffer.from(canonicalJson(manifest as unknown as JsonObject)));
    w.entry(ENTRY.checkpoint, Buffer.from(note));
    w.entry(ENTRY.events, await provedEvents(ledger, cp, chosen));
    const content = w.contentDigest();
    const cid = report.data.snapshot as string;
    const snapshot = { cid, sha256: Buffer.from(parseCid(cid).multihash.digest).toString('hex') };
    w.finish(rejudgeStatementOf(report.data, content, snapshot, (report.data.bundleDigest as string).slice('sha256:'.length)), o.publisher);
    return { path: o.out, events: chosen.length, treeSize: cp.treeSize, bytes: w.bytes, contentDigest: content, report: report.data };
  } catch (e) {
    w.abort();
    throw e;
  }
}
