import type { SourceStat } from '../domain/stat-cache';
import type { BlobBatch } from './blob-store.port';

export interface SourceEntry {
  /** The name, decoded from UTF-8. */
  readonly name: string;
  /** Set (to the raw bytes) when the name on disk is not valid UTF-8; `name` is then unusable. */
  readonly invalidName?: Uint8Array;
  readonly stat: SourceStat;
}

export interface HashRequest {
  /** Path relative to the root, '/'-separated. */
  readonly rel: string;
  /** The lstat the walk saw; the hasher refuses a file that is no longer this inode. */
  readonly stat: SourceStat;
}

export interface HashedFile {
  /** Bytes read. */
  readonly size: number;
  /** sha2-256 of each chunk, 32 bytes each, in order (one chunk for files of at most one chunk). */
  readonly digests: Uint8Array;
  /** The stat after reading: what the stat cache records. */
  readonly stat: SourceStat;
}

/** Reads and hashes file content, writing chunk blobs to a batch when given one. */
export interface ContentHasher {
  hash(req: HashRequest): Promise<HashedFile>;
  /** Resolves when the hasher can take more work (backpressure for the walk). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A directory tree to snapshot, seen through lstat only. Implementations never follow a symlink and check that
 * what they read is still what the walk saw.
 */
export interface TreeSource {
  /** A stable identity for the stat cache (the file-system adapter uses the real path of the root). */
  readonly id: string;
  statRoot(): Promise<SourceStat>;
  /** The entries of a directory (unsorted; `.` and `..` excluded). `expected` is the directory's own lstat. */
  listDir(rel: string, expected: SourceStat): Promise<SourceEntry[]>;
  /** The raw bytes of a symlink's target. */
  readLink(rel: string): Promise<Uint8Array>;
  openHasher(batch: BlobBatch | null): ContentHasher;
}
