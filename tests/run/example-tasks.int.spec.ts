/**
 * The example tasks of the run: both validate as Harbor tasks (and carry valid Judge and run settings), and their
 * scoring scripts score what they should, run directly with python3 here; with Docker and the base image, the
 * tiny-optimizer Judge also runs as it will in a real Judge (entrypoint, /tests 0700, run-as-candidate, network
 * off, read-only root), against an optimizer that tries to read the hidden tests and forge the reward.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readJudgeSettings } from '@assay/judge';
import { readRunTaskSettings } from '@assay/run';
import { loadTaskPlan, mergeRunSettings, validateTaskDir } from '@assay/task-format';
import { describeDocker } from '../support/docker';

jest.setTimeout(120_000);

const REPO = join(__dirname, '../..');
const OPT = join(REPO, 'examples/tasks/tiny-optimizer');
const DATA = join(REPO, 'examples/tasks/data-contract');
const AGENT_OPTS = join(REPO, 'examples/agents/reference-agent/optimizers');

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'assay-examples-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
function workspace(files: Record<string, string>): string {
  n += 1;
  const ws = join(dir, `ws${n}`);
  mkdirSync(ws);
  for (const [k, v] of Object.entries(files)) writeFileSync(join(ws, k), v);
  return ws;
}

function score(ws: string): { rewards: Record<string, number>; out: string } {
  const out = join(ws, '..', `out-${n}-${Math.random().toString(16).slice(2)}`);
  const r = spawnSync(
    'python3',
    ['-I', join(OPT, 'tests/score.py'), '--workspace', ws, '--out', out, '--runner', 'none', '--python', 'python3', '--cwd', dir],
    { encoding: 'utf8', timeout: 100_000 },
  );
  expect(r.status).toBe(0);
  return { rewards: JSON.parse(readFileSync(join(out, 'reward.json'), 'utf8')) as Record<string, number>, out: r.stdout + r.stderr };
}

const SGD = readFileSync(join(OPT, 'environment/workspace/optimizer.py'), 'utf8');

describe('the example tasks validate', () => {
  it.each([
    [OPT, 'assay/tiny-optimizer', 'val_loss', 'minimize', ['optimizer.py']],
    [DATA, 'assay/data-contract', 'reward', 'maximize', null],
  ] as const)('%s', async (taskDir, name, metric, direction, editable) => {
    const v = await validateTaskDir(taskDir);
    expect(v.problems).toEqual([]);
    const plan = await loadTaskPlan(taskDir);
    expect(plan.name).toBe(name);
    expect(plan.environment).toMatchObject({ workdir: '/workspace', gpus: 0, network: { mode: 'no-network' } });
    expect(readFileSync(join(taskDir, 'environment/Dockerfile'), 'utf8')).toMatch(/^FROM assay\/base:bookworm$/m);
    expect(mergeRunSettings(plan.runSettings)).toMatchObject({ primaryMetric: metric, direction });
    expect(readJudgeSettings(plan.metadata).ok).toBe(true);
    expect(readRunTaskSettings(plan.metadata)).toEqual({ ok: true, value: { editablePaths: editable } });
  });
});

describe('tiny-optimizer scoring (python3 and numpy on this machine)', () => {
  let baseline: Record<string, number>;
  beforeAll(() => {
    baseline = score(workspace({ 'optimizer.py': SGD })).rewards;
  });

  it('scores plain SGD, and each reference optimizer lower than the one before', () => {
    expect(baseline.failed_sizes).toBe(0);
    expect(baseline.val_loss).toBeCloseTo(0.115665, 4);
    let last = baseline.val_loss as number;
    for (const f of ['1-momentum.py', '2-adam.py', '3-adam-cosine.py']) {
      const r = score(workspace({ 'optimizer.py': readFileSync(join(AGENT_OPTS, f), 'utf8') })).rewards;
      expect(r.failed_sizes).toBe(0);
      expect(r.val_loss).toBeLessThan(last);
      last = r.val_loss as number;
    }
  });

  it('a NaN, crashing or misshapen optimizer scores the loss at the initial parameters, never better', () => {
    const nan =
      'import numpy as np\nclass Optimizer:\n    def __init__(self, shapes): pass\n    def step(self, params, grads): return [p * np.nan for p in params]\n';
    const crash = 'raise RuntimeError("boom")\n';
    const shape = 'class Optimizer:\n    def __init__(self, shapes): pass\n    def step(self, params, grads): return [p.ravel() for p in params]\n';
    const results = [nan, crash, shape].map((src) => score(workspace({ 'optimizer.py': src })));
    for (const r of results) {
      expect(r.rewards.failed_sizes).toBe(3);
      expect(r.rewards.val_loss).toBeGreaterThan(baseline.val_loss as number);
    }
    expect(results[0]?.rewards.val_loss).toBe(results[1]?.rewards.val_loss);
    expect(results[0]?.out).toMatch(/non-finite parameters at step 0/);
    expect(results[1]?.out).toMatch(/RuntimeError: boom/);
    expect(results[2]?.out).toMatch(/returned shape \(\d+,\) for parameter 0/);
  });

  it('an optimizer that prints cannot corrupt the protocol; a planted numpy.py shadows nothing', () => {
    const noisy = SGD.replace('return [', 'print("step!"); return [');
    const r = score(workspace({ 'optimizer.py': noisy, 'numpy.py': 'raise ImportError("shadowed")\n' }));
    expect(r.rewards).toEqual(baseline);
    expect(r.out).toContain('step!');
  });
});

describe('data-contract scoring', () => {
  const check = (dataset: string) => {
    const out = join(dir, `dc-${Math.random().toString(16).slice(2)}`);
    const r = spawnSync('python3', ['-I', join(DATA, 'tests/check.py'), '--dataset', dataset, '--out', out], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    return { reward: JSON.parse(readFileSync(join(out, 'reward.json'), 'utf8')) as Record<string, number>, out: r.stdout };
  };

  it('the reference solution meets the contract: reward 1', () => {
    const ws = workspace({});
    execFileSync('bash', ['-c', readFileSync(join(DATA, 'solution/solve.sh'), 'utf8').replace('/workspace/dataset.jsonl', join(ws, 'dataset.jsonl'))]);
    const r = check(join(ws, 'dataset.jsonl'));
    expect(r.reward).toEqual({ reward: 1, records: 50, failures: 0 });
    expect(r.out).toBe('PASS: 50 records (math 20, code 15, prose 15); the dataset meets the contract\n');
  });

  it('reward 0 with every failure and its line', () => {
    const good = (i: number, domain = 'math') => JSON.stringify({ id: `r-${i}`, domain, prompt: 'a prompt of some length', answer: 'x' });
    const lines = [
      good(1),
      good(1),
      JSON.stringify({ id: 'r-2', domain: 'math', prompt: 'a prompt of some length', answer: 'x', extra: 1 }),
      '{"id":"r-3","domain":"math","prompt":"a prompt of some length","answer":NaN}',
      good(4, 'poetry'),
    ];
    const ws = workspace({ 'dataset.jsonl': `${lines.join('\n')}\n` });
    const r = check(join(ws, 'dataset.jsonl'));
    expect(r.reward.reward).toBe(0);
    expect(r.out.split('\n')).toEqual([
      'FAIL dataset.jsonl:2: id "r-1" is not unique (first on line 1)',
      'FAIL dataset.jsonl:3: unexpected field "extra"',
      'FAIL dataset.jsonl:4: not strict JSON (NaN is not JSON)',
      'FAIL dataset.jsonl:5: field "domain" must be one of math, code, prose, got "poetry"',
      'FAIL dataset.jsonl:0: domain "math" has 3 records, the contract needs exactly 20',
      'FAIL dataset.jsonl:0: domain "code" has 0 records, the contract needs exactly 15',
      'FAIL dataset.jsonl:0: domain "prose" has 0 records, the contract needs exactly 15',
      'reward 0: 7 failures; 4 records (math 3, code 0, prose 0)',
      '',
    ]);
  });

  it('never follows a symlink (the hidden tests stay unread) and bounds the size', () => {
    const ws = workspace({});
    symlinkSync(join(DATA, 'tests/check.py'), join(ws, 'dataset.jsonl'));
    const r = check(join(ws, 'dataset.jsonl'));
    expect(r.out).toBe(
      'FAIL dataset.jsonl:0: is a symbolic link; the contract needs a regular file\nreward 0: 1 failure; 0 records (math 0, code 0, prose 0)\n',
    );
    const big = workspace({ 'dataset.jsonl': 'x'.repeat(1024 * 1024 + 1) });
    expect(check(join(big, 'dataset.jsonl')).out).toMatch(/is larger than 1048576 bytes/);
    expect(check(join(ws, 'missing.jsonl')).out).toMatch(/does not exist/);
  });
});

// ---- the real Judge environment, when Docker and the base image are here --------------------------------------------

function docker(args: string[], input?: Buffer): { code: number | null; out: string; err: string } {
  const r = spawnSync('docker', args, { encoding: 'utf8', timeout: 120_000, ...(input ? { input } : {}) });
  return { code: r.status, out: r.stdout ?? '', err: r.stderr ?? '' };
}

describeDocker('tiny-optimizer in a Judge-like container (Docker)', () => {
  const image = `assay/test-tiny-optimizer:${process.pid}`;
  beforeAll(() => {
    execFileSync('docker', ['build', '-q', '--network', 'none', '-t', image, join(OPT, 'environment')], { stdio: 'pipe', timeout: 120_000 });
  });
  afterAll(() => {
    docker(['rmi', '-f', image]);
  });

  /** As the Judge runs it: entrypoint, tests on stdin into a 0700 tmpfs, caps dropped but SETUID/SETGID, no network. */
  function judge(ws: string): { rewards: Record<string, number>; log: string } {
    chmodSync(ws, 0o755);
    const logs = mkdtempSync(join(dir, 'logs-'));
    const tar = execFileSync('tar', ['-c', '-C', join(OPT, 'tests'), '.']);
    const r = docker(
      [
        'run',
        '--rm',
        '-i',
        '--network',
        'none',
        '--read-only',
        '--tmpfs',
        '/tmp:mode=1777',
        '--tmpfs',
        '/tests:mode=0700',
        '--cap-drop',
        'ALL',
        '--cap-add',
        'SETUID',
        '--cap-add',
        'SETGID',
        '--security-opt',
        'no-new-privileges',
        '-e',
        'ASSAY_JUDGE_WORKDIR=/workspace',
        '-v',
        `${ws}:/workspace:ro`,
        '-v',
        `${logs}:/logs/verifier`,
        '-v',
        `${join(REPO, 'task-runtime/judge/entrypoint')}:/opt/assay/judge/entrypoint:ro`,
        '-v',
        `${join(REPO, 'task-runtime/judge/run-as-candidate')}:/usr/local/bin/run-as-candidate:ro`,
        image,
        '/opt/assay/judge/entrypoint',
        '/bin/bash',
        '/tests/test.sh',
      ],
      tar,
    );
    expect(r.code).toBe(0);
    return { rewards: JSON.parse(readFileSync(join(logs, 'reward.json'), 'utf8')) as Record<string, number>, log: r.out + r.err };
  }

  it('scores with numpy from the base image as on this machine, and an attacking optimizer gains nothing', () => {
    const local = score(workspace({ 'optimizer.py': readFileSync(join(AGENT_OPTS, '3-adam-cosine.py'), 'utf8') })).rewards;
    const inJudge = judge(workspace({ 'optimizer.py': readFileSync(join(AGENT_OPTS, '3-adam-cosine.py'), 'utf8') })).rewards;
    expect(inJudge.val_loss).toBeCloseTo(local.val_loss as number, 6);

    const attack = [
      'import os, sys',
      'for what, f in (("read", lambda: open("/tests/score.py").read()), ("write", lambda: open("/logs/verifier/reward.json", "w").write("{\\"val_loss\\": 0}")), ("list", lambda: os.listdir("/tests"))):',
      '    try:',
      '        f(); print("ATTACK %s succeeded" % what, file=sys.stderr)',
      '    except OSError as e:',
      '        print("ATTACK %s refused: %s" % (what, type(e).__name__), file=sys.stderr)',
      'print("ATTACK uid %d" % os.getuid(), file=sys.stderr)',
      SGD,
    ].join('\n');
    const r = judge(workspace({ 'optimizer.py': attack }));
    expect(r.log).toMatch(/ATTACK read refused: PermissionError/);
    expect(r.log).toMatch(/ATTACK write refused: PermissionError/);
    expect(r.log).toMatch(/ATTACK list refused: PermissionError/);
    expect(r.log).toMatch(/ATTACK uid 65534/);
    expect(r.log).not.toMatch(/succeeded/);
    expect(r.rewards.val_loss).toBeCloseTo(0.115665, 4); // scored as the plain SGD it is
  });
});
