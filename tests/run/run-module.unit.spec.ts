/** RunModule binds the run's shared ports (RUN_BINDING) from the importing module's providers, and hands them out as RunPorts. */
import 'reflect-metadata';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FakeGpuProbe, FakeGpuRuntimeCheck, MemoryRunLedger, RunModule, RunPorts, type RunBinding } from '@assay/run';

const LEDGER = Symbol('LEDGER');

async function boot(ledger: () => Promise<MemoryRunLedger>) {
  const probe = FakeGpuProbe.withGpus(1);
  const check = new FakeGpuRuntimeCheck();
  // what an importing module provides (RuntimeModule: its LedgerHomeProvider and CONTAINER_RUNTIME)
  const source: DynamicModule = { module: class LedgerSourceModule {}, providers: [{ provide: LEDGER, useValue: ledger }], exports: [LEDGER] };
  const run = RunModule.forRootAsync({
    imports: [source],
    inject: [LEDGER],
    useFactory: (l: () => Promise<MemoryRunLedger>): RunBinding => ({ ledger: l, gpuProbe: probe, gpuRuntimeCheck: check }),
  });
  @Module({ imports: [run] })
  class Root {}
  const app = await NestFactory.createApplicationContext(Root, { logger: false, abortOnError: false });
  return { app, probe, check };
}

describe('RunModule', () => {
  it('hands out the bound ports; the run ledger is asked for only when a run opens', async () => {
    const memory = new MemoryRunLedger();
    let asked = 0;
    const { app, probe, check } = await boot(async () => {
      asked += 1;
      return memory;
    });
    try {
      expect(asked).toBe(0);
      const ports = app.get(RunPorts);
      expect([ports.gpuProbe, ports.gpuRuntimeCheck]).toEqual([probe, check]);
      expect(await ports.ledger()).toBe(memory);
      expect(asked).toBe(1);
      expect(await ports.gpuRuntimeCheck.check(['0'])).toBeTruthy();
      expect(check.calls).toEqual([['0']]);
    } finally {
      await app.close();
    }
  });

  it("a run ledger that cannot be opened fails the run that asks, with the binding's error, and nothing else", async () => {
    const refused = new Error('no ledger in this home');
    const { app } = await boot(() => Promise.reject(refused));
    try {
      await expect(app.get(RunPorts).ledger()).rejects.toBe(refused);
    } finally {
      await app.close();
    }
  });
});
