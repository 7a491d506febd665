/**
 * `assay task init` as a user runs it: each template gives a task that `assay task validate` accepts as created, with
 * every task.toml key listed; a non-empty directory and an unknown template are refused. (That each template also
 * passes `assay task check` is tests/task/task-check.e2e.spec.ts, with Docker.)
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import { scaffoldTask, TASK_TEMPLATES, templateFiles, validateTaskDir } from '@assay/task-format';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { scratchDirs } from '../support/scratch';

const { base, fresh } = scratchDirs('assay-task-init-');
const home = join(base, 'home');

describe('assay task init', () => {
  it.each(TASK_TEMPLATES)(
    '%s: creates a task that validates as created',
    async (template) => {
      const dir = fresh(template);
      const r = await assay(['task', 'init', dir, '--from-template', template, '--json'], home);
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout) as { name: string; template: string; files: string[] };
      expect(out).toMatchObject({ name: expect.stringMatching(/^local\//), template });
      expect(out.files).toEqual(
        expect.arrayContaining(['task.toml', 'instruction.md', 'environment/Dockerfile', 'tests/test.sh', 'tests/score.py', 'solution/solve.sh']),
      );
      for (const f of ['tests/test.sh', 'solution/solve.sh']) expect(fs.statSync(join(dir, f)).mode & 0o111).not.toBe(0);
      expect(fs.readFileSync(join(dir, 'environment/Dockerfile'), 'utf8')).toMatch(/^FROM assay\/base:bookworm$/m);
      expect(fs.readFileSync(join(dir, 'tests/test.sh'), 'utf8')).toContain('run-as-candidate');

      const v = await assay(['task', 'validate', dir], home);
      expect(v.stderr).toBe('');
      expect(v.code).toBe(0);
      expect(v.stdout).toMatch(/^ok local\//);
      const plan = await validateTaskDir(dir);
      expect(plan.ok).toBe(true);
      expect(plan.warnings).toEqual([]);
    },
    60_000,
  );

  it('task.toml lists every key Assay reads, the optional ones commented out', () => {
    const dir = fresh('keys');
    return assay(['task', 'init', dir], home).then((r) => {
      expect(r.code).toBe(0);
      const toml = fs.readFileSync(join(dir, 'task.toml'), 'utf8');
      for (const key of [
        'schema_version',
        'source',
        'authors',
        'keywords',
        'allowed_paths',
        'editable_paths',
        'require_disjoint_phase_nodes',
        'assets',
        'primary_metric',
        'direction',
        'max_submissions',
        'cooldown_sec',
        'time_budget_sec',
        'gpu_budget_sec',
        'pause_work_during_judge',
        'tolerance',
        'cpus',
        'memory_mb',
        'storage_mb',
        'gpus',
        'gpu_types',
        'workdir',
        'network_mode',
        'allowed_hosts',
        'allow_internet',
        'build_timeout_sec',
        'docker_image',
        'timeout_sec',
        'user',
        'environment_mode',
      ])
        expect(toml).toMatch(new RegExp(`^#? ?${key} = `, 'm'));
    });
  }, 30_000);

  it('--name sets the task name', async () => {
    const dir = fresh('named');
    const r = await assay(['task', 'init', dir, '--from-template', 'kernel', '--name', 'acme/softmax'], home);
    expect(r.code).toBe(0);
    expect(fs.readFileSync(join(dir, 'task.toml'), 'utf8')).toContain('name = "acme/softmax"');
  }, 30_000);

  it('refuses a non-empty directory and leaves it as it was', async () => {
    const dir = fresh('busy');
    fs.mkdirSync(dir);
    fs.writeFileSync(join(dir, 'notes.txt'), 'mine');
    const r = await assay(['task', 'init', dir], home);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('TASK_DIR_NOT_EMPTY');
    expect(fs.readdirSync(dir)).toEqual(['notes.txt']);
  }, 30_000);

  it('scaffoldTask (in process): writes the files with their modes, refuses to write over anything', () => {
    const dir = fresh('lib');
    const r = scaffoldTask(dir, 'dataset');
    expect(r).toMatchObject({ name: expect.stringMatching(/^local\/lib-\d+$/), template: 'dataset' });
    expect(fs.statSync(join(dir, 'tests/test.sh')).mode & 0o777).toBe(0o755);
    expect(fs.statSync(join(dir, 'tests/score.py')).mode & 0o777).toBe(0o644);
    expect(() => scaffoldTask(dir, 'kernel')).toThrow(expect.objectContaining({ code: 'TASK_DIR_NOT_EMPTY', kind: 'conflict' }));
    const file = join(base, 'a-file');
    fs.writeFileSync(file, '');
    expect(() => scaffoldTask(file, 'kernel')).toThrow(expect.objectContaining({ code: 'TASK_DIR_NOT_EMPTY' }));
    const empty = fresh('empty');
    fs.mkdirSync(empty);
    expect(scaffoldTask(empty, 'kernel', { name: 'a/b' }).name).toBe('a/b');
  });

  it('refuses an unknown template', async () => {
    const r = await assay(['task', 'init', fresh('bad'), '--from-template', 'gpu'], home);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--from-template must be one of optimizer, dataset, kernel');
  }, 30_000);
});

describe('tests/fixtures/tasks/broken-*', () => {
  // Each is `assay task init --from-template kernel --name assay-test/broken-<x>` with one defect: these are the files
  // that differ, so a change to the template that is not carried over to them shows here.
  it.each([
    ['broken-no-reward', ['task.toml', 'tests/test.sh']],
    ['broken-leaked-tests', ['environment/Dockerfile', 'environment/hidden/score.py', 'task.toml']],
    ['broken-nondeterministic', ['task.toml', 'tests/score.py']],
    ['broken-candidate-writes', ['task.toml', 'tests/test.sh']],
    ['broken-no-better', ['solution/solve.sh', 'task.toml']],
  ])('%s is the kernel template but for %j', (fixture, differing) => {
    const dir = join(REPO_ROOT, 'tests/fixtures/tasks', fixture);
    const expected = new Map(templateFiles('kernel', `assay-test/${fixture}`).map((f) => [f.path, f.content]));
    const actual = walk(dir);
    const paths = [...new Set([...expected.keys(), ...actual.keys()])].sort();
    expect(paths.filter((p) => expected.get(p) !== actual.get(p))).toEqual(differing);
  });
});

function walk(root: string, rel = ''): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of fs.readdirSync(join(root, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) for (const [k, v] of walk(root, p)) out.set(k, v);
    else out.set(p, fs.readFileSync(join(root, p), 'utf8'));
  }
  return out;
}
