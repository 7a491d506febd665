/**
 * An in-memory, unsigned RunLedger for unit tests, with the ledger's append semantics (expected revision,
 * idempotent retries of the same ids, catalogue validation of every event) so that it agrees with the real one
 * (tests/run/run-ledger.contract.ts). `appendTo` lets other writers (a fake Judge) put events in other streams.
 */
import { AssayError, systemClock, type Clock } from '@assay/core';
import { eventDataProblem, wrongExpectedRevision, duplicateEventId, type JsonObject } from '@assay/ledger';
import { isJudgeStream, runStream, JUDGE_EVENT_TYPES, type RunEventDraft, type RunEventRecord } from '../domain/run-events';
import type { RunLedger } from '../ports/run-ledger.port';

export type Expected = number | 'no_stream' | 'any';

export interface ForeignEvent {
  readonly type: string;
  readonly data: Record<string, unknown>;
  readonly id: string;
}

export class MemoryRunLedger implements RunLedger {
  private readonly log: RunEventRecord[] = [];
  private readonly revisions = new Map<string, number>();
  private readonly byId = new Map<string, RunEventRecord>();
  /** Set to make the next append fail (after validation, before anything is stored). */
  failNextAppend: Error | null = null;

  constructor(private readonly clock: Clock = systemClock) {}

  /** Every event, in position order. */
  all(): readonly RunEventRecord[] {
    return this.log;
  }

  async read(run: string, fromPosition = 0): Promise<RunEventRecord[]> {
    const stream = runStream(run);
    return this.log.filter(
      (e) =>
        e.position >= fromPosition &&
        (e.stream === stream || (isJudgeStream(e.stream) && (JUDGE_EVENT_TYPES as readonly string[]).includes(e.type) && e.data.run === run)),
    );
  }

  async append(run: string, events: ReadonlyArray<RunEventDraft & { readonly id: string }>, expected: number | 'no_stream'): Promise<RunEventRecord[]> {
    return this.appendTo(runStream(run), events, expected);
  }

  async appendTo(stream: string, events: ReadonlyArray<ForeignEvent>, expected: Expected = 'any'): Promise<RunEventRecord[]> {
    if (events.length === 0) throw new AssayError('LEDGER_EMPTY_APPEND', 'invalid_input', 'an append needs at least one event');
    events.forEach((e, i) => {
      const p = eventDataProblem(e.type, e.data as JsonObject);
      if (p) throw new AssayError(p.code, 'invalid_input', `event ${i} (${e.type}): ${p.message}`, { details: { index: i } });
    });
    const current = this.revisions.get(stream) ?? null;
    const known = events.map((e) => this.byId.get(e.id));
    if (known.every((k) => k !== undefined)) {
      const recs = known as RunEventRecord[];
      const first = recs[0] as RunEventRecord;
      if (recs.every((r, i) => r.stream === stream && r.revision === first.revision + i)) return recs;
    }
    for (const [i, k] of known.entries()) if (k && k.stream !== stream) throw duplicateEventId(events[i]?.id ?? '', stream, k.stream);
    if (known.some((k) => k !== undefined)) throw wrongExpectedRevision(stream, expected, current);
    if (expected === 'no_stream' ? current !== null : typeof expected === 'number' ? current !== expected : false)
      throw wrongExpectedRevision(stream, expected, current);
    if (this.failNextAppend) {
      const e = this.failNextAppend;
      this.failNextAppend = null;
      throw e;
    }
    const time = this.clock.now().toISOString();
    let rev = current ?? -1;
    const out = events.map((e) => {
      rev += 1;
      const rec: RunEventRecord = { position: this.log.length, stream, revision: rev, id: e.id, type: e.type, time, data: structuredClone(e.data) };
      this.log.push(rec);
      this.byId.set(e.id, rec);
      return rec;
    });
    this.revisions.set(stream, rev);
    return out;
  }
}
