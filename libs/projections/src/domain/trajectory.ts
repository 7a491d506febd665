/**
 * The run trajectory read model: every round in order with its time since RunStarted, its status and score as
 * `assay run status` shows them (the run fold's roundView), and the best eligible score after it.
 */
import { eligibleScore, roundView, type RoundViewStatus } from '@assay/run';
import type { Direction } from './leaderboard';
import type { RunSlot } from './run-projection';

export interface TrajectoryPoint {
  readonly round: number;
  /** SubmissionReceived time. */
  readonly at: string;
  /** ms from RunStarted to the round's SubmissionReceived. */
  readonly elapsedMs: number;
  readonly status: RoundViewStatus;
  /** The primary score; null for a rule violation (its forced 0 is not a score), a refunded or open round. */
  readonly score: number | null;
  /** Whether the round can be selected (counted, completed, no violation, scored). */
  readonly eligible: boolean;
  /** The best eligible score after this round under the run's direction; null while none. */
  readonly bestSoFar: number | null;
  readonly bestRoundSoFar: number | null;
  readonly snapshot: string | null;
}

export interface Trajectory {
  readonly run: string;
  readonly task: string;
  readonly agent: string;
  readonly status: string;
  readonly metric: string | null;
  readonly direction: Direction;
  readonly startedAt: string;
  readonly completedAt: string | null;
  readonly rounds: readonly TrajectoryPoint[];
  readonly source: 'ledger';
}

const better = (d: Direction, a: number, b: number): boolean => (d === 'maximize' ? a > b : a < b);

/** The run's trajectory; null before its RunStarted. Ties keep the earlier round (the selection's tieBreak). */
export function trajectoryOf(slot: RunSlot): Trajectory | null {
  const s = slot.state;
  const st = s.started;
  if (!st) return null;
  const direction = st.selection.direction;
  const t0 = Date.parse(st.startedAt);
  let best: { score: number; round: number } | null = null;
  const rounds = s.rounds.map((r): TrajectoryPoint => {
    const v = roundView(s, r);
    const e = eligibleScore(s, r);
    if (e !== null && (best === null || better(direction, e, best.score))) best = { score: e, round: r.round };
    const b = best as { score: number; round: number } | null;
    return {
      round: r.round,
      at: r.receivedAt,
      elapsedMs: Math.max(0, Date.parse(r.receivedAt) - t0),
      status: v.status,
      score: v.status === 'rule_violation' ? null : v.score,
      eligible: e !== null,
      bestSoFar: b ? b.score : null,
      bestRoundSoFar: b ? b.round : null,
      snapshot: v.snapshot,
    };
  });
  return {
    run: slot.run,
    task: st.task,
    agent: st.agent,
    status: slot.error !== null ? 'invalid' : s.completed ? s.completed.status : 'running',
    metric: st.selection.metric,
    direction,
    startedAt: st.startedAt,
    completedAt: s.completed?.at ?? null,
    rounds,
    source: 'ledger',
  };
}
