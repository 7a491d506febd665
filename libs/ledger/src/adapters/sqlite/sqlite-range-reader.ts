/**
 * Reads a SQLite ledger's events by position range on a verification worker thread, over the worker's own read-only
 * connection, so the rows never cross threads: the worker reads, checks and sends back only digests (see
 * application/verify). Opened from the path the event store reports in `parallelReadSpec()`.
 */
import Database from 'better-sqlite3';
import type { ParallelReadSpec } from '../../ports/event-store.port';

/** A row as an array, in this order (no object per row: cheaper to read in bulk). */
export type RawRangeRow = [position: number, stream: string, revision: number, id: string, type: string, bytes: Buffer, hash: Buffer];

export interface RangeReader {
  /** Events in [from, to), in position order, as arrays. */
  rawRange(from: number, to: number): RawRangeRow[];
  /** Stored bytes of every KeyRegistered event, in position order (unverified: a hint for the signature checks). */
  keyRegistrations(): Array<{ position: number; bytes: Buffer }>;
  /** `PRAGMA integrity_check` over this connection: problems, or an empty list when the file is sound. */
  integrityProblems(): string[];
  close(): void;
}

export function openRangeReader(spec: ParallelReadSpec): RangeReader {
  const db = new Database(spec.path, { readonly: true, fileMustExist: true });
  const rawRange = db
    .prepare('SELECT position, stream, revision, id, type, bytes, hash FROM events WHERE position >= ? AND position < ? ORDER BY position')
    .raw(true);
  const keys = db.prepare("SELECT position, bytes FROM events WHERE type = 'KeyRegistered' ORDER BY position");
  return {
    rawRange: (from, to) => rawRange.all(from, to) as RawRangeRow[],
    keyRegistrations: () => keys.all() as Array<{ position: number; bytes: Buffer }>,
    integrityProblems: () => {
      try {
        return (db.pragma('integrity_check') as Array<Record<string, unknown>>).map((r) => String(Object.values(r)[0])).filter((l) => l !== 'ok');
      } catch (e) {
        return [(e as Error).message];
      }
    },
    close: () => db.close(),
  };
}
