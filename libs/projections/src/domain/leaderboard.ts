/**
 * The leaderboard read model: a row per run, from its slot, and the ranking of rows per group. A group is what makes
 * scores comparable: the same task (id and digest) run under the same protocol (its fingerprint); runs of one task
 * under different fingerprints are never ranked together.
 */
import {
  baselineView,
  compareWithBaseline,
  findMatchedBaseline,
  bestRound,
  roundView,
  type Baseline,
  type BaselineComparison,
  type MatchedBaselineView,
  type RunState,
} from '@assay/run';
import type { RunSlot } from './run-projection';
import type { RejudgeView } from './reports';

export type Direction = 'maximize' | 'minimize';

export interface LeaderboardGroupKey {
  readonly task: string;
  readonly taskDigest: string;
  readonly fingerprint: string;
}

export interface LeaderboardRow extends LeaderboardGroupKey {
  readonly run: string;
  readonly agent: string;
  readonly model: string | null;
  /** `running` until RunCompleted, then its status; `invalid` when the run's events broke its rules. */
  readonly status: string;
  readonly metric: string | null;
  readonly direction: Direction;
  /** The best eligible round under the run's selection rule; null without a valid submission. */
  readonly best: { readonly score: number; readonly round: number; readonly snapshot: string } | null;
  readonly submissions: { readonly used: number; readonly allowed: number | null };
  readonly rounds: { readonly total: number; readonly invalid: number; readonly failed: number; readonly violating: number; readonly refunded: number };
  /** RunStarted's time; null for an imported row (a bundle's claim does not state it). */
  readonly startedAt: string | null;
  readonly completedAt: string | null;
  /** RunStarted to RunCompleted, in ms; null while running, and for an imported row. */
  readonly wallTimeMs: number | null;
  /** `ledger`: this ledger's own run; `imported`: a verified bundle from someone else (`assay bundle import`). */
  readonly source: 'ledger' | 'imported';
  /** For an imported row: the bundle file's SHA-256, the publisher key it verified against, and when it was imported. */
  readonly imported?: ImportProvenance;
}

export interface ImportProvenance {
  /** `sha256:<hex>` of the bundle file, as stored under `<ASSAY_HOME>/imports/`. */
  readonly bundleDigest: string;
  /** The verifier key text (`name+hex+base64`) the bundle's root key matched. */
  readonly publisherKey: string;
  readonly importedAt: string;
}

export interface LeaderboardGroup extends LeaderboardGroupKey {
  readonly metric: string | null;
  readonly direction: Direction;
  /**
   * The group's baseline rows: the latest `start` (the untouched starting workspace) and `oracle` (the task's
   * `solution/`) baselines recorded under this task digest and fingerprint; null when none was recorded.
   */
  readonly baselines: { readonly start: MatchedBaselineView | null; readonly oracle: MatchedBaselineView | null };
  /**
   * Ranked: best first; runs without a valid submission last. `vsBaseline`: the run's best score against the
   * group's `start` baseline (absolute and relative improvement, the repeats' spread, and whether it is
   * distinguishable), or why there is none.
   */
  readonly rows: ReadonlyArray<
    LeaderboardRow & {
      readonly rank: number | null;
      readonly vsBaseline: BaselineComparison;
      /** The latest re-judge in this ledger of the run's best snapshot (RejudgeCompleted), or null: never re-judged here. */
      readonly rejudge: RejudgeView | null;
    }
  >;
}

/** The group key as one string (stored, compared): JSON of [task, taskDigest, fingerprint]. */
export const groupKeyOf = (k: LeaderboardGroupKey): string => JSON.stringify([k.task, k.taskDigest, k.fingerprint]);

function roundCounts(s: RunState): LeaderboardRow['rounds'] {
  let invalid = 0;
  let failed = 0;
  let violating = 0;
  let refunded = 0;
  for (const r of s.rounds) {
    const v = roundView(s, r);
    if (v.status === 'submission_error') invalid += 1;
    else if (v.status === 'verifier_error' || v.status === 'verifier_timeout') failed += 1;
    else if (v.status === 'rule_violation') violating += 1;
    else if (v.status === 'refunded') refunded += 1;
  }
  return { total: s.rounds.length, invalid, failed, violating, refunded };
}

/** The run's leaderboard row; null before its RunStarted. */
export function leaderboardRow(slot: RunSlot): LeaderboardRow | null {
  const s = slot.state;
  const st = s.started;
  if (!st) return null;
  const best = bestRound(s);
  const completedAt = s.completed?.at ?? null;
  const allowed = st.protocol.budgets.submissions;
  return {
    task: st.task,
    taskDigest: st.taskDigest,
    fingerprint: st.fingerprint,
    run: slot.run,
    agent: st.agent,
    model: st.model,
    status: slot.error !== null ? 'invalid' : s.completed ? s.completed.status : 'running',
    metric: st.selection.metric,
    direction: st.selection.direction,
    best: best ? { score: best.score, round: best.round, snapshot: best.snapshot } : null,
    submissions: { used: s.consumed.submissions, allowed: typeof allowed === 'number' ? allowed : null },
    rounds: roundCounts(s),
    startedAt: st.startedAt,
    completedAt,
    wallTimeMs: completedAt !== null ? Math.max(0, Date.parse(completedAt) - Date.parse(st.startedAt)) : null,
    source: 'ledger',
  };
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Orders a group's rows: by best score in the direction (higher first for maximize, lower first for minimize);
 * ties by earlier completion (a run still running after every completed one), then run id; runs without a valid
 * submission last, by run id.
 */
export function compareRows(direction: Direction, a: LeaderboardRow, b: LeaderboardRow): number {
  if (a.best === null || b.best === null) {
    if (a.best !== b.best) return a.best === null ? 1 : -1;
    return cmp(a.run, b.run);
  }
  if (a.best.score !== b.best.score) return direction === 'maximize' ? b.best.score - a.best.score : a.best.score - b.best.score;
  if (a.completedAt !== b.completedAt) {
    if (a.completedAt === null) return 1;
    if (b.completedAt === null) return -1;
    return cmp(a.completedAt, b.completedAt);
  }
  return cmp(a.run, b.run);
}

/**
 * Groups rows by (task, task digest, fingerprint) and ranks each group. The group's direction and metric are those
 * of its first run (by run id); a run with another direction or metric under the same fingerprint cannot occur
 * (the selection rule is part of the protocol the fingerprint stands for), and would be ranked by the group's.
 * Baselines join the group of their task digest and fingerprint; a baseline with no run under its protocol makes a
 * group of its own (no rows, its metric and direction). Groups come ordered by task, then most runs, then key.
 */
export function rankLeaderboard(
  rows: readonly LeaderboardRow[],
  baselines: readonly Baseline[] = [],
  rejudges: readonly RejudgeView[] = [],
): LeaderboardGroup[] {
  const latestRejudge = (r: LeaderboardRow): RejudgeView | null => {
    // This ledger's re-judges are about this ledger's runs; an imported row of the same run id is someone else's.
    if (r.source !== 'ledger') return null;
    let out: RejudgeView | null = null;
    for (const j of rejudges) if (j.run === r.run && r.best !== null && j.snapshot === r.best.snapshot && (out === null || j.position > out.position)) out = j;
    return out;
  };
  const groups = new Map<string, LeaderboardRow[]>();
  for (const r of rows) {
    const k = groupKeyOf(r);
    const list = groups.get(k) ?? [];
    list.push(r);
    groups.set(k, list);
  }
  const out: LeaderboardGroup[] = [];
  const matched = (key: { taskDigest: string; fingerprint: string }, kind: 'start' | 'oracle') => {
    const b = findMatchedBaseline(baselines, key, kind);
    return b ? baselineView(b) : null;
  };
  for (const list of groups.values()) {
    const first = [...list].sort((a, b) => cmp(a.run, b.run))[0]!;
    const sorted = [...list].sort((a, b) => compareRows(first.direction, a, b));
    let rank = 0;
    out.push({
      task: first.task,
      taskDigest: first.taskDigest,
      fingerprint: first.fingerprint,
      metric: first.metric,
      direction: first.direction,
      baselines: { start: matched(first, 'start'), oracle: matched(first, 'oracle') },
      rows: sorted.map((r) => ({
        ...r,
        rank: r.best === null ? null : ++rank,
        vsBaseline: compareWithBaseline(
          { taskDigest: r.taskDigest, fingerprint: r.fingerprint, direction: r.direction, score: r.best?.score ?? null },
          baselines,
        ),
        rejudge: latestRejudge(r),
      })),
    });
  }
  const seen = new Set(out.map((g) => groupKeyOf(g)));
  for (const b of [...baselines].sort((x, y) => (x.position ?? 0) - (y.position ?? 0))) {
    const key = { task: b.task, taskDigest: b.taskDigest, fingerprint: b.protocolFingerprint };
    if (seen.has(groupKeyOf(key))) continue;
    seen.add(groupKeyOf(key));
    out.push({ ...key, metric: b.metric, direction: b.direction, baselines: { start: matched(key, 'start'), oracle: matched(key, 'oracle') }, rows: [] });
  }
  return out.sort((a, b) => cmp(a.task, b.task) || b.rows.length - a.rows.length || cmp(groupKeyOf(a), groupKeyOf(b)));
}
