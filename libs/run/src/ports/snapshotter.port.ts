/**
 * Snapshots of the run's workspace (libs/snapshots through the runtime, later). The run records the events
 * (SnapshotTaken, WorkspaceEdited) itself: implementations must not.
 *
 * Freezing: the caller freezes Work (WorkControl) around snapshot(); implementations only read the workspace.
 */
import type { SnapshotFacts } from '../domain/decide';

export interface SnapshotRequest {
  readonly run: string;
  /** The round being submitted, or null for a periodic snapshot between submissions. */
  readonly round: number | null;
}

/** What a snapshot of the workspace reports: the facts the run records in SnapshotTaken. */
export type WorkspaceSnapshot = SnapshotFacts;

export interface WorkspaceChange {
  /** Relative to the workspace, `/`-separated. */
  readonly path: string;
  readonly change: 'added' | 'removed' | 'changed';
  readonly kind: 'file' | 'dir' | 'symlink';
  /** Bytes before/after (files), null for the missing side. */
  readonly sizeBefore: number | null;
  readonly sizeAfter: number | null;
}

export interface Snapshotter {
  /**
   * Snapshots the workspace into the content-addressed store. Fails with the snapshot lib's codes; the limit codes
   * (SNAPSHOT_TOO_MANY_FILES, SNAPSHOT_FILE_TOO_LARGE, SNAPSHOT_TOO_LARGE, SNAPSHOT_TOO_DEEP) are the candidate's
   * doing (a RuleViolation), anything else is an infrastructure failure (the round is refunded).
   */
  snapshot(req: SnapshotRequest): Promise<WorkspaceSnapshot>;
  /** Every change from one snapshot to another, in path order, parents before children. */
  changes(from: string, to: string): AsyncIterable<WorkspaceChange>;
}

/** Snapshot error codes that are the candidate's doing. */
export const SNAPSHOT_LIMIT_CODES: ReadonlySet<string> = new Set(['SNAPSHOT_TOO_MANY_FILES', 'SNAPSHOT_FILE_TOO_LARGE', 'SNAPSHOT_TOO_LARGE', 'SNAPSHOT_TOO_DEEP']);
