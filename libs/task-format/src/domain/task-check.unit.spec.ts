import { TASK_TEMPLATES, taskNameFor, templateFiles } from './templates';
import {
  checkTolerance,
  findDockerfileLeaks,
  findRootInterpreterRisks,
  firstFailure,
  HOSTILE_KEY,
  HOSTILE_MARKER,
  hostileVerdict,
  judgedChecks,
  median,
  plantHostile,
  type JudgeOutcome,
} from './task-check';

const done = (score: number, ms = 1000): JudgeOutcome => ({ status: 'completed', score, durationMs: ms, detail: null });
const base = { direction: 'maximize' as const, metric: 'reward', tolerance: 0, verifierTimeoutSec: 60 };
const byName = (cs: ReturnType<typeof judgedChecks>, n: string) => cs.find((c) => c.name === n);

describe('findRootInterpreterRisks', () => {
  const risky = (s: string) => findRootInterpreterRisks(s, '/workspace').map((f) => f.why);

  it('accepts the templates and the patterns of the examples', () => {
    for (const t of TASK_TEMPLATES) {
      const sh = templateFiles(t, 'a/b').find((f) => f.path === 'tests/test.sh')?.content as string;
      expect(risky(sh)).toEqual([]);
    }
    expect(risky('exec python3 -I /tests/score.py --workspace /workspace\n')).toEqual([]);
    expect(risky('out=$(run-as-candidate --timeout 5 -- python3 /workspace/x.py)\n')).toEqual([]);
    expect(risky("python3 -I - <<'PY'\nimport json\nPY\n")).toEqual([]);
    expect(risky('cd /tests && python3 score.py\n')).toEqual([]);
    expect(risky('# python3 /workspace/x.py\n')).toEqual([]);
  });

  it('reports root interpreters and tools that import from the workdir', () => {
    expect(risky('python3 /workspace/train.py\n')).toHaveLength(1);
    expect(risky('python3 train.py\n')[0]).toMatch(/runs train.py/);
    expect(risky('cd /workspace && PYTHONPATH=. python3 -m bench\n')[0]).toMatch(/PYTHONPATH/);
    expect(risky('export PYTHONPATH=/tests:/workspace\n')[0]).toMatch(/PYTHONPATH/);
    expect(risky('export PYTHONSAFEPATH=0\n')[0]).toMatch(/PYTHONSAFEPATH/);
    expect(risky('pytest -q /tests/test_x.py\n')[0]).toMatch(/pytest runs as root in the workdir/);
    expect(risky('cd /tests\npytest -q\n')).toEqual([]);
    expect(risky('node -e "require(\'x\')"\n')[0]).toMatch(/node -e/);
    expect(risky('source ./env.sh\n')[0]).toMatch(/sources/);
    expect(risky("python3 -I - <<'PY'\nimport sys; sys.path.insert(0, '.')\nPY\n")[0]).toMatch(/sys.path/);
  });
});

describe('findDockerfileLeaks', () => {
  it('reports COPY and ADD of tests/ or solution/', () => {
    expect(findDockerfileLeaks('FROM x\nCOPY workspace/ /workspace/\n')).toEqual([]);
    expect(findDockerfileLeaks('FROM x\nCOPY tests/ /opt/tests/\n')[0]).toMatchObject({ line: 2 });
    expect(findDockerfileLeaks('ADD --chown=1:1 ./solution/solve.sh /s.sh\n')[0]?.why).toMatch(/solution/);
  });
});

describe('the hostile workspace', () => {
  it('plants code in Python and shell files only, keeping a shebang and __future__ imports first', () => {
    expect(plantHostile('a.txt', 'x')).toBeNull();
    const py = plantHostile('a.py', '#!/usr/bin/env python3\nprint(1)\n') as string;
    expect(py.startsWith('#!/usr/bin/env python3\n# --- planted')).toBe(true);
    const fut = plantHostile('b.py', 'from __future__ import annotations\nx = 1') as string;
    expect(fut.startsWith('from __future__ import annotations\nx = 1\n# --- planted')).toBe(true);
    expect(plantHostile('c.sh', 'echo hi\n')).toContain('/logs/verifier/reward.json');
  });

  it('sees a planted verdict in the rewards or the output', () => {
    expect(hostileVerdict({ rewards: { reward: 1 }, output: 'fine' }).wrote).toBe(false);
    expect(hostileVerdict({ rewards: { reward: 1, [HOSTILE_KEY]: 1 }, output: '' }).wrote).toBe(true);
    expect(hostileVerdict({ rewards: null, output: `x\n${HOSTILE_MARKER} /logs/verifier/reward.json\n` }).how).toContain('reward.json');
  });
});

describe('judgedChecks', () => {
  it('is sound when the oracle beats the start and scores repeat exactly', () => {
    const cs = judgedChecks({ ...base, start: [done(0.5), done(0.5)], oracle: [done(1, 2000), done(1, 3000)] });
    expect(cs.map((c) => c.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    expect(byName(cs, 'judge-duration')?.detail).toMatch(/^median 1.50 s over 4 Judges/);
    expect(firstFailure(cs)).toBeNull();
  });

  it('respects the direction and the tolerance', () => {
    const min = judgedChecks({ ...base, direction: 'minimize', start: [done(2), done(2)], oracle: [done(3), done(3)] });
    expect(byName(min, 'separates')?.status).toBe('failed');
    const noisy = judgedChecks({ ...base, tolerance: 0.1, start: [done(0.5), done(0.55)], oracle: [done(1), done(0.95)] });
    expect(byName(noisy, 'deterministic')?.status).toBe('ok');
    expect(byName(judgedChecks({ ...base, start: [done(0.5), done(0.55)], oracle: [done(1), done(1)] }), 'deterministic')?.status).toBe('failed');
  });

  it('fails reward-written on a verifier error or a missing metric, and skips what it cannot decide', () => {
    const err: JudgeOutcome = { status: 'verifier_error', score: null, durationMs: 10, detail: 'no reward file' };
    const cs = judgedChecks({ ...base, start: [done(0)], oracle: [err] });
    expect(byName(cs, 'reward-written')).toMatchObject({ status: 'failed', detail: 'oracle: no usable reward: verifier_error (no reward file)' });
    expect(byName(cs, 'separates')?.status).toBe('skipped');
    expect(byName(cs, 'deterministic')?.status).toBe('skipped');
    const rule: JudgeOutcome = { status: 'submission_error', score: 0, durationMs: 1, detail: 'rule broken' };
    expect(byName(judgedChecks({ ...base, start: [rule], oracle: [done(1)] }), 'reward-written')?.detail).toMatch(/^start: .*submission_error/);
    const timeout: JudgeOutcome = { status: 'verifier_timeout', score: null, durationMs: 60_000, detail: null };
    expect(byName(judgedChecks({ ...base, start: [done(0)], oracle: [timeout] }), 'judge-duration')?.status).toBe('failed');
  });
});

describe('helpers', () => {
  it('median, tolerance, task names', () => {
    expect(median([])).toBeNull();
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(checkTolerance({})).toBe(0);
    expect(checkTolerance({ assay_check: { tolerance: 0.5 } })).toBe(0.5);
    expect(checkTolerance({ assay_check: { tolerance: -1 } })).toMatch(/tolerance/);
    expect(taskNameFor('My Task!')).toBe('local/my-task');
    expect(taskNameFor('...')).toBe('local/task');
  });
});
