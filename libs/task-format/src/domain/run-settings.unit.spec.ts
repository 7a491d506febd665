import { TASK_ERROR_CODES as C } from '../task-format.errors';
import { DEFAULT_RUN_SETTINGS, mergeRunSettings, parseRunSettingsFlags } from './run-settings';

describe('run settings', () => {
  it('defaults < [metadata.assay] < command line', () => {
    expect(mergeRunSettings({})).toEqual(DEFAULT_RUN_SETTINGS);
    const merged = mergeRunSettings(
      { primaryMetric: 'acc', direction: 'minimize', maxSubmissions: 5, cooldownSec: 10 },
      { direction: 'maximize', maxSubmissions: 2, gpuBudgetSec: 5400 },
    );
    expect(merged).toEqual({
      primaryMetric: 'acc',
      direction: 'maximize',
      maxSubmissions: 2,
      cooldownSec: 10,
      timeBudgetSec: null,
      gpuBudgetSec: 5400,
      pauseWorkDuringJudge: false,
    });
    expect(Object.isFrozen(merged)).toBe(true);
  });

  it('parses command-line flags strictly', () => {
    expect(
      parseRunSettingsFlags({ metric: 'reward', direction: 'minimize', maxSubmissions: '3', cooldownSec: '0', timeBudgetSec: '7200.5', gpuBudgetHours: '2' }),
    ).toEqual({
      ok: true,
      value: { primaryMetric: 'reward', direction: 'minimize', maxSubmissions: 3, cooldownSec: 0, timeBudgetSec: 7200.5, gpuBudgetSec: 7200 },
    });
    const bad = parseRunSettingsFlags({ direction: 'up', maxSubmissions: '1e3', cooldownSec: '-1', timeBudgetSec: '0', gpuBudgetHours: ' 2', metric: '' });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.key).sort()).toEqual([
      '--cooldown-sec',
      '--direction',
      '--gpu-budget-hours',
      '--max-submissions',
      '--metric',
      '--time-budget-sec',
    ]);
    expect(bad.problems.every((p) => p.code === C.INVALID_VALUE && p.file === '<command line>')).toBe(true);
  });

  it('keeps ONE GPU budget in seconds: --gpu-budget S, --gpu-budget-hours H converted, never both', () => {
    expect(parseRunSettingsFlags({ gpuBudgetSec: '90.5' })).toEqual({ ok: true, value: { gpuBudgetSec: 90.5 } });
    expect(parseRunSettingsFlags({ gpuBudgetHours: '0.5' })).toEqual({ ok: true, value: { gpuBudgetSec: 1800 } });
    const both = parseRunSettingsFlags({ gpuBudgetSec: '10', gpuBudgetHours: '1' });
    expect(both.ok).toBe(false);
    if (!both.ok) expect(both.problems[0]?.message).toMatch(/not both/);
    for (const junk of ['0', '-5', '1e3', '', ' 7', '0x10', 'ten']) {
      const r = parseRunSettingsFlags({ gpuBudgetSec: junk });
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.problems[0]?.key).toBe('--gpu-budget');
    }
  });
});
