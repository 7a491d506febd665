import type { Command } from 'commander';
import { AssayError } from '@assay/core';
import type { TaskDigests, TaskProblem } from '@assay/task-format';
import type { TaskCheckReport } from '@assay/runtime';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';
import { onStopSignals } from './stop-signals';

/**
 * `assay task validate DIR [--json]`: exit 0 with a one-line summary (then one `warning <code> <file>: <message>` line
 * per warning), or every problem found (one per line on stdout, `<code> <file>: <key>: <message>`) and exit 2
 * (TASK_INVALID).
 * `assay task show DIR [--json]`: the validated plan (JSON with --json), or the same error as validate.
 * `assay task init DIR [--from-template optimizer|dataset|kernel] [--name ORG/NAME] [--json]`: a new task that
 * validates and passes `assay task check` as created; DIR must be absent or empty (else exit 4, TASK_DIR_NOT_EMPTY).
 * `assay task check DIR [--repeat N] [--gpus LIST] [--json]`: validates, builds, judges the start and the oracle N times each and a
 * hostile workspace once, prints one line per check; exit 0 when sound, 5 (TASK_UNSOUND) naming the first failed
 * check (docs/task-format.md, "Authoring a task").
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
      const { loadTaskPlan, describePlan } = libs.taskFormat();
      const plan = await loadTaskPlan(dir);
      const digests = await taskDigestsOf(ctx, dir);
      if (opts.json) ctx.out(JSON.stringify({ ...plan, digests }, null, 2));
      else {
        for (const line of describePlan(plan)) ctx.out(line);
        ctx.out(`digests: task ${digests.task}, instruction ${digests.instruction}, tests ${digests.tests}, environment ${digests.environment}`);
      }
    });

  task
    .command('init')
    .description('create a new task directory from a template (validates and passes `assay task check` as created)')
    .argument('<dir>', 'directory to create (absent or empty)')
    .option('--from-template <template>', 'optimizer | dataset | kernel', 'optimizer')
    .option('--name <org/name>', 'task name (default: local/<directory name>)')
    .option('--json', 'print {dir, name, template, files} as JSON')
    .action((dir: string, opts: { fromTemplate: string; name?: string; json?: boolean }) => {
      const { scaffoldTask, isTaskTemplate, TASK_TEMPLATES, TASK_ERROR_CODES } = libs.taskFormat();
      if (!isTaskTemplate(opts.fromTemplate)) {
        throw new AssayError(
          TASK_ERROR_CODES.BAD_ARGUMENT,
          'invalid_input',
          `--from-template must be one of ${TASK_TEMPLATES.join(', ')}, got "${opts.fromTemplate}"`,
        );
      }
      if (opts.name !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/.test(opts.name)) {
        throw new AssayError(TASK_ERROR_CODES.BAD_ARGUMENT, 'invalid_input', `--name must be org/name (letters, digits, ".", "_", "-"), got "${opts.name}"`);
      }
      const r = scaffoldTask(dir, opts.fromTemplate, opts.name !== undefined ? { name: opts.name } : {});
      if (opts.json) return ctx.out(JSON.stringify(r));
      ctx.out(`created ${r.name} in ${r.dir} (template ${r.template}): ${r.files.join(', ')}`);
      ctx.out(`next: assay task validate ${dir} && assay task check ${dir}`);
    });

  task
    .command('import')
    .description(
      'take in a published task directory as it is (Harbor, Terminal-Bench, OpenRSI Index): validate it, check that every image it needs is in the local Docker daemon (saying how to provide those that are not: Assay never pulls), and record it (TaskRegistered, with its digests)',
    )
    .argument('<dir>', 'task directory')
    .option('--json', 'print the report as JSON')
    .action(async (dir: string, opts: { json?: boolean }) => importTask(ctx, dir, opts.json === true));

  task
    .command('check')
    .description('judge the oracle and the starting workspace and report whether the task is sound')
    .argument('<dir>', 'task directory')
    .option('--repeat <n>', 'Judges of the start and of the oracle, each (1 to 20)', '2')
    .option('--gpus <list>', "host GPUs for a task whose verifier needs them (each Judge gets the verifier's number of them), e.g. 0")
    .option('--json', 'print the report as JSON')
    .action(async (dir: string, opts: { repeat: string; gpus?: string; json?: boolean }) => {
      const { TASK_ERROR_CODES } = libs.taskFormat();
      if (!/^\d{1,2}$/.test(opts.repeat) || Number(opts.repeat) < 1 || Number(opts.repeat) > 20) {
        throw new AssayError(TASK_ERROR_CODES.BAD_ARGUMENT, 'invalid_input', `--repeat must be an integer from 1 to 20, got "${opts.repeat}"`);
      }
      const gpus = opts.gpus !== undefined ? libs.runtime().parseGpuList(opts.gpus) : [];
      const { CheckTaskCommand } = libs.runtime();
      const tty = process.stderr.isTTY === true;
      // Ctrl-C / SIGTERM: kill the running Judge, start no other, remove what the check started (exit 7,
      // JUDGE_CANCELLED); a second one ends the process at once.
      const abort = new AbortController();
      const offSignals = onStopSignals(ctx, 'stopping the check (again to quit at once)', () => abort.abort());
      let report: TaskCheckReport;
      try {
        report = await withRuntimeBuses(ctx, ({ commands }) =>
          commands.execute(
            new CheckTaskCommand(dir, {
              repeat: Number(opts.repeat),
              ...(gpus.length ? { gpus } : {}),
              progress: ctx.progress(),
              signal: abort.signal,
              ...(tty && !opts.json ? { log: (l: string) => ctx.err(`assay: ${l}`) } : {}),
            }),
          ),
        );
      } finally {
        offSignals();
      }
      const first = report.checks.find((c) => c.status === 'failed');
      // --json: one document, the report when sound, else the error with the report in its details.
      if (!opts.json) printReport(ctx, report);
      else if (!first) ctx.out(JSON.stringify(report, null, 2));
      if (first) {
        throw new AssayError(TASK_ERROR_CODES.UNSOUND, 'integrity', `${dir}: not sound: ${first.name}: ${first.detail}`, {
          details: { dir: report.dir, check: first.name, detail: first.detail, ...(opts.json ? { report } : {}) },
        });
      }
    });
}

function printReport(ctx: CliContext, r: TaskCheckReport): void {
  const width = Math.max(...r.checks.map((c) => c.name.length));
  ctx.out(`task      ${r.name ?? '(invalid)'} (${r.dir})`);
  for (const c of r.checks) ctx.out(`${c.name.padEnd(width)}  ${c.status.padEnd(7)}  ${c.detail}`);
  ctx.out(`${r.sound ? 'sound' : 'NOT SOUND'} (${(r.durationMs / 1000).toFixed(1)} s)`);
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

/** A task directory's digests, by the snapshot rules (content addressing, docs/snapshots-format.md); nothing is stored. */
function taskDigestsOf(ctx: CliContext, dir: string): Promise<TaskDigests> {
  const { TaskDigestsQuery } = libs.runtime();
  return withRuntimeBuses(ctx, ({ queries }) => queries.execute(new TaskDigestsQuery(dir)));
}

/** `assay task import DIR`: validate, digest, check the images, record TaskRegistered once per digest. */
async function importTask(ctx: CliContext, dir: string, json: boolean): Promise<void> {
  const { TASK_ERROR_CODES } = libs.taskFormat();
  const { ImportTaskCommand } = libs.runtime();
  const report = await withRuntimeBuses(ctx, ({ commands }) => commands.execute(new ImportTaskCommand(dir)));
  const { images, digests } = report;
  const missing = images.filter((i) => !i.present);
  if (json) ctx.out(JSON.stringify(report, null, 2));
  else {
    ctx.out(`task      ${report.name} (${report.dir})`);
    ctx.out(`digest    ${digests.task}`);
    for (const i of images) ctx.out(`image     ${i.ref} (${i.why}): ${i.present ? `present ${i.id}` : `MISSING: ${i.hint}`}`);
    if (images.length === 0) ctx.out('image     none needed beyond what the task builds');
    if (report.recorded)
      ctx.out(`ledger    TaskRegistered@${report.recorded.position} (${report.recorded.stream})${report.recorded.already ? ', recorded before' : ''}`);
  }
  if (missing.length > 0)
    throw new AssayError(
      TASK_ERROR_CODES.IMAGES_MISSING,
      'unavailable',
      `${dir}: ${missing.length} image(s) not in the local Docker daemon: ${missing.map((m) => m.ref).join(', ')}; nothing recorded (provide them as the report says, then import again)`,
      { details: { missing: missing.map((m) => ({ ref: m.ref, hint: m.hint })) } },
    );
}
