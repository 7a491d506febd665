import type { EntryKind } from './format';
import type { PolicyDocument } from './policy';

/**
 * The ledger events this library produces, as plain JSON data (strings, finite numbers, booleans, null, objects,
 * arrays: no bigint, no undefined), ready for RFC 8785 canonicalisation. The code that takes a snapshot appends
 * them through a SnapshotEventSink; the ledger wiring lives outside this library.
 */
export const SNAPSHOT_TAKEN = 'SnapshotTaken';
export const WORKSPACE_EDITED = 'WorkspaceEdited';

/** How many paths an event lists at most (the counts are always complete). */
export const EVENT_MAX_PATHS = 100;

export interface BoundedPaths {
  /** How many there are in all. */
  count: number;
  /** The first EVENT_MAX_PATHS of them, sorted. */
  paths: string[];
  /** True when `paths` is shorter than `count`. */
  truncated: boolean;
}

/** `SnapshotTaken`: a workspace was frozen into the store under `rootCid`. */
export interface SnapshotTakenData {
  /** The root directory manifest's CID (CIDv1, dag-cbor, sha2-256, base32): the snapshot's identity. */
  rootCid: string;
  /** The snapshot format, `assay-snapshot/1`. */
  format: string;
  /** Bytes per content chunk (1048576). */
  chunkSize: number;
  /** Regular files recorded (a hard-linked file counts once per name). */
  files: number;
  /** Directories recorded, the root not counted (empty directories are recorded). */
  directories: number;
  /** Symbolic links recorded. */
  symlinks: number;
  /** Total bytes of file content (sum of file sizes, once per name). */
  bytes: number;
  /** Blobs this snapshot added to the store (content already present is not written again). */
  newBlobs: number;
  /** Bytes of those new blobs. */
  newBytes: number;
  /** Wall time of the snapshot from the injected clock, in milliseconds. */
  durationMs: number;
  /** When the snapshot started (ISO 8601, injected clock). */
  startedAt: string;
  /** CID (dag-cbor, sha2-256) of `policy`: recompute it to check the policy was the one declared. */
  policyDigest: string;
  /** The policy the snapshot was taken under. */
  policy: PolicyDocument;
  /** A caller-given label for what was snapshotted (e.g. the workspace path or run id), or null. */
  source: string | null;
  /** Symlinks whose targets resolve outside the snapshot (recorded, never followed). */
  outsideSymlinks: BoundedPaths;
  /** Entries left out by the policy: special files skipped (`specialFiles: "skip"`). Excluded paths are not listed. */
  skippedSpecialFiles: BoundedPaths;
  /** Files whose CID came from the stat cache (`hits`) or were read and hashed (`hashed`). */
  cache: { hits: number; hashed: number };
}

export type ChangeKind = 'added' | 'removed' | 'changed';

export interface ChangedPath {
  /** Path relative to the snapshot root, `/`-separated. */
  path: string;
  change: ChangeKind;
  /** The entry's kind (for `changed`, files and symlinks only; a change of kind is a removal plus an addition). */
  kind: EntryKind;
  /** Size before (files: bytes; symlinks: target length; directories: bytes beneath), null when added. */
  sizeBefore: number | null;
  /** Size after, null when removed. */
  sizeAfter: number | null;
}

export interface SideSummary {
  files: number;
  symlinks: number;
  directories: number;
  /** Bytes of the files counted. */
  bytes: number;
}

export interface DiffSummary {
  added: SideSummary;
  removed: SideSummary;
  changed: {
    files: number;
    symlinks: number;
    /** Of those, entries whose content is the same and only the mode (the executable bit) changed. */
    modeOnly: number;
    bytesBefore: number;
    bytesAfter: number;
  };
  /** Number of changed paths in all (every added or removed path beneath an added or removed directory counts). */
  totalChanges: number;
}

/** `WorkspaceEdited`: what changed in a workspace between two snapshots. */
export interface WorkspaceEditedData extends DiffSummary {
  fromCid: string;
  toCid: string;
  /** The first EVENT_MAX_PATHS changes in path order. */
  paths: ChangedPath[];
  pathsTruncated: boolean;
}

/** Where the events go. The ledger adapter implements it; with none, snapshots still work. */
export interface SnapshotEventSink {
  snapshotTaken(data: SnapshotTakenData): Promise<void>;
  workspaceEdited(data: WorkspaceEditedData): Promise<void>;
}

/** A sink that keeps what it is given (tests, dry wiring). */
export class MemoryEventSink implements SnapshotEventSink {
  readonly events: Array<{ type: typeof SNAPSHOT_TAKEN; data: SnapshotTakenData } | { type: typeof WORKSPACE_EDITED; data: WorkspaceEditedData }> = [];
  async snapshotTaken(data: SnapshotTakenData): Promise<void> {
    this.events.push({ type: SNAPSHOT_TAKEN, data });
  }
  async workspaceEdited(data: WorkspaceEditedData): Promise<void> {
    this.events.push({ type: WORKSPACE_EDITED, data });
  }
}

export function boundedPaths(all: readonly string[], max = EVENT_MAX_PATHS): BoundedPaths {
  const sorted = [...all].sort();
  return { count: sorted.length, paths: sorted.slice(0, max), truncated: sorted.length > max };
}

/** True when `v` is plain JSON that RFC 8785 can canonicalise (used by tests and as a guard before emitting). */
export function isPlainJson(v: unknown): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) return v.every(isPlainJson);
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return false;
    return Object.values(v as Record<string, unknown>).every((x) => x !== undefined && isPlainJson(x));
  }
  return false;
}
