import type { DirCacheRecord } from '../domain/stat-cache';

export interface StatCacheUpdate {
  /** Directories whose record changed (relative path, '' for the root). */
  readonly upserts: ReadonlyArray<{ dir: string; record: DirCacheRecord }>;
  /** Every directory the snapshot visited; records of any other directory of the scope are dropped. */
  readonly visitedDirs: ReadonlySet<string>;
}

/**
 * Remembers, per tree (`scope`: the real path of its root) and directory, the stat signature of every entry and
 * the CIDs they hashed to (see domain/stat-cache.ts for when they may be used).
 */
export interface StatCache {
  lookupDir(scope: string, dir: string): Promise<DirCacheRecord | null>;
  /** Applied after a snapshot succeeds, atomically. */
  commit(scope: string, update: StatCacheUpdate): Promise<void>;
  /** After garbage collection: no record may claim its blobs are stored any more (they are re-checked). */
  forgetStored(): Promise<void>;
  close(): Promise<void>;
}
