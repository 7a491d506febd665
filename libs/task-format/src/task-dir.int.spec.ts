import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssayError } from '@assay/core';
import { TASK_ERROR_CODES as C } from './task-format.errors';
import { loadTaskPlan, validateTaskDir } from './task-dir';
import { summarizePlan } from './task-report';

const EXAMPLE = join(__dirname, '../../../examples/tasks/hello-judge');
const TOML = 'schema_version = "1.4"\n[task]\nname = "t/ok"\n[environment]\ngpus = 0\n';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'assay-task-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function makeTask(dir = root, files: Record<string, string> = {}): string {
  const all: Record<string, string> = {
    'task.toml': TOML,
    'instruction.md': 'Do it.\n',
    'environment/Dockerfile': 'FROM assay/base:bookworm\n',
    'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
    ...files,
  };
  for (const [rel, text] of Object.entries(all)) {
    mkdirSync(join(dir, rel, '..'), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

const keysOf = (v: { problems: readonly { code: string; file: string }[] }) => v.problems.map((p) => `${p.code} ${p.file}`);

describe('validateTaskDir', () => {
  it('accepts the hello-judge example', async () => {
    const v = await validateTaskDir(EXAMPLE);
    expect(v.problems).toEqual([]);
    expect(v.plan?.name).toBe('assay/hello-judge');
    expect(v.plan?.files.solution).toBe('solution');
    expect(v.plan?.runSettings).toEqual({ primaryMetric: 'reward', direction: 'maximize', maxSubmissions: 5, cooldownSec: 0 });
    expect(summarizePlan(v.plan!)).toBe(
      'assay/hello-judge (schema 1.4): work 0 GPU, judge 0 GPU, network work no-network / judge no-network, agent 600s, judge 60s, environment/Dockerfile',
    );
  });

  it('reports every missing required path at once', async () => {
    const v = await validateTaskDir(root);
    expect(v.ok).toBe(false);
    expect(keysOf(v)).toEqual([`${C.FILE_MISSING} task.toml`, `${C.FILE_MISSING} instruction.md`, `${C.FILE_MISSING} environment`, `${C.FILE_MISSING} tests`]);
  });

  it('reports file-system and task.toml problems together', async () => {
    makeTask(root, { 'task.toml': 'schema_version = "1.4"\n[environment]\ngpus = true\n', 'tests/test.sh': '' });
    const v = await validateTaskDir(root);
    expect(keysOf(v)).toEqual([`${C.INVALID_VALUE} tests/test.sh`, `${C.INVALID_TYPE} task.toml`]);
  });

  it('refuses symlinked required files and links that leave their part of the task', async () => {
    makeTask();
    const outside = mkdtempSync(join(tmpdir(), 'assay-outside-'));
    try {
      writeFileSync(join(outside, 'secret'), 'x');
      rmSync(join(root, 'instruction.md'));
      symlinkSync(join(outside, 'secret'), join(root, 'instruction.md'));
      symlinkSync('../environment/Dockerfile', join(root, 'tests', 'peek'));
      symlinkSync('/etc/passwd', join(root, 'environment', 'passwd'));
      symlinkSync('Dockerfile', join(root, 'environment', 'fine-link'));
      mkdirSync(join(root, 'environment', 'sub'));
      symlinkSync('../Dockerfile', join(root, 'environment', 'sub', 'also-fine'));
      const v = await validateTaskDir(root);
      expect(
        v.problems
          .filter((p) => p.code === C.FILE_UNSAFE)
          .map((p) => p.file)
          .sort(),
      ).toEqual(['environment/passwd', 'instruction.md', 'instruction.md', 'tests/peek']);
      expect(v.problems.find((p) => p.file === 'tests/peek')?.message).toContain('leaves tests/');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('refuses fifos, oversized files, invalid UTF-8 and too many entries', async () => {
    makeTask(root, { 'task.toml': `${TOML}# ${'x'.repeat(2000)}\n` });
    execFileSync('mkfifo', [join(root, 'environment', 'pipe')]);
    writeFileSync(join(root, 'instruction.md'), Buffer.from([0x48, 0xff, 0xfe]));
    const v = await validateTaskDir(root, { limits: { maxTaskTomlBytes: 1024 } });
    expect(keysOf(v).sort()).toEqual([`${C.FILE_ENCODING} instruction.md`, `${C.FILE_TOO_LARGE} task.toml`, `${C.FILE_UNSAFE} environment/pipe`].sort());
    const many = await validateTaskDir(root, { limits: { maxEntries: 3 } });
    expect(many.problems.some((p) => p.code === C.FILE_TOO_LARGE && p.message.includes('more than 3 entries'))).toBe(true);
  });

  it('names the task after its directory for Harbor 1.0 files without [task]', async () => {
    const dir = join(root, 'My Task!');
    mkdirSync(dir);
    makeTask(dir, { 'task.toml': 'version = "1.0"\n[agent]\ntimeout_sec = 60.0\n' });
    const v = await validateTaskDir(dir);
    expect(v.plan?.name).toBe('local/My-Task-');
  });

  it('warns, without refusing, when tests/test.sh downloads tools and the Judge has no network', async () => {
    makeTask(root, { 'tests/test.sh': '#!/bin/bash\npip install pytest\npytest /tests && echo 1 > /logs/verifier/reward.txt\n' });
    const v = await validateTaskDir(root);
    expect(v.ok).toBe(true);
    expect(v.problems).toEqual([]);
    expect(v.warnings).toEqual([expect.objectContaining({ code: C.TESTS_NEED_NETWORK, file: 'tests/test.sh', key: null })]);
    expect(v.warnings[0]?.message).toContain('(line 2: pip install)');
    expect(v.plan?.warnings).toEqual(v.warnings);
    writeFileSync(join(root, 'task.toml'), `${TOML}[verifier]\nnetwork_mode = "public"\n`);
    expect((await validateTaskDir(root)).warnings).toEqual([]);
  });
});

describe('loadTaskPlan', () => {
  it('returns the plan, or throws TASK_INVALID with every problem, or TASK_DIR_NOT_FOUND', async () => {
    makeTask();
    expect((await loadTaskPlan(root)).name).toBe('t/ok');
    writeFileSync(join(root, 'task.toml'), 'schema_version = "9"\n[environment]\ngpus = -1\n');
    const err = await loadTaskPlan(root).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AssayError);
    expect((err as AssayError).code).toBe(C.INVALID);
    expect((err as AssayError).kind).toBe('invalid_input');
    expect((err as AssayError).details.problems).toHaveLength(2);
    const nf = await loadTaskPlan(join(root, 'nope')).catch((e: unknown) => e);
    expect((nf as AssayError).code).toBe(C.DIR_NOT_FOUND);
    expect((nf as AssayError).kind).toBe('not_found');
  });
});
