import { AssayError } from '@assay/core';
import type { RunSettingsOverrides } from '@assay/task-format';
import { libs } from '../libs';

/**
 * The run-setting flags (`--max-submissions`, `--time-budget`, `--cooldown`, `--gpu-budget`, `--gpu-budget-hours`,
 * `--metric`, `--score-direction`) as `assay run` and `assay baseline` read them: the same flags give the same
 * settings, hence the same protocol fingerprint, so a baseline taken with a run's flags matches that run.
 */
export interface RunSettingFlags {
  maxSubmissions?: string;
  timeBudget?: string;
  cooldown?: string;
  gpuBudget?: string;
  gpuBudgetHours?: string;
  metric?: string;
  /** `assay run`'s older spelling of --metric. */
  primaryReward?: string;
  scoreDirection?: string;
}

/** The option lines, for commander (`[flags, description]`). */
export const RUN_SETTING_OPTIONS: ReadonlyArray<readonly [string, string]> = [
  ['--max-submissions <n>', "submission budget (over the task's)"],
  ['--time-budget <s>', 'wall-time budget in seconds'],
  ['--cooldown <s>', 'seconds between counted submissions'],
  ['--gpu-budget <s>', 'GPU budget in GPU-seconds (every GPU held by Work or a Judge, times its holding time)'],
  ['--gpu-budget-hours <h>', 'the same GPU budget in GPU-hours (converted to seconds)'],
  ['--metric <key>', "the reward key that is the primary score (over the task's [metadata.assay] primary_metric)"],
  ['--score-direction <dir>', 'maximize | minimize'],
];

const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);

/** A non-negative integer flag, or undefined when not given (a usage error names the flag otherwise). */
export function intFlag(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d{1,9}$/.test(v)) throw usage(`${name} must be a non-negative integer, got "${v}"`);
  return Number(v);
}

/** The overrides the flags ask for (only those given); `badInput` makes the error of a bad GPU budget. */
export function runSettingOverridesOf(o: RunSettingFlags, badInput: (message: string) => Error): RunSettingsOverrides {
  if (o.scoreDirection !== undefined && o.scoreDirection !== 'maximize' && o.scoreDirection !== 'minimize')
    throw usage(`--score-direction must be maximize or minimize, got "${o.scoreDirection}"`);
  const gpuBudget = libs.taskFormat().parseRunSettingsFlags({
    ...(o.gpuBudget !== undefined ? { gpuBudgetSec: o.gpuBudget } : {}),
    ...(o.gpuBudgetHours !== undefined ? { gpuBudgetHours: o.gpuBudgetHours } : {}),
  });
  if (!gpuBudget.ok) throw badInput(gpuBudget.problems.map((x) => `${x.key}: ${x.message}`).join('\n'));
  const maxSubmissions = intFlag(o.maxSubmissions, '--max-submissions');
  const timeBudgetSec = intFlag(o.timeBudget, '--time-budget');
  const cooldownSec = intFlag(o.cooldown, '--cooldown');
  const metric = o.metric ?? o.primaryReward;
  return {
    ...(gpuBudget.value.gpuBudgetSec !== undefined ? { gpuBudgetSec: gpuBudget.value.gpuBudgetSec } : {}),
    ...(maxSubmissions !== undefined ? { maxSubmissions } : {}),
    ...(timeBudgetSec !== undefined ? { timeBudgetSec } : {}),
    ...(cooldownSec !== undefined ? { cooldownSec } : {}),
    ...(metric !== undefined ? { primaryMetric: metric } : {}),
    ...(o.scoreDirection !== undefined ? { direction: o.scoreDirection as 'maximize' | 'minimize' } : {}),
  };
}
