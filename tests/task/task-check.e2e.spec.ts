/**
 * `assay task check` end to end, with Docker: a task of each template is sound as created, and each broken fixture
 * (tests/fixtures/tasks/broken-*: a copy of the kernel template with one defect) fails with the right check and
 * exit 5 (TASK_UNSOUND). Each check builds two small images and runs five Judges (start and oracle twice, one hostile).
 */
import { join } from 'node:path';
import { TASK_TEMPLATES } from '@assay/task-format';
import { checkTask } from '../../libs/runtime/src/task-check';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { scratchDirs } from '../support/scratch';

interface Report {
  sound: boolean;
  checks: { name: string; status: string; detail: string }[];
  judges: { start: { status: string }[]; oracle: { status: string }[]; hostile: { status: string } | null };
}

const FIXTURES = join(REPO_ROOT, 'tests/fixtures/tasks');

describeDocker('assay task check (CLI, Docker)', () => {
  const { base, fresh } = scratchDirs('assay-task-check-');
  const home = join(base, 'home');

  const check = async (dir: string): Promise<{ code: number | null; report: Report; message: string }> => {
    const r = await assay(['task', 'check', dir, '--json'], home, 170_000);
    // --json: the report when sound; else the error document, with the report in its details.
    const doc = JSON.parse(r.stdout) as Report | { error: { code: string; message: string; details: { report: Report } } };
    if ('error' in doc) {
      expect(doc.error.code).toBe('TASK_UNSOUND');
      return { code: r.code, report: doc.error.details.report, message: doc.error.message };
    }
    return { code: r.code, report: doc, message: r.stderr };
  };
  const status = (r: Report, name: string) => r.checks.find((c) => c.name === name)?.status;

  it.each(TASK_TEMPLATES)(
    'a new %s task is sound as created',
    async (template) => {
      const dir = fresh(template);
      expect((await assay(['task', 'init', dir, '--from-template', template], home)).code).toBe(0);
      const { code, report, message } = await check(dir);
      expect(message).toBe('');
      expect(report.checks.filter((c) => c.status !== 'ok')).toEqual([]);
      expect(report.sound).toBe(true);
      expect(report.judges.start).toHaveLength(2);
      expect(report.judges.oracle).toHaveLength(2);
      expect(report.judges.hostile?.status).toBe('completed');
      expect(code).toBe(0);
    },
    180_000,
  );

  it.each([
    ['broken-no-reward', 'reward-written', /verifier_error.*wrote neither/],
    ['broken-leaked-tests', 'leak-context', /environment\/hidden\/score\.py is a copy of tests\/score\.py/],
    ['broken-candidate-writes', 'reward-writable', /candidate code can write the reward/],
    ['broken-no-better', 'separates', /no better than the starting workspace/],
  ])(
    '%s fails %s',
    async (fixture, failing, why) => {
      const { code, report, message } = await check(join(FIXTURES, fixture));
      expect(report.sound).toBe(false);
      expect(status(report, failing)).toBe('failed');
      expect(report.checks.find((c) => c.status === 'failed')?.name).toBe(failing);
      expect(message).toMatch(new RegExp(`not sound: ${failing}: `));
      expect(message).toMatch(why);
      expect(code).toBe(5);
      if (fixture === 'broken-leaked-tests') expect(status(report, 'leak-image')).toBe('failed');
    },
    180_000,
  );

  it('broken-nondeterministic fails deterministic (in process, through checkTask)', async () => {
    const lines: string[] = [];
    const report = await checkTask(join(FIXTURES, 'broken-nondeterministic'), { repeat: 2, log: (l) => lines.push(l) });
    expect(report.sound).toBe(false);
    expect(report.checks.find((c) => c.status === 'failed')).toMatchObject({ name: 'deterministic', detail: expect.stringMatching(/changes between Judges/) });
    expect(report.checks.filter((c) => c.status !== 'ok').map((c) => c.name)).toEqual(['deterministic']);
    expect(report.judges.start.map((j) => j.status)).toEqual(['completed', 'completed']);
    expect(report.judges.hostile?.status).toBe('completed');
    expect(lines).toEqual(expect.arrayContaining(['validating', 'building images', 'judging the oracle (2/2)', 'judging a hostile workspace']));
  }, 180_000);

  it('prints a table and exits 0 for a sound task', async () => {
    const dir = fresh('table');
    expect((await assay(['task', 'init', dir, '--from-template', 'kernel'], home)).code).toBe(0);
    const r = await assay(['task', 'check', dir, '--repeat', '1'], home, 170_000);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^separates +ok +reward \(maximize\): oracle 1, start 0\.5$/m);
    expect(r.stdout).toMatch(/^deterministic +skipped/m);
    expect(r.stdout).toMatch(/^sound \(/m);
  }, 180_000);
});
