import { Option, type Command } from 'commander';
import { AssayError, escapeTerminalText } from '@assay/core';
import type { RunReport } from '@assay/runtime';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';
import { onStopSignals } from './stop-signals';
import { intFlag, RUN_SETTING_OPTIONS, runSettingOverridesOf } from './run-setting-options';

const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);

/**
 * `assay run TASK_DIR --agent reference|command:<cmd> [--max-submissions N] [--time-budget S] [--cooldown S]
 *  [--metric KEY] [--score-direction maximize|minimize] [--gpus LIST] [--gpu-budget S] [--run-id ID]
 *  [--snapshot-interval S] [--checkpoint-interval S] [--json]`
 * `assay run --resume RUN_ID`
 *
 * Builds (or reuses) the task's images, starts the Work container, runs the agent in it, judges each rsi-submit with
 * a fresh Judge, and prints the rounds and the selected best. Ctrl-C cancels the run (RunCompleted cancelled).
 */
export function register(program: Command, ctx: CliContext): void {
  const runCmd = program
    .command('run')
    .description('run an agent on a task: Work container, submissions judged by fresh Judges, best round selected')
    .argument('[task-dir]', 'task directory')
    .option(
      '--agent <agent>',
      'reference | command:<shell command run inside Work> | codex[:model] | claude-code[:model] (the last two: OPENAI_API_KEY / ANTHROPIC_API_KEY from the environment, the binary in the task image, network through the egress proxy)',
      'reference',
    );
  for (const [flags, description] of RUN_SETTING_OPTIONS) runCmd.option(flags, description);
  runCmd
    .option('--gpus <list>', 'host GPUs this run may use: comma-separated indices or UUIDs, e.g. 0,1 (default: none)')
    .addOption(new Option('--primary-reward <key>', 'the same as --metric (older spelling)').hideHelp())
    .option('--run-id <id>', 'the run id (default: generated)')
    .option('--snapshot-interval <s>', 'seconds between workspace snapshots while the agent works (0: none)', '60')
    .option(
      '--checkpoint-interval <s>',
      "seconds between checkpoints signed while the run goes on, when there are new events, so that assay serve's live views follow it (0: only at the end)",
      '10',
    )
    .option('--resume <run>', 'resume a run from the ledger (its containers are cleaned up and Work restarted)')
    .option(
      '--allow-root-agent',
      'full-rootfs tasks (workdir "/"): run the agent as root in Work although the Docker daemon does not remap users (refused otherwise; kept for --resume)',
    )
    .option(
      '--allow-unbounded-workspace',
      "go on where the workspace cannot be bounded by the task's storage_mb (a controller that is not root, or outside the Docker daemon's mount namespace; refused otherwise; kept for --resume)",
    )
    .option('--json', 'print one JSON document')
    .action(
      async (
        taskDir: string | undefined,
        o: {
          agent: string;
          maxSubmissions?: string;
          timeBudget?: string;
          cooldown?: string;
          gpus?: string;
          gpuBudget?: string;
          gpuBudgetHours?: string;
          metric?: string;
          primaryReward?: string;
          scoreDirection?: string;
          runId?: string;
          resume?: string;
          snapshotInterval: string;
          checkpointInterval: string;
          allowRootAgent?: boolean;
          allowUnboundedWorkspace?: boolean;
          json?: boolean;
        },
      ) => {
        if (o.scoreDirection !== undefined && o.scoreDirection !== 'maximize' && o.scoreDirection !== 'minimize') {
          throw usage(`--score-direction must be maximize or minimize, got "${o.scoreDirection}"`);
        }
        intFlag(o.snapshotInterval, '--snapshot-interval');
        intFlag(o.checkpointInterval, '--checkpoint-interval');
        if (!o.resume && !taskDir) throw usage('assay run needs TASK_DIR (or --resume RUN_ID)');
        if (o.runId !== undefined && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(o.runId))
          throw usage(`--run-id must be lowercase letters, digits and dashes, got "${o.runId}"`);
        if (o.resume !== undefined && !/^[a-z0-9][a-z0-9-]{0,62}$/.test(o.resume))
          throw usage(`--resume needs a run id (lowercase letters, digits and dashes), got "${o.resume}"`);
        if (o.resume) {
          // a run that has ended is reported from the ledger (its recorded times), with no image and no container
          const ended = (await readRunViews(ctx).catch(() => [])).find((x) => x.run === o.resume && x.ended);
          if (ended) {
            ctx.err(`assay: run ${ended.run} has already ended (${ended.state}); its report from the ledger:`);
            // the same document as `run status`, matched baseline included
            const { readBaselines } = require('./baseline.commands') as typeof import('./baseline.commands');
            const baseline = libs.run().compareWithBaseline({ ...ended, score: ended.best?.score ?? null }, await readBaselines(ctx));
            if (o.json) ctx.out(jsonOut({ ...ended, baseline }));
            else for (const l of statusLines(ended, baseline)) ctx.out(l);
            return;
          }
        }
        const { RUN_ERROR_CODES } = libs.run();
        const { agentOf, RunResearchCommand } = libs.runtime();
        const gpus = libs.runtime().parseGpuList(o.gpus);
        const badInput = (message: string) => new AssayError(RUN_ERROR_CODES.INVALID_INPUT, 'invalid_input', message);
        const overrides = runSettingOverridesOf(o, badInput);
        if (o.resume && overrides.gpuBudgetSec !== undefined)
          throw badInput("the GPU budget is part of the run's recorded protocol; it cannot change on --resume");
        agentOf(o.agent); // a bad --agent fails before anything starts
        const abort = new AbortController();
        const offSignals = onStopSignals(ctx, 'cancelling the run', () => abort.abort());
        try {
          const rep = await withRuntimeBuses(ctx, ({ commands }) =>
            commands.execute(
              new RunResearchCommand({
                home: ctx.home,
                taskDir: taskDir ?? '',
                agent: o.agent,
                overrides,
                ...(o.resume ? { resume: true, runId: o.resume } : o.runId ? { runId: o.runId } : {}),
                log: (l) => ctx.err(`assay: ${l}`),
                agentOutput: (c) => (o.json ? process.stderr.write(c) : process.stdout.write(c)),
                signal: abort.signal,
                snapshotIntervalSec: intFlag(o.snapshotInterval, '--snapshot-interval') as number,
                checkpointIntervalSec: intFlag(o.checkpointInterval, '--checkpoint-interval') as number,
                ...(o.gpus !== undefined ? { gpus } : {}),
                ...(o.allowRootAgent ? { allowRootAgent: true } : {}),
                ...(o.allowUnboundedWorkspace ? { allowUnboundedWorkspace: true } : {}),
              }),
            ),
          );
          // JSON escapes C0 controls itself; C1, bidi and zero-width characters (agent-chosen names in a detail) are
          // written as \u escapes too, the same JSON value
          if (o.json)
            ctx.out(
              JSON.stringify(rep, null, 2).replace(
                /[\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g,
                (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
              ),
            );
          else printReport(ctx, rep);
        } finally {
          offSignals();
        }
      },
    );
  registerViews(runCmd, ctx);
}

/**
 * `assay run ls [--json]`, `assay run status RUN_ID [--json]`: read-only views of the ledger (no Docker, no state
 * created: a missing ledger is LEDGER_NOT_INITIALIZED, not_found). `ls` and `status` are reserved first words of
 * `assay run`; a task directory of that name is given as `./ls`.
 */
function registerViews(runCmd: Command, ctx: CliContext): void {
  // `--json` after the subcommand may be taken by `run`'s own option of the same name: read both
  const wantsJson = (o: { json?: boolean }, cmd: Command) => Boolean(o.json || (cmd.parent?.opts() as { json?: boolean }).json);
  const views = () => readRunViews(ctx);
  runCmd
    .command('ls')
    .description('every run in the ledger: state, task, agent, rounds used of allowed, budgets, best round')
    .option('--json', 'print one JSON document')
    .action(async (o: { json?: boolean }, cmd: Command) => {
      const { runSummary } = libs.run();
      const runs = (await views()).map(runSummary);
      if (wantsJson(o, cmd)) return ctx.out(jsonOut({ runs }));
      if (runs.length === 0) return ctx.out('no runs in this ledger');
      const one = (t: string | null) => escapeTerminalText(t ?? '-', { newlines: true });
      for (const r of runs) {
        const allowed = r.submissions.allowed === null ? 'unlimited' : String(r.submissions.allowed);
        ctx.out(
          `${r.run}  ${r.state}  task ${one(r.task)}  agent ${one(r.agent)}  submissions ${r.submissions.used}/${allowed}  ` +
            `wall ${Math.floor(r.budgets.wall_time.used)} s  agent ${Math.floor(r.budgets.agent_time.used)} s  ` +
            `best ${r.best ? `round ${r.best.round}, score ${r.best.score} (${one(r.metric ?? 'reward')}, ${r.direction})` : '-'}`,
        );
      }
    });
  runCmd
    .command('status')
    .description("a run's rounds as judged (round, time, status, score, rule), budgets and the best so far")
    .argument('<run-id>', 'the run id')
    .option('--json', 'print one JSON document')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const v = (await views()).find((x) => x.run === id);
      if (!v) throw new AssayError('RUN_NOT_FOUND', 'not_found', `no run ${escapeTerminalText(id)} in the ledger at ${ctx.home}`);
      // the best score against the matched `start` baseline (same task digest and protocol fingerprint)
      const { readBaselines } = require('./baseline.commands') as typeof import('./baseline.commands');
      const baseline = libs.run().compareWithBaseline({ ...v, score: v.best?.score ?? null }, await readBaselines(ctx));
      if (wantsJson(o, cmd)) return ctx.out(jsonOut({ ...v, baseline }));
      for (const l of statusLines(v, baseline)) ctx.out(l);
    });

  runCmd
    .command('logs')
    .description("the agent's transcript (every controller session) or, with --judge or --round, the Judge logs of the run's rounds")
    .argument('<run-id>', 'the run id')
    .option('--judge', "the Judge logs (every round's), not the agent's transcript")
    .option('--round <n>', "only this round's Judge log")
    .option('--follow', 'keep printing what is added while the run is live (until its controller ends, or Ctrl-C)')
    .option('--json', 'print {run, files: [{kind, path, bytes, sha256, recorded, check}]} instead of the contents (check: recorded, differs or unrecorded)')
    .action(async (id: string, o: { judge?: boolean; round?: string; follow?: boolean; json?: boolean }, cmd: Command) => {
      if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(id)) throw usage(`the run id must be lowercase letters, digits and dashes, got "${id}"`);
      if (o.round !== undefined && !/^[1-9]\d{0,5}$/.test(o.round)) throw usage(`--round must be a round number (1, 2, ...), got "${o.round}"`);
      await showRunLogs(ctx, id, {
        judge: o.judge === true || o.round !== undefined,
        ...(o.round !== undefined ? { round: Number(o.round) } : {}),
        follow: o.follow === true,
        json: wantsJson(o, cmd),
      });
    });
}

/**
 * `assay run logs`: the files under `<home>/runs/<id>/`: `agent/session-<n>.log` (the agent's output, secrets
 * redacted) and `logs/round-<n>.log` (each round's Judge log). Their text is the agent's or the candidate's: printed
 * escaped and marked `agent| ` or `judge| `, so nothing in it acts on the terminal or passes for Assay's own lines.
 */
async function showRunLogs(ctx: CliContext, run: string, o: { judge: boolean; round?: number; follow: boolean; json: boolean }): Promise<void> {
  const { existsSync, readdirSync, statSync, openSync, readSync, closeSync, readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { createHash } = await import('node:crypto');
  const { MarkedLineStream } = await import('@assay/core');
  const dir = join(ctx.home, 'runs', run);
  if (!existsSync(dir)) throw new AssayError('RUN_NOT_FOUND', 'not_found', `no run ${run} under ${join(ctx.home, 'runs')}`);
  const sub = o.judge ? join(dir, 'logs') : join(dir, 'agent');
  const pattern = o.judge ? /^round-(\d+)\.log$/ : /^session-(\d+)\.log$/;
  const list = () =>
    (existsSync(sub) ? readdirSync(sub) : [])
      .map((f) => ({ f, m: pattern.exec(f) }))
      .filter((x): x is { f: string; m: RegExpExecArray } => x.m !== null && (o.round === undefined || Number(x.m[1]) === o.round))
      .sort((a, b) => Number(a.m[1]) - Number(b.m[1]))
      .map((x) => join(sub, x.f));
  // the digests the ledger recorded for these files: a file that differs is not the one the run recorded
  const recorded = await readRecordedLogDigests(ctx, run, o.judge);
  const numberOf = (path: string) => Number(pattern.exec(path.slice(sub.length + 1))?.[1]);
  const { checkLogDigest } = libs.run();
  const checked = (path: string) => {
    const bytes = readFileSync(path);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const rec = recorded.get(numberOf(path)) ?? null;
    return { kind: o.judge ? 'judge' : 'agent', path, bytes: bytes.length, sha256, recorded: rec, check: checkLogDigest(`sha256:${sha256}`, rec ?? undefined) };
  };
  if (o.json) return ctx.out(JSON.stringify({ run, files: list().map(checked) }, null, 2));
  const what = o.judge ? (o.round !== undefined ? `round ${o.round}'s Judge log` : 'Judge logs') : 'agent transcript';
  const offsets = new Map<string, number>();
  const marks = new Map<string, InstanceType<typeof MarkedLineStream>>();
  const drain = (): boolean => {
    let grew = false;
    for (const path of list()) {
      const from = offsets.get(path) ?? 0;
      const size = statSync(path).size;
      if (size <= from) continue;
      if (from === 0) ctx.out(`== ${path}`);
      const fd = openSync(path, 'r');
      try {
        const buf = Buffer.alloc(Math.min(size - from, 1 << 20));
        let at = from;
        while (at < size) {
          const n = readSync(fd, buf, 0, Math.min(buf.length, size - at), at);
          if (n <= 0) break;
          const mark = marks.get(path) ?? marks.set(path, new MarkedLineStream(o.judge ? 'judge| ' : 'agent| ')).get(path)!;
          const text = mark.push(buf.subarray(0, n));
          if (text) ctx.out(text);
          at += n;
        }
        offsets.set(path, at);
        grew = true;
      } finally {
        closeSync(fd);
      }
    }
    return grew;
  };
  const shown = drain();
  if (o.follow) {
    // follow while the run's controller holds its lock, then print what came last
    let stop = false;
    const onInt = () => (stop = true);
    process.once('SIGINT', onInt);
    try {
      while (!stop && existsSync(join(dir, 'controller.lock'))) {
        await new Promise((r) => setTimeout(r, 500));
        drain();
      }
      drain();
    } finally {
      process.off('SIGINT', onInt);
    }
  }
  for (const [, m] of marks) {
    const rest = m.end();
    if (rest) ctx.out(rest);
  }
  if (!shown && offsets.size === 0) ctx.err(`assay: run ${run} has no ${what} yet (${sub})`);
  for (const f of list().map(checked))
    if (f.check === 'differs')
      ctx.err(
        `assay: warning: ${f.path} is not the file the ledger recorded (${f.recorded?.digest} at position ${f.recorded?.position}; the file is sha256:${f.sha256})`,
      );
}

/** The ledger's digests of the run's agent transcripts (by session) or Judge logs (by round); read-only. */
function readRecordedLogDigests(ctx: CliContext, run: string, judge: boolean): Promise<Map<number, { digest: string; position: number }>> {
  const { RecordedRunLogsQuery } = libs.runtime();
  return withRuntimeBuses(ctx, ({ queries }) => queries.execute(new RecordedRunLogsQuery(run, judge ? 'judge' : 'agent')));
}

/** Every run of the ledger in ctx.home, folded (read-only: nothing is created; no ledger is LEDGER_NOT_INITIALIZED). */
function readRunViews(ctx: CliContext): Promise<Array<import('@assay/run').RunStatusView>> {
  const { ListRunsQuery } = libs.runtime();
  return withRuntimeBuses(ctx, ({ queries }) => queries.execute(new ListRunsQuery()));
}

function jsonOut(v: unknown): string {
  return JSON.stringify(v, null, 2).replace(
    /[\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** `run status` as text: Assay's own lines (task and agent names escaped). */
export function statusLines(v: import('@assay/run').RunStatusView, baseline?: import('@assay/run').BaselineComparison): string[] {
  const one = (t: string | null) => escapeTerminalText(t ?? '-', { newlines: true });
  const metric = `${one(v.metric ?? 'reward')}, ${v.direction ?? '-'}`;
  const lines = [`run       ${v.run} (${one(v.task)}) ${v.state}, agent ${one(v.agent)}, started ${v.startedAt ?? '-'}`];
  if (v.rounds.length === 0) lines.push('rounds    none');
  for (const r of v.rounds) {
    const what =
      r.status === 'rule_violation' ? `rule violation: ${one(r.rule)} (scored 0)` : `${r.status}${r.score !== null ? `, score ${r.score} (${metric})` : ''}`;
    lines.push(`round ${r.round}   ${r.receivedAt}  ${what}`);
  }
  const b = v.budgets;
  const lim = (x: { used: number; limit: number | null }) => `${Math.floor(x.used)}/${x.limit === null ? 'unlimited' : x.limit}`;
  lines.push(`budgets   submissions ${lim(b.submissions)}, wall ${lim(b.wall_time)} s, agent ${lim(b.agent_time)} s, gpu ${lim(b.gpu_seconds)} GPU-s`);
  lines.push(`best      ${v.best ? `round ${v.best.round}, score ${v.best.score} (${metric})` : 'none'}`);
  if (v.gpus) {
    const g = v.gpus;
    const each = g.gpus.map((x) => `${one(x.device)} = ${one(x.model)}${x.memoryMiB !== null ? ` ${x.memoryMiB} MiB` : ''}`).join('; ');
    const first = g.gpus[0];
    lines.push(`gpus      ${each} on ${one(g.node)}${first ? `, driver ${one(first.driver)}, CUDA ${one(first.cuda)}` : ''} (probed ${g.at})`);
  }
  if (baseline) lines.push(...baselineLines(baseline));
  if (v.state === 'interrupted') lines.push(`no controller is running this run (it was killed or crashed): \`assay run --resume ${v.run}\` goes on with it`);
  return lines;
}

/** `run status`'s lines on the matched `start` baseline (docs/run.md, "assay run status"). */
function baselineLines(c: import('@assay/run').BaselineComparison): string[] {
  if (!c.matched) return [`baseline  ${c.reason}`];
  const b = c.baseline;
  const lines = [
    `baseline  start, median ${b.median ?? '-'}, range [${b.min ?? '-'}, ${b.max ?? '-'}] (spread ${b.spread ?? '-'}) over ${b.completed}/${b.repeats} completed Judges, ` +
      `recorded ${b.recordedAt ?? '-'} (BaselineRecorded@${b.position ?? '-'})`,
  ];
  const signed = (x: number) => (x > 0 ? `+${x}` : String(x));
  const rel = c.relative === null ? 'relative -' : `${c.relative > 0 ? '+' : ''}${(c.relative * 100).toFixed(1)} % relative`;
  lines.push(
    `vs start  ${c.absolute === null ? 'no comparison' : `${signed(c.absolute)} absolute, ${rel} (positive: better, ${c.direction})`}: ${c.verdict} (${c.reason})`,
  );
  return lines;
}

function printReport(ctx: CliContext, r: RunReport): void {
  // Agent output went out escaped and marked `agent| ` (runResearch); these lines are Assay's own, unmarked.
  const one = (t: string) => escapeTerminalText(t, { newlines: true });
  ctx.out(`run       ${r.run} (${one(r.task)}) ${r.status}`);
  for (const x of r.rounds) {
    // a rule violation's forced 0 is not a score: never printed like one
    if (x.status === 'rule_violation') ctx.out(`round ${x.round}   rule violation: ${one(x.rule ?? 'unknown')} (scored 0)`);
    else ctx.out(`round ${x.round}   ${x.status}${x.score !== null ? `  score ${x.score}` : ''}${x.rule ? `  rule ${one(x.rule)}` : ''}`);
  }
  ctx.out(`best      ${r.bestRound === null ? 'none' : `round ${r.bestRound}, score ${r.bestScore}, snapshot ${r.bestSnapshot}`}`);
  ctx.out(
    `time      ${(r.timings.totalMs / 1000).toFixed(1)} s total: agent ${(r.timings.agentMs / 1000).toFixed(1)} s, judges ${(r.timings.judgeMs / 1000).toFixed(1)} s, snapshots ${(r.timings.snapshotMs / 1000).toFixed(1)} s`,
  );
  ctx.out(`files     ${r.dir}`);
}
