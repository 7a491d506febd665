/**
 * Resume after SIGKILL of the controller, on a real SQLite ledger: killed between SubmissionReceived and the
 * snapshot, and during a Judge. A new controller rebuilds the run from the ledger alone, refunds the interrupted
 * round, takes over the socket and goes on; the ledger verifies and holds every event exactly once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds, randomIds, systemClock } from '@assay/core';
import { LedgerHome, initLedgerHome } from '@assay/ledger';
import { FakeJudge, FakeSnapshotter, LedgerRunLedger, SubmissionService, SubmitEndpoint, runClaimRules, runStream } from '@assay/run';
import { spawnTs } from '../support/child-process';
import { TOKEN } from './support/run-fixtures';
import { rsiSubmit } from './support/endpoint';

jest.setTimeout(60_000);

function waitForLine(child: ReturnType<typeof spawnTs>, line: string, ms = 30_000): Promise<string> {
  let out = '';
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "${line}" within ${ms} ms; stdout: ${out}; stderr: ${err}`)), ms);
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.split('\n').includes(line)) {
        clearTimeout(timer);
        resolve(out);
      }
    });
    child.once('exit', (code) => {
      if (!out.split('\n').includes(line)) reject(new Error(`the child exited (${code}) before "${line}"; stderr: ${err}`));
    });
  });
}

const killed = (child: ReturnType<typeof spawnTs>) =>
  new Promise<NodeJS.Signals | null>((resolve) => {
    child.once('exit', (_code, signal) => resolve(signal));
    child.kill('SIGKILL');
  });

describe.each([
  [
    'between the submission and the snapshot',
    'snapshot',
    'SNAPSHOTTING 1',
    /before the workspace was snapshotted/,
    ['RunStarted', 'SubmissionReceived', 'SubmissionRejected', 'SubmissionReceived', 'SnapshotTaken'],
  ],
  [
    'during a Judge',
    'judge',
    'JUDGING 1',
    /before the Judge recorded a result \(Judge child-1 was launched\)/,
    ['RunStarted', 'SubmissionReceived', 'SnapshotTaken', 'SubmissionRejected', 'SubmissionReceived', 'SnapshotTaken', 'WorkspaceEdited'],
  ],
] as const)('SIGKILL %s', (_what, hang, marker, reason, before) => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-resume-'));
    await initLedgerHome(dir, { clock: new ManualClock('2026-03-01T10:00:00.000Z'), ids: new SequentialIds(), origin: 'assay.test/resume' });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a new controller refunds the round, reuses the socket and continues; nothing lost or duplicated', async () => {
    const socket = join(dir, 'submit.sock');
    const child = spawnTs('tests/run/support/run-controller-child.ts', [dir, 'run1', socket, 'start', hang]);
    await waitForLine(child, 'READY');
    const env = { ASSAY_SUBMIT_SOCKET: socket, ASSAY_SUBMIT_TOKEN: TOKEN };
    const pending = rsiSubmit(env);
    await waitForLine(child, marker);
    expect(await killed(child)).toBe('SIGKILL');
    expect((await pending).code).toBe(7); // the connection died with the controller

    const home = new LedgerHome(dir, { clock: systemClock, ids: randomIds });
    try {
      const ledger = new LedgerRunLedger(home.ledger);
      const ids = new SequentialIds('00000000-0000-4000-8abc');
      const deps = {
        run: 'run1',
        ledger,
        snapshotter: new FakeSnapshotter({ 'solve.py': 'v2' }),
        judge: new FakeJudge((s, e, x) => ledger.appendTo(s, e, x), ids, [{ status: 'completed', rewards: { reward: 0.75 } }]),
        clock: systemClock,
        ids,
      };
      const service = new SubmissionService(deps);
      const recovery = await service.resume();
      expect(recovery).toEqual({ round: 1, outcome: 'refunded' });
      const endpoint = await SubmitEndpoint.listen({ socketPath: socket, gateway: service });
      try {
        const r = await rsiSubmit(env);
        expect(r.code).toBe(0);
        expect(r.stdout).toContain('round: 2\nstatus: completed\n');
        const list = await rsiSubmit(env, ['--list']);
        expect(list.stdout).toMatch(/^round 1: refunded, .*the controller stopped/m);
      } finally {
        await endpoint.close();
      }
      expect(await service.complete()).toMatchObject({ status: 'completed', bestRound: 2, bestScore: 0.75 });
      // a second resume of a completed run changes nothing
      expect(await new SubmissionService(deps).resume()).toEqual({ round: null, outcome: null });

      const events = await home.readEvents({ stream: runStream('run1'), limit: 100 });
      const types = events.map((e) => e.envelope.type);
      expect(types).toEqual([...before, 'BudgetConsumed', 'RunCompleted']);
      expect(events.find((e) => e.envelope.type === 'SubmissionRejected')?.envelope.data).toMatchObject({
        round: 1,
        status: 503,
        reason: expect.stringMatching(reason),
      });
      const all = await home.readEvents({ from: 0, limit: 1000 });
      const idsSeen = all.map((e) => e.envelope.id);
      expect(new Set(idsSeen).size).toBe(idsSeen.length);
      const report = await home.verify({ claims: runClaimRules() });
      expect(report.failure).toBeNull();
      expect(report.ok).toBe(true);
    } finally {
      await home.close();
    }
  });
});
