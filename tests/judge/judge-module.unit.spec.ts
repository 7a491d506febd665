/**
 * JudgeModule binds the Judge's ports (JUDGE_BINDING, JUDGE_OWNERS) and composes runners over them with the container
 * runtime, clock and ids of the modules it imports. Here everything is a fake but the Judge itself: the in-memory
 * container runtime, a directory-backed snapshot port and a signing Ledger over memory stores.
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { Module, type DynamicModule, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AssayError, CLOCK, ID_GENERATOR } from '@assay/core';
import { ContainersModule, type ContainerSpec } from '@assay/containers';
import { loadTaskPlan } from '@assay/task-format';
import { JudgeComposer, JudgeModule, ProcessOwnerRegistry, type JudgeBinding, type JudgeHostSettings } from '@assay/judge';
import { FakeContainerRuntime } from '../../libs/containers/src/testing';
import { DirSnapshots, TestOwners, installFakeEntrypoint, memoryLedger, removeFakeSnapshots, tmp, writeTask, type MemoryLedger } from './judge-fakes';

const JUDGE_RUNTIME = resolve(__dirname, '../../task-runtime/judge');
const cleanup: string[] = [];
afterAll(() => {
  for (const d of cleanup) fs.rmSync(d, { recursive: true, force: true });
  removeFakeSnapshots();
});

interface Booted {
  app: INestApplicationContext;
  runtime: FakeContainerRuntime;
  snapshots: DirSnapshots;
  ml: MemoryLedger;
  home: string;
  /** How many times the module asked the binding for its ports, and for its host settings. */
  asked: { ports: number; host: number };
}

async function boot(o: { owners?: TestOwners; ports?: () => Promise<never> } = {}): Promise<Booted> {
  const runtime = new FakeContainerRuntime();
  runtime.addImage({ tag: 'assay/base:bookworm' });
  installFakeEntrypoint(runtime);
  const snapshots = new DirSnapshots();
  const ml = await memoryLedger();
  const home = tmp('judge-module-home-');
  cleanup.push(home);
  const asked = { ports: 0, host: 0 };
  const host: JudgeHostSettings = {
    judgesDir: join(home, 'judges'),
    imageLogsDir: join(home, 'images', 'logs'),
    homeTag: 'home-module',
    hostCpus: 2,
    judgeRuntimeDir: JUDGE_RUNTIME,
    procVisibility: 'hidden',
  };
  // what an importing module provides: the time and ids (LedgerModule's in RuntimeModule), the container runtime
  const time: DynamicModule = {
    module: class TimeModule {},
    providers: [
      { provide: CLOCK, useValue: ml.clock },
      { provide: ID_GENERATOR, useValue: ml.ids },
    ],
    exports: [CLOCK, ID_GENERATOR],
  };
  const judge = JudgeModule.forRootAsync({
    imports: [time, ContainersModule.forRuntime(runtime)],
    useFactory: (): JudgeBinding => ({
      ports:
        o.ports ??
        (async () => {
          asked.ports += 1;
          return { recorder: ml.recorder, snapshots };
        }),
      host: () => {
        asked.host += 1;
        return host;
      },
    }),
    ...(o.owners ? { owners: o.owners } : {}),
  });
  @Module({ imports: [judge] })
  class Root {}
  const app = await NestFactory.createApplicationContext(Root, { logger: false, abortOnError: false });
  return { app, runtime, snapshots, ml, home, asked };
}

describe('JudgeModule', () => {
  it('asks for its ports only when a Judge is composed, once per composition', async () => {
    const b = await boot();
    try {
      expect(b.asked).toEqual({ ports: 0, host: 0 });
      const composer = b.app.get(JudgeComposer);
      await composer.compose();
      await composer.compose();
      expect(b.asked).toEqual({ ports: 2, host: 2 });
    } finally {
      await b.app.close();
    }
  });

  it('composes a runner and an image builder that judge through the bound ports with the imported clock, ids and runtime', async () => {
    const owners = new TestOwners('host/4242/7');
    const b = await boot({ owners });
    try {
      const j = await b.app.get(JudgeComposer).compose();
      expect(j.owners).toBe(owners);
      expect(j.recorder).toBe(b.ml.recorder);
      expect(j.snapshots).toBe(b.snapshots);

      const specs: ContainerSpec[] = [];
      const createContainer = b.runtime.createContainer.bind(b.runtime);
      b.runtime.createContainer = async (spec) => {
        specs.push(spec);
        return createContainer(spec);
      };
      const dir = writeTask(tmp('judge-module-task-'), { files: { 'reward.txt': '0.5' } });
      cleanup.push(dir);
      const plan = await loadTaskPlan(dir);
      const images = await j.images.ensure(dir, plan);
      const prepared = await j.runner.prepare(dir, plan, images);
      const ws = tmp('judge-module-ws-');
      cleanup.push(ws);
      fs.writeFileSync(join(ws, 'main.py'), 'print(1)\n');
      const r = await j.runner.judge(prepared, await b.snapshots.snapshotDirectory(ws));
      expect([r.status, r.primaryScore]).toEqual(['completed', 0.5]);

      // the Judge ran on the module's runtime, labelled with the bound owner and the host's tag, under its judgesDir
      expect(specs.map((s) => s.labels)).toContainEqual(
        expect.objectContaining({ 'org.assay.role': 'judge', 'org.assay.owner': owners.self, 'org.assay.home': 'home-module' }),
      );
      expect(r.dir).toBe(join(b.home, 'judges', r.judge));
      // the events went to the bound recorder, stamped by the imported clock, with ids from the imported generator
      const events = await b.ml.stream(`judge-${r.judge}`);
      expect(events.map((e) => [e.type, e.signer])).toEqual([
        ['JudgeLaunched', 'runtime'],
        ['JudgeCompleted', 'judge'],
        ['RewardRecorded', 'judge'],
      ]);
      expect(r.judge).toMatch(/^00000000-0000-4000-8000-[0-9a-f]{12}$/);
      // image build logs under the bound imageLogsDir, named by the imported (manual) clock's time
      const logs = fs.readdirSync(join(b.home, 'images', 'logs'));
      expect(logs.length).toBeGreaterThan(0);
      for (const l of logs) expect(l).toContain('2026-12-01T10-00-');
    } finally {
      await b.app.close();
    }
  });

  it('owns leftovers as this process by default (ProcessOwnerRegistry)', async () => {
    const b = await boot();
    try {
      expect((await b.app.get(JudgeComposer).compose()).owners).toBeInstanceOf(ProcessOwnerRegistry);
    } finally {
      await b.app.close();
    }
  });

  it("starts without the ports, and a composition that cannot get them fails with the binding's error", async () => {
    const refused = new AssayError('JUDGE_KEYS_MISSING', 'refused', 'no judge key');
    const b = await boot({ ports: () => Promise.reject(refused) });
    try {
      await expect(b.app.get(JudgeComposer).compose()).rejects.toBe(refused);
    } finally {
      await b.app.close();
    }
  });
});
