import { buildRunRules, editablePathProblem, parseRunProtocol, protocolJson, runProtocolProblem } from './run-protocol';
import { changesOutside, isEditablePath, notEditableDetail, readRunTaskSettings } from './editable';

const sha = 'a'.repeat(64);
const settings = { primaryMetric: 'val_loss', direction: 'minimize' as const, maxSubmissions: 6, cooldownSec: 5, timeBudgetSec: 3600, gpuBudgetSec: 1800 };

describe('run protocol', () => {
  it('is built from the merged run settings: GPU hours become seconds, the agent timeout is the agent-time budget', () => {
    const { protocol, selection } = buildRunRules({
      settings,
      agentTimeoutSec: 1800,
      editablePaths: ['optimizer.py'],
      tokenSha256: sha,
      fingerprintInput: { a: 1 },
    });
    expect(protocol.budgets).toEqual({ submissions: 6, wall_time: 3600, agent_time: 1800, gpu_seconds: 1800 });
    expect(protocol).toMatchObject({ cooldownSec: 5, editablePaths: ['optimizer.py'], submission: { endpoint: 'unix-socket', tokenSha256: sha } });
    expect(selection).toEqual({
      scheme: 'assay.selection/1',
      metric: 'val_loss',
      direction: 'minimize',
      eligible: 'counted_completed_without_violation',
      tieBreak: 'earliest_round',
    });
    expect(parseRunProtocol(JSON.parse(JSON.stringify(protocolJson(protocol))))).toEqual(protocol);
  });

  it('refuses what a verifier could not recompute', () => {
    const ok = protocolJson(buildRunRules({ settings, agentTimeoutSec: null, editablePaths: null, tokenSha256: sha, fingerprintInput: null }).protocol);
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ ...ok, scheme: 'x' }, /scheme/],
      [{ ...ok, budgets: { ...(ok.budgets as object), extra: 1 } }, /unknown key "extra"/],
      [{ ...ok, budgets: { ...(ok.budgets as object), submissions: 1.5 } }, /integer/],
      [{ ...ok, budgets: { ...(ok.budgets as object), gpu_seconds: -1 } }, /gpu_seconds/],
      [{ ...ok, cooldownSec: Infinity }, /cooldownSec/],
      [{ ...ok, submission: { endpoint: 'tcp', tokenSha256: sha } }, /submission/],
      [{ ...ok, submission: { endpoint: 'unix-socket', tokenSha256: 'A'.repeat(64) } }, /submission/],
      [{ ...ok, editablePaths: [] }, /editablePaths/],
      [{ ...ok, editablePaths: ['../x'] }, /normalised/],
    ];
    for (const [p, re] of bad) expect(runProtocolProblem(p)).toMatch(re);
    expect(() =>
      buildRunRules({ settings: { ...settings, cooldownSec: -1 }, agentTimeoutSec: null, editablePaths: null, tokenSha256: sha, fingerprintInput: null }),
    ).toThrow(/cooldownSec/);
    expect(() => buildRunRules({ settings, agentTimeoutSec: null, editablePaths: null, tokenSha256: 'nope', fingerprintInput: null })).toThrow(/tokenSha256/);
  });
});

describe('editable paths', () => {
  it('reads [metadata.assay_run] strictly', () => {
    expect(readRunTaskSettings({})).toEqual({ ok: true, value: { editablePaths: null } });
    expect(readRunTaskSettings({ assay_run: { editable_paths: ['src/', 'a.py', 'a.py'] } })).toEqual({ ok: true, value: { editablePaths: ['a.py', 'src/'] } });
    const r = readRunTaskSettings({ assay_run: { editable_paths: ['/abs', 'x/../y', '*.py'], typo: 1 } });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problems).toEqual([
      'task.toml: metadata.assay_run.typo: unknown key (known: editable_paths)',
      'task.toml: metadata.assay_run.editable_paths: "/abs" must be relative to the workspace',
      'task.toml: metadata.assay_run.editable_paths: "x/../y" must be normalised (no empty, "." or ".." parts)',
      'task.toml: metadata.assay_run.editable_paths: "*.py" must be a plain path (no control characters, wildcards or backslashes)',
    ]);
    expect(readRunTaskSettings({ assay_run: 'x' }).ok).toBe(false);
    expect(readRunTaskSettings({ assay_run: { editable_paths: [] } }).ok).toBe(false);
    expect(editablePathProblem(7)).toMatch(/string/);
  });

  it('exact files and directories ending in "/"; nothing else', () => {
    const e = ['optimizer.py', 'src/'];
    for (const p of ['optimizer.py', 'src', 'src/a.py', 'src/deep/b']) expect(isEditablePath(p, e)).toBe(true);
    for (const p of ['optimizer.pyc', 'numpy.py', 'srcx', 'x/optimizer.py', 'optimizer.py/x']) expect(isEditablePath(p, e)).toBe(false);
    const bad = changesOutside(
      [
        { path: 'optimizer.py', change: 'changed' },
        { path: 'numpy.py', change: 'added' },
        { path: 'b', change: 'removed' },
      ],
      e,
      1,
    );
    expect(bad).toEqual([{ path: 'numpy.py', change: 'added' }]);
    expect(notEditableDetail(bad, e)).toBe('the submission changes paths outside the editable ones ("optimizer.py", "src/"): added "numpy.py"');
  });
});
