/**
 * A re-judge report (RejudgeCompleted, docs/rejudge.md), pure: the arithmetic from the fresh Judges' scores to the
 * verdict, and the event's data. `assay rejudge` computes it; `assay verify` recomputes it from a report bundle's
 * event and refuses a report whose median, spread, delta, verdict or status do not follow from its own scores.
 */
import type { JsonObject } from '@assay/ledger';
import { bundleError } from '../bundles.errors';
import type { ResultClaim } from './bundle-format';

export const REJUDGE_VERDICTS = ['reproduced', 'not_reproduced', 'could_not_judge'] as const;
export type RejudgeVerdict = (typeof REJUDGE_VERDICTS)[number];

/** The event type and stream category a re-judging is recorded under. */
export const REJUDGE_EVENT = 'RejudgeCompleted';
export const REJUDGE_STREAM_PREFIX = 'rejudge-';
export const MAX_REJUDGE_REPEAT = 100;

/** One fresh Judge's outcome, as the report and the event keep it. */
export interface RejudgeScore {
  readonly judge: string;
  readonly status: string;
  /** The primary metric's value; null unless the Judge completed with one. */
  readonly primaryScore: number | null;
}

export interface RejudgeArithmetic {
  /** The median of the completed Judges' primary scores (mean of the middle two for an even count); null: none. */
  readonly median: number | null;
  /** max - min of those scores; null: none. */
  readonly spread: number | null;
  /** median - recorded; null when either is missing. */
  readonly delta: number | null;
  readonly verdict: RejudgeVerdict;
}

/** Which scores count: a Judge that completed with a finite primary score. */
export function completedScores(scores: readonly RejudgeScore[]): number[] {
  return scores
    .filter((s) => s.status === 'completed' && typeof s.primaryScore === 'number' && Number.isFinite(s.primaryScore))
    .map((s) => s.primaryScore as number);
}

/**
 * The report's arithmetic: `reproduced` when |median - recorded| <= tolerance (0: exactly equal), `not_reproduced`
 * otherwise, `could_not_judge` when no Judge completed with a score (or the claim records none).
 */
export function rejudgeVerdict(recorded: number | null, scores: readonly RejudgeScore[], tolerance: number): RejudgeArithmetic {
  if (!Number.isFinite(tolerance) || tolerance < 0) throw bundleError('BUNDLE_BAD_OPTION', `the tolerance must be a finite number >= 0, got ${tolerance}`);
  const v = completedScores(scores).sort((a, b) => a - b);
  if (v.length === 0) return { median: null, spread: null, delta: null, verdict: 'could_not_judge' };
  const mid = v.length >> 1;
  const median = v.length % 2 === 1 ? (v[mid] as number) : ((v[mid - 1] as number) + (v[mid] as number)) / 2;
  const spread = (v[v.length - 1] as number) - (v[0] as number);
  if (recorded === null || !Number.isFinite(recorded)) return { median, spread, delta: null, verdict: 'could_not_judge' };
  const delta = median - recorded;
  return { median, spread, delta, verdict: Math.abs(delta) <= tolerance ? 'reproduced' : 'not_reproduced' };
}

/** RejudgeCompleted's data (docs/events.md, docs/rejudge.md). */
export function rejudgeEventData(
  r: { claim: ResultClaim; bundleDigest: string; scores: readonly RejudgeScore[]; tolerance: number } & RejudgeArithmetic,
): JsonObject {
  const { claim } = r;
  return {
    snapshot: claim.snapshot as string,
    run: claim.run,
    ...(claim.round !== null ? { round: claim.round } : {}),
    status: rejudgeStatus(r.scores),
    primaryScore: r.median,
    matches: r.verdict === 'reproduced',
    verdict: r.verdict,
    bundleDigest: r.bundleDigest,
    task: claim.task,
    taskDigest: claim.taskDigest,
    protocolFingerprint: claim.protocolFingerprint,
    metric: claim.metric,
    direction: claim.direction,
    recordedScore: claim.claimedScore,
    scores: r.scores.map((s) => ({ judge: s.judge, status: s.status, primaryScore: s.primaryScore })),
    median: r.median,
    spread: r.spread,
    delta: r.delta,
    tolerance: r.tolerance,
  };
}

/** The report's status: `completed` when any Judge completed (or none ran), else the last Judge's status. */
export function rejudgeStatus(scores: readonly RejudgeScore[]): string {
  const last = scores[scores.length - 1];
  return scores.some((s) => s.status === 'completed') || !last ? 'completed' : last.status;
}

/** The members `assay rejudge` always writes; a RejudgeCompleted without them (a generic append) is no report. */
const REPORT_MEMBERS = [
  'snapshot',
  'run',
  'status',
  'primaryScore',
  'matches',
  'verdict',
  'bundleDigest',
  'task',
  'taskDigest',
  'protocolFingerprint',
  'metric',
  'direction',
  'recordedScore',
  'scores',
  'median',
  'spread',
  'delta',
  'tolerance',
] as const;

/**
 * Why a RejudgeCompleted's data is not a self-consistent report, or null: every member `assay rejudge` writes is
 * there, and the median, spread, delta, verdict, `matches`, `primaryScore` (the median) and `status` are exactly what
 * `rejudgeVerdict` and `rejudgeStatus` give for its own scores, recorded score and tolerance. The event's schema
 * (docs/events.md) is checked separately, by the signatures step.
 */
export function rejudgeReportProblem(data: Readonly<Record<string, unknown>>): string | null {
  const missing = REPORT_MEMBERS.filter((k) => !(k in data));
  if (missing.length > 0) return `it lacks ${missing.join(', ')} (not written by assay rejudge)`;
  const scores = data.scores as RejudgeScore[];
  const tolerance = data.tolerance as number;
  const recorded = data.recordedScore as number | null;
  if (!Array.isArray(scores) || scores.length === 0) return 'it records no Judge';
  if (typeof tolerance !== 'number' || !Number.isFinite(tolerance) || tolerance < 0) return `its tolerance ${String(tolerance)} is not a finite number >= 0`;
  if (typeof data.bundleDigest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(data.bundleDigest)) return 'its bundleDigest is not sha256:<64 hex>';
  if (typeof data.snapshot !== 'string') return 'it names no snapshot';
  const a = rejudgeVerdict(recorded, scores, tolerance);
  const want: Record<string, unknown> = {
    median: a.median,
    spread: a.spread,
    delta: a.delta,
    verdict: a.verdict,
    matches: a.verdict === 'reproduced',
    primaryScore: a.median,
    status: rejudgeStatus(scores),
  };
  for (const [k, v] of Object.entries(want))
    if (data[k] !== v) return `its ${k} is ${JSON.stringify(data[k])}, but its own scores, recorded score and tolerance give ${JSON.stringify(v)}`;
  return null;
}
