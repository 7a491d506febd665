/**
 * A whole research run on the in-memory container runtime, without Docker: runResearch's preparation (the task's
 * images built, the workspace seeded, Work's container spec), the controller session (runWorkSession), the agent's
 * submissions over the real submission socket, the real JudgeRunner judging real snapshots of the workspace, and the
 * end (the transcript's digest, the checkpoint), all recorded in a real signing ledger under a ManualClock; a cancel;
 * and a controller SIGKILLed mid-run, then resumed.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome, type ReadEvent, initLedgerHome } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { runResearch } from '../../libs/runtime/src/run-runtime';
import { LIFELINE_CMD } from '../../libs/runtime/src/work-containment';
import { tmp } from '../judge/judge-fakes';
import { spawnTs } from '../support/child-process';
import { FAKE_RUN_TIME as T, fakeRun, submitFromWork, writeFakeRunTask } from './support/fake-run';

const cleanup: string[] = [];
afterAll(() => {
  for (const d of cleanup) fs.rmSync(d, { recursive: true, force: true });
});

/** A home with a ledger and a fake task. */
async function homeAndTask(): Promise<{ home: string; taskDir: string }> {
  const home = tmp('fake-run-home-');
  const taskDir = writeFakeRunTask(tmp('fake-run-task-'));
  cleanup.push(home, taskDir);
  await initLedgerHome(home, { clock: new ManualClock(T), ids: new SequentialIds(), origin: 'assay.test/fake-run' });
  return { home, taskDir };
}

async function ledgerOf(home: string): Promise<{ events: ReadEvent[]; verified: boolean }> {
  const lh = new LedgerHome(home, { clock: new ManualClock(T), ids: new SequentialIds() });
  try {
    return { events: await lh.readEvents({ limit: 10_000 }), verified: (await lh.verify({ claims: runClaimRules() })).ok };
  } finally {
    await lh.close();
  }
}

const typesOf = (events: ReadEvent[], stream: string) => events.filter((e) => e.envelope.stream === stream).map((e) => e.envelope.type);

describe('a research run on the in-memory container runtime', () => {
  it('builds, starts Work, takes two submissions, judges them and completes, all signed in the ledger', async () => {
    const { home, taskDir } = await homeAndTask();
    const replies: string[] = [];
    const s = fakeRun(home, taskDir, 'r-fake', async (p) => {
      p.writeFile('/workspace/solution.txt', 'first try\n');
      replies.push(await submitFromWork(p));
      p.writeFile('/workspace/solution.txt', 'second try\n');
      replies.push(await submitFromWork(p));
      p.write('stdout', 'agent: done\n');
      return 0;
    });
    const report = await runResearch(s.options);

    expect(report).toMatchObject({ run: 'r-fake', status: 'completed', bestRound: 1, bestScore: 0.5, agentExitCode: 0 });
    expect(report.rounds.map((r) => [r.round, r.status, r.score])).toEqual([
      [1, 'completed', 0.5],
      [2, 'completed', 0.5],
    ]);
    expect(replies.map((r) => /^status: (\S+)$/m.exec(r)?.[1])).toEqual(['completed', 'completed']);

    // the ledger: the run's stream in order, the Judges' own streams, all at the clock's time, all verifying
    const { events, verified } = await ledgerOf(home);
    expect(verified).toBe(true);
    expect(typesOf(events, 'run-r-fake')).toEqual([
      'RunStarted',
      'WorkStarted',
      'SnapshotTaken', // the baseline
      'SubmissionReceived',
      'SnapshotTaken',
      'WorkspaceEdited',
      'BudgetConsumed',
      'SubmissionReceived',
      'SnapshotTaken',
      'WorkspaceEdited',
      'BudgetConsumed',
      'RunCompleted',
    ]);
    const runEvents = events.filter((e) => e.envelope.stream === 'run-r-fake').map((e) => e.envelope);
    expect(events.filter((e) => e.envelope.type === 'RewardRecorded').map((e) => e.envelope.data)).toEqual([
      expect.objectContaining({ run: 'r-fake', round: 1, primaryScore: 0.5 }),
      expect.objectContaining({ run: 'r-fake', round: 2, primaryScore: 0.5 }),
    ]);
    expect(new Set(events.map((e) => e.envelope.time))).toEqual(new Set([T]));
    expect(runEvents.every((e) => e.id.startsWith('11111111-0000-4000-8000-'))).toBe(true);
    expect(runEvents.at(-1)!.data).toMatchObject({ status: 'completed', bestRound: 1, bestScore: 0.5 });
    expect(events.find((e) => e.envelope.type === 'AgentTranscriptRecorded')?.envelope.data).toMatchObject({
      run: 'r-fake',
      bytes: 12,
      digest: `sha256:${createHash('sha256').update('agent: done\n').digest('hex')}`,
    });

    // Work as it was started: contained, the agent's user, the lifeline, the submission directory read-only
    const work = s.work!;
    expect(work).toMatchObject({ networkMode: 'none', readOnlyRootfs: true, capDrop: ['ALL'], capAdd: [], noNewPrivileges: true, cmd: LIFELINE_CMD });
    expect(work.user).toMatch(/^\d+:\d+$/);
    expect(work.user).not.toBe('0:0');
    expect(work.mounts).toContainEqual(expect.objectContaining({ type: 'bind', target: '/run/assay', readOnly: true }));
    expect(work.mounts).toContainEqual(expect.objectContaining({ type: 'bind', target: '/workspace', readOnly: false }));
    const workId = (runEvents[1]!.data as { container: string }).container;
    expect(s.wardens).toEqual([{ id: workId, closed: true }]);

    // the workspace: seeded from the task, then the agent's edits; Work is gone, nothing left running
    const ws = join(home, 'runs', 'r-fake', 'workspace');
    expect(fs.readFileSync(join(ws, 'start.txt'), 'utf8')).toBe('the start\n');
    expect(fs.readFileSync(join(ws, 'solution.txt'), 'utf8')).toBe('second try\n');
    expect(await s.fake.listContainers({})).toEqual([]);
    expect(s.fake.calls).toEqual(expect.arrayContaining([`kill ${workId.slice(0, 12)}`, `remove ${workId.slice(0, 12)}`]));
    // the agent's output reached the operator marked as the agent's
    expect(s.shown.join('')).toMatch(/agent: done/);
    expect(s.lines).toContain('agent exited with status 0');
  }, 60_000);

  it('an operator cancel while the agent works: Work killed and removed, the run recorded as cancelled', async () => {
    const { home, taskDir } = await homeAndTask();
    const ac = new AbortController();
    const s = fakeRun(home, taskDir, 'r-cancel', async (p) => {
      p.writeFile('/workspace/solution.txt', 'unfinished\n');
      ac.abort();
      await p.sleep(3_600_000); // killed with Work
      return 0;
    });
    const report = await runResearch({ ...s.options, signal: ac.signal });
    expect(report).toMatchObject({ run: 'r-cancel', status: 'cancelled', rounds: [] });
    const { events, verified } = await ledgerOf(home);
    expect(verified).toBe(true);
    expect(typesOf(events, 'run-r-cancel')).toEqual(['RunStarted', 'WorkStarted', 'SnapshotTaken', 'RunCompleted']);
    expect(events.find((e) => e.envelope.type === 'RunCompleted')!.envelope.data).toMatchObject({ status: 'cancelled' });
    expect(await s.fake.listContainers({})).toEqual([]);
    expect(s.wardens.map((w) => w.closed)).toEqual([true]);
  }, 60_000);

  it('a controller SIGKILLed mid-run, then resumed: the orphan edit is recorded before the agent goes on, and the run completes', async () => {
    const { home, taskDir } = await homeAndTask();
    const child = spawnTs('tests/run/support/fake-run-child.ts', [home, taskDir, 'r-crash']);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const killed = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (out.includes('READY\n')) resolve();
      });
      child.on('close', () => reject(new Error(`the controller ended before it was killed: ${out} ${stderr}`)));
    });
    child.kill('SIGKILL');
    expect(await killed).toBe('SIGKILL');

    const s = fakeRun(home, taskDir, 'r-crash', async (p) => {
      // the resumed agent finds the workspace as the dead session's agent left it
      expect(p.readFile('/workspace/solution.txt').toString('utf8')).toBe('edited by the agent its controller left behind\n');
      p.writeFile('/workspace/solution.txt', 'second try\n');
      await submitFromWork(p);
      return 0;
    });
    // another process: ids of its own
    const report = await runResearch({ ...s.options, ids: new SequentialIds('22222222-0000-4000-8000'), resume: true });
    expect(report).toMatchObject({ run: 'r-crash', status: 'completed' });
    expect(report.rounds.map((r) => [r.round, r.status])).toEqual([
      [1, 'completed'],
      [2, 'completed'],
    ]);
    expect(s.lines.some((l) => /controller pid \d+ .* is gone; taking the run over/.test(l))).toBe(true);

    const { events, verified } = await ledgerOf(home);
    expect(verified).toBe(true);
    const types = typesOf(events, 'run-r-crash');
    // the second session: Work again, the workspace as the orphan left it (its edit recorded), then round 2
    const second = types.lastIndexOf('WorkStarted');
    expect(second).toBeGreaterThan(types.indexOf('WorkStarted'));
    expect(types.slice(second)).toEqual([
      'WorkStarted',
      'SnapshotTaken',
      'WorkspaceEdited',
      'SubmissionReceived',
      'SnapshotTaken',
      'WorkspaceEdited',
      'BudgetConsumed',
      'RunCompleted',
    ]);
    const orphanEdit = events.filter((e) => e.envelope.stream === 'run-r-crash' && e.envelope.type === 'WorkspaceEdited').map((e) => e.envelope.data)[1];
    expect(orphanEdit).toMatchObject({ changed: 1, paths: { changed: ['solution.txt'] } });
  }, 120_000);
});

describe('a full-rootfs run on the in-memory container runtime', () => {
  /** The fake task with workdir "/" (full-rootfs mode) and storage_mb 16. */
  async function rootfsHomeAndTask(): Promise<{ home: string; taskDir: string }> {
    const h = await homeAndTask();
    const toml = join(h.taskDir, 'task.toml');
    fs.writeFileSync(toml, fs.readFileSync(toml, 'utf8').replace('workdir = "/workspace"', 'workdir = "/"\nstorage_mb = 16'));
    fs.rmSync(join(h.taskDir, 'environment', 'workspace'), { recursive: true, force: true });
    return h;
  }

  for (const quota of [true, false]) {
    it(`Work's writable layer is limited by the storage driver where it can (${quota ? 'here it can' : 'here it cannot: a check instead'}), and WorkStarted says which`, async () => {
      const { home, taskDir } = await rootfsHomeAndTask();
      const s = fakeRun(home, taskDir, quota ? 'r-quota' : 'r-checked', async (p) => {
        p.writeFile('/etc/assay-answer', '42\n');
        await submitFromWork(p);
        return 0;
      });
      s.fake.storageQuota = quota;
      const report = await runResearch({ ...s.options, allowRootAgent: true });
      expect(report).toMatchObject({ status: 'completed' });
      expect(s.work?.rootfsSizeBytes).toBe(quota ? 16 * 1048576 : undefined);
      const { events, verified } = await ledgerOf(home);
      expect(verified).toBe(true);
      const started = events.find((e) => e.envelope.type === 'WorkStarted')?.envelope.data as { limits: Record<string, unknown> };
      expect(started.limits).toMatchObject({ user: '0:0', rootfsWriteBytes: 16 * 1048576, rootfsWriteBound: quota ? 'kernel' : 'checked' });
      expect(s.lines.join('\n')).toContain(
        quota
          ? "Work's file system is limited to the task's storage_mb (16 MiB) by the storage driver"
          : "Work's file system is bounded by a check every 10 s, not by the kernel",
      );
    });
  }
});
