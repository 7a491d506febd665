import type { Baseline } from '@assay/run';
import type { LeaderboardRow } from '../domain/leaderboard';
import type { RunSlot } from '../domain/run-projection';
import type { Trajectory } from '../domain/trajectory';
import type { RejudgeView } from '../domain/reports';

/** Where the projector stands: the next ledger position to apply and the hash of the event before it. */
export interface ProjectionCheckpoint {
  readonly position: number;
  /** Hex SHA-256 of the envelope at `position - 1`; null at position 0. */
  readonly lastHash: string | null;
}

/** What one batch changed, written with its new checkpoint in one transaction. */
export interface ProjectionBatch {
  readonly slots: readonly RunSlot[];
  readonly rows: readonly LeaderboardRow[];
  readonly trajectories: readonly Trajectory[];
  /** Baselines recorded in the batch (each by its ledger position). */
  readonly baselines?: readonly Baseline[];
  /** Re-judges recorded in the batch (each by its ledger position). */
  readonly rejudges?: readonly RejudgeView[];
  readonly checkpoint: ProjectionCheckpoint;
}

/** The read models' storage. */
export interface ReadModelStore {
  checkpoint(): ProjectionCheckpoint;
  slot(run: string): RunSlot | null;
  /** Applies a batch and moves the checkpoint, atomically; refuses unless `expectedFrom` is the stored position. */
  apply(batch: ProjectionBatch, expectedFrom: number): void;
  /** Rows whose task is `task`. */
  rowsOfTask(task: string): LeaderboardRow[];
  trajectory(run: string): Trajectory | null;
  /** Baselines of `task` (BaselineRecorded.task), in ledger position order. */
  baselinesOfTask(task: string): Baseline[];
  /** Re-judges (RejudgeCompleted) that name `run`, in ledger position order. */
  rejudgesOfRun(run: string): RejudgeView[];
  /** Re-judges that name a run of `task` (one with a leaderboard row of that task), in ledger position order. */
  rejudgesOfTask(task: string): RejudgeView[];
  /** Every task with at least one run, and its number of runs, by task id. */
  tasks(): Array<{ task: string; runs: number }>;
  /** Every stored row of every table, in key order, as text: equal text is equal read models. */
  dump(): string;
  close(): void;
}
