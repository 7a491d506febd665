/**
 * Judging one round's snapshot. The real implementation wraps @assay/judge's JudgeRunner (prepared once per run,
 * `runner.judge(prepared, snapshot, { run, round })`, with a LedgerJudgeRecorder over the run's ledger).
 *
 * Contract:
 *  - the Judge records its own events in the same ledger, in a `judge-<id>` stream, with `data.run` and
 *    `data.round` set: JudgeLaunched, JudgeCompleted (always, also for infrastructure_error), RewardRecorded (when
 *    completed), RuleViolation (for submission_error). The run reads its verdict from those events, not from the
 *    returned value, so that what the agent is told and what is selected is exactly what is signed;
 *  - it resolves once those events are appended; it rejects only when it could not judge at all (nothing or only
 *    JudgeLaunched recorded): the run then refunds the round;
 *  - `signal` aborts a Judge (run cancelled): kill the container, record infrastructure_error, resolve or reject;
 *  - the full Judge log is published read-only to Work; `log` is its path as the agent sees it there.
 */
import type { JudgeStatus } from '../domain/run-events';
import type { GpuHolding } from '../domain/decide';

export interface JudgeRequest {
  readonly run: string;
  readonly round: number;
  /** Root CID of the round's snapshot. */
  readonly snapshot: string;
  readonly signal?: AbortSignal;
  /** Host GPU device ids handed to this Judge (a GPU pool decides them); absent or empty: none. */
  readonly gpus?: readonly string[];
}

export interface JudgeOutcome {
  /** The Judge's id: its events are in stream `judge-<id>`. */
  readonly judge: string;
  readonly status: JudgeStatus;
  readonly rewards: Readonly<Record<string, number>> | null;
  readonly primaryScore: number | null;
  readonly detail: string | null;
  /** Path of the full Judge log inside Work (read-only mount), or null when there is none. */
  readonly log: string | null;
  /** GPU-seconds held by this Judge (GPUs times holding time); 0 on CPU. */
  readonly gpuSeconds: number;
  /** Which GPUs the Judge held and for how long (gpuSeconds = devices × heldSec); absent on CPU. */
  readonly gpu?: GpuHolding | null;
}

export interface JudgePort {
  judge(req: JudgeRequest): Promise<JudgeOutcome>;
}
