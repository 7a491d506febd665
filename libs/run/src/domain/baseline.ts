/**
 * Matched baselines (`assay baseline`, docs/task-format.md "Baselines"): what a task's starting workspace and its
 * oracle score when judged N times under exactly the protocol a run of the task uses, recorded as BaselineRecorded
 * events; and the rule that compares a run's best score with the matched `start` baseline. Pure: no I/O.
 *
 * Matched: same task digest AND same protocol fingerprint (RunStarted.taskDigest / RunStarted.fingerprint against
 * BaselineRecorded.taskDigest / .protocolFingerprint). The latest matched `start` baseline (highest log position)
 * is the one compared.
 *
 * The rule (statistical honesty): an improvement is distinguishable only when the baseline has at least
 * MIN_DISTINGUISHING_REPEATS repeats whose Judge completed with a score AND the run's score lies outside the
 * baseline's [min, max] range in the improving direction (above max when maximizing, below min when minimizing).
 * Outside the range in the other direction, with as many repeats, is a regression. Everything else is
 * `not_distinguishable`: the difference is within what re-judging the unchanged start already produces.
 */
import type { JsonObject } from './run-events';

export const BASELINE_EVENT_TYPE = 'BaselineRecorded';
export const BASELINE_KINDS = ['start', 'oracle'] as const;
export type BaselineKind = (typeof BASELINE_KINDS)[number];
/** Completed repeats a baseline needs before any difference from it is called distinguishable. */
export const MIN_DISTINGUISHING_REPEATS = 3;
/** `--repeat` bounds (the catalogue's `scores` array holds at most this many). */
export const MAX_BASELINE_REPEATS = 20;

/** The ledger stream of a task's baselines: `baseline-<task id>` (taskIdOf: `org/name` → `org:name`). */
export function baselineStream(task: string): string {
  return `baseline-${task}`;
}

export interface BaselineRepeat {
  /** The Judge's id (its events are in `judge-<id>`). */
  readonly judge: string;
  /** The Judge's status (`completed`, `verifier_error`, ...). */
  readonly status: string;
  /** The primary score; null when the Judge did not complete with one. */
  readonly primaryScore: number | null;
}

export interface Baseline {
  readonly task: string;
  readonly taskDigest: string;
  readonly protocolFingerprint: string;
  readonly metric: string | null;
  readonly direction: 'maximize' | 'minimize';
  readonly kind: BaselineKind;
  /** The snapshot CID judged. */
  readonly snapshot: string;
  readonly judgeImageDigest: string | null;
  /** Judges asked for (the `--repeat`). */
  readonly repeats: number;
  readonly scores: readonly BaselineRepeat[];
  /** Over the completed repeats' scores; null when none completed. */
  readonly median: number | null;
  readonly min: number | null;
  readonly max: number | null;
  /** Where it is in the ledger, when read from it. */
  readonly position: number | null;
  readonly recordedAt: string | null;
}

export interface ScoreSummary {
  readonly completed: number;
  readonly median: number | null;
  readonly min: number | null;
  readonly max: number | null;
}

/** Median (mean of the middle two for an even count), min and max of the finite scores; nulls are failed Judges. */
export function summarizeScores(scores: ReadonlyArray<number | null>): ScoreSummary {
  const ok = scores.filter((s): s is number => typeof s === 'number' && Number.isFinite(s)).sort((a, b) => a - b);
  if (ok.length === 0) return { completed: 0, median: null, min: null, max: null };
  const mid = Math.floor(ok.length / 2);
  const median = ok.length % 2 === 1 ? (ok[mid] as number) : ((ok[mid - 1] as number) + (ok[mid] as number)) / 2;
  return { completed: ok.length, median, min: ok[0] as number, max: ok[ok.length - 1] as number };
}

/** BaselineRecorded's data (the catalogue's schema) for one kind. */
export function baselineEventData(i: {
  task: string;
  taskDigest: string;
  protocolFingerprint: string;
  fingerprintInput: JsonObject;
  metric: string | null;
  direction: 'maximize' | 'minimize';
  kind: BaselineKind;
  snapshot: string;
  judgeImageDigest: string | null;
  scores: readonly BaselineRepeat[];
}): JsonObject {
  const s = summarizeScores(i.scores.map((x) => x.primaryScore));
  return {
    task: i.task,
    taskDigest: i.taskDigest,
    protocolFingerprint: i.protocolFingerprint,
    fingerprintInput: i.fingerprintInput,
    metric: i.metric,
    direction: i.direction,
    kind: i.kind,
    snapshot: i.snapshot,
    judgeImageDigest: i.judgeImageDigest,
    repeats: i.scores.length,
    scores: i.scores.map((x) => ({ judge: x.judge, status: x.status, primaryScore: x.primaryScore })),
    median: s.median,
    min: s.min,
    max: s.max,
  };
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** A recorded BaselineRecorded's data as a Baseline (defensive: null when a required field is missing). */
export function parseBaseline(data: JsonObject, where: { position?: number; time?: string } = {}): Baseline | null {
  const task = str(data.task);
  const taskDigest = str(data.taskDigest);
  const protocolFingerprint = str(data.protocolFingerprint);
  const direction = data.direction === 'maximize' || data.direction === 'minimize' ? data.direction : null;
  const kind = (BASELINE_KINDS as readonly unknown[]).includes(data.kind) ? (data.kind as BaselineKind) : null;
  const snapshot = str(data.snapshot);
  if (!task || !taskDigest || !protocolFingerprint || !direction || !kind || !snapshot || !Array.isArray(data.scores)) return null;
  const scores: BaselineRepeat[] = [];
  for (const x of data.scores) {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) return null;
    const o = x as JsonObject;
    scores.push({ judge: str(o.judge) ?? '', status: str(o.status) ?? '', primaryScore: num(o.primaryScore) });
  }
  // the summary is recomputed from the repeats: what is compared follows from the recorded scores alone
  const s = summarizeScores(scores.map((x) => x.primaryScore));
  return {
    task,
    taskDigest,
    protocolFingerprint,
    metric: str(data.metric),
    direction,
    kind,
    snapshot,
    judgeImageDigest: str(data.judgeImageDigest),
    repeats: typeof data.repeats === 'number' ? data.repeats : scores.length,
    scores,
    median: s.median,
    min: s.min,
    max: s.max,
    position: where.position ?? null,
    recordedAt: where.time ?? null,
  };
}

/** The latest baseline of `kind` with this task digest and protocol fingerprint, or null. */
export function findMatchedBaseline(
  baselines: readonly Baseline[],
  run: { readonly taskDigest: string; readonly fingerprint: string },
  kind: BaselineKind = 'start',
): Baseline | null {
  let found: Baseline | null = null;
  for (const b of baselines) {
    if (b.kind !== kind || b.taskDigest !== run.taskDigest || b.protocolFingerprint !== run.fingerprint) continue;
    if (found === null || (b.position ?? -1) >= (found.position ?? -1)) found = b;
  }
  return found;
}

export type BaselineVerdict = 'improvement' | 'regression' | 'not_distinguishable';

export interface MatchedBaselineView {
  readonly kind: BaselineKind;
  readonly position: number | null;
  readonly recordedAt: string | null;
  readonly snapshot: string;
  readonly repeats: number;
  /** Repeats whose Judge completed with a score. */
  readonly completed: number;
  readonly median: number | null;
  readonly min: number | null;
  readonly max: number | null;
  /** max − min (null without a completed repeat). */
  readonly spread: number | null;
}

export type BaselineComparison =
  | { readonly matched: false; readonly reason: string }
  | {
      readonly matched: true;
      readonly baseline: MatchedBaselineView;
      readonly direction: 'maximize' | 'minimize';
      /** The run's best score (null: none). */
      readonly score: number | null;
      /** The improvement over the baseline's median, positive when better in the run's direction (null: nothing to compare). */
      readonly absolute: number | null;
      /** absolute / |median| (null when the median is 0 or there is nothing to compare). */
      readonly relative: number | null;
      readonly verdict: BaselineVerdict;
      /** verdict is `improvement` or `regression`. */
      readonly distinguishable: boolean;
      readonly reason: string;
    };

/** What a baseline shows beside a run or on a leaderboard: where it was recorded, its repeats and their range. */
export function baselineView(b: Baseline): MatchedBaselineView {
  return {
    kind: b.kind,
    position: b.position,
    recordedAt: b.recordedAt,
    snapshot: b.snapshot,
    repeats: b.repeats,
    completed: b.scores.filter((s) => s.primaryScore !== null).length,
    median: b.median,
    min: b.min,
    max: b.max,
    spread: b.min !== null && b.max !== null ? b.max - b.min : null,
  };
}

/**
 * Compares a run's best score with its matched `start` baseline (module comment: the rule). `run.direction` is the
 * run's selection direction; a matched baseline has the same one (it is bound by the fingerprint).
 */
export function compareWithBaseline(
  run: {
    readonly taskDigest: string | null;
    readonly fingerprint: string | null;
    readonly direction: 'maximize' | 'minimize' | null;
    readonly score: number | null;
  },
  baselines: readonly Baseline[],
): BaselineComparison {
  if (run.taskDigest === null || run.fingerprint === null) return { matched: false, reason: 'no matched baseline: the run has not started' };
  const b = findMatchedBaseline(baselines, { taskDigest: run.taskDigest, fingerprint: run.fingerprint });
  if (!b) {
    const sameTask = baselines.some((x) => x.kind === 'start' && x.taskDigest === run.taskDigest);
    return {
      matched: false,
      reason: sameTask
        ? 'no matched baseline: the start baselines of this task digest were recorded under another protocol fingerprint'
        : 'no matched baseline: no start baseline of this task digest',
    };
  }
  const direction = run.direction ?? b.direction;
  const view = baselineView(b);
  const completed = view.completed;
  const base = { matched: true as const, baseline: view, direction, score: run.score };
  if (run.score === null || !Number.isFinite(run.score))
    return { ...base, score: null, absolute: null, relative: null, verdict: 'not_distinguishable', distinguishable: false, reason: 'the run has no score yet' };
  if (b.median === null || b.min === null || b.max === null)
    return {
      ...base,
      absolute: null,
      relative: null,
      verdict: 'not_distinguishable',
      distinguishable: false,
      reason: 'no Judge of the baseline completed with a score',
    };
  const absolute = direction === 'maximize' ? run.score - b.median : b.median - run.score;
  const relative = b.median === 0 ? null : absolute / Math.abs(b.median);
  const better = direction === 'maximize' ? run.score > b.max : run.score < b.min;
  const worse = direction === 'maximize' ? run.score < b.min : run.score > b.max;
  const range = `[${b.min}, ${b.max}]`;
  let verdict: BaselineVerdict = 'not_distinguishable';
  let reason: string;
  if (completed < MIN_DISTINGUISHING_REPEATS) {
    reason = `the baseline has ${completed} completed repeat(s); at least ${MIN_DISTINGUISHING_REPEATS} are needed to tell a difference`;
  } else if (better) {
    verdict = 'improvement';
    reason = `the score lies outside the baseline's range ${range}, on the better side (${direction})`;
  } else if (worse) {
    verdict = 'regression';
    reason = `the score lies outside the baseline's range ${range}, on the worse side (${direction})`;
  } else {
    reason = `the score lies within the baseline's range ${range}`;
  }
  return { ...base, absolute, relative, verdict, distinguishable: verdict !== 'not_distinguishable', reason };
}
