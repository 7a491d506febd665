import type { Command } from 'commander';
import { AssayError, escapeTerminalText } from '@assay/core';
import type { Baseline } from '@assay/run';
import type { BaselineReport } from '@assay/runtime';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';
import { onStopSignals } from './stop-signals';
import { RUN_SETTING_OPTIONS, runSettingOverridesOf, type RunSettingFlags } from './run-setting-options';

const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);

/**
 * `assay baseline TASK_DIR [--repeat N] [--json]`: judges the task's starting workspace and its oracle (solution/)
 * N times each (default 3) under the protocol `assay run TASK_DIR` would use, and records one BaselineRecorded per
 * kind in the ledger (docs/task-format.md, "Baselines"). Exit 2 for a bad --repeat or task, 5 when the oracle fails
 * (BASELINE_ORACLE_FAILED: nothing recorded), 7 when Docker is unavailable or on Ctrl-C (JUDGE_CANCELLED).
 * `assay baseline ls [--task DIR] [--json]`: the recorded baselines (read-only; no Docker).
 * `ls` is a reserved first word of `assay baseline`; a task directory of that name is given as `./ls`.
 */
export function register(program: Command, ctx: CliContext): void {
  const cmd = program
    .command('baseline')
    .description("judge a task's starting workspace and its oracle N times under the run protocol; record BaselineRecorded")
    .argument('[task-dir]', 'task directory')
    .option('--repeat <n>', 'Judges of each workspace (1 to 20)', '3')
    .option('--json', 'print one JSON document');
  // the run-setting flags of `assay run`: a baseline taken with a run's flags has that run's protocol fingerprint
  for (const [flags, description] of RUN_SETTING_OPTIONS) cmd.option(flags, `${description}; as \`assay run\` takes it`);
  cmd.action(async (taskDir: string | undefined, o: { repeat: string; json?: boolean } & RunSettingFlags) => {
    if (!taskDir) throw usage('assay baseline needs TASK_DIR (or `assay baseline ls`)');
    if (!/^\d{1,2}$/.test(o.repeat) || Number(o.repeat) < 1 || Number(o.repeat) > 20)
      throw usage(`--repeat must be an integer from 1 to 20, got "${o.repeat}"`);
    const overrides = runSettingOverridesOf(o, usage);
    const { RecordBaselineCommand } = libs.runtime();
    const tty = process.stderr.isTTY === true;
    // Ctrl-C / SIGTERM: kill the running Judge, start no other, record nothing (exit 7, JUDGE_CANCELLED).
    const abort = new AbortController();
    const offSignals = onStopSignals(ctx, 'stopping the baseline (again to quit at once)', () => abort.abort());
    let r: BaselineReport;
    try {
      r = await withRuntimeBuses(ctx, ({ commands }) =>
        commands.execute(
          new RecordBaselineCommand(taskDir, {
            home: ctx.home,
            repeat: Number(o.repeat),
            overrides,
            progress: ctx.progress(),
            signal: abort.signal,
            ...(tty && !o.json ? { log: (l: string) => ctx.err(`assay: ${l}`) } : {}),
          }),
        ),
      );
    } finally {
      offSignals();
    }
    if (o.json) return ctx.out(JSON.stringify(r, null, 2));
    const one = (t: string | null) => escapeTerminalText(t ?? '-', { newlines: true });
    ctx.out(`task      ${one(r.name)} (${one(r.dir)})`);
    ctx.out(`digest    ${r.taskDigest}`);
    ctx.out(`protocol  ${r.protocolFingerprint} (${one(r.metric ?? 'reward')}, ${r.direction}; judge image ${r.judgeImageDigest})`);
    for (const b of r.baselines) ctx.out(`${b.kind.padEnd(9)} ${summaryText(b)}  snapshot ${b.snapshot}  BaselineRecorded@${b.position}`);
    if (r.noOracle) ctx.out(`oracle    none: ${r.noOracle}`);
    ctx.out(`recorded  in ${r.stream} (${(r.durationMs / 1000).toFixed(1)} s)`);
  });

  cmd
    .command('ls')
    .description('the baselines recorded in the ledger (task, kind, median and range of the repeats, digest, fingerprint)')
    .option('--task <dir>', "only this task's baselines (marked current when recorded for its present digest)")
    .option('--json', 'print one JSON document')
    .action(async (o: { task?: string; json?: boolean }, sub: Command) => {
      const json = Boolean(o.json || (sub.parent?.opts() as { json?: boolean }).json);
      const { ListBaselinesQuery } = libs.runtime();
      const { task, baselines: shown } = await withRuntimeBuses(ctx, ({ queries }) => queries.execute(new ListBaselinesQuery(o.task)));
      if (json) return ctx.out(JSON.stringify({ baselines: shown }, null, 2));
      if (shown.length === 0) return ctx.out(task !== null ? `no baselines of ${task} in this ledger` : 'no baselines in this ledger');
      const one = (t: string | null) => escapeTerminalText(t ?? '-', { newlines: true });
      for (const b of shown)
        ctx.out(
          `${b.position}  ${b.recordedAt ?? '-'}  ${b.task}  ${b.kind.padEnd(6)}  ${summaryText(b)}  (${one(b.metric ?? 'reward')}, ${b.direction})  ` +
            `task ${b.taskDigest}  protocol ${b.protocolFingerprint}${'current' in b ? (b.current ? '  current' : '  older digest') : ''}`,
        );
    });
}

/** `median M [min, max] over C/N completed Judges` (C: Judges that completed with a score). */
function summaryText(b: Pick<Baseline, 'median' | 'min' | 'max' | 'scores'>): string {
  const done = b.scores.filter((s) => s.primaryScore !== null).length;
  const failed = b.scores.filter((s) => s.primaryScore === null).map((s) => s.status);
  return (
    `${b.median === null ? 'no score' : `median ${b.median} [${b.min}, ${b.max}]`} over ${done}/${b.scores.length} completed Judges` +
    (failed.length ? ` (failed: ${failed.join(', ')})` : '')
  );
}

/** Every BaselineRecorded of the ledger in ctx.home (read-only; no ledger is LEDGER_NOT_INITIALIZED). */
export function readBaselines(ctx: CliContext): Promise<Baseline[]> {
  const { ListBaselinesQuery } = libs.runtime();
  return withRuntimeBuses(ctx, async ({ queries }) => (await queries.execute(new ListBaselinesQuery())).baselines);
}
