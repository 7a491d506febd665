/**
 * Imported leaderboard rows (docs/projections.md, "Imported bundles"): a result bundle from someone else, verified by
 * `assay bundle import` against its publisher's key, becomes a row built from its verified claim (the ResultClaim
 * that `assay verify` recomputes from the bundle's own events). The row is marked `imported` with its provenance and
 * is never mixed into this ledger's streams.
 */
import { AssayError } from '@assay/core';
import { TIME_RE } from '@assay/ledger';
import type { Direction, ImportProvenance, LeaderboardRow } from './leaderboard';

const bad = (field: string, expected: string): AssayError =>
  new AssayError('PROJECTIONS_IMPORT_CLAIM', 'invalid_input', `the bundle's claim: ${field} must be ${expected}`, { details: { field } });

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function str(o: Record<string, unknown>, k: string, nullable = false): string | null {
  const v = o[k];
  if (nullable && v === null) return null;
  if (typeof v !== 'string' || v.length === 0 || v.length > 4096) throw bad(k, nullable ? 'a string or null' : 'a non-empty string');
  return v;
}

function count(o: Record<string, unknown>, k: string, where: string): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw bad(`${where}.${k}`, 'a non-negative integer');
  return v;
}

/** The run's times as the verification read them from its signed events; null when absent or not envelope times. */
function runTimes(times: { startedAt: string; completedAt: string } | null): Pick<LeaderboardRow, 'startedAt' | 'completedAt' | 'wallTimeMs'> {
  if (!times || !TIME_RE.test(times.startedAt) || !TIME_RE.test(times.completedAt)) return { startedAt: null, completedAt: null, wallTimeMs: null };
  const wall = Date.parse(times.completedAt) - Date.parse(times.startedAt);
  return { startedAt: times.startedAt, completedAt: times.completedAt, wallTimeMs: Number.isFinite(wall) ? Math.max(0, wall) : null };
}

/**
 * The leaderboard row an imported bundle's verified claim supports, with the run's start and end when the
 * verification gives them (the envelope times of its signed RunStarted and RunCompleted; the claim itself has none).
 */
export function importedRow(claim: unknown, provenance: ImportProvenance, times: { startedAt: string; completedAt: string } | null = null): LeaderboardRow {
  if (!isObj(claim)) throw bad('claim', 'an object');
  const direction = claim.direction === 'maximize' || claim.direction === 'minimize' ? (claim.direction as Direction) : null;
  if (direction === null) throw bad('direction', '"maximize" or "minimize"');
  const score = claim.claimedScore;
  if (score !== null && (typeof score !== 'number' || !Number.isFinite(score))) throw bad('claimedScore', 'a finite number or null');
  const counts = claim.counts;
  if (!isObj(counts)) throw bad('counts', 'an object');
  const budgets = isObj(claim.budgets) ? claim.budgets : {};
  const subs = isObj(budgets.submissions) ? budgets.submissions : { granted: null, used: 0 };
  const used = typeof subs.used === 'number' && Number.isFinite(subs.used) && subs.used >= 0 ? subs.used : 0;
  const granted = typeof subs.granted === 'number' && Number.isFinite(subs.granted) && subs.granted >= 0 ? subs.granted : null;
  let best: LeaderboardRow['best'] = null;
  if (typeof score === 'number') {
    const round = claim.round;
    if (typeof round !== 'number' || !Number.isSafeInteger(round) || round < 1) throw bad('round', 'a round number when there is a score');
    best = { score, round, snapshot: str(claim, 'snapshot') as string };
  }
  return {
    task: str(claim, 'task') as string,
    taskDigest: str(claim, 'taskDigest') as string,
    fingerprint: str(claim, 'protocolFingerprint') as string,
    run: str(claim, 'run') as string,
    agent: str(claim, 'agent') as string,
    model: str(claim, 'model', true),
    status: str(claim, 'status') as string,
    metric: str(claim, 'metric', true),
    direction,
    best,
    submissions: { used, allowed: granted },
    rounds: {
      total: count(counts, 'rounds', 'counts'),
      invalid: count(counts, 'invalid', 'counts'),
      failed: count(counts, 'failed', 'counts'),
      violating: count(counts, 'violating', 'counts'),
      refunded: count(counts, 'refunded', 'counts'),
    },
    ...runTimes(times),
    source: 'imported',
    imported: provenance,
  };
}
