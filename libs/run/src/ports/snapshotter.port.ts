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

/** Snapshot error codes that are the candidate's doing: the task's limits. */
export const SNAPSHOT_LIMIT_CODES: ReadonlySet<string> = new Set([
  'SNAPSHOT_TOO_MANY_FILES',
  'SNAPSHOT_FILE_TOO_LARGE',
  'SNAPSHOT_TOO_LARGE',
  'SNAPSHOT_TOO_DEEP',
]);

/**
 * Snapshot error codes that name something the agent left in the workspace which snapshots refuse: a fifo, socket or
 * device node, a name that is not UTF-8 or not portable, two names that collide, a symlink that leaves the workspace
 * or has an invalid target, a path that escapes it.
 */
export const SNAPSHOT_REFUSED_CODES: ReadonlySet<string> = new Set([
  'SNAPSHOT_NAME_NOT_UTF8',
  'SNAPSHOT_NAME_INVALID',
  'SNAPSHOT_NAME_COLLISION',
  'SNAPSHOT_SYMLINK_TARGET_INVALID',
  'SNAPSHOT_SYMLINK_OUTSIDE',
  'SNAPSHOT_SPECIAL_FILE',
  'SNAPSHOT_PATH_ESCAPE',
]);

/**
 * errno values of reading a workspace path that the workspace's own contents cause (a path longer than PATH_MAX, a
 * symlink loop, a file or directory the agent made unreadable, a fifo opened for reading ...): the agent's doing.
 * Anything else (EIO, ENOSPC, EMFILE, ENOMEM, a path of the store) is the host's.
 */
export const WORKSPACE_ERRNOS: ReadonlySet<string> = new Set([
  'ENAMETOOLONG',
  'ELOOP',
  'EACCES',
  'EPERM',
  'EOVERFLOW',
  'EFBIG',
  'ENXIO',
  'EINVAL',
  'EISDIR',
  'ENOTDIR',
  'ETXTBSY',
]);

/** Who caused a failed snapshot: the agent (the round counts, with a RuleViolation) or the infrastructure (refund). */
export type SnapshotFault =
  { readonly by: 'agent'; readonly rule: string; readonly detail: string } | { readonly by: 'infrastructure'; readonly detail: string };

const ERRNO_IN_MESSAGE = /\b(E[A-Z0-9]{2,15})\b/;

/**
 * Classifies a snapshot failure by who caused it (docs/run.md, "Who caused a fault"):
 *   - a task limit (too many files, too large, too deep): `snapshot.limits`;
 *   - something snapshots refuse (SNAPSHOT_REFUSED_CODES), or an I/O error on a workspace path (relative: store paths
 *     are absolute) whose errno is one the workspace's contents cause (WORKSPACE_ERRNOS): `snapshot.refused`;
 *   - anything else: the infrastructure's (the round is refunded, within the run's refund cap).
 */
export function classifySnapshotFailure(e: unknown): SnapshotFault {
  const err = e as { code?: unknown; message?: unknown; details?: { path?: unknown; errno?: unknown } } | null;
  const code = typeof err?.code === 'string' ? err.code : '';
  const message = typeof err?.message === 'string' ? err.message : String(e);
  const text = code ? `${code}: ${message}` : message;
  if (SNAPSHOT_LIMIT_CODES.has(code))
    return { by: 'agent', rule: 'snapshot.limits', detail: `the workspace could not be snapshotted within the task's limits: ${text}` };
  if (SNAPSHOT_REFUSED_CODES.has(code)) return { by: 'agent', rule: 'snapshot.refused', detail: `the workspace holds what snapshots refuse: ${text}` };
  if (code === 'SNAPSHOT_IO') {
    const path = err?.details?.path;
    const errno = typeof err?.details?.errno === 'string' ? err.details.errno : (ERRNO_IN_MESSAGE.exec(message)?.[1] ?? null);
    const inWorkspace = typeof path !== 'string' || !path.startsWith('/');
    if (inWorkspace && errno !== null && WORKSPACE_ERRNOS.has(errno))
      return { by: 'agent', rule: 'snapshot.refused', detail: `a workspace path could not be read (${errno}), because of what the workspace holds: ${text}` };
  }
  return { by: 'infrastructure', detail: `the workspace snapshot failed: ${text}` };
}
