/**
 * The RunLedger over @assay/ledger's signing Ledger (SQLite in production; memory stores in tests). Appends are
 * validated against the catalogue and signed by the held key of the right role (controller for the run lifecycle,
 * runtime for SnapshotTaken, WorkspaceEdited and WorkStarted). Reads parse the stored envelopes.
 *
 * Reading a run's history scans the log from the run's first event for the Judge's events about it (they live in
 * their own streams); an index of judge events by run (a projection) can replace the scan when ledgers grow.
 */
import type { Ledger, JsonObject } from '@assay/ledger';
import { isJudgeStream, recordOf, runStream, JUDGE_EVENT_TYPES, type RunEventDraft, type RunEventRecord } from '../domain/run-events';
import type { RunLedger } from '../ports/run-ledger.port';
import type { Expected, ForeignEvent } from './memory-run-ledger.adapter';

export { recordOf };

export class LedgerRunLedger implements RunLedger {
  constructor(private readonly ledger: Ledger) {}

  async read(run: string, fromPosition = 0): Promise<RunEventRecord[]> {
    const store = this.ledger.store;
    const stream = runStream(run);
    let start = fromPosition;
    if (fromPosition === 0) {
      let first: number | null = null;
      for await (const e of store.readStream(stream, { maxCount: 1 })) first = e.position;
      if (first === null) return [];
      start = first;
    }
    const out: RunEventRecord[] = [];
    for await (const batch of store.readAll({ fromPosition: start, batchSize: 1000 })) {
      for (const e of batch) {
        if (e.stream === stream) out.push(recordOf(e));
        else if (isJudgeStream(e.stream) && (JUDGE_EVENT_TYPES as readonly string[]).includes(e.type)) {
          const rec = recordOf(e);
          if (rec.data.run === run) out.push(rec);
        }
      }
    }
    return out;
  }

  async append(run: string, events: ReadonlyArray<RunEventDraft & { readonly id: string }>, expected: number | 'no_stream'): Promise<RunEventRecord[]> {
    return this.appendTo(runStream(run), events, expected);
  }

  /** Appends to any stream (the Judge's recorder in tests, tooling). */
  async appendTo(stream: string, events: ReadonlyArray<ForeignEvent>, expected: Expected = 'any'): Promise<RunEventRecord[]> {
    const r = await this.ledger.append(
      stream,
      events.map((e) => ({ type: e.type, data: e.data as JsonObject, id: e.id })),
      expected,
    );
    return r.events.map(recordOf);
  }
}
