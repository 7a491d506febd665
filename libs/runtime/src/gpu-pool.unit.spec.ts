import { ManualClock } from '@assay/core';
import { GpuPool, PooledJudge, parseGpuList, planGpus } from './gpu-pool';

describe('--gpus LIST', () => {
  it('takes host indices and UUIDs, comma-separated, in the order given; nothing given is no GPU', () => {
    expect(parseGpuList(undefined)).toEqual([]);
    expect(parseGpuList('0')).toEqual(['0']);
    expect(parseGpuList('3,1,GPU-8f2c1d3e-0000-4a5b-9c7d-123456789abc,MIG-1f2e')).toEqual(['3', '1', 'GPU-8f2c1d3e-0000-4a5b-9c7d-123456789abc', 'MIG-1f2e']);
  });

  it.each([
    ['', /empty/],
    ['0,0', /"0" is listed twice/],
    ['0,00', /"00" is listed twice/],
    ['0,,1', /empty item/],
    ['0,', /empty item/],
    [',0', /empty item/],
    ['0, 1', /" 1" is neither/],
    ['all', /"all" is neither/],
    ['-1', /"-1" is neither/],
    ['--device=all', /neither/],
    ['0;rm -rf /', /neither/],
    ['12345', /neither/],
    ['GPU-', /neither/],
    ['gpu0', /neither/],
    [Array.from({ length: 65 }, (_, i) => String(i)).join(','), /more than 64/],
  ])('refuses %j with RUN_GPUS_INVALID naming the item', (text, why) => {
    expect(() => parseGpuList(text)).toThrow(why);
    try {
      parseGpuList(text);
    } catch (e) {
      expect(e).toMatchObject({ code: 'RUN_GPUS_INVALID', kind: 'invalid_input' });
      expect((e as Error).message).toMatch(/^--gpus /);
    }
  });
});

describe('GPU plan', () => {
  it('CPU task: nothing to hand out, with or without a list', () => {
    expect(planGpus({ available: [], workGpus: 0, judgeGpus: 0 })).toEqual({
      available: [],
      work: [],
      judge: [],
      handOver: false,
      pauseWorkDuringJudge: false,
    });
    expect(planGpus({ available: ['0'], workGpus: 0, judgeGpus: 0, pauseWorkDuringJudge: true })).toMatchObject({
      work: [],
      judge: [],
      handOver: false,
      pauseWorkDuringJudge: true,
    });
  });

  it('enough GPUs: Work and the Judge get their own devices, no hand-over', () => {
    expect(planGpus({ available: ['2', '0', '1'], workGpus: 2, judgeGpus: 1 })).toEqual({
      available: ['2', '0', '1'],
      work: ['2', '0'],
      judge: ['1'],
      handOver: false,
      pauseWorkDuringJudge: false,
    });
  });

  it("too few for both: the Judge takes the free ones first, then borrows Work's, and Work stays paused", () => {
    expect(planGpus({ available: ['0', '1', '2'], workGpus: 2, judgeGpus: 2 })).toEqual({
      available: ['0', '1', '2'],
      work: ['0', '1'],
      judge: ['2', '0'],
      handOver: true,
      pauseWorkDuringJudge: true,
    });
    expect(planGpus({ available: ['0'], workGpus: 1, judgeGpus: 1 })).toMatchObject({ work: ['0'], judge: ['0'], handOver: true });
  });

  it('refuses what cannot fit even with a hand-over, naming the numbers', () => {
    expect(() => planGpus({ available: [], workGpus: 1, judgeGpus: 0, task: 't/gemm' })).toThrow(
      /task t\/gemm: it needs GPUs \(Work 1: environment.gpus; Judge 0: .*\) and --gpus gives none; pass --gpus LIST/,
    );
    expect(() => planGpus({ available: [], workGpus: 0, judgeGpus: 2 })).toThrow(/--gpus gives none/);
    expect(() => planGpus({ available: ['0', '1'], workGpus: 4, judgeGpus: 0 })).toThrow(
      /Work needs 4 GPU\(s\) \(environment.gpus\) but --gpus gives 2 \(0,1\)/,
    );
    expect(() => planGpus({ available: ['0'], workGpus: 0, judgeGpus: 2 })).toThrow(/each Judge needs 2 GPU\(s\) .* --gpus gives 1 \(0\), even taking Work's/);
    try {
      planGpus({ available: ['0'], workGpus: 3, judgeGpus: 0 });
    } catch (e) {
      expect(e).toMatchObject({ code: 'RUN_GPUS_INSUFFICIENT', details: { workGpus: 3, judgeGpus: 0, given: 1 } });
    }
  });
});

describe('GPU pool accounting', () => {
  const T0 = '2026-03-01T10:00:00.000Z';

  it('Work holds its GPUs from start to stop, pauses included; takeWork hands out what accumulated once', () => {
    const clock = new ManualClock(T0);
    const pool = new GpuPool(planGpus({ available: ['0', '1'], workGpus: 2, judgeGpus: 0 }), clock);
    expect(pool.takeWork()).toEqual([]);
    pool.startWork();
    clock.advance(10_000);
    expect(pool.takeWork()).toEqual([{ holder: 'work', devices: ['0', '1'], heldSec: 10 }]);
    clock.advance(2_500);
    pool.stopWork();
    clock.advance(60_000); // stopped: nothing accrues
    expect(pool.takeWork()).toEqual([{ holder: 'work', devices: ['0', '1'], heldSec: 2.5 }]);
    expect(pool.takeWork()).toEqual([]);
    expect(pool.secondsUntilExhausted(100)).toBe(50);
    expect(pool.secondsUntilExhausted(null)).toBeNull();
  });

  it('a Judge on its own GPUs: Work keeps counting, the Judge counts its devices × its lifetime', async () => {
    const clock = new ManualClock(T0);
    const pool = new GpuPool(planGpus({ available: ['0', '1', '2'], workGpus: 1, judgeGpus: 2 }), clock);
    pool.startWork();
    const r = await pool.lendToJudge(async (d) => {
      clock.advance(4_000);
      return d;
    });
    expect(r).toEqual({ value: ['1', '2'], holding: { holder: 'judge', devices: ['1', '2'], heldSec: 4 } });
    expect(pool.takeWork()).toEqual([{ holder: 'work', devices: ['0'], heldSec: 4 }]);
  });

  it("hand-over: the borrowed devices count for the Judge only, never twice; Work's others keep counting", async () => {
    const clock = new ManualClock(T0);
    const pool = new GpuPool(planGpus({ available: ['0', '1'], workGpus: 2, judgeGpus: 1 }), clock);
    expect(pool.plan).toMatchObject({ judge: ['0'], handOver: true });
    pool.startWork();
    clock.advance(5_000);
    const r = await pool.lendToJudge(async () => {
      clock.advance(3_000);
      return 'ok';
    });
    expect(r.holding).toEqual({ holder: 'judge', devices: ['0'], heldSec: 3 });
    clock.advance(2_000);
    const work = pool.takeWork();
    expect(work).toEqual(
      expect.arrayContaining([
        { holder: 'work', devices: ['0'], heldSec: 7 },
        { holder: 'work', devices: ['1'], heldSec: 10 },
      ]),
    );
    expect(work).toHaveLength(2);
  });

  it('a Judge that fails still gives its devices back; Judges are one at a time', async () => {
    const clock = new ManualClock(T0);
    const pool = new GpuPool(planGpus({ available: ['0'], workGpus: 1, judgeGpus: 1 }), clock);
    pool.startWork();
    await expect(pool.lendToJudge(async () => Promise.reject(new Error('docker died')))).rejects.toThrow('docker died');
    let release: () => void = () => undefined;
    const first = pool.lendToJudge(() => new Promise<void>((r) => (release = r)));
    await expect(pool.lendToJudge(async () => undefined)).rejects.toMatchObject({ code: 'RUN_CONFLICT' });
    release();
    await first;
    clock.advance(1_000);
    expect(pool.takeWork()).toEqual([{ holder: 'work', devices: ['0'], heldSec: 1 }]);
  });

  it('PooledJudge hands the devices to the Judge and reports its GPU-seconds; a CPU Judge is passed through', async () => {
    const clock = new ManualClock(T0);
    const seen: Array<readonly string[] | undefined> = [];
    const inner = {
      judge: async (req: { gpus?: readonly string[] }) => {
        seen.push(req.gpus);
        clock.advance(1_500);
        return { judge: 'j', status: 'completed' as const, rewards: { reward: 1 }, primaryScore: 1, detail: null, log: null, gpuSeconds: 0 };
      },
    };
    const gpu = new PooledJudge(inner, new GpuPool(planGpus({ available: ['0', '1', '2'], workGpus: 1, judgeGpus: 2 }), clock));
    expect(await gpu.judge({ run: 'r', round: 1, snapshot: 'bafy' })).toMatchObject({
      gpuSeconds: 3,
      gpu: { holder: 'judge', devices: ['1', '2'], heldSec: 1.5 },
    });
    const cpu = new PooledJudge(inner, new GpuPool(planGpus({ available: [], workGpus: 0, judgeGpus: 0 }), clock));
    expect(await cpu.judge({ run: 'r', round: 2, snapshot: 'bafy' })).toMatchObject({ gpuSeconds: 0 });
    expect(seen).toEqual([['1', '2'], undefined]);
  });
});
