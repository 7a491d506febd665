/**
 * Run-level settings that Harbor / OpenRSI tasks do not carry: the primary metric, its direction, the submission
 * limit and cooldown, and the time and GPU budgets. A task may propose them in [metadata.assay]; the command line
 * overrides the task; defaults fill the rest. They are part of the protocol fingerprint.
 */
import { problem, TASK_ERROR_CODES as C, type TaskProblem } from '../task-format.errors';
import { checkKeys, Problems, readBool, readEnum, readInt, readNumber, readString, type Table } from './values';

export type Direction = 'maximize' | 'minimize';
export const DIRECTIONS: readonly Direction[] = ['maximize', 'minimize'];

export interface RunSettings {
  /** reward.json key that ranks rounds; null: `reward`, else the only key (see the Judge semantics). */
  readonly primaryMetric: string | null;
  readonly direction: Direction;
  /** Most submissions a run may make; null: unlimited. */
  readonly maxSubmissions: number | null;
  /** Minimum seconds between two submissions. */
  readonly cooldownSec: number;
  /** Wall-clock budget of the whole run in seconds; null: bounded only by the agent timeout. */
  readonly timeBudgetSec: number | null;
  /**
   * GPU-seconds the run may consume (every GPU held by Work or a Judge, times its holding time); null: unlimited.
   * The task may give it as `gpu_budget_sec` or `gpu_budget_hours` (converted: × 3600); it is seconds from here on.
   */
  readonly gpuBudgetSec: number | null;
  /**
   * Keep Work paused (docker pause) while each Judge runs, not only while the snapshot is taken
   * (`[metadata.assay] pause_work_during_judge`); a run also does this by itself when a Judge borrows Work's GPUs.
   * Covered by the task digest, so not a separate fingerprint budget. Absent: false.
   */
  readonly pauseWorkDuringJudge?: boolean;
}

export type RunSettingsOverrides = { readonly [K in keyof RunSettings]?: RunSettings[K] };

export const DEFAULT_RUN_SETTINGS: RunSettings = Object.freeze({
  primaryMetric: null,
  direction: 'maximize',
  maxSubmissions: null,
  cooldownSec: 0,
  timeBudgetSec: null,
  gpuBudgetSec: null,
  pauseWorkDuringJudge: false,
});

export const RUN_SETTING_LIMITS = {
  maxSubmissions: { min: 1, max: 1_000_000 },
  cooldownSec: { min: 0, max: 31_536_000 },
  timeBudgetSec: { gt: 0, max: 315_360_000 },
  gpuBudgetHours: { gt: 0, max: 10_000_000 },
  gpuBudgetSec: { gt: 0, max: 36_000_000_000 },
  primaryMetricLength: 256,
} as const;

const ASSAY_KEYS = [
  'primary_metric',
  'direction',
  'max_submissions',
  'cooldown_sec',
  'time_budget_sec',
  'gpu_budget_sec',
  'gpu_budget_hours',
  'pause_work_during_judge',
];

/** Reads [metadata.assay]; unknown keys are refused (they would otherwise be silently ignored run settings). */
export function readAssayMetadata(p: Problems, t: Table, path = 'metadata.assay'): RunSettingsOverrides {
  checkKeys(p, t, path, ASSAY_KEYS);
  const out: { -readonly [K in keyof RunSettings]?: RunSettings[K] } = {};
  const metric = readString(p, t, 'primary_metric', path, { nonEmpty: true, maxLength: RUN_SETTING_LIMITS.primaryMetricLength });
  if (metric !== undefined) out.primaryMetric = metric;
  const direction = readEnum(p, t, 'direction', path, DIRECTIONS);
  if (direction !== undefined) out.direction = direction;
  const maxSubmissions = readInt(p, t, 'max_submissions', path, RUN_SETTING_LIMITS.maxSubmissions);
  if (maxSubmissions !== undefined) out.maxSubmissions = maxSubmissions;
  const cooldown = readNumber(p, t, 'cooldown_sec', path, RUN_SETTING_LIMITS.cooldownSec);
  if (cooldown !== undefined) out.cooldownSec = cooldown;
  const time = readNumber(p, t, 'time_budget_sec', path, RUN_SETTING_LIMITS.timeBudgetSec);
  if (time !== undefined) out.timeBudgetSec = time;
  const gpuSec = readNumber(p, t, 'gpu_budget_sec', path, RUN_SETTING_LIMITS.gpuBudgetSec);
  const gpuHours = readNumber(p, t, 'gpu_budget_hours', path, RUN_SETTING_LIMITS.gpuBudgetHours);
  if (gpuSec !== undefined && gpuHours !== undefined) {
    p.add(C.CONFLICT, `${path}.gpu_budget_hours`, 'gpu_budget_sec is also set; give the GPU budget once (gpu_budget_sec, in GPU-seconds)');
  } else if (gpuSec !== undefined) out.gpuBudgetSec = gpuSec;
  else if (gpuHours !== undefined) out.gpuBudgetSec = gpuHours * 3600;
  const pause = readBool(p, t, 'pause_work_during_judge', path);
  if (pause !== undefined) out.pauseWorkDuringJudge = pause;
  return Object.freeze(out);
}

/** Command-line flags as strings (as commander hands them over); absent flags are undefined. */
export interface RunSettingsFlags {
  metric?: string;
  direction?: string;
  maxSubmissions?: string;
  cooldownSec?: string;
  timeBudgetSec?: string;
  /** `--gpu-budget S`: GPU-seconds. */
  gpuBudgetSec?: string;
  /** `--gpu-budget-hours H`: the same budget in GPU-hours (× 3600); not together with --gpu-budget. */
  gpuBudgetHours?: string;
}

export const RUN_SETTINGS_FLAG_NAMES: Readonly<Record<keyof RunSettingsFlags, string>> = {
  metric: '--metric',
  direction: '--direction',
  maxSubmissions: '--max-submissions',
  cooldownSec: '--cooldown-sec',
  timeBudgetSec: '--time-budget-sec',
  gpuBudgetSec: '--gpu-budget',
  gpuBudgetHours: '--gpu-budget-hours',
};

export type RunSettingsParse = { readonly ok: true; readonly value: RunSettingsOverrides } | { readonly ok: false; readonly problems: readonly TaskProblem[] };

const CLI = '<command line>';
const DECIMAL = /^(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/;
const INTEGER = /^(?:0|[1-9][0-9]*)$/;

/** Parses run-setting flags strictly (plain decimal numbers only; no exponents, signs, hex or whitespace). */
export function parseRunSettingsFlags(flags: RunSettingsFlags): RunSettingsParse {
  const problems: TaskProblem[] = [];
  const out: { -readonly [K in keyof RunSettings]?: RunSettings[K] } = {};
  const bad = (flag: keyof RunSettingsFlags, message: string) => problems.push(problem(C.INVALID_VALUE, CLI, RUN_SETTINGS_FLAG_NAMES[flag], message));

  if (flags.metric !== undefined) {
    const m = flags.metric;
    if (m.trim() === '' || m.length > RUN_SETTING_LIMITS.primaryMetricLength) {
      bad('metric', `expected a reward key of 1 to ${RUN_SETTING_LIMITS.primaryMetricLength} characters`);
    } else out.primaryMetric = m;
  }
  if (flags.direction !== undefined) {
    if ((DIRECTIONS as readonly string[]).includes(flags.direction)) out.direction = flags.direction as Direction;
    else bad('direction', `expected "maximize" or "minimize", got ${JSON.stringify(flags.direction)}`);
  }
  if (flags.maxSubmissions !== undefined) {
    const { min, max } = RUN_SETTING_LIMITS.maxSubmissions;
    const s = flags.maxSubmissions;
    const n = INTEGER.test(s) ? Number(s) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) bad('maxSubmissions', `expected an integer from ${min} to ${max}, got ${JSON.stringify(s)}`);
    else out.maxSubmissions = n;
  }
  const num = (flag: 'cooldownSec' | 'timeBudgetSec' | 'gpuBudgetSec' | 'gpuBudgetHours', lowerInclusive: boolean, max: number) => {
    const s = flags[flag];
    if (s === undefined) return undefined;
    const n = DECIMAL.test(s) ? Number(s) : NaN;
    const okLower = lowerInclusive ? n >= 0 : n > 0;
    if (!Number.isFinite(n) || !okLower || n > max) {
      bad(flag, `expected a plain decimal number ${lowerInclusive ? 'at least 0' : 'greater than 0'} and at most ${max}, got ${JSON.stringify(s)}`);
      return undefined;
    }
    return n;
  };
  const cooldown = num('cooldownSec', true, RUN_SETTING_LIMITS.cooldownSec.max);
  if (cooldown !== undefined) out.cooldownSec = cooldown;
  const time = num('timeBudgetSec', false, RUN_SETTING_LIMITS.timeBudgetSec.max);
  if (time !== undefined) out.timeBudgetSec = time;
  const gpuSec = num('gpuBudgetSec', false, RUN_SETTING_LIMITS.gpuBudgetSec.max);
  const gpuHours = num('gpuBudgetHours', false, RUN_SETTING_LIMITS.gpuBudgetHours.max);
  if (flags.gpuBudgetSec !== undefined && flags.gpuBudgetHours !== undefined)
    bad('gpuBudgetHours', 'give the GPU budget once: --gpu-budget S (GPU-seconds) or --gpu-budget-hours H, not both');
  else if (gpuSec !== undefined) out.gpuBudgetSec = gpuSec;
  else if (gpuHours !== undefined) out.gpuBudgetSec = gpuHours * 3600;

  return problems.length > 0 ? { ok: false, problems } : { ok: true, value: Object.freeze(out) };
}

/** Defaults, overridden by the task's [metadata.assay], overridden by the command line. */
export function mergeRunSettings(fromTask: RunSettingsOverrides, fromCli: RunSettingsOverrides = {}): RunSettings {
  const pick = <K extends keyof RunSettings>(k: K): RunSettings[K] => {
    const cli = fromCli[k];
    if (cli !== undefined) return cli as RunSettings[K];
    const task = fromTask[k];
    if (task !== undefined) return task as RunSettings[K];
    return DEFAULT_RUN_SETTINGS[k];
  };
  return Object.freeze({
    primaryMetric: pick('primaryMetric'),
    direction: pick('direction'),
    maxSubmissions: pick('maxSubmissions'),
    cooldownSec: pick('cooldownSec'),
    timeBudgetSec: pick('timeBudgetSec'),
    gpuBudgetSec: pick('gpuBudgetSec'),
    pauseWorkDuringJudge: pick('pauseWorkDuringJudge') ?? false,
  });
}
