/**
 * The RunLedger contract: every adapter (memory fake, the signing Ledger over memory stores, over SQLite) must pass
 * it, written only against the port plus `appendTo` (how the Judge's events get into other streams).
 */
import { ManualClock, SequentialIds } from '@assay/core';
import { foldRun, SubmissionService, type ForeignEvent, type RunEventRecord, type RunLedger } from '@assay/run';
import { FakeJudge, FakeSnapshotter } from '@assay/run';
import { startInput, submitReq, T0 } from './support/run-fixtures';

export interface RunLedgerUnderTest {
  ledger: RunLedger;
  appendTo(stream: string, events: ForeignEvent[], expected: number | 'no_stream' | 'any'): Promise<RunEventRecord[]>;
  close(): Promise<void>;
}

let n = 0;
const id = () => {
  n += 1;
  return `00000000-0000-4000-9000-${n.toString(16).padStart(12, '0')}`;
};

export function runLedgerContract(name: string, make: () => Promise<RunLedgerUnderTest>): void {
  describe(`RunLedger contract: ${name}`, () => {
    let t: RunLedgerUnderTest;
    beforeEach(async () => {
      t = await make();
    });
    afterEach(async () => {
      await t.close();
    });

    const started = (run: string) => ({
      type: 'RunStarted' as const,
      data: { run, task: 't', taskDigest: 'sha256:t', agent: 'a', fingerprint: 'sha256:f', protocol: {}, selection: {} },
      id: id(),
    });

    it('reads nothing for an unknown run; appends with revisions from 0 and global positions', async () => {
      expect(await t.ledger.read('nope')).toEqual([]);
      const recs = await t.ledger.append('r1', [started('r1'), { type: 'SubmissionReceived', data: { run: 'r1', round: 1 }, id: id() }], 'no_stream');
      expect(recs.map((r) => [r.stream, r.revision, r.type])).toEqual([
        ['run-r1', 0, 'RunStarted'],
        ['run-r1', 1, 'SubmissionReceived'],
      ]);
      expect((recs[1] as RunEventRecord).position).toBe((recs[0] as RunEventRecord).position + 1);
      expect(recs[1]?.data).toEqual({ run: 'r1', round: 1 });
      expect(recs[0]?.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(await t.ledger.read('r1')).toEqual(recs);
    });

    it('enforces the expected revision and makes retries of the same ids idempotent', async () => {
      const a = [started('r1')];
      await t.ledger.append('r1', a, 'no_stream');
      await expect(t.ledger.append('r1', [{ type: 'SubmissionReceived', data: { run: 'r1', round: 1 }, id: id() }], 'no_stream')).rejects.toMatchObject({
        code: 'LEDGER_WRONG_EXPECTED_REVISION',
      });
      await expect(t.ledger.append('r1', [{ type: 'SubmissionReceived', data: { run: 'r1', round: 1 }, id: id() }], 5)).rejects.toMatchObject({
        code: 'LEDGER_WRONG_EXPECTED_REVISION',
      });
      const again = await t.ledger.append('r1', a, 'no_stream');
      expect(again.map((r) => r.revision)).toEqual([0]);
      expect(await t.ledger.read('r1')).toHaveLength(1);
    });

    it('refuses what the catalogue refuses, and writes nothing', async () => {
      await expect(t.ledger.append('r1', [{ type: 'SubmissionReceived', data: { run: 'r1', round: 0 }, id: id() }], 'no_stream')).rejects.toMatchObject({
        code: 'LEDGER_EVENT_INVALID',
      });
      await expect(t.ledger.append('r1', [{ type: 'RoundScored' as never, data: { run: 'r1' }, id: id() }], 'no_stream')).rejects.toMatchObject({
        code: 'LEDGER_UNKNOWN_EVENT_TYPE',
      });
      expect(await t.ledger.read('r1')).toEqual([]);
    });

    it("reads the Judge's events about the run from judge streams, in global order, from a position", async () => {
      await t.ledger.append('r1', [started('r1')], 'no_stream');
      await t.ledger.append('r2', [started('r2')], 'no_stream');
      const done = (run: string, judge: string): ForeignEvent => ({
        type: 'JudgeCompleted',
        data: { run, round: 1, judge, status: 'completed', exitCode: 0, durationMs: 1, outputDigest: 'sha256:o', outputBytes: 0 },
        id: id(),
      });
      await t.appendTo('judge-j1', [done('r1', 'j1')], 'no_stream');
      await t.appendTo('judge-j2', [done('r2', 'j2')], 'no_stream');
      await t.appendTo(
        'judge-j3',
        [{ ...done('r1', 'j3'), data: { judge: 'j3', status: 'completed', exitCode: 0, durationMs: 1, outputDigest: 'sha256:o', outputBytes: 0 } }],
        'no_stream',
      );
      await t.appendTo('note-x', [{ type: 'Note', data: { text: 'r1' }, id: id() }], 'no_stream');
      await t.ledger.append('r1', [{ type: 'SubmissionReceived', data: { run: 'r1', round: 1 }, id: id() }], 0);
      const all = await t.ledger.read('r1');
      expect(all.map((r) => `${r.stream}:${r.type}`)).toEqual(['run-r1:RunStarted', 'judge-j1:JudgeCompleted', 'run-r1:SubmissionReceived']);
      expect(all.map((r) => r.position)).toEqual([...all.map((r) => r.position)].sort((a, b) => a - b));
      const from = await t.ledger.read('r1', (all[1] as RunEventRecord).position);
      expect(from.map((r) => r.type)).toEqual(['JudgeCompleted', 'SubmissionReceived']);
      expect(await t.ledger.read('r2')).toHaveLength(2);
    });

    it('carries a whole service round; folding what it reads gives the same state', async () => {
      const clock = new ManualClock(T0, 1);
      const ids = new SequentialIds('00000000-0000-4000-a000');
      const judge = new FakeJudge((s, e, x) => t.appendTo(s, e, x), ids, [{ status: 'completed', rewards: { reward: 0.5 } }]);
      const deps = { run: 'r9', ledger: t.ledger, snapshotter: new FakeSnapshotter(), judge, clock, ids };
      const svc = await new SubmissionService(deps).start(startInput('r9'));
      expect((await svc.submit(submitReq())).status).toBe('completed');
      expect(await svc.complete()).toMatchObject({ status: 'completed', bestRound: 1, bestScore: 0.5 });
      const events = await t.ledger.read('r9');
      expect(foldRun('r9', events)).toEqual(svc.current);
    });
  });
}
