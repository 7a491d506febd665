/** JudgeRecorder over the signing Ledger of @assay/ledger (SQLite in production, memory stores in unit tests). */
import type { JsonObject, Ledger } from '@assay/ledger';
import type { JudgeRecorder, RecordedPosition } from '../ports/judge-recorder.port';

export class LedgerJudgeRecorder implements JudgeRecorder {
  constructor(private readonly ledger: Ledger) {}

  async append(
    stream: string,
    events: ReadonlyArray<{ type: string; data: Record<string, unknown> }>,
    expected: 'no_stream' | 'any' | number,
  ): Promise<RecordedPosition[]> {
    const r = await this.ledger.append(
      stream,
      events.map((e) => ({ type: e.type, data: e.data as JsonObject })),
      expected,
    );
    return r.events.map((e) => ({ type: e.type, position: e.position, revision: e.revision }));
  }

  async streamTypes(stream: string): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.ledger.store.readStream(stream)) out.push(e.type);
    return out;
  }
}
