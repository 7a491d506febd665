/**
 * The runtime node's NestJS module (libs/runtime/src/nest): the runtime's use cases dispatched as commands on the
 * same buses as the ledger's, with the Clock, the ids and the container runtime the module binds. Here the container
 * runtime is the in-memory fake with its daemon "down", so each command shows which runtime it was given (the fake's
 * own message) without building an image; the ledger is a real SQLite ledger under a temporary ASSAY_HOME.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModulesContainer, NestFactory } from '@nestjs/core';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { INestApplicationContext } from '@nestjs/common';
import { ManualClock, SequentialIds } from '@assay/core';
import { CONTAINER_RUNTIME } from '@assay/containers';
import { AppendEventsCommand, InitLedgerCommand, LedgerHomeProvider, ReadEventsQuery } from '@assay/ledger';
import { SnapshotHomeProvider, parseCid } from '@assay/snapshots';
import {
  BuildBaseImageCommand,
  BuildTaskImagesCommand,
  CheckTaskCommand,
  ExportRejudgeBundleCommand,
  ExportRunBundleCommand,
  ImportTaskCommand,
  JudgeSnapshotCommand,
  ListRunsQuery,
  TaskDigestsQuery,
  RecordedRunLogsQuery,
  RecordBaselineCommand,
  RunResearchCommand,
  RuntimeComposition,
  RuntimeModule,
} from '@assay/runtime';
import { FakeContainerRuntime } from '../../libs/containers/src/testing';
import { installFakeEntrypoint } from '../judge/judge-fakes';
import { FAKE_RUN_TIME, fakeRun, submitFromWork, writeFakeRunTask } from './support/fake-run';
import { DockerGpuRuntimeCheck, NvidiaSmiGpuProbe } from '../../libs/runtime/src/gpu-host';
import { FakeGpuProbe, FakeGpuRuntimeCheck, LedgerRunLedger, RunPorts } from '@assay/run';

const TASK = join(__dirname, '..', '..', 'examples', 'tasks', 'hello-judge');

/** RuntimeModule over a fresh home (its ledger initialised through the module), with `fake` as its container runtime. */
async function bootModule(
  prefix: string,
  clock: ManualClock,
  ids: string,
  fake: FakeContainerRuntime,
): Promise<{ home: string; app: INestApplicationContext }> {
  const home = mkdtempSync(join(tmpdir(), prefix));
  const app = await NestFactory.createApplicationContext(RuntimeModule.forHome(home, { clock, ids: new SequentialIds(ids), containers: fake }), {
    logger: false,
    abortOnError: false,
  });
  await app.get(CommandBus).execute(new InitLedgerCommand());
  return { home, app };
}

describe('RuntimeModule: the runtime use cases as commands', () => {
  let home: string;
  let app: INestApplicationContext;
  let fake: FakeContainerRuntime;
  const clock = new ManualClock('2026-05-01T12:00:00.000Z');

  beforeAll(async () => {
    fake = new FakeContainerRuntime();
    fake.available = false;
    ({ home, app } = await bootModule('assay-runtime-module-', clock, '00000000-0000-4000-8000', fake));
  }, 30_000);

  afterAll(async () => {
    await app?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it('binds the container runtime it was given, and the ledger module its clock', async () => {
    expect(app.get(CONTAINER_RUNTIME)).toBe(fake);
    const events = await app.get(QueryBus).execute(new ReadEventsQuery());
    expect(events.length).toBeGreaterThan(0);
    expect(new Set(events.map((e) => e.envelope.time))).toEqual(new Set(['2026-05-01T12:00:00.000Z']));
    expect(events[0]?.envelope.id).toMatch(/^00000000-0000-4000-8000-/);
  });

  it('a research run reaches the container runtime of the module (its daemon is down: CONTAINER_UNAVAILABLE)', async () => {
    const run = app.get(CommandBus).execute(new RunResearchCommand({ home, taskDir: TASK, agent: 'reference', runId: 'r-module', snapshotIntervalSec: 0 }));
    await expect(run).rejects.toMatchObject({ code: 'CONTAINER_UNAVAILABLE', message: expect.stringContaining('fake: unavailable') });
    expect(fake.calls).toEqual([]); // nothing was created: the ping failed first
  }, 30_000);

  it('Judges on a snapshot do too, before sweeping or snapshotting anything', async () => {
    const ready = jest.fn();
    await expect(
      app.get(CommandBus).execute(new JudgeSnapshotCommand({ home, taskDir: TASK, snapshot: join(TASK, 'solution'), repeat: 1, onReady: ready })),
    ).rejects.toMatchObject({ code: 'CONTAINER_UNAVAILABLE', message: expect.stringContaining('fake: unavailable') });
    expect(ready).not.toHaveBeenCalled();
    expect(fake.calls).toEqual([]);
  }, 30_000);

  it('building images does too', async () => {
    for (const cmd of [new BuildTaskImagesCommand(TASK, { home }), new BuildBaseImageCommand({ home })])
      await expect(app.get(CommandBus).execute(cmd)).rejects.toMatchObject({
        code: 'CONTAINER_UNAVAILABLE',
        message: expect.stringContaining('fake: unavailable'),
      });
    expect(fake.calls).toEqual([]);
  }, 30_000);

  it("the runs' views are queries on the module's ledger, opened read-only: no run was recorded by the failed start", async () => {
    expect(await app.get(QueryBus).execute(new ListRunsQuery())).toEqual([]);
    expect(await app.get(QueryBus).execute(new RecordedRunLogsQuery('r-module', 'judge'))).toEqual(new Map());
  });

  it("a task's digests are a query (nothing stored); importing a task reaches the module's container runtime after digesting it", async () => {
    const digests = await app.get(QueryBus).execute(new TaskDigestsQuery(TASK));
    expect(digests.task).toMatch(/^b[a-z2-7]+$/);
    await expect(app.get(CommandBus).execute(new ImportTaskCommand(TASK))).rejects.toMatchObject({
      code: 'CONTAINER_UNAVAILABLE',
      message: expect.stringContaining('fake: unavailable'),
    });
    expect((await app.get(QueryBus).execute(new ReadEventsQuery())).some((e) => e.envelope.type === 'TaskRegistered')).toBe(false);
  }, 30_000);

  it("bundle exports sign with the module's ledger: an unknown run and an unknown re-judging are refused, nothing written", async () => {
    const out = join(home, 'no.bundle');
    await expect(
      app.get(CommandBus).execute(new ExportRunBundleCommand({ run: 'r-none', out, snapshots: 'none', logs: 'none', hostnames: [] })),
    ).rejects.toMatchObject({ code: 'BUNDLE_RUN_NOT_FOUND' });
    await expect(app.get(CommandBus).execute(new ExportRejudgeBundleCommand({ rejudge: 'none', out, cosigned: true }))).rejects.toMatchObject({
      code: 'BUNDLE_CHECKPOINT_INVALID',
      message: expect.stringContaining(join(home, 'ledger', 'checkpoint.cosigned')),
    });
    expect(existsSync(out)).toBe(false);
  }, 30_000);

  it('a task check and a baseline do too', async () => {
    await expect(app.get(CommandBus).execute(new CheckTaskCommand(TASK, { repeat: 1 }))).rejects.toMatchObject({
      code: 'CONTAINER_UNAVAILABLE',
      message: expect.stringContaining('fake: unavailable'),
    });
    await expect(app.get(CommandBus).execute(new RecordBaselineCommand(TASK, { home, repeat: 1 }))).rejects.toMatchObject({
      code: 'CONTAINER_UNAVAILABLE',
      message: expect.stringContaining('fake: unavailable'),
    });
  }, 30_000);
});

describe("RuntimeModule's JudgeRuntime: the module's ledger and snapshot store, shared by its commands", () => {
  let home: string;
  let app: INestApplicationContext;
  const clock = new ManualClock('2026-05-02T09:00:00.000Z');

  beforeAll(async () => {
    const fake = new FakeContainerRuntime();
    fake.addImage({ tag: 'assay/base:bookworm' });
    installFakeEntrypoint(fake);
    ({ home, app } = await bootModule('assay-runtime-module-judge-', clock, '33333333-0000-4000-8000', fake));
  }, 30_000);

  afterAll(async () => {
    await app?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it('is composed over the providers the module holds, and closing it leaves them open', async () => {
    // JudgeModule and RunModule import the very modules RuntimeModule does: Nest makes each once, so the Judge's
    // recorder and store and the run ledger are over the same ledger and store as every other command
    const modules = [...app.get(ModulesContainer).values()].map((m) => m.metatype.name);
    for (const name of ['LedgerModule', 'SnapshotsModule', 'ContainersModule', 'JudgeModule', 'RunModule']) {
      expect(modules.filter((n) => n === name)).toEqual([name]);
    }
    const rt = await app.get(RuntimeComposition).judgeRuntime({});
    expect(rt.ledgerHome).toBe(await app.get(LedgerHomeProvider).get());
    expect(rt.snapshotHome).toBe(await app.get(SnapshotHomeProvider).writer());
    await rt.close();
    // still open: the module's ledger appends, its store answers
    await app.get(CommandBus).execute(new AppendEventsCommand('note-module', [{ type: 'Note', data: { text: 'after close' } }]));
    expect(await rt.snapshotHome.pins()).toEqual(expect.any(Array));
  });

  it('Judges on a snapshot record through the module ledger, with its clock and ids', async () => {
    const task = writeFakeRunTask(mkdtempSync(join(tmpdir(), 'assay-runtime-module-task-')));
    try {
      const r = await app
        .get(CommandBus)
        .execute(new JudgeSnapshotCommand({ home, taskDir: task, snapshot: join(task, 'environment', 'workspace'), repeat: 2 }));
      expect(r.results.map((j) => [j.status, j.status === 'completed' ? j.primaryScore : null])).toEqual([
        ['completed', 0.5],
        ['completed', 0.5],
      ]);
      const events = (await app.get(QueryBus).execute(new ReadEventsQuery({ limit: 1000 }))).map((e) => e.envelope);
      const judged = events.filter((e) => ['ImageBuilt', 'JudgeLaunched', 'JudgeCompleted', 'RewardRecorded'].includes(e.type));
      expect(judged.map((e) => e.type)).toEqual(['ImageBuilt', 'ImageBuilt', ...Array(2).fill(['JudgeLaunched', 'JudgeCompleted', 'RewardRecorded']).flat()]);
      expect(new Set(judged.map((e) => e.time))).toEqual(new Set(['2026-05-02T09:00:00.000Z']));
      expect(judged.every((e) => e.id.startsWith('33333333-0000-4000-8000-'))).toBe(true);
      // the snapshot judged is in the module's store
      expect(await (await app.get(SnapshotHomeProvider).reader()).verify(parseCid(r.snapshot))).toBeTruthy();
    } finally {
      rmSync(task, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("RuntimeModule's RunModule: the run's shared ports, bound once for the module's runs and task checks", () => {
  const dirs: string[] = [];
  const scratch = (prefix: string): string => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('binds the GPU runtime check to `docker info` through the module container runtime, and the run ledger to its ledger', async () => {
    const fake = new FakeContainerRuntime();
    const { home, app } = await bootModule('assay-runtime-module-run-', new ManualClock('2026-05-03T09:00:00.000Z'), '44444444-0000-4000-8000', fake);
    dirs.push(home);
    try {
      const ports = app.get(RunPorts);
      expect(ports.gpuRuntimeCheck).toBeInstanceOf(DockerGpuRuntimeCheck);
      expect(ports.gpuProbe).toBeInstanceOf(NvidiaSmiGpuProbe);
      fake.available = false; // the check asks the module's runtime: its daemon is down
      await expect(ports.gpuRuntimeCheck.check(['0'])).rejects.toMatchObject({ code: 'CONTAINER_UNAVAILABLE' });
      const ledger = await ports.ledger();
      expect(ledger).toBeInstanceOf(LedgerRunLedger);
      expect(await ledger.read('r-none')).toEqual([]);
    } finally {
      await app.close();
    }
  }, 30_000);

  it('a GPU run and a GPU task check ask the GPU ports given to the module, before anything starts', async () => {
    const taskDir = writeFakeRunTask(scratch('assay-runtime-module-gpu-task-'));
    const toml = join(taskDir, 'task.toml');
    // Work and the Judge each need one GPU
    writeFileSync(toml, `${readFileSync(toml, 'utf8').replace('gpus = 0\nworkdir', 'gpus = 1\nworkdir')}[metadata.rsi_harness.verifier]\ngpus = 1\n`);
    const probe = FakeGpuProbe.withGpus(2);
    const check = new FakeGpuRuntimeCheck({ Runtimes: { runc: { path: 'runc' } }, CDISpecDirs: ['/etc/cdi'] });
    const home = scratch('assay-runtime-module-gpu-');
    const app = await NestFactory.createApplicationContext(
      RuntimeModule.forHome(home, { containers: new FakeContainerRuntime(), gpu: { probe, runtimeCheck: check } }),
      { logger: false, abortOnError: false },
    );
    try {
      const bus = app.get(CommandBus);
      await expect(bus.execute(new RunResearchCommand({ home, taskDir, agent: 'reference', gpus: ['0'] }))).rejects.toMatchObject({
        code: 'RUN_GPU_RUNTIME_MISSING',
      });
      // a task check reports it as its build check, nothing built
      const checked = await bus.execute(new CheckTaskCommand(taskDir, { gpus: ['1'], repeat: 1 }));
      expect(checked).toMatchObject({ sound: false, images: null });
      expect(checked.checks.find((c) => c.name === 'build')).toMatchObject({
        status: 'failed',
        detail: expect.stringMatching(/^--gpus 1: the NVIDIA Container Toolkit is not set up on this Docker daemon/),
      });
      expect(check.calls).toEqual([['0'], ['1']]);
      expect(probe.calls).toEqual([]);
      expect(readdirSync(home)).toEqual([]); // no ledger, no run directory
    } finally {
      await app.close();
    }
  }, 30_000);

  it("a whole run dispatched as RunResearchCommand records through RunModule's run ledger, on the module runtime, clock and ids", async () => {
    const home = scratch('assay-runtime-module-whole-');
    const taskDir = writeFakeRunTask(scratch('assay-runtime-module-whole-task-'));
    const s = fakeRun(home, taskDir, 'r-command', async (p) => {
      p.writeFile('/workspace/solution.txt', 'an answer\n');
      await submitFromWork(p);
      return 0;
    });
    const { clock, ids, containers, ...options } = s.options;
    const app = await NestFactory.createApplicationContext(
      RuntimeModule.forHome(home, { ...(clock ? { clock } : {}), ...(ids ? { ids } : {}), ...(containers ? { containers } : {}) }),
      { logger: false, abortOnError: false },
    );
    try {
      await app.get(CommandBus).execute(new InitLedgerCommand());
      const ledgerAsked = jest.spyOn(app.get(RunPorts), 'ledger');
      const report = await app.get(CommandBus).execute(new RunResearchCommand(options));
      expect(report).toMatchObject({ run: 'r-command', status: 'completed', bestRound: 1, bestScore: 0.5 });
      expect(ledgerAsked).toHaveBeenCalledTimes(1);
      const run = await (await app.get(RunPorts).ledger()).read('r-command');
      expect(run[0]?.type).toBe('RunStarted');
      expect(run.map((e) => e.type)).toContain('RewardRecorded');
      expect(s.work).not.toBeNull(); // Work ran on the module's (fake) runtime
      const events = (await app.get(QueryBus).execute(new ReadEventsQuery({ limit: 10_000 }))).map((e) => e.envelope);
      const ofRun = events.filter((e) => e.stream === 'run-r-command');
      expect(new Set(ofRun.map((e) => e.time))).toEqual(new Set([FAKE_RUN_TIME]));
      expect(ofRun.every((e) => e.id.startsWith('11111111-0000-4000-8000-'))).toBe(true);
    } finally {
      await app.close();
    }
  }, 60_000);
});
