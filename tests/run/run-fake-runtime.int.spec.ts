/**
 * A whole research run on the in-memory container runtime, without Docker: runResearch's preparation (the task's
 * images built, the workspace seeded, Work's container spec), the controller session (runWorkSession), the agent's
 * submissions over the real submission socket, the real JudgeRunner judging real snapshots of the workspace, and the
 * end (the transcript's digest, the checkpoint), all recorded in a real signing ledger under a ManualClock.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import type { ContainerSpec } from '@assay/containers';
import { LedgerHome, type ReadEvent } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { FakeContainerRuntime, type FakeProcess } from '../../libs/containers/src/testing';
import { runResearch, type RunStartOptions } from '../../libs/runtime/src/run-runtime';
import { LIFELINE_CMD } from '../../libs/runtime/src/work-containment';
import { installFakeEntrypoint, tmp, writeTask } from '../judge/judge-fakes';

const T = '2026-09-01T08:00:00.000Z';
const cleanup: string[] = [];
afterAll(() => {
  for (const d of cleanup) fs.rmSync(d, { recursive: true, force: true });
});

/** POST /submit over Work's submission socket (the host path its /run/assay mount binds), as rsi-submit does. */
function submit(p: FakeProcess): Promise<string> {
  const mount = p.spec.mounts.find((m) => m.target === '/run/assay');
  if (!mount || mount.type !== 'bind') throw new Error('Work has no /run/assay bind');
  const token = p.readFile('/run/assay/token').toString('utf8').trim();
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: join(mount.source, 'submit.sock'), method: 'POST', path: '/submit', headers: { authorization: `Bearer ${token}`, accept: 'text/plain' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

interface Setup {
  readonly home: string;
  readonly taskDir: string;
  readonly clock: ManualClock;
  readonly fake: FakeContainerRuntime;
  /** Work's container spec, as the agent's exec saw it. */
  work: ContainerSpec | null;
  readonly wardens: Array<{ id: string; closed: boolean }>;
  readonly options: RunStartOptions;
  readonly lines: string[];
  readonly shown: string[];
}

/** A fake task (reward 0.5 per Judge), a ledger, and a fake runtime whose `bash` is the agent `agent`. */
async function setup(run: string, agent: (p: FakeProcess) => Promise<number>): Promise<Setup> {
  const home = tmp('fake-run-home-');
  const taskDir = writeTask(tmp('fake-run-task-'), { files: { 'reward.json': '{"reward": 0.5}' } });
  cleanup.push(home, taskDir);
  fs.mkdirSync(join(taskDir, 'environment', 'workspace'), { recursive: true });
  fs.writeFileSync(join(taskDir, 'environment', 'workspace', 'start.txt'), 'the start\n');
  const clock = new ManualClock(T);
  await LedgerHome.init(home, { clock, ids: new SequentialIds(), origin: 'assay.test/fake-run' });
  const fake = new FakeContainerRuntime();
  fake.addImage({ tag: 'assay/base:bookworm' });
  installFakeEntrypoint(fake);
  fake.defineProgram('sh', async (p) => {
    if (p.argv.join(' ') === LIFELINE_CMD.join(' ')) {
      await p.sleep(3_600_000); // Work's first process: until the container is killed
      return 0;
    }
    return 3; // the seed container: the image has nothing in its workdir
  });
  fake.defineProgram('test', async (p) => (p.exists(p.argv[2] ?? '') ? 0 : 1)); // is the bounded workspace seen?
  const s: Setup = {
    home,
    taskDir,
    clock,
    fake,
    work: null,
    wardens: [],
    lines: [],
    shown: [],
    options: {
      home,
      taskDir,
      agent: 'command:solve',
      runId: run,
      clock,
      ids: new SequentialIds('11111111-0000-4000-8000'),
      containers: fake,
      overrides: { maxSubmissions: 2, cooldownSec: 0 },
      snapshotIntervalSec: 0,
      checkpointIntervalSec: 0,
      log: (l) => s.lines.push(l),
      agentOutput: (chunk) => s.shown.push(chunk.toString('utf8')),
      workWarden: (id) => {
        const w = { id, closed: false };
        s.wardens.push(w);
        return { pid: -1, close: () => void (w.closed = true) };
      },
    },
  };
  fake.defineProgram('bash', (p) => {
    s.work = p.spec;
    return agent(p);
  });
  return s;
}

async function ledgerOf(home: string): Promise<{ events: ReadEvent[]; verified: boolean }> {
  const lh = await LedgerHome.open(home, { clock: new ManualClock(T), ids: new SequentialIds() });
  try {
    return { events: await lh.readEvents({ limit: 10_000 }), verified: (await lh.verify({ claims: runClaimRules() })).ok };
  } finally {
    await lh.close();
  }
}

describe('a research run on the in-memory container runtime', () => {
  it('builds, starts Work, takes two submissions, judges them and completes, all signed in the ledger', async () => {
    const replies: string[] = [];
    const s = await setup('r-fake', async (p) => {
      p.writeFile('/workspace/solution.txt', 'first try\n');
      replies.push(await submit(p));
      p.writeFile('/workspace/solution.txt', 'second try\n');
      replies.push(await submit(p));
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
    const { events, verified } = await ledgerOf(s.home);
    expect(verified).toBe(true);
    const runEvents = events.filter((e) => e.envelope.stream === 'run-r-fake').map((e) => e.envelope);
    expect(runEvents.map((e) => e.type)).toEqual([
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
    const ws = join(s.home, 'runs', 'r-fake', 'workspace');
    expect(fs.readFileSync(join(ws, 'start.txt'), 'utf8')).toBe('the start\n');
    expect(fs.readFileSync(join(ws, 'solution.txt'), 'utf8')).toBe('second try\n');
    expect(await s.fake.listContainers({})).toEqual([]);
    expect(s.fake.calls).toEqual(expect.arrayContaining([`kill ${workId.slice(0, 12)}`, `remove ${workId.slice(0, 12)}`]));
    // the agent's output reached the operator marked as the agent's
    expect(s.shown.join('')).toMatch(/agent: done/);
    expect(s.lines).toContain('agent exited with status 0');
  }, 60_000);

  it('an operator cancel while the agent works: Work killed and removed, the run recorded as cancelled', async () => {
    const ac = new AbortController();
    const s = await setup('r-cancel', async (p) => {
      p.writeFile('/workspace/solution.txt', 'unfinished\n');
      ac.abort();
      await p.sleep(3_600_000); // killed with Work
      return 0;
    });
    const report = await runResearch({ ...s.options, signal: ac.signal });
    expect(report).toMatchObject({ run: 'r-cancel', status: 'cancelled', rounds: [] });
    const { events, verified } = await ledgerOf(s.home);
    expect(verified).toBe(true);
    const runEvents = events.filter((e) => e.envelope.stream === 'run-r-cancel').map((e) => e.envelope);
    expect(runEvents.map((e) => e.type)).toEqual(['RunStarted', 'WorkStarted', 'SnapshotTaken', 'RunCompleted']);
    expect(runEvents.at(-1)!.data).toMatchObject({ status: 'cancelled' });
    expect(await s.fake.listContainers({})).toEqual([]);
    expect(s.wardens.map((w) => w.closed)).toEqual([true]);
  }, 60_000);
});
