/**
 * The selection rule (RunStarted.selection, scheme assay.selection/1), pure:
 *
 *   score(round)  = rewards[metric]                      when the rule names a metric
 *                 = rewards.reward, else the only key   when it does not (the Judge's primary-metric rule)
 *   eligible      = counted rounds (BudgetConsumed submissions) whose Judge completed, with a finite score, a
 *                   snapshot, and no RuleViolation for the round
 *   best          = the eligible round with the highest (maximize) or lowest (minimize) score; ties go to the
 *                   earliest round
 *
 * The score is recomputed from RewardRecorded.rewards, not taken from RewardRecorded.primaryScore, so a verifier
 * needs only the recorded rule and the rewards.
 */
import type { Direction } from './run-protocol';

export interface RoundScore {
  readonly round: number;
  readonly score: number;
  readonly snapshot: string;
}

/** The primary score of a set of rewards under a metric (null metric: `reward`, else the only key). */
export function primaryScoreOf(rewards: Readonly<Record<string, number>> | null, metric: string | null): number | null {
  if (rewards === null) return null;
  let v: number | undefined;
  if (metric !== null) v = Object.prototype.hasOwnProperty.call(rewards, metric) ? rewards[metric] : undefined;
  else if (Object.prototype.hasOwnProperty.call(rewards, 'reward')) v = rewards.reward;
  else {
    const keys = Object.keys(rewards);
    if (keys.length === 1) v = rewards[keys[0] as string];
  }
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** True when `a` is strictly better than `b` under the direction. */
export function better(a: number, b: number, direction: Direction): boolean {
  return direction === 'maximize' ? a > b : a < b;
}

/** The best round, ties to the earliest round; null when there is none. Input order does not matter. */
export function selectBest(candidates: readonly RoundScore[], direction: Direction): RoundScore | null {
  let best: RoundScore | null = null;
  for (const c of candidates) {
    if (!Number.isFinite(c.score)) continue;
    if (best === null || better(c.score, best.score, direction) || (c.score === best.score && c.round < best.round)) best = c;
  }
  return best;
}
