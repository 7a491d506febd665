/**
 * Where a run's events live. Adapters: LedgerRunLedger (over @assay/ledger's signing Ledger: SQLite in production,
 * memory stores in tests) and MemoryRunLedger (an unsigned in-memory fake for unit tests). One contract suite
 * (tests/run/run-ledger.contract.ts) runs against both.
 */
import type { RunEventDraft, RunEventRecord } from '../domain/run-events';

export interface RunLedger {
  /**
   * The run's history from `fromPosition` (inclusive), in global position order: every event of the stream
   * `run-<run>`, and every event of a `judge-<id>` stream whose `data.run` is the run. Empty when nothing is there.
   */
  read(run: string, fromPosition?: number): Promise<RunEventRecord[]>;
  /**
   * Appends to `run-<run>` atomically, signed by the key whose role the catalogue allows for each type.
   * `expected`: the revision of the stream's last event, or `no_stream`. A retry of the same ids is a success without
   * duplicates; a mismatch is LEDGER_WRONG_EXPECTED_REVISION (another writer).
   */
  append(run: string, events: ReadonlyArray<RunEventDraft & { readonly id: string }>, expected: number | 'no_stream'): Promise<RunEventRecord[]>;
}
