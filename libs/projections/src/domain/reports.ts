/**
 * The reproducibility and budget reports (docs/projections.md, "Reports").
 *
 * Reproducibility: every RejudgeCompleted in this ledger that names the run (written by `assay rejudge` into the
 * rejudger's own ledger, stream `rejudge-<id>`), next to the score the run recorded for the same round. The figures
 * are the re-judge's own (median, spread, delta, tolerance, verdict); `assay verify` of the report's bundle checks
 * that its arithmetic holds, and the ledger's claims step checks the RejudgeCompleted schema.
 *
 * Budget: what each budget kind allowed (RunStarted's protocol) and what BudgetConsumed events used, per run and
 * summed per task. Refunded rounds consume nothing; their count is shown beside.
 */
import { BUDGET_KINDS, bestRound, type BudgetKind, type RunState } from '@assay/run';
import type { ProjectionEvent, RunSlot } from './run-projection';

export interface RejudgeView {
  /** Ledger position of the RejudgeCompleted. */
  readonly position: number;
  /** Its event id (the rejudge id `assay bundle export-rejudge` takes). */
  readonly id: string;
  readonly at: string;
  readonly run: string;
  readonly round: number | null;
  readonly snapshot: string;
  readonly status: string;
  readonly verdict: string | null;
  readonly matches: boolean;
  readonly recordedScore: number | null;
  readonly median: number | null;
  readonly spread: number | null;
  readonly delta: number | null;
  readonly tolerance: number | null;
  readonly judges: number;
  readonly bundleDigest: string | null;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The re-judge a RejudgeCompleted records, or null for any other event (or one that names no run). */
export function rejudgeOfEvent(e: ProjectionEvent): RejudgeView | null {
  if (e.type !== 'RejudgeCompleted') return null;
  const d = e.data;
  const run = str(d.run);
  if (run === null) return null;
  return {
    position: e.position,
    id: e.id,
    at: e.time,
    run,
    round: num(d.round),
    snapshot: str(d.snapshot) ?? '',
    status: str(d.status) ?? '',
    verdict: str(d.verdict),
    matches: d.matches === true,
    recordedScore: num(d.recordedScore),
    median: num(d.median),
    spread: num(d.spread),
    delta: num(d.delta),
    tolerance: num(d.tolerance),
    judges: Array.isArray(d.scores) ? d.scores.length : 0,
    bundleDigest: str(d.bundleDigest),
  };
}

export interface BudgetLine {
  readonly kind: BudgetKind;
  /** What the protocol allowed; null: no limit. */
  readonly allowed: number | null;
  readonly used: number;
  /** allowed - used, never below 0; null without a limit. */
  readonly remaining: number | null;
  /** used / allowed; null without a limit or with a limit of 0. */
  readonly fraction: number | null;
}

export interface BudgetReport {
  readonly kinds: readonly BudgetLine[];
  /** Rounds whose Judge failed for infrastructure reasons and consumed nothing. */
  readonly refundedRounds: number;
  /** The first budget rule broken (RuleViolation `budget.*`), if any. */
  readonly overBudget: string | null;
}

export interface ReproducibilityReport {
  /** The run's selected best round as the ledger records it; null without an eligible round. */
  readonly recorded: { readonly round: number; readonly score: number; readonly snapshot: string } | null;
  /** Every re-judge of this run in this ledger, by position. */
  readonly rejudges: readonly RejudgeView[];
  /** The latest re-judge of the recorded best round's snapshot, or null when it was never re-judged here. */
  readonly latest: RejudgeView | null;
}

export interface RunReport {
  readonly run: string;
  readonly task: string;
  readonly status: string;
  readonly reproducibility: ReproducibilityReport;
  readonly budget: BudgetReport;
}

export interface TaskBudgetReport {
  readonly task: string;
  readonly runs: number;
  /** Sums over the task's runs; `allowed` is summed over runs with a limit (null when none had one). */
  readonly kinds: readonly BudgetLine[];
  readonly refundedRounds: number;
}

function line(kind: BudgetKind, allowed: number | null, used: number): BudgetLine {
  return {
    kind,
    allowed,
    used,
    remaining: allowed === null ? null : Math.max(0, allowed - used),
    fraction: allowed === null || allowed === 0 ? null : used / allowed,
  };
}

const refunded = (s: RunState): number => s.rounds.filter((r) => r.outcome === 'refunded').length;

/** The budget report of one run. */
export function budgetReport(s: RunState): BudgetReport {
  const budgets = s.started?.protocol.budgets;
  return {
    kinds: BUDGET_KINDS.map((k) => line(k, budgets ? (budgets[k] ?? null) : null, s.consumed[k] ?? 0)),
    refundedRounds: refunded(s),
    overBudget: s.overBudget,
  };
}

/** The run's report: its reproducibility (re-judges against the recorded best) and its budget. */
export function runReport(slot: RunSlot, rejudges: readonly RejudgeView[], status: string): RunReport {
  const s = slot.state;
  const best = s.started ? bestRound(s) : null;
  const recorded = best ? { round: best.round, score: best.score, snapshot: best.snapshot } : null;
  const mine = [...rejudges].filter((r) => r.run === slot.run).sort((a, b) => a.position - b.position);
  const ofBest = recorded ? mine.filter((r) => r.round === recorded.round || r.snapshot === recorded.snapshot) : [];
  return {
    run: slot.run,
    task: s.started?.task ?? '',
    status,
    reproducibility: { recorded, rejudges: mine, latest: ofBest[ofBest.length - 1] ?? null },
    budget: budgetReport(s),
  };
}

/** The budget report of a task: its runs' budgets summed. */
export function taskBudgetReport(task: string, slots: readonly RunSlot[]): TaskBudgetReport {
  const reports = slots.map((x) => budgetReport(x.state));
  const kinds = BUDGET_KINDS.map((k, i) => {
    let used = 0;
    let allowed: number | null = null;
    for (const r of reports) {
      const l = r.kinds[i]!;
      used += l.used;
      if (l.allowed !== null) allowed = (allowed ?? 0) + l.allowed;
    }
    return line(k, allowed, used);
  });
  return { task, runs: slots.length, kinds, refundedRounds: reports.reduce((n, r) => n + r.refundedRounds, 0) };
}
