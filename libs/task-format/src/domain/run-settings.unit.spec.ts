import { TASK_ERROR_CODES as C } from '../task-format.errors';
import { DEFAULT_RUN_SETTINGS, mergeRunSettings, parseRunSettingsFlags } from './run-settings';

describe('run settings', () => {
  it('defaults < [metadata.assay] < command line', () => {
    expect(mergeRunSettings({})).toEqual(DEFAULT_RUN_SETTINGS);
    const merged = mergeRunSettings(
      { primaryMetric: 'acc', direction: 'minimize', maxSubmissions: 5, cooldownSec: 10 },
      { direction: 'maximize', maxSubmissions: 2, gpuBudgetHours: 1.5 },
    );
    expect(merged).toEqual({ primaryMetric: 'acc', direction: 'maximize', maxSubmissions: 2, cooldownSec: 10, timeBudgetSec: null, gpuBudgetHours: 1.5 });
    expect(Object.isFrozen(merged)).toBe(true);
  });

  it('parses command-line flags strictly', () => {
    expect(parseRunSettingsFlags({ metric: 'reward', direction: 'minimize', maxSubmissions: '3', cooldownSec: '0', timeBudgetSec: '7200.5', gpuBudgetHours: '2' })).toEqual({
      ok: true,
      value: { primaryMetric: 'reward', direction: 'minimize', maxSubmissions: 3, cooldownSec: 0, timeBudgetSec: 7200.5, gpuBudgetHours: 2 },
    });
    const bad = parseRunSettingsFlags({ direction: 'up', maxSubmissions: '1e3', cooldownSec: '-1', timeBudgetSec: '0', gpuBudgetHours: ' 2', metric: '' });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.key).sort()).toEqual(['--cooldown-sec', '--direction', '--gpu-budget-hours', '--max-submissions', '--metric', '--time-budget-sec']);
    expect(bad.problems.every((p) => p.code === C.INVALID_VALUE && p.file === '<command line>')).toBe(true);
  });
});
