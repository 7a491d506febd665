import type { SourceStat } from '../domain/stat-cache';
import type { BlobBatch } from './blob-store.port';

export interface SourceEntry {
  /** The name, decoded from UTF-8. */
  readonly name: string;
  /** Set (to the raw bytes) when the name on disk is not valid UTF-8; `name` is then unusable. */
  readonly invalidName?: Uint8Array;
  readonly stat: SourceStat;
}

/**
 * A directory's listing with what lets the walk recognise an unchanged directory without looking at each entry.
 * Counts are over the listing as read (before exclusions).
 */
export interface ListingSummary {
  readonly files: number;
  readonly dirs: number;
  /** Symlinks, special files and entries of unknown kind. */
  readonly others: number;
  /** Every name is printable ASCII other than `/`, and not `..`. */
  readonly allPlain: boolean;
  /** Bytes of the regular files, and the size of the largest. */
  readonly fileBytes: number;
  readonly largestFile: number;
  /**
   * For every regular file in byte order of names: `f`, NUL, the name, NUL, its stat signature (statSig), `\n`.
   * The same bytes as the files' part of the walk's ListingKey when the directory has no symlink.
   */
  readonly filesKeyText: Uint8Array;
  /** Every entry, unsorted (as listDir returns them). */
  entries(): SourceEntry[];
  /** The subdirectories only, unsorted. */
  subdirectories(): SourceEntry[];
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

export interface PrefetchOptions {
  /**
   * Whether the walk will descend into every subdirectory (no exclusion patterns): a source may then list the
   * whole tree below the hinted directories without waiting for more hints. Decided by the first hint.
   */
  readonly wholeTree?: boolean;
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
  /** listDir with a summary (sources that can produce one cheaply; the walk then skips unchanged directories). */
  listSummary?(rel: string, expected: SourceStat): Promise<ListingSummary>;
  /**
   * A hint: these directories (relative path and lstat, in the order the walk will visit them) will be listed
   * soon. A source may start listing them in the background; listDir must give the same result either way.
   */
  prefetch?(dirs: ReadonlyArray<{ readonly rel: string; readonly stat: SourceStat }>, options?: PrefetchOptions): void;
  /** The walk is over (done or failed): drop whatever prefetch still holds. */
  release?(): void;
  /** The raw bytes of a symlink's target. */
  readLink(rel: string): Promise<Uint8Array>;
  openHasher(batch: BlobBatch | null): ContentHasher;
}
