/**
 * The run's GPU pool (docs/run.md, "GPUs"): `--gpus LIST` names the host GPUs a run may use; Work holds
 * `environment.gpus` of them for the run's life, each Judge holds `verifier.gpus` of them for its own life. When Work
 * and a Judge together need more than the list holds, the Judge borrows Work's GPUs (hand-over): Work stays paused
 * (docker pause) while that Judge runs, and the borrowed devices count for the Judge, not for Work, meanwhile. A task
 * that cannot fit even so is refused before anything starts.
 *
 * Accounting: every GPU held, times its holding time, is GPU-seconds: Work's from its start to its stop (pauses
 * included while it holds the device), a Judge's from its lease to its release. Time comes from the injected clock.
 */
import { AssayError, type Clock } from '@assay/core';
import { GPU_DEVICE_ID_RE, type GpuRequest } from '@assay/containers';
import { loadTaskPlan, mergeRunSettings } from '@assay/task-format';
import { RUN_ERROR_CODES, gpuSecondsOf, type GpuHolding, type JudgeOutcome, type JudgePort, type JudgeRequest } from '@assay/run';

export const MAX_GPUS = 64;

/**
 * Parses `--gpus LIST`: comma-separated host GPU indices (`0,1`) or UUIDs (`GPU-…`, `MIG-…`), no spaces, no empty
 * items, no duplicates, at most 64. Undefined or absent: no GPUs. Throws RUN_GPUS_INVALID naming the bad item.
 */
export function parseGpuList(text: string | undefined | null): string[] {
  if (text === undefined || text === null) return [];
  const bad = (why: string, item?: string) =>
    new AssayError(
      RUN_ERROR_CODES.GPUS_INVALID,
      'invalid_input',
      `--gpus ${JSON.stringify(text.slice(0, 200))}: ${why}; expected comma-separated host GPU indices or UUIDs, e.g. "0,1" or "GPU-<uuid>"`,
      {
        details: { flag: '--gpus', ...(item !== undefined ? { item } : {}) },
      },
    );
  if (text.length === 0) throw bad('the list is empty (leave --gpus out for no GPUs)');
  if (text.length > 64 * 130) throw bad('the list is too long');
  const items = text.split(',');
  if (items.length > MAX_GPUS) throw bad(`more than ${MAX_GPUS} GPUs`);
  const seen = new Set<string>();
  for (const item of items) {
    if (item === '') throw bad('an empty item (two commas, or a comma at an end)');
    if (!GPU_DEVICE_ID_RE.test(item)) throw bad(`${JSON.stringify(item)} is neither a GPU index (0-9999) nor a GPU UUID`, item);
    const key = /^[0-9]+$/.test(item) ? String(Number(item)) : item;
    if (seen.has(key)) throw bad(`${JSON.stringify(item)} is listed twice`, item);
    seen.add(key);
  }
  return items;
}

export interface GpuPlan {
  /** The run's list, as given. */
  readonly available: readonly string[];
  /** Work's devices, held for the run's life. */
  readonly work: readonly string[];
  /** Each Judge's devices. */
  readonly judge: readonly string[];
  /** The Judge borrows (some of) Work's devices: Work must stay paused while a Judge runs. */
  readonly handOver: boolean;
  /** Work stays paused while each Judge runs (hand-over, or the task's pause_work_during_judge). */
  readonly pauseWorkDuringJudge: boolean;
}

/** Whether a plan gives Work or a Judge any GPU (then the run checks and probes the host's GPUs at start). */
export function planUsesGpus(plan: GpuPlan): boolean {
  return plan.available.length > 0 && (plan.work.length > 0 || plan.judge.length > 0);
}

/** Decides who gets which GPUs, or refuses with RUN_GPUS_INSUFFICIENT naming the numbers. Pure. */
export function planGpus(i: { available: readonly string[]; workGpus: number; judgeGpus: number; pauseWorkDuringJudge?: boolean; task?: string }): GpuPlan {
  const { available, workGpus, judgeGpus } = i;
  const task = i.task ? `task ${i.task}` : 'the task';
  const refuse = (why: string) =>
    new AssayError(RUN_ERROR_CODES.GPUS_INSUFFICIENT, 'invalid_input', `${task}: ${why}`, { details: { workGpus, judgeGpus, given: available.length } });
  if ((workGpus > 0 || judgeGpus > 0) && available.length === 0) {
    throw refuse(
      `it needs GPUs (Work ${workGpus}: environment.gpus; Judge ${judgeGpus}: metadata.rsi_harness.verifier.gpus) and --gpus gives none; pass --gpus LIST (e.g. --gpus 0,1)`,
    );
  }
  if (workGpus > available.length)
    throw refuse(`Work needs ${workGpus} GPU(s) (environment.gpus) but --gpus gives ${available.length} (${available.join(',')})`);
  if (judgeGpus > available.length)
    throw refuse(
      `each Judge needs ${judgeGpus} GPU(s) (metadata.rsi_harness.verifier.gpus) but --gpus gives ${available.length} (${available.join(',')}), even taking Work's`,
    );
  const work = available.slice(0, workGpus);
  const free = available.slice(workGpus);
  const handOver = workGpus + judgeGpus > available.length;
  // A Judge takes the free devices first, then borrows Work's.
  const judge = [...free, ...work].slice(0, judgeGpus);
  return { available: [...available], work, judge, handOver, pauseWorkDuringJudge: handOver || i.pauseWorkDuringJudge === true };
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/**
 * Who holds which device, since when. Work's devices accumulate holding time except while a Judge borrows them;
 * `takeWork()` hands out what accumulated (for a BudgetConsumed) and starts counting afresh.
 */
export class GpuPool {
  private readonly workSince = new Map<string, number | null>();
  private readonly workHeldMs = new Map<string, number>();
  private judgeBusy = false;
  private workRunning = false;

  constructor(
    readonly plan: GpuPlan,
    private readonly clock: Clock,
  ) {}

  private now(): number {
    return this.clock.now().getTime();
  }

  /** Work's container started with its devices. */
  startWork(): void {
    if (this.workRunning) return;
    this.workRunning = true;
    const t = this.now();
    for (const d of this.plan.work) {
      this.workSince.set(d, t);
      this.workHeldMs.set(d, this.workHeldMs.get(d) ?? 0);
    }
  }

  private closeSegment(d: string, t: number): void {
    const since = this.workSince.get(d);
    if (since !== undefined && since !== null) {
      this.workHeldMs.set(d, (this.workHeldMs.get(d) ?? 0) + Math.max(0, t - since));
      this.workSince.set(d, null);
    }
  }

  /** Work's container stopped: its devices are free. */
  stopWork(): void {
    const t = this.now();
    for (const d of this.plan.work) this.closeSegment(d, t);
    this.workRunning = false;
  }

  /** Work's GPU use since the last take, grouped by holding time (one holding per group); [] when nothing to record. */
  takeWork(): GpuHolding[] {
    const t = this.now();
    const byMs = new Map<number, string[]>();
    for (const d of this.plan.work) {
      const since = this.workSince.get(d);
      let ms = this.workHeldMs.get(d) ?? 0;
      if (since !== undefined && since !== null) {
        ms += Math.max(0, t - since);
        this.workSince.set(d, t);
      }
      this.workHeldMs.set(d, 0);
      if (ms > 0) byMs.set(ms, [...(byMs.get(ms) ?? []), d]);
    }
    return [...byMs.entries()].map(([ms, devices]) => ({ holder: 'work' as const, devices, heldSec: round3(ms / 1000) })).filter((h) => h.heldSec > 0);
  }

  /** Seconds until the GPU budget runs out at Work's current rate, or null when Work holds no GPU or there is no limit. */
  secondsUntilExhausted(remainingGpuSeconds: number | null): number | null {
    if (remainingGpuSeconds === null || this.plan.work.length === 0) return null;
    return Math.max(0, remainingGpuSeconds / this.plan.work.length);
  }

  /**
   * Runs one Judge with its devices: borrowed from Work when they are Work's (Work's holding pauses for them). One
   * Judge at a time. Returns the Judge's holding (null when it needs no GPU).
   */
  async lendToJudge<T>(fn: (devices: readonly string[]) => Promise<T>): Promise<{ value: T; holding: GpuHolding | null }> {
    const devices = this.plan.judge;
    if (devices.length === 0) return { value: await fn([]), holding: null };
    if (this.judgeBusy) throw new AssayError(RUN_ERROR_CODES.CONFLICT, 'conflict', 'a Judge already holds the GPU pool; Judges of a run are serialised');
    this.judgeBusy = true;
    const t0 = this.now();
    const borrowed = devices.filter((d) => this.plan.work.includes(d) && this.workRunning);
    for (const d of borrowed) this.closeSegment(d, t0);
    try {
      const value = await fn(devices);
      return { value, holding: { holder: 'judge', devices: [...devices], heldSec: round3((this.now() - t0) / 1000) } };
    } finally {
      const t1 = this.now();
      if (this.workRunning) for (const d of borrowed) this.workSince.set(d, t1);
      this.judgeBusy = false;
    }
  }
}

/** The JudgePort with GPUs: each Judge gets its devices from the pool and reports its GPU-seconds. */
export class PooledJudge implements JudgePort {
  constructor(
    private readonly inner: JudgePort,
    private readonly pool: GpuPool,
  ) {}

  async judge(req: JudgeRequest): Promise<JudgeOutcome> {
    const { value, holding } = await this.pool.lendToJudge((gpus) => this.inner.judge(gpus.length ? { ...req, gpus } : req));
    if (!holding) return value;
    return { ...value, gpuSeconds: round3(gpuSecondsOf(holding)), gpu: holding };
  }
}

/** The Work container's GPU request for a plan (spread into its ContainerSpec); {} without GPUs. */
export function workGpuSpec(plan: GpuPlan): { gpus?: GpuRequest } {
  return plan.work.length ? { gpus: { driver: 'nvidia', deviceIds: [...plan.work] } } : {};
}

/**
 * Reads the task (task.toml only: no image, no container) and plans its GPUs from `--gpus`; throws
 * RUN_GPUS_INSUFFICIENT before anything starts when the task cannot fit.
 */
export async function planTaskGpus(taskDir: string, available: readonly string[]): Promise<GpuPlan> {
  const plan = await loadTaskPlan(taskDir);
  const settings = mergeRunSettings(plan.runSettings, {});
  return planGpus({
    available,
    workGpus: plan.environment.gpus,
    judgeGpus: plan.verifier.gpus,
    pauseWorkDuringJudge: settings.pauseWorkDuringJudge === true,
    task: plan.name,
  });
}

/**
 * Records Work's GPU use since the last call: one `BudgetConsumed {budget: gpu_seconds, holder: work, gpus, heldSec}`
 * per group of devices held equally long. Going over the budget is the run's RuleViolation (decide).
 */
export async function recordWorkGpuUse(
  pool: GpuPool,
  svc: { consume(budget: 'gpu_seconds', amount: number, round: null, gpu: GpuHolding): Promise<void> },
): Promise<void> {
  for (const h of pool.takeWork()) await svc.consume('gpu_seconds', round3(gpuSecondsOf(h)), null, h);
}
