import type { Command } from 'commander';
import { AssayError } from '@assay/core';
import type { TaskDigests, TaskProblem } from '@assay/task-format';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';

/**
 * `assay task validate DIR [--json]`: exit 0 with a one-line summary (then one `warning <code> <file>: <message>` line
 * per warning), or every problem found (one per line on stdout, `<code> <file>: <key>: <message>`) and exit 2
 * (TASK_INVALID).
 * `assay task show DIR [--json]`: the validated plan (JSON with --json), or the same error as validate.
 */
export function register(program: Command, ctx: CliContext): void {
  const task = program.command('task').description('inspect task directories (Harbor / OpenRSI Index format)');

  task
    .command('validate')
    .description('check a task directory and list every problem found')
    .argument('<dir>', 'task directory (task.toml, instruction.md, environment/, tests/test.sh)')
    .option('--json', 'print {ok, dir, summary, problems} as JSON')
    .action(async (dir: string, opts: { json?: boolean }) => {
      const { validateTaskDir, summarizePlan, formatProblem } = libs.taskFormat();
      const v = await validateTaskDir(dir);
      if (opts.json) {
        ctx.out(JSON.stringify({ ok: v.ok, dir: v.dir, summary: v.plan ? summarizePlan(v.plan) : null, problems: v.problems, warnings: v.warnings }));
      } else if (v.ok && v.plan) {
        ctx.out(`ok ${summarizePlan(v.plan)}`);
        for (const w of v.warnings) ctx.out(`warning ${w.code} ${formatProblem(w)}`);
      } else {
        for (const p of v.problems) ctx.out(`${p.code} ${formatProblem(p)}`);
      }
      if (!v.ok) throw failure(v.dir, v.problems);
    });

  task
    .command('show')
    .description('print the validated plan of a task directory')
    .argument('<dir>', 'task directory')
    .option('--json', 'print the plan as JSON')
    .action(async (dir: string, opts: { json?: boolean }) => {
      const { loadTaskPlan, computeTaskDigests, describePlan } = libs.taskFormat();
      const plan = await loadTaskPlan(dir);
      // Digests use the snapshot rules (content addressing, docs/snapshots-format.md); nothing is stored.
      const snapshots = await libs.snapshots().SnapshotHome.open(ctx.home, { sink: null });
      let digests: TaskDigests;
      try {
        digests = await computeTaskDigests(dir, {
          digest: async (d: string) => (await snapshots.create(d, { dryRun: true, previous: null, label: null, useCache: false })).rootCid,
        });
      } finally {
        await snapshots.close();
      }
      if (opts.json) ctx.out(JSON.stringify({ ...plan, digests }, null, 2));
      else {
        for (const line of describePlan(plan)) ctx.out(line);
        ctx.out(`digests: task ${digests.task}, instruction ${digests.instruction}, tests ${digests.tests}, environment ${digests.environment}`);
      }
    });
}

function failure(dir: string, problems: readonly TaskProblem[]): AssayError {
  const { TASK_ERROR_CODES } = libs.taskFormat();
  const first = problems[0];
  if (problems.length === 1 && first?.code === TASK_ERROR_CODES.DIR_NOT_FOUND) {
    return new AssayError(first.code, 'not_found', `${first.file}: ${first.message}`);
  }
  const n = problems.length;
  return new AssayError(TASK_ERROR_CODES.INVALID, 'invalid_input', `${dir}: ${n} problem${n === 1 ? '' : 's'} found (listed above)`, {
    details: { dir, problems: problems.map((p) => ({ ...p })) },
  });
}
