/**
 * Worker thread entry for ledger verification. Its requests:
 *   chunk  check events the main thread read and packed (any EventStore);
 *   range  read events [from, to) over this worker's own read-only connection and check them (SQLite), so the rows
 *          never cross threads; only digests and a compact summary go back;
 *   keys   the stored KeyRegistered events, a hint for which keys to verify with (the ordered pass decides);
 *   signatures  check a batch of Ed25519 signatures whose keys the caller decided (signature-batch.ts);
 *   integrity  the storage check (SQLite `PRAGMA integrity_check`), run here so it overlaps the event checks.
 * This file is a composition root like a CLI entry, so it sits in home/ beside LedgerHome: it is where the SQLite
 * range reader and the ledger kernels addon (when built; node:crypto and parseEnvelope otherwise) are wired in to the
 * verification (application/verify), which itself names neither. application/verify/worker-pool.ts starts it by path.
 */
import { parentPort } from 'node:worker_threads';
import type { ParallelReadSpec } from '../ports/event-store.port';
import { openRangeReader, type RangeReader } from '../adapters/sqlite/sqlite-range-reader';
import { bestKernels } from '../adapters/native-kernels';
import { checkChunk, checkRange, type ChunkInput, type ChunkOutput } from '../application/verify/check-chunk';
import { badSignaturesIn, type SignatureBatch } from '../application/verify/signature-pack';

const kernels = bestKernels();

const keyCache = new Map<string, Uint8Array>();
const readers = new Map<string, RangeReader>();

function reader(spec: ParallelReadSpec): RangeReader {
  let r = readers.get(spec.path);
  if (!r) {
    r = openRangeReader(spec);
    readers.set(spec.path, r);
  }
  return r;
}

export type WorkerRequest =
  | { seq: number; op: 'chunk'; input: ChunkInput }
  | { seq: number; op: 'range'; spec: ParallelReadSpec; from: number; to: number; keys: Array<[string, Uint8Array]> }
  | { seq: number; op: 'keys'; spec: ParallelReadSpec }
  | { seq: number; op: 'signatures'; batch: SignatureBatch }
  | { seq: number; op: 'integrity'; spec: ParallelReadSpec };

function transferOf(out: ChunkOutput): ArrayBuffer[] {
  return [out.digests.buffer as ArrayBuffer, out.signerIndex.buffer as ArrayBuffer, out.idWords.buffer as ArrayBuffer];
}

parentPort?.on('message', (msg: WorkerRequest) => {
  try {
    if (msg.op === 'chunk') {
      const out = checkChunk(msg.input, keyCache, kernels);
      parentPort?.postMessage({ seq: msg.seq, out }, transferOf(out));
    } else if (msg.op === 'range') {
      const { out, meta } = checkRange(reader(msg.spec), msg.from, msg.to, msg.keys, keyCache, kernels);
      parentPort?.postMessage({ seq: msg.seq, out, meta }, [
        ...transferOf(out),
        meta.positions.buffer as ArrayBuffer,
        meta.revisions.buffer as ArrayBuffer,
        meta.streamIndex.buffer as ArrayBuffer,
        meta.typeIndex.buffer as ArrayBuffer,
      ]);
    } else if (msg.op === 'signatures') {
      parentPort?.postMessage({ seq: msg.seq, bad: badSignaturesIn(msg.batch) });
    } else if (msg.op === 'keys') {
      parentPort?.postMessage({ seq: msg.seq, keys: reader(msg.spec).keyRegistrations() });
    } else {
      parentPort?.postMessage({ seq: msg.seq, problems: reader(msg.spec).integrityProblems() });
    }
  } catch (e) {
    parentPort?.postMessage({ seq: msg.seq, error: e instanceof Error ? e.message : String(e) });
  }
});
