/**
 * The sample research run of examples/ledger/sample-run.jsonl, produced the way Assay produces a run: the real run
 * controller (SubmissionService: decide + evolve) drives five submissions, with a scripted workspace standing in
 * for the agent's edits and a scripted Judge that records what the real Judge records (JudgeLaunched with the
 * runtime key's data, JudgeCompleted and RewardRecorded with the Judge's). So every claim in it (rounds, budgets,
 * the selected best) follows from its events, and the claims step of `assay ledger verify` accepts it.
 *
 * The run: tiny-optimizer, minimize val_loss, 4 submissions. Round 1 momentum (0.912), round 2 a tuned momentum
 * (0.574), round 3 plants a numpy.py outside the editable paths (RuleViolation workspace.not_editable, not judged),
 * round 4's Judge fails for infrastructure reasons (refunded), round 5 Adam (0.433, the best); a sixth submission is
 * refused (budget exhausted).
 *
 * `npx jest tests/run/sample-run.unit.spec.ts` checks the file against this; `SAMPLE_RUN_WRITE=1` rewrites it.
 */
import { MemoryTree, takeSnapshot } from '@assay/snapshots';
import { ManualClock, SequentialIds } from '@assay/core';
import { EMPTY_OUTPUT_DIGEST, judgeCompletedData, judgeLaunchedData, rewardRecordedData, type LaunchedLimits } from '@assay/judge';
import type { JsonObject } from '@assay/ledger';
import {
  buildRunRules,
  FakeSnapshotter,
  MemoryRunLedger,
  SubmissionService,
  taskIdOf,
  tokenSha256,
  type JudgeOutcome,
  type JudgePort,
  type JudgeRequest,
  type JudgeStatus,
  type SnapshotRequest,
  type WorkspaceChange,
  type WorkspaceSnapshot,
} from '@assay/run';

export interface SampleEvent {
  stream: string;
  type: string;
  data: JsonObject;
}

export const SAMPLE_RUN_ID = 'r-20261202-0001';
const TASK_DIGEST = 'sha256:0ebb429fa86d481c2630fac53db1c91cffed5d4d41d1021c179444eb67e7ee0b';
const TESTS_DIGEST = 'sha256:59830ebc3a4184110566bf1a290d08473dfdcbd492ce498b14cd1a5e2fa2e441';
const JUDGE_IMAGE = 'sha256:b29814cf5792e684cd75d6a7fce7a67a11887e312f87ca2ac2496d81f365ff72';
const WORK_IMAGE = 'sha256:5c1f0e7a9b3d2c4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e';

/**
 * The workspace a fake snapshot root stands for: one file, `workspace.txt`, holding the root's name. Its real snapshot
 * CID names the root in the sample, so a test can put the very same snapshot in a store (sampleSnapshotTrees).
 */
async function cidOf(root: string): Promise<string> {
  const r = await takeSnapshot(
    { source: new MemoryTree().file('workspace.txt', root), store: null, clock: new ManualClock('2026-12-01T10:00:00.000Z') },
    { dryRun: true },
  );
  return r.rootCid;
}

/** Every sample snapshot's CID and the content of its one file, `workspace.txt` (filled as the sample is produced). */
export const SAMPLE_WORKSPACES = new Map<string, string>();

/** The fake snapshotter under real snapshot CIDs. */
class SampleSnapshotter extends FakeSnapshotter {
  private readonly names = new Map<string, string>();
  override async snapshot(req: SnapshotRequest): Promise<WorkspaceSnapshot> {
    const s = await super.snapshot(req);
    const cid = await cidOf(s.root);
    this.names.set(cid, s.root);
    SAMPLE_WORKSPACES.set(cid, s.root);
    return { ...s, root: cid, durationMs: 12, policyDigest: 'sha256:823412d1eacb67956220e532959f0104603057c88704863ca38e7cd188fda812', source: '/workspace' };
  }
  override changes(from: string, to: string): AsyncIterable<WorkspaceChange> {
    return super.changes(this.names.get(from) ?? from, this.names.get(to) ?? to);
  }
}

export const SAMPLE_JUDGE_LIMITS: LaunchedLimits = {
  cpus: 2,
  cpusRequested: 2,
  memoryBytes: 4294967296,
  pidsLimit: 512,
  verifierTimeoutSec: 600,
  outputCapBytes: 1048576,
  testsTmpfsBytes: 67108864,
  readOnlyRootfs: true,
  capAdd: ['SETGID', 'SETPCAP', 'SETUID', 'SYS_ADMIN'],
  capDrop: ['ALL'],
  noNewPrivileges: true,
  setupCapabilities: ['SETPCAP', 'SYS_ADMIN'],
  procHidden: true,
  rootfsWrites: 'none',
  rootfsWriteBytes: null,
  candidateMemoryBytes: 2147483648,
  user: '0:0',
};

type Verdict = { status: JudgeStatus; rewards?: Record<string, number>; detail?: string; durationMs: number; outputDigest: string; outputBytes: number };

/** Records what JudgeRunner records for one judging, with scripted verdicts. */
class SampleJudge implements JudgePort {
  private n = 0;
  constructor(
    private readonly ledger: MemoryRunLedger,
    private readonly ids: SequentialIds,
    private readonly verdicts: Verdict[],
  ) {}

  async judge(req: JudgeRequest): Promise<JudgeOutcome> {
    const v = this.verdicts[this.n] as Verdict;
    this.n += 1;
    const judge = `${req.run}-${req.round}`;
    const stream = `judge-${judge}`;
    const ref = { run: req.run, round: req.round, judge };
    const ev = (type: string, data: Record<string, unknown>) => ({ type, data, id: this.ids.next() });
    await this.ledger.appendTo(
      stream,
      [
        ev(
          'JudgeLaunched',
          judgeLaunchedData({ ...ref, image: JUDGE_IMAGE, snapshot: req.snapshot, testsDigest: TESTS_DIGEST, limits: SAMPLE_JUDGE_LIMITS, network: 'none' }),
        ),
      ],
      'no_stream',
    );
    const done = [
      ev(
        'JudgeCompleted',
        judgeCompletedData({
          ...ref,
          status: v.status,
          exitCode: v.status === 'completed' ? 0 : null,
          durationMs: v.durationMs,
          outputDigest: v.outputDigest,
          outputBytes: v.outputBytes,
          detail: v.detail ?? null,
        }),
      ),
    ];
    if (v.rewards)
      done.push(ev('RewardRecorded', rewardRecordedData({ ...ref, rewards: v.rewards, primaryMetric: 'val_loss', primaryScore: v.rewards.val_loss ?? null })));
    await this.ledger.appendTo(stream, done, 0);
    return {
      judge,
      status: v.status,
      rewards: v.rewards ?? null,
      primaryScore: v.rewards?.val_loss ?? null,
      detail: v.detail ?? null,
      log: `/logs/assay/round-${req.round}.log`,
      gpuSeconds: 0,
    };
  }
}

const optimizer = (body: string) => `import numpy as np\n\n\nclass Optimizer:\n${body}`;

/** The sample run's events, in order, as `assay ledger append --file` lines would give them. */
export async function sampleRunEvents(): Promise<SampleEvent[]> {
  const clock = new ManualClock('2026-12-02T09:00:00.000Z');
  const ids = new SequentialIds('5a3e0000-0000-4000-8000');
  const ledger = new MemoryRunLedger(clock);
  const snapshotter = new SampleSnapshotter({
    'optimizer.py': optimizer('    def step(self, w, g):\n        return w - 0.01 * g\n'),
    'train.py': 'from optimizer import Optimizer\n',
    'README.md': '# tiny-optimizer\n',
  });
  const judge = new SampleJudge(ledger, ids, [
    {
      status: 'completed',
      rewards: { val_loss: 0.912, train_loss: 0.8208000000000001 },
      durationMs: 8300,
      outputDigest: 'sha256:6776128287ef2cb8ead79828e5b76f6eefbd55378c32a6f8a594785c5e0e5997',
      outputBytes: 2048,
    },
    {
      status: 'completed',
      rewards: { val_loss: 0.574, train_loss: 0.5166 },
      durationMs: 8400,
      outputDigest: 'sha256:bb619172719d183053c27a2dedd8eb7f1ca3f3728781137c6cbe8c2825f4fac7',
      outputBytes: 2048,
    },
    {
      status: 'infrastructure_error',
      detail: 'the Docker daemon stopped answering while the tests ran (container wait: socket hang up)',
      durationMs: 31000,
      outputDigest: EMPTY_OUTPUT_DIGEST,
      outputBytes: 0,
    },
    {
      status: 'completed',
      rewards: { val_loss: 0.433, train_loss: 0.3897 },
      durationMs: 8600,
      outputDigest: 'sha256:d8bf048bf51f42327bee60f77c0c14fdc0afd4b6d28ee248959c40deff14e6ec',
      outputBytes: 2048,
    },
  ]);
  const deps = { run: SAMPLE_RUN_ID, ledger, snapshotter, judge, clock, ids };
  const token = 'sample-token-not-a-secret';
  const { protocol, selection } = buildRunRules({
    settings: { primaryMetric: 'val_loss', direction: 'minimize', maxSubmissions: 4, cooldownSec: 0, timeBudgetSec: 3600, gpuBudgetSec: null },
    agentTimeoutSec: 1800,
    editablePaths: ['optimizer.py'],
    tokenSha256: tokenSha256(token),
    fingerprintInput: { scheme: 'assay.protocol-fingerprint/1', taskDigest: TASK_DIGEST, judgeImageDigest: JUDGE_IMAGE },
  });
  const svc = await new SubmissionService(deps).start({
    run: SAMPLE_RUN_ID,
    task: taskIdOf('tiny-optimizer'),
    taskDigest: TASK_DIGEST,
    agent: 'reference',
    model: 'scripted',
    fingerprint: 'sha256:5aef96240bca5582e6fd0468879a26863d81d1c1fb602def55926ef33ec8bb1f',
    protocol,
    selection,
  });
  await svc.workStarted('assay-work-5e1f-r-20261202-0001', WORK_IMAGE, { cpus: 2, memoryBytes: 4294967296, pidsLimit: 512, network: 'none' });
  await svc.recordWorkspace();
  const auth = { authorization: `Bearer ${token}`, hasBody: false, hasQuery: false };
  const edit = (path: string, content: string) => snapshotter.files.set(path, content);
  const minutes = (m: number) => clock.advance(m * 60_000);

  minutes(4);
  edit(
    'optimizer.py',
    optimizer(
      '    def __init__(self):\n        self.v = 0\n\n    def step(self, w, g):\n        self.v = 0.9 * self.v + g\n        return w - 0.01 * self.v\n',
    ),
  );
  await svc.submit(auth); // round 1: momentum
  minutes(5);
  edit(
    'optimizer.py',
    optimizer(
      '    def __init__(self):\n        self.v = 0\n\n    def step(self, w, g):\n        self.v = 0.95 * self.v + g\n        return w - 0.02 * self.v\n',
    ),
  );
  await svc.recordWorkspace(); // a periodic snapshot between submissions
  await svc.tick();
  await svc.submit(auth); // round 2: tuned momentum
  minutes(5);
  edit('numpy.py', 'def mean(x):\n    return 0.0\n');
  await svc.submit(auth); // round 3: a planted numpy.py, outside the editable paths
  snapshotter.files.delete('numpy.py');
  minutes(5);
  edit(
    'optimizer.py',
    optimizer(
      '    def __init__(self):\n        self.m = self.v = 0\n        self.t = 0\n\n    def step(self, w, g):\n        self.t += 1\n        self.m = 0.9 * self.m + 0.1 * g\n        self.v = 0.999 * self.v + 0.001 * g * g\n        return w - 0.05 * self.m / (np.sqrt(self.v) + 1e-8)\n',
    ),
  );
  await svc.submit(auth); // round 4: the Judge's infrastructure fails: refunded
  minutes(1);
  await svc.submit(auth); // round 5: Adam again, judged
  minutes(1);
  await svc.submit(auth); // refused: the submission budget is used up
  minutes(2);
  await svc.tick();
  await svc.consume('agent_time', 1260);
  await svc.complete();

  const run: SampleEvent[] = ledger.all().map((r) => ({ stream: r.stream, type: r.type, data: r.data as JsonObject }));
  return [
    {
      stream: 'task-tiny-optimizer',
      type: 'TaskRegistered',
      data: {
        task: 'tiny-optimizer',
        name: 'tiny-optimizer',
        digest: TASK_DIGEST,
        instructionDigest: 'sha256:bf5f4400481065a29433f97eda4ad3ce698428d2cbf0c7d5f7163deefd6c1062',
        testsDigest: TESTS_DIGEST,
        environmentDigest: 'sha256:b77349bf1fa9b26d45d545d7d64dad96737e9cfbb3cbb5f5d10fb77b0fcc44ad',
        metadata: { difficulty: 'easy', category: 'optimization' },
      },
    },
    {
      stream: 'image-base',
      type: 'ImageBuilt',
      data: {
        image: 'assay/base:bookworm',
        digest: 'sha256:cae662172fd450bb0cd710a769079c05bfc5d8e35efa6576edc7d0377afdd4a2',
        purpose: 'base',
        recipeDigest: 'sha256:e1d8e552330911f9f779f85b6f2c00a15e790dcc3fbb3b28f5da1d660a30c5b8',
        durationMs: 84210,
      },
    },
    {
      stream: 'image-tiny-optimizer',
      type: 'ImageBuilt',
      data: {
        image: 'assay/task-tiny-optimizer:latest',
        digest: JUDGE_IMAGE,
        purpose: 'judge',
        task: 'tiny-optimizer',
        buildLogDigest: 'sha256:836ff184e7b41b1e13cb5fd89fa1de98dbbab99e9d2918913ff43b86a5c7c213',
        durationMs: 5120,
      },
    },
    ...run,
    {
      stream: `note-${SAMPLE_RUN_ID}`,
      type: 'Note',
      data: {
        text: 'Demonstration run: momentum in rounds 1 and 2, a planted numpy.py in round 3 (not editable), a refunded round 4, Adam in round 5 (the best).',
      },
    },
  ];
}

/** The JSON-lines text of the sample. */
export async function sampleRunJsonl(): Promise<string> {
  return (await sampleRunEvents()).map((e) => JSON.stringify(e)).join('\n') + '\n';
}
