/**
 * What the Judge needs from the snapshot store (libs/snapshots, wired in libs/runtime). A small port so the Judge
 * can be tested without the store, and so it depends on nothing of the store's API beyond these operations.
 */
import type { SnapshotEntry } from '../domain/judge-settings';

export interface MaterialiseLimits {
  readonly maxFiles: number;
  readonly maxFileBytes: number;
  readonly maxTotalBytes: number;
  readonly maxDepth: number;
}

export interface JudgeSnapshots {
  /** Snapshots a directory into the store (symlinks recorded, never followed) and returns the root CID. */
  snapshotDirectory(dir: string): Promise<string>;
  /** True when `cid` parses and its root is in the store; JUDGE_SNAPSHOT_INVALID when it is not a CID. */
  has(cid: string): Promise<boolean>;
  /** Every entry, parents before children, from the manifests alone; the caller may stop early. */
  walk(cid: string): AsyncIterable<SnapshotEntry>;
  /**
   * Writes the snapshot into `dest` (which must not exist), checking every block against its CID. Fails with the
   * store's errors (SNAPSHOT_TOO_MANY_FILES, SNAPSHOT_BLOB_CORRUPT, ...).
   */
  materialise(cid: string, dest: string, limits: MaterialiseLimits): Promise<{ files: number; bytes: number }>;
  /**
   * The snapshot as tar entries, parents before children, without the end-of-archive marker (the caller appends
   * to it): every block checked against its CID as it is read, files streamed a chunk at a time. Paths (relative,
   * `/`-separated) for which `skip` is true are left out with everything beneath them. Needed for full-rootfs
   * Judges only (workdir `/`); stores without it cannot judge those.
   */
  archive?(cid: string, skip: (path: string) => boolean): AsyncIterable<Uint8Array>;
  /** The content digest (root CID) of a directory, without storing it: how tests/ and environment/ are named. */
  digestDirectory(dir: string): Promise<string>;
}
