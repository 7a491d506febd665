import { basename } from 'node:path';
import type { Command } from 'commander';
import { AssayError, escapeTerminalText } from '@assay/core';
import type { LeaderboardGroup, RunReport, Trajectory } from '@assay/projections';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withModule, type Buses } from '../nest-context';

/**
 * `assay leaderboard TASK [--json]` and `assay report RUN_ID [--json]` (docs/projections.md): read models of the
 * ledger. Both first catch the read models (`<ASSAY_HOME>/projections/read-models.db`) up with the ledger, verified
 * first and only up to its latest signed checkpoint (progress on a terminal only), then print. They never write to
 * the ledger (it is opened read-only).
 */
const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);
const projections = () => require('@assay/projections') as typeof import('@assay/projections');

const RUN_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const one = (t: string | null): string => escapeTerminalText(t ?? '-', { newlines: true });

/**
 * The read models' queries (ProjectionsModule, as the API dispatches them) on this ASSAY_HOME's ledger, opened
 * read-only; the read models caught up first with this terminal's progress and the verifier's default threads.
 */
function withProjections<T>(ctx: CliContext, fn: (queries: Buses['queries'], P: typeof import('@assay/projections')) => Promise<T>): Promise<T> {
  const p = projections();
  return withModule(p.ProjectionsModule.forLedger(libs.ledger().LedgerModule.forHome(ctx.home), { workers: null, progress: ctx.progress() }), (b) =>
    fn(b.queries, p),
  );
}

export function register(program: Command, ctx: CliContext): void {
  program
    .command('leaderboard')
    .description(
      "a task's runs ranked by best score, one table per protocol group (task id, task digest, protocol fingerprint): runs are only ranked against runs of the same protocol; each group shows its start and oracle baselines and every run's improvement over the start (docs/projections.md)",
    )
    .argument('<task>', 'the task id as RunStarted records it (a task directory path is matched by its last component)')
    .option('--json', 'print one JSON document')
    .action(async (task: string, o: { json?: boolean }) => {
      if (task.length === 0 || task.length > 4096) throw usage('the task must be 1 to 4096 characters');
      const groups = await withProjections(ctx, async (queries, P) => {
        const exact = await queries.execute(new P.LeaderboardQuery(task));
        const name = basename(task.replace(/\/+$/, ''));
        return exact.length > 0 || name === task || name === '' ? exact : queries.execute(new P.LeaderboardQuery(name));
      });
      if (o.json) return ctx.out(JSON.stringify({ task, groups }, null, 2));
      for (const l of leaderboardLines(task, groups)) ctx.out(l);
    });

  program
    .command('report')
    .description(
      "a run's trajectory from the ledger (every round's time since the start, status, score and the best score so far), its reproducibility report (re-judges of its best against the recorded score) and its budget report (docs/projections.md)",
    )
    .argument('<run-id>', 'the run id')
    .option('--json', 'print one JSON document')
    .action(async (id: string, o: { json?: boolean }) => {
      if (!RUN_ID_RE.test(id)) throw usage(`not a run id: "${escapeTerminalText(id)}"`);
      const [t, report] = await withProjections(ctx, (queries, P) =>
        Promise.all([queries.execute(new P.TrajectoryQuery(id)), queries.execute(new P.RunReportQuery(id))]),
      );
      if (!t || !report) throw new AssayError('RUN_NOT_FOUND', 'not_found', `no run ${id} in the signed part of the ledger at ${ctx.home}`);
      if (o.json) return ctx.out(JSON.stringify({ ...t, reproducibility: report.reproducibility, budget: report.budget }, null, 2));
      for (const l of [...reportLines(t), '', ...runReportLines(report)]) ctx.out(l);
    });
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => `  ${r.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`.trimEnd());
}

const seconds = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(1)} s`);

/** `leaderboard` as text: a header per protocol group saying what identifies it, then its ranked rows. */
export function leaderboardLines(task: string, groups: readonly LeaderboardGroup[]): string[] {
  if (groups.length === 0) return [`no runs of task ${one(task)} in the signed part of this ledger`];
  const out: string[] = [];
  groups.forEach((g, i) => {
    if (i > 0) out.push('');
    out.push(`task ${one(g.task)}  protocol group ${i + 1} of ${groups.length}: task digest ${one(g.taskDigest)}, protocol fingerprint ${one(g.fingerprint)}`);
    out.push(`  ranked by ${one(g.metric ?? 'reward')} (${g.direction}); ${g.rows.length} run(s)`);
    out.push(baselineLine('start', g.baselines.start), baselineLine('oracle', g.baselines.oracle));
    if (g.rows.length === 0) return;
    const rows = [
      [
        'rank',
        'run',
        'agent',
        'model',
        'status',
        'best',
        'round',
        'snapshot',
        'vs start baseline',
        'submissions',
        'invalid',
        'failed',
        'violating',
        'refunded',
        'wall',
        're-judged',
        'source',
      ],
    ];
    for (const r of g.rows)
      rows.push([
        r.rank === null ? '-' : String(r.rank),
        one(r.run),
        one(r.agent),
        one(r.model),
        one(r.status),
        r.best ? String(r.best.score) : '-',
        r.best ? String(r.best.round) : '-',
        r.best ? one(r.best.snapshot) : '-',
        versusBaseline(r.vsBaseline),
        `${r.submissions.used}/${r.submissions.allowed ?? 'unlimited'}`,
        String(r.rounds.invalid),
        String(r.rounds.failed),
        String(r.rounds.violating),
        String(r.rounds.refunded),
        seconds(r.wallTimeMs),
        r.rejudge ? `${one(r.rejudge.verdict ?? r.rejudge.status)} (delta ${shown(r.rejudge.delta)})` : '-',
        r.imported ? `imported from ${one(r.imported.publisherKey.split('+')[0] ?? '')}` : r.source,
      ]);
    out.push(...table(rows));
  });
  return out;
}

/** A computed number as text, to 12 significant digits (0.95 - 0.9 shows as 0.05, not 0.04999999999999993). */
const shown = (x: number | null): string => (x === null ? '-' : String(Number(x.toPrecision(12))));

/** A group's baseline row: the latest matched baseline of a kind, or that none was recorded under this protocol. */
function baselineLine(kind: 'start' | 'oracle', b: LeaderboardGroup['baselines']['start']): string {
  const label = `  baseline ${kind.padEnd(6)}`;
  if (b === null) return `${label} none recorded under this protocol${kind === 'start' ? ' (assay baseline TASK_DIR --repeat 3)' : ''}`;
  if (b.median === null) return `${label} no repeat completed with a score (${b.repeats} asked; position ${b.position ?? '-'})`;
  return `${label} median ${shown(b.median)} over ${b.completed} of ${b.repeats} repeat(s), range [${shown(b.min)}, ${shown(b.max)}], spread ${shown(b.spread)} (position ${b.position ?? '-'})`;
}

/** A row's improvement over the group's start baseline: `+0.12 (+15.0%) improvement`, or why there is none. */
export function versusBaseline(c: LeaderboardGroup['rows'][number]['vsBaseline']): string {
  if (!c.matched) return 'no matched baseline';
  if (c.score === null) return 'no score';
  if (c.absolute === null) return 'baseline has no score';
  const sign = (x: number) => (x >= 0 ? `+${shown(x)}` : shown(x));
  const rel = c.relative === null ? '' : ` (${c.relative >= 0 ? '+' : ''}${(c.relative * 100).toFixed(1)}%)`;
  return `${sign(c.absolute)}${rel} ${c.verdict.replace(/_/g, ' ')}`;
}

/** `report` as text: the run, then one line per round. */
export function reportLines(t: Trajectory): string[] {
  const out = [`run ${one(t.run)}  task ${one(t.task)}  agent ${one(t.agent)}  status ${one(t.status)}  ${one(t.metric ?? 'reward')} (${t.direction})`];
  if (t.rounds.length === 0) return [...out, '  no rounds'];
  const rows = [['round', 'elapsed', 'status', 'score', 'best so far']];
  for (const r of t.rounds)
    rows.push([
      String(r.round),
      seconds(r.elapsedMs),
      r.status,
      r.score === null ? '-' : String(r.score),
      r.bestSoFar === null ? '-' : `${r.bestSoFar} (round ${r.bestRoundSoFar})`,
    ]);
  return [...out, ...table(rows)];
}

/** The reproducibility and budget sections of `report`. */
export function runReportLines(r: RunReport): string[] {
  const out: string[] = [];
  const rec = r.reproducibility.recorded;
  out.push(
    rec ? `reproducibility: recorded best ${shown(rec.score)} (round ${rec.round}, snapshot ${one(rec.snapshot)})` : 'reproducibility: no recorded best',
  );
  if (r.reproducibility.rejudges.length === 0) out.push('  never re-judged in this ledger (assay rejudge BUNDLE; docs/rejudge.md)');
  for (const j of r.reproducibility.rejudges)
    out.push(
      `  re-judge ${one(j.id)} (round ${j.round ?? '-'}): ${one(j.verdict ?? j.status)}, median ${shown(j.median)} over ${j.judges} Judge(s), delta ${shown(j.delta)}, tolerance ${shown(j.tolerance)}`,
    );
  out.push('budget:');
  const rows = [['kind', 'used', 'allowed', 'remaining']];
  for (const k of r.budget.kinds)
    rows.push([k.kind, shown(k.used), k.allowed === null ? 'unlimited' : shown(k.allowed), k.remaining === null ? '-' : shown(k.remaining)]);
  out.push(...table(rows));
  out.push(`  refunded rounds: ${r.budget.refundedRounds}${r.budget.overBudget ? `; over budget: ${one(r.budget.overBudget)}` : ''}`);
  return out;
}
