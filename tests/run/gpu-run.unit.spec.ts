/**
 * GPUs in a run, end to end without a GPU: the GPU pool hands out fake device ids, Work and the Judge get them as
 * nvidia device requests through the fake container runtime, the real JudgeRunner judges, every event goes through
 * a real signing Ledger (catalogue schemas checked), and the run records GPU-seconds as BudgetConsumed. The host's
 * GPUs come from FakeGpuProbe / FakeGpuRuntimeCheck: GpusProbed after RunStarted, through the run's own stream, and a
 * run that has it still folds, verifies (claims) and exports as a bundle that verifies.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import { loadTaskPlan } from '@assay/task-format';
import { JudgeRunner, TaskImageBuilder } from '@assay/judge';
import { FakeContainerRuntime } from '../../libs/containers/src/testing';
import {
  FakeGpuProbe,
  FakeGpuRuntimeCheck,
  LedgerRunLedger,
  runClaimRules,
  SubmissionService,
  type RunEventRecord,
  type Snapshotter,
  type WorkControl,
  type WorkspaceChange,
} from '@assay/run';
import { CLAIM_EVENT_TYPES, eventDataProblem, parseVerifierKey, verifyLedger, type JsonObject } from '@assay/ledger';
import { supportedClaim } from '@assay/bundles';
import { GpuPool, PooledJudge, planGpus, planTaskGpus, planUsesGpus, recordWorkGpuUse, workGpuSpec, type GpuPlan } from '../../libs/runtime/src/gpu-pool';
import { RunnerJudge, runResearch } from '../../libs/runtime/src/run-runtime';
import { DirSnapshots, TestOwners, installFakeEntrypoint, memoryLedger, removeFakeSnapshots, tmp, writeTask } from '../judge/judge-fakes';
import { BEARER, startInput, submitReq } from './support/run-fixtures';

const JUDGE_RUNTIME = join(__dirname, '../../task-runtime/judge');
const cleanup: string[] = [];
afterAll(() => {
  for (const d of cleanup) fs.rmSync(d, { recursive: true, force: true });
  removeFakeSnapshots();
});
const dir = (prefix: string) => {
  const d = tmp(prefix);
  cleanup.push(d);
  return d;
};

/** A fake task whose Work needs `work` GPUs (environment.gpus) and each Judge `judge` (verifier.gpus). */
function gpuTask(work: number, judge: number, extra = ''): string {
  const d = writeTask(
    dir('gpu-task-'),
    { files: { 'reward.json': '{"reward": 0.5}' } },
    { toml: `[metadata.rsi_harness.verifier]\ngpus = ${judge}\n${extra}` },
  );
  const toml = join(d, 'task.toml');
  fs.writeFileSync(toml, fs.readFileSync(toml, 'utf8').replace('gpus = 0\nworkdir', `gpus = ${work}\nworkdir`));
  return d;
}

class RecordingWork implements WorkControl {
  frozen = false;
  readonly log: string[] = [];
  async freeze(): Promise<void> {
    this.frozen = true;
    this.log.push('freeze');
  }
  async thaw(): Promise<void> {
    this.frozen = false;
    this.log.push('thaw');
  }
}

/** Snapshots a directory into the Judge's DirSnapshots store, so the real JudgeRunner can judge it. */
class DirStoreSnapshotter implements Snapshotter {
  constructor(
    private readonly store: DirSnapshots,
    private readonly ws: string,
  ) {}
  async snapshot() {
    return { root: await this.store.snapshotDirectory(this.ws), files: 1, bytes: 1, durationMs: 1, policyDigest: 'sha256:p' };
  }
  async *changes(): AsyncIterable<WorkspaceChange> {
    return;
  }
}

/** A fake container runtime with the base image and the fake entrypoint, and a real JudgeRunner and image builder over it. */
async function judgeParts(runnerOptions: { homeTag: string; drainMs?: number }) {
  const runtime = new FakeContainerRuntime();
  runtime.addImage({ tag: 'assay/base:bookworm' });
  installFakeEntrypoint(runtime);
  const snapshots = new DirSnapshots();
  const ml = await memoryLedger();
  const home = dir('gpu-home-');
  const runner = new JudgeRunner({
    runtime,
    snapshots,
    recorder: ml.recorder,
    owners: new TestOwners(),
    clock: ml.clock,
    ids: ml.ids,
    judgesDir: join(home, 'judges'),
    hostCpus: 2,
    ...runnerOptions,
  });
  const images = new TaskImageBuilder({
    runtime,
    snapshots,
    recorder: ml.recorder,
    clock: ml.clock,
    logsDir: join(home, 'logs'),
    judgeRuntimeDir: JUDGE_RUNTIME,
  });
  return { runtime, snapshots, ml, runner, images };
}

async function gpuWorld(taskDir: string, available: string[], settings: { gpuBudgetSec?: number | null } = {}) {
  const { runtime, snapshots, ml, runner, images } = await judgeParts({ homeTag: 'home1', drainMs: 1000 });
  const plan = await loadTaskPlan(taskDir);
  const taskImages = await images.ensure(taskDir, plan);
  const prepared = await runner.prepare(taskDir, plan, taskImages, { gpusFromPool: true });
  const gpuPlan: GpuPlan = await planTaskGpus(taskDir, available);
  const pool = new GpuPool(gpuPlan, ml.clock);

  // Work: created (never started: the fake runtime would run its command) with its GPUs, as run-runtime does
  const ws = dir('gpu-ws-');
  fs.writeFileSync(join(ws, 'main.py'), 'print(1)\n');
  const workId = await runtime.createContainer({
    image: taskImages.work.id,
    cmd: ['sleep', 'infinity'],
    env: {},
    labels: { 'org.assay.role': 'work' },
    mounts: [],
    networkMode: 'none',
    readOnlyRootfs: false,
    capDrop: ['ALL'],
    capAdd: [],
    noNewPrivileges: true,
    pidsLimit: 512,
    memoryBytes: 64 << 20,
    nanoCpus: 1e9,
    init: true,
    openStdin: false,
    ...workGpuSpec(gpuPlan),
  });
  const work = new RecordingWork();
  const seen: Array<{ frozen: boolean; gpus: readonly string[] | undefined }> = [];
  const runnerJudge = new RunnerJudge(runner, prepared, dir('gpu-logs-'));
  const observed = {
    judge: async (req: Parameters<RunnerJudge['judge']>[0]) => {
      seen.push({ frozen: work.frozen, gpus: req.gpus });
      ml.clock.advance(30_000); // the Judge holds its GPUs for 30 s
      return runnerJudge.judge(req);
    },
  };
  const ledger = new LedgerRunLedger(ml.ledger);
  const deps = {
    run: 'r1',
    ledger,
    snapshotter: new DirStoreSnapshotter(snapshots, ws),
    judge: new PooledJudge(observed, pool),
    work,
    clock: ml.clock,
    ids: ml.ids,
    options: { keepWorkPausedDuringJudge: gpuPlan.pauseWorkDuringJudge },
  };
  const svc = await new SubmissionService(deps).start(startInput('r1', { settings }));
  // as run-runtime does right after RunStarted: what the host says its --gpus are
  if (planUsesGpus(gpuPlan)) await svc.gpusProbed('gpu-node-1', await FakeGpuProbe.withGpus(4).probe(gpuPlan.available));
  pool.startWork();
  return { runtime, ml, pool, gpuPlan, workId, work, seen, svc, deps, ledger };
}

const gpuEvents = (all: Array<{ type: string; data: Record<string, unknown> }>) =>
  all.filter((e) => e.type === 'BudgetConsumed' && e.data.budget === 'gpu_seconds').map((e) => e.data);

describe('a run with GPUs (fake devices, fake container runtime, real Judge and signing ledger)', () => {
  it('hand-over: one GPU for Work and Judge; Work stays paused during the Judge; GPU-seconds recorded for both', async () => {
    const w = await gpuWorld(gpuTask(1, 1), ['0']);
    expect(w.gpuPlan).toMatchObject({ work: ['0'], judge: ['0'], handOver: true, pauseWorkDuringJudge: true });
    expect((await w.runtime.inspectContainer(w.workId))?.deviceRequests).toEqual([{ driver: 'nvidia', deviceIds: ['0'], capabilities: ['gpu'] }]);

    w.ml.clock.advance(10_000);
    const reply = await w.svc.submit(submitReq(BEARER));
    expect(reply).toMatchObject({ httpStatus: 200, status: 'completed', round: 1 });
    expect(w.seen).toEqual([{ frozen: true, gpus: ['0'] }]); // Work paused while the Judge held its GPU
    expect(w.work.log).toEqual(['freeze', 'thaw']); // frozen for the snapshot and kept so until the Judge was done

    // the Judge's container got the device; JudgeLaunched records it
    const judgeStream = w.svc.current.rounds[0]?.judge?.judge as string;
    const judgeEvents = await w.ml.stream(`judge-${judgeStream}`);
    expect(judgeEvents[0]).toMatchObject({ type: 'JudgeLaunched', data: { round: 1, limits: expect.objectContaining({ gpus: ['0'] }) } });

    await recordWorkGpuUse(w.pool, w.svc);
    const runEvents = await w.ml.stream('run-r1');
    const gpu = gpuEvents(runEvents);
    expect(gpu[0]).toMatchObject({ budget: 'gpu_seconds', holder: 'judge', gpus: ['0'], round: 1, remaining: null });
    expect(gpu[0]?.heldSec as number).toBeGreaterThanOrEqual(30);
    expect(gpu[1]).toMatchObject({ budget: 'gpu_seconds', holder: 'work', gpus: ['0'] });
    expect(gpu[1]).not.toHaveProperty('round');
    // the borrowed device counted once: Work's time excludes the Judge's 30 s
    expect(gpu[1]?.heldSec as number).toBeGreaterThanOrEqual(10);
    expect(gpu[1]?.heldSec as number).toBeLessThan(30);
    const total = gpu.reduce((a, d) => a + (d.amount as number), 0);
    expect(w.svc.current.consumed.gpu_seconds).toBeCloseTo(total, 6);
    expect(runEvents.filter((e) => e.type === 'BudgetConsumed').every((e) => e.signer === 'controller')).toBe(true);
  });

  it('a Judge that takes the run over its GPU budget: RuleViolation budget.gpu_seconds (score 0), submissions closed; resume rebuilds the use from the ledger alone', async () => {
    const w = await gpuWorld(gpuTask(1, 1), ['0', '1'], { gpuBudgetSec: 20 });
    expect(w.gpuPlan).toMatchObject({ work: ['0'], judge: ['1'], handOver: false, pauseWorkDuringJudge: false });
    const r = await w.svc.submit(submitReq(BEARER));
    expect(r).toMatchObject({ httpStatus: 200, status: 'rule_violation', round: 1 });
    expect(r.text).toContain('rule violation: budget.gpu_seconds (scored 0)');
    expect(w.seen).toEqual([{ frozen: false, gpus: ['1'] }]); // no hand-over: Work runs on during the Judge
    const again = await w.svc.submit(submitReq(BEARER));
    expect(again).toMatchObject({ httpStatus: 429, code: 'SUBMIT_BUDGET_EXHAUSTED' });
    expect(again.text).toContain('budget.gpu_seconds');
    expect(again.text).toMatch(/gpu_seconds=0\n/);

    const fresh = await new SubmissionService(w.deps).load();
    expect(fresh.current.consumed.gpu_seconds).toBe(w.svc.current.consumed.gpu_seconds);
    expect(fresh.current.overBudget).toBe('budget.gpu_seconds');
    expect(fresh.current.rounds[0]?.violation).toMatchObject({ rule: 'budget.gpu_seconds' });
  });

  it("Work alone going over the GPU budget is the run's RuleViolation, recorded once", async () => {
    const w = await gpuWorld(gpuTask(2, 0), ['0', '1'], { gpuBudgetSec: 100 });
    w.ml.clock.advance(40_000);
    await recordWorkGpuUse(w.pool, w.svc); // 2 GPUs × 40 s = 80
    expect(w.svc.current.overBudget).toBeNull();
    w.ml.clock.advance(20_000);
    await recordWorkGpuUse(w.pool, w.svc); // +40 = 120 > 100
    w.ml.clock.advance(20_000);
    await recordWorkGpuUse(w.pool, w.svc);
    const runEvents = await w.ml.stream('run-r1');
    expect(runEvents.filter((e) => e.type === 'RuleViolation').map((e) => e.data)).toEqual([expect.objectContaining({ rule: 'budget.gpu_seconds', score: 0 })]);
    expect((await w.svc.submit(submitReq(BEARER))).code).toBe('SUBMIT_BUDGET_EXHAUSTED');
  });

  it('pause_work_during_judge = true keeps Work paused during Judges even with GPUs to spare (and on CPU)', async () => {
    const t = gpuTask(0, 0, '[metadata.assay]\npause_work_during_judge = true\n');
    expect(await planTaskGpus(t, [])).toMatchObject({ handOver: false, pauseWorkDuringJudge: true });
    const w = await gpuWorld(t, []);
    await w.svc.submit(submitReq(BEARER));
    expect(w.seen).toEqual([{ frozen: true, gpus: undefined }]);
  });
});

describe('GpusProbed: the host GPUs behind --gpus, recorded at the start of a GPU run', () => {
  it('follows RunStarted in the run stream, signed by the controller, schema-checked by the signing ledger; the run still folds', async () => {
    const w = await gpuWorld(gpuTask(1, 1), ['1', 'GPU-00000000-0000-0000-0000-000000000003']);
    const runEvents = await w.ml.stream('run-r1');
    expect(runEvents.slice(0, 2).map((e) => [e.type, e.revision, e.signer])).toEqual([
      ['RunStarted', 0, 'controller'],
      ['GpusProbed', 1, 'controller'],
    ]);
    const data = runEvents[1]!.data;
    expect(data).toEqual({
      run: 'r1',
      node: 'gpu-node-1',
      gpus: [
        { device: '1', index: 1, uuid: 'GPU-00000000-0000-0000-0000-000000000001', model: 'NVIDIA H200', memoryMiB: 143771, driver: '550.54.15', cuda: '12.4' },
        {
          device: 'GPU-00000000-0000-0000-0000-000000000003',
          index: 3,
          uuid: 'GPU-00000000-0000-0000-0000-000000000003',
          model: 'NVIDIA H200',
          memoryMiB: 143771,
          driver: '550.54.15',
          cuda: '12.4',
        },
      ],
    });
    expect(eventDataProblem('GpusProbed', data as never)).toBeNull();
    // the catalogue refuses what the probe never writes
    expect(eventDataProblem('GpusProbed', { ...data, gpus: [{ ...(data.gpus as object[])[0], uuid: '--privileged' }] } as never)).toMatchObject({
      code: 'LEDGER_EVENT_INVALID',
      message: expect.stringContaining('data.gpus[0].uuid'),
    });
    expect(eventDataProblem('GpusProbed', { ...data, extra: 1 } as never)?.code).toBe('LEDGER_EVENT_INVALID');

    // the run goes on as before: a round, GPU-seconds; a fresh fold from the ledger alone agrees
    expect((await w.svc.submit(submitReq(BEARER))).status).toBe('completed');
    const fresh = await new SubmissionService(w.deps).load();
    expect(fresh.current.revision).toBe(w.svc.current.revision);
    expect(fresh.current.rounds).toHaveLength(1);

    // a resumed controller session records it again (resumed: true); never after RunCompleted
    await w.svc.gpusProbed('gpu-node-2', await FakeGpuProbe.withGpus(2).probe(['1']), true);
    expect((await w.ml.stream('run-r1')).at(-1)).toMatchObject({ type: 'GpusProbed', data: { node: 'gpu-node-2', resumed: true } });
    await w.svc.complete();
    await expect(w.svc.gpusProbed('gpu-node-2', await FakeGpuProbe.withGpus(2).probe(['1']))).rejects.toMatchObject({ code: 'RUN_CONFLICT' });
  });

  it("a run with GpusProbed verifies: the ledger verifier's claims step folds it, and so does a bundle's claim", async () => {
    const w = await gpuWorld(gpuTask(1, 0), ['0']);
    expect((await w.ml.stream('run-r1')).map((e) => e.type)).toContain('GpusProbed');
    await w.svc.submit(submitReq(BEARER));
    await recordWorkGpuUse(w.pool, w.svc);
    await w.svc.complete();
    await w.ml.ledger.checkpoint();
    const report = await verifyLedger({
      store: w.ml.ledger.store,
      checkpoints: [],
      decodeKey: (t: string) => ({ keyId: parseVerifierKey(t).signer, publicKey: parseVerifierKey(t).publicKey }),
      claims: runClaimRules(),
      workers: 0,
    });
    expect(report.failure).toBeNull();
    expect(report.steps.find((s) => s.name === 'claims')).toMatchObject({ status: 'ok' });

    // a bundle's claims step hands the claim types, in position order, to the checker and then folds the run's
    // (verify-bundle.ts): GpusProbed is one of them, so the run stream stays dense and the claim is the same
    const all: RunEventRecord[] = await new LedgerRunLedger(w.ml.ledger).read('r1');
    const claimEvents = all.filter((e) => CLAIM_EVENT_TYPES.includes(e.type));
    expect(claimEvents.map((e) => e.type)).toContain('GpusProbed');
    const checker = runClaimRules().start();
    for (const e of claimEvents) expect(checker.event({ ...e, signer: 'c', data: e.data as JsonObject })).toBeNull();
    expect(checker.end()).toBeNull();
    expect(supportedClaim('r1', claimEvents, claimEvents, false)).toEqual(supportedClaim('r1', all, all, false));
    expect(supportedClaim('r1', claimEvents, claimEvents, false)).toMatchObject({ run: 'r1', status: 'completed' });

    // and the claims step refuses it where it does not belong: before RunStarted, in another stream
    const ev = (position: number, stream: string, type: string, data: JsonObject) => ({ position, stream, revision: 0, type, signer: 'c', data });
    expect(
      runClaimRules()
        .start()
        .event(ev(1, 'run-x', 'GpusProbed', { run: 'x', node: 'n', gpus: [] })),
    ).toMatchObject({ rule: 'run.started_first' });
    expect(
      runClaimRules()
        .start()
        .event(ev(1, 'note-x', 'GpusProbed', { run: 'x', node: 'n', gpus: [] })),
    ).toMatchObject({ rule: 'claims.stream' });
  });

  it('the fakes decide as the real adapters do: which plans probe, a daemon without the toolkit, an unknown device', async () => {
    expect(planUsesGpus(planGpus({ available: ['0'], workGpus: 1, judgeGpus: 0 }))).toBe(true);
    expect(planUsesGpus(planGpus({ available: ['0'], workGpus: 0, judgeGpus: 1 }))).toBe(true);
    expect(planUsesGpus(planGpus({ available: ['0', '1'], workGpus: 0, judgeGpus: 0 }))).toBe(false); // --gpus on a CPU task
    expect(planUsesGpus(planGpus({ available: [], workGpus: 0, judgeGpus: 0 }))).toBe(false);
    await expect(new FakeGpuRuntimeCheck({ Runtimes: { runc: {} } }).check(['0'])).rejects.toMatchObject({ code: 'RUN_GPU_RUNTIME_MISSING' });
    await expect(FakeGpuProbe.withGpus(2).probe(['2'])).rejects.toMatchObject({ code: 'RUN_GPUS_UNKNOWN' });
  });
});

describe('JudgeRunner and GPUs', () => {
  it('a GPU verifier is refused without a pool (assay judge), and a Judge handed the wrong number of GPUs is a bad request', async () => {
    const { snapshots, runner, images } = await judgeParts({ homeTag: 'h' });
    const task = gpuTask(0, 2);
    const plan = await loadTaskPlan(task);
    const imgs = await images.ensure(task, plan);
    await expect(runner.prepare(task, plan, imgs)).rejects.toMatchObject({
      code: 'JUDGE_TASK_UNSUPPORTED',
      message: expect.stringMatching(/needs 2 GPU\(s\).*assay run --gpus LIST/),
    });
    const t = await runner.prepare(task, plan, imgs, { gpusFromPool: true });
    const ws = dir('gpu-ws-');
    fs.writeFileSync(join(ws, 'a.py'), 'x');
    const cid = await snapshots.snapshotDirectory(ws);
    await expect(runner.judge(t, cid, {}, { gpus: ['0'] })).rejects.toMatchObject({
      code: 'JUDGE_BAD_REQUEST',
      message: expect.stringMatching(/needs 2 GPU\(s\).*but 1 were handed/),
    });
    const r = await runner.judge(t, cid, {}, { gpus: ['3', 'GPU-aa11'] });
    expect(r).toMatchObject({ status: 'completed', limits: { gpus: ['3', 'GPU-aa11'] } });
  });
});

describe('assay run refuses a GPU task it cannot give GPUs, before anything starts', () => {
  it('no --gpus: refused with RUN_GPUS_INSUFFICIENT naming what the task needs', async () => {
    const home = dir('gpu-run-home-');
    await expect(runResearch({ home, taskDir: gpuTask(1, 1), agent: 'reference' })).rejects.toMatchObject({
      code: 'RUN_GPUS_INSUFFICIENT',
      kind: 'invalid_input',
      message: expect.stringMatching(
        /it needs GPUs \(Work 1: environment.gpus; Judge 1: metadata.rsi_harness.verifier.gpus\) and --gpus gives none; pass --gpus LIST/,
      ),
    });
    expect(fs.readdirSync(home)).toEqual([]); // no ledger, no run directory, no container
    expect(planGpus({ available: ['0'], workGpus: 1, judgeGpus: 1 })).toMatchObject({ handOver: true }); // one GPU is enough with a hand-over
  });

  it('a daemon without the NVIDIA Container Toolkit: RUN_GPU_RUNTIME_MISSING with how to fix it, nothing probed or started', async () => {
    const home = dir('gpu-run-home-');
    const probe = FakeGpuProbe.withGpus(2);
    const check = new FakeGpuRuntimeCheck({ Runtimes: { runc: { path: 'runc' } }, CDISpecDirs: ['/etc/cdi'] });
    await expect(runResearch({ home, taskDir: gpuTask(1, 1), agent: 'reference', gpus: ['0'], gpuRuntimeCheck: check, gpuProbe: probe })).rejects.toMatchObject(
      {
        code: 'RUN_GPU_RUNTIME_MISSING',
        kind: 'unavailable',
        message: expect.stringMatching(
          /the NVIDIA Container Toolkit is not set up on this Docker daemon.*nvidia-ctk runtime configure --runtime=docker.*restart dockerd/,
        ),
      },
    );
    expect(check.calls).toEqual([['0']]);
    expect(probe.calls).toEqual([]);
    expect(fs.readdirSync(home)).toEqual([]); // no ledger, no run directory, no container
  });

  it('a --gpus id the host does not have: RUN_GPUS_UNKNOWN naming it and what the host has, nothing started', async () => {
    const home = dir('gpu-run-home-');
    await expect(
      runResearch({
        home,
        taskDir: gpuTask(1, 0),
        agent: 'reference',
        gpus: ['0', '5'],
        gpuRuntimeCheck: new FakeGpuRuntimeCheck({ CDISpecDirs: ['/var/run/cdi'] }, new Map([['/var/run/cdi', ['nvidia.yaml']]])),
        gpuProbe: FakeGpuProbe.withGpus(2),
      }),
    ).rejects.toMatchObject({
      code: 'RUN_GPUS_UNKNOWN',
      kind: 'invalid_input',
      message: expect.stringMatching(/--gpus names "5", which this host does not have \(nvidia-smi lists: 0 \(GPU-0+-0+-0+-0+-0+, NVIDIA H200\), 1 /),
    });
    expect(fs.readdirSync(home)).toEqual([]);
  });

  it('more GPUs than given: the numbers are named', async () => {
    const home = dir('gpu-run-home-');
    await expect(runResearch({ home, taskDir: gpuTask(4, 0), agent: 'reference', gpus: ['0', '1'] })).rejects.toThrow(
      /Work needs 4 GPU\(s\) \(environment.gpus\) but --gpus gives 2 \(0,1\)/,
    );
    expect(fs.readdirSync(home)).toEqual([]);
  });
});
