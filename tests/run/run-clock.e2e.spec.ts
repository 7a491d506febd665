/**
 * The run controller takes its time and ids from the caller (RunStartOptions.clock, .ids), like every other writer
 * of the ledger: a whole run on Docker (examples/tasks/hello-judge, one submission by a command agent) under a
 * ManualClock and SequentialIds. Every event it records (the run's, the Judge's, the budgets') carries the injected
 * time, the run is named from the injected ids, and the phases are timed by the same clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { runResearch } from '../../libs/runtime/src/run-runtime';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';

jest.setTimeout(240_000);

const TASK = join(REPO_ROOT, 'examples/tasks/hello-judge');

describeDocker('assay run under an injected clock and ids (Docker)', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'assay-run-clock-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('stamps every event with the injected clock and names the run from the injected ids', async () => {
    const home = join(root, 'home');
    expect((await assay(['ledger', 'init', '--origin', 'assay.test/run-clock'], home)).code).toBe(0);
    // One millisecond per reading: time moves forward, and the whole run stays within a few seconds of the start.
    const clock = new ManualClock('2031-05-06T07:08:09.000Z', 1);
    const ids = new SequentialIds('c10c0000-0000-4000-8000');
    const report = await runResearch({ home, taskDir: TASK, agent: 'command:rsi-submit', clock, ids, checkpointIntervalSec: 1 });
    expect(report.run).toBe('run-c10c0000');
    expect(report.rounds.map((r) => r.status)).toEqual(['completed']);
    // Durations come from the same clock: a reading is a millisecond, so the run "took" its number of readings.
    expect(report.timings.totalMs).toBeGreaterThan(0);
    expect(report.timings.totalMs).toBeLessThan(60_000);

    const h = new LedgerHome(home, { clock: new ManualClock(), ids: new SequentialIds('ffff0000-0000-4000-8000') });
    try {
      const events = await h.readEvents({ limit: 10_000 });
      const ofRun = events.filter((e) => e.envelope.stream === report.run || JSON.stringify(e.envelope.data).includes(report.run));
      const types = new Set(ofRun.map((e) => e.envelope.type));
      for (const t of ['RunStarted', 'WorkStarted', 'SnapshotTaken', 'JudgeLaunched', 'JudgeCompleted', 'RewardRecorded', 'BudgetConsumed', 'RunCompleted'])
        expect(types).toContain(t);
      for (const e of ofRun) {
        expect({ type: e.envelope.type, time: e.envelope.time }).toEqual({
          type: e.envelope.type,
          time: expect.stringMatching(/^2031-05-06T07:08:(09|1[0-9])\./),
        });
        expect(e.envelope.id).toMatch(/^c10c0000-0000-4000-8000-/);
      }
    } finally {
      await h.close();
    }
  });
});
