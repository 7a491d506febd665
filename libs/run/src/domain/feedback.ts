/**
 * What the agent is told, pure: the fixed-format footer of every POST /submit reply, and the history of
 * GET /submissions. Only the run's own state goes in (rounds, statuses, rewards, scores, budgets, the Judge log's
 * path inside Work, the harness's one-line detail); never anything of the hidden tests.
 *
 * Footer (exactly these 11 lines, in this order, `key: value`, values on one line, `-` for none):
 *
 *   --- assay ---
 *   round: <n | ->
 *   status: <completed | submission_error | verifier_error | verifier_timeout | rule_violation | refunded | rejected>
 *   code: <HTTP status>[ <rejection code>]
 *   reward: <key=value ...sorted by key | ->
 *   score: <primary score (<metric>, <direction>) | rule violation: <rule> (scored 0) | ->
 *   best: <round <n>, score <s> | ->
 *   remaining: submissions=<n|unlimited> wall_time_s=<s|unlimited> agent_time_s=<s|unlimited> gpu_seconds=<s|unlimited>
 *   log: <path of the full Judge log inside Work | ->
 *   detail: <one line, at most 300 characters | ->
 *   --- end ---
 */
import { BUDGET_KINDS, REWARD_KEY_RE, type BudgetKind, type JsonObject } from './run-events';
import { bestRound, roundScore, type RoundState, type RunState } from './run-state';
import { remainingBudgets } from './decide';

/** What a round shows the agent, `assay run status` and the run report: its Judge's status, or what the run made of it. */
export const ROUND_VIEW_STATUSES = ['judging', 'completed', 'submission_error', 'verifier_error', 'verifier_timeout', 'rule_violation', 'refunded'] as const;
export type RoundViewStatus = (typeof ROUND_VIEW_STATUSES)[number];

export interface RoundView {
  readonly round: number;
  readonly status: RoundViewStatus;
  /** The primary score; 0 for a rule violation (the score the violation forces); null when none. */
  readonly score: number | null;
  readonly rewards: Readonly<Record<string, number>> | null;
  readonly snapshot: string | null;
  readonly receivedAt: string;
  readonly counted: boolean;
  readonly rule: string | null;
  readonly detail: string | null;
}

export function roundView(s: RunState, r: RoundState): RoundView {
  let status: RoundViewStatus;
  let detail: string | null = null;
  if (r.outcome === 'refunded') {
    status = 'refunded';
    detail = r.refund?.reason ?? null;
  } else if (r.violation) {
    status = r.outcome === 'open' ? 'judging' : 'rule_violation';
    detail = r.violation.detail;
  } else if (r.outcome === 'open') status = 'judging';
  else {
    status = r.judge?.status === 'infrastructure_error' || !r.judge ? 'refunded' : r.judge.status;
    detail = r.judge?.detail ?? null;
  }
  const score = status === 'rule_violation' ? 0 : status === 'refunded' || status === 'judging' ? null : roundScore(s, r);
  return {
    round: r.round,
    status,
    score,
    rewards: status === 'refunded' ? null : r.rewards,
    snapshot: r.snapshot?.root ?? null,
    receivedAt: r.receivedAt,
    counted: r.outcome === 'counted',
    rule: r.violation?.rule ?? null,
    detail,
  };
}

export interface FooterInput {
  readonly round: number | null;
  readonly status: RoundViewStatus | 'rejected';
  readonly httpStatus: number;
  readonly code: string | null;
  readonly rewards: Readonly<Record<string, number>> | null;
  readonly score: number | null;
  readonly rule: string | null;
  readonly metric: string | null;
  readonly direction: string | null;
  readonly best: { readonly round: number; readonly score: number } | null;
  readonly remaining: Readonly<Record<BudgetKind, number | null>>;
  readonly log: string | null;
  readonly detail: string | null;
}

export const FOOTER_START = '--- assay ---';
export const FOOTER_END = '--- end ---';
export const FOOTER_DETAIL_MAX = 300;

/** One line: control characters and line breaks become spaces; clipped. */
export function oneLine(text: string, max = FOOTER_DETAIL_MAX): string {
  const t = text.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ').trim();
  return t.length <= max ? t : `${t.slice(0, max - 3)}...`;
}

const num = (n: number): string => String(n);

export function formatRewards(rewards: Readonly<Record<string, number>> | null): string {
  if (!rewards) return '-';
  const parts = Object.keys(rewards)
    .filter((k) => REWARD_KEY_RE.test(k))
    .sort()
    .map((k) => `${k}=${num(rewards[k] as number)}`);
  return parts.length ? parts.join(' ') : '-';
}

export function formatRemaining(r: Readonly<Record<BudgetKind, number | null>>): string {
  const names: Record<BudgetKind, string> = { submissions: 'submissions', wall_time: 'wall_time_s', agent_time: 'agent_time_s', gpu_seconds: 'gpu_seconds' };
  return BUDGET_KINDS.map((k) => {
    const v = r[k];
    return `${names[k]}=${v === null ? 'unlimited' : k === 'submissions' ? String(v) : String(Math.floor(v))}`;
  }).join(' ');
}

export function formatFooter(f: FooterInput): string {
  let score = '-';
  // a rule violation's forced 0 is not a score under the metric: no `(metric, direction)` after it
  if (f.status === 'rule_violation') score = `rule violation: ${oneLine(f.rule ?? 'unknown', 128)} (scored 0)`;
  else if (f.score !== null) score = num(f.score);
  if (score !== '-' && f.status !== 'rule_violation' && f.direction) score += ` (${f.metric ?? 'reward'}, ${f.direction})`;
  const lines = [
    FOOTER_START,
    `round: ${f.round ?? '-'}`,
    `status: ${f.status}`,
    `code: ${f.httpStatus}${f.code ? ` ${f.code}` : ''}`,
    `reward: ${formatRewards(f.rewards)}`,
    `score: ${score}`,
    `best: ${f.best ? `round ${f.best.round}, score ${num(f.best.score)}` : '-'}`,
    `remaining: ${formatRemaining(f.remaining)}`,
    `log: ${f.log ? oneLine(f.log, 1024) : '-'}`,
    `detail: ${f.detail ? oneLine(f.detail) : '-'}`,
    FOOTER_END,
  ];
  return `${lines.join('\n')}\n`;
}

/** The footer of a judged (or refunded) round. */
export function roundFooter(s: RunState, round: number, now: Date, log: string | null): { httpStatus: number; text: string; view: RoundView } {
  const r = s.rounds[round - 1];
  if (!r) throw new RangeError(`round ${round} does not exist`);
  const v = roundView(s, r);
  const httpStatus = v.status === 'refunded' ? 503 : 200;
  const best = bestRound(s);
  const text = formatFooter({
    round,
    status: v.status,
    httpStatus,
    code: v.status === 'refunded' ? 'SUBMIT_REFUNDED' : null,
    rewards: v.rewards,
    score: v.score,
    rule: v.rule,
    metric: s.started?.selection.metric ?? null,
    direction: s.started?.selection.direction ?? null,
    best: best ? { round: best.round, score: best.score } : null,
    remaining: remainingBudgets(s, now),
    log,
    detail: v.detail,
  });
  return { httpStatus, text, view: v };
}

/** The footer of a refused request (401, 422, 429). */
export function rejectionFooter(s: RunState, now: Date, httpStatus: number, code: string, reason: string): string {
  const best = bestRound(s);
  return formatFooter({
    round: null,
    status: 'rejected',
    httpStatus,
    code,
    rewards: null,
    score: null,
    rule: null,
    metric: null,
    direction: null,
    best: httpStatus === 401 ? null : best ? { round: best.round, score: best.score } : null,
    remaining: httpStatus === 401 ? { submissions: null, wall_time: null, agent_time: null, gpu_seconds: null } : remainingBudgets(s, now),
    log: null,
    detail: reason,
  });
}

/** GET /submissions as JSON: this run's rounds only. */
export function historyJson(s: RunState, now: Date, logPathOf: (round: number) => string | null = () => null): JsonObject {
  const best = bestRound(s);
  return {
    run: s.run,
    metric: s.started?.selection.metric ?? null,
    direction: s.started?.selection.direction ?? null,
    rounds: s.rounds.map((r) => {
      const v = roundView(s, r);
      return {
        round: v.round,
        status: v.status,
        score: v.score,
        rewards: v.rewards ? { ...v.rewards } : null,
        snapshot: v.snapshot,
        receivedAt: v.receivedAt,
        counted: v.counted,
        rule: v.rule,
        detail: v.detail === null ? null : oneLine(v.detail),
        log: v.status === 'refunded' ? null : logPathOf(r.round),
      };
    }),
    refusedRequests: s.rejections,
    best: best ? { round: best.round, score: best.score, snapshot: best.snapshot } : null,
    remaining: { ...remainingBudgets(s, now) },
    closed: s.completed ? s.completed.status : null,
  };
}

/** GET /submissions as text: one line per round, then the best round and what is left. */
export function formatHistory(s: RunState, now: Date, logPathOf: (round: number) => string | null = () => null): string {
  const lines = [`--- assay: run ${s.run} ---`];
  if (s.rounds.length === 0) lines.push('no submissions yet');
  for (const r of s.rounds) {
    const v = roundView(s, r);
    const what =
      v.status === 'rule_violation'
        ? `rule violation: ${oneLine(v.rule ?? '', 128)} (scored 0)`
        : `${v.status}, score ${v.score === null ? '-' : num(v.score)}`;
    const log = v.status === 'refunded' ? null : logPathOf(r.round);
    lines.push(
      `round ${v.round}: ${what}, snapshot ${v.snapshot ?? '-'}, received ${v.receivedAt}${log ? `, log ${oneLine(log, 1024)}` : ''}${v.detail ? `, detail: ${oneLine(v.detail, 160)}` : ''}`,
    );
  }
  if (s.rejections > 0) lines.push(`refused requests (no round used): ${s.rejections}`);
  const best = bestRound(s);
  const metric = s.started ? `${s.started.selection.metric ?? 'reward'}, ${s.started.selection.direction}` : '-';
  lines.push(`best: ${best ? `round ${best.round}, score ${num(best.score)} (${metric})` : '-'}`);
  lines.push(`remaining: ${formatRemaining(remainingBudgets(s, now))}`);
  if (s.completed) lines.push(`run ended: ${s.completed.status}`);
  lines.push(FOOTER_END);
  return `${lines.join('\n')}\n`;
}

/**
 * The controller's own line for a settled round (printed by `assay run` whatever the agent prints):
 * `round 3: completed, score 0.0172 (val_loss, minimize); best: round 3, score 0.0172`;
 * a rule violation reads `round 2: rule violation: workspace.not_editable (scored 0); best: ...`, never like a score.
 */
export function formatRoundLine(s: RunState, round: number): string | null {
  const r = s.rounds.find((x) => x.round === round);
  if (!r) return null;
  const v = roundView(s, r);
  const metric = s.started ? ` (${s.started.selection.metric ?? 'reward'}, ${s.started.selection.direction})` : '';
  let what: string;
  if (v.status === 'rule_violation') what = `rule violation: ${oneLine(v.rule ?? 'unknown', 128)} (scored 0)`;
  else if (v.status === 'refunded') what = 'refunded (not counted)';
  else what = `${v.status}${v.score !== null ? `, score ${num(v.score)}${metric}` : ''}`;
  const best = bestRound(s);
  return `round ${v.round}: ${what}; best: ${best ? `round ${best.round}, score ${num(best.score)}` : '-'}`;
}
