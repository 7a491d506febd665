import type { CID } from 'multiformats/cid';
import type { Block } from '../domain/format';

/** A root kept alive by garbage collection. */
export interface PinRecord {
  /** The snapshot root CID. */
  readonly cid: string;
  /** ISO 8601, from the injected clock. */
  readonly createdAt: string;
  /** What was snapshotted (label or path), or null (e.g. imported). */
  readonly source: string | null;
  /** How the root arrived: `snapshot` or `import`. */
  readonly origin: 'snapshot' | 'import' | 'pin';
}

export interface StoredBlob {
  readonly cid: CID;
  readonly size: number;
  /** Last modification of the stored blob (ms since epoch): its age for the GC grace period. */
  readonly mtimeMs: number;
}

/**
 * Fast path of the file-system pack store: hashing threads append the raw chunks they hash to pack files of
 * their own in `dir` (docs/snapshots-format.md, section 9), skipping the chunks in `table()` (the raw blobs
 * stored when the batch began: 32-byte digests, open addressing on the digest's first 4 bytes, little endian),
 * and hand the batch what they wrote through `adopt` (also what a failed job wrote: its bytes are intact).
 */
export interface PackStaging {
  readonly dir: string;
  /** Identifies the batch to the threads (a new batch starts new packs). */
  readonly batch: string;
  readonly maxBytes: number;
  /** The table of stored raw blobs, built on first call and shared with the threads. */
  table(): SharedArrayBuffer;
  /**
   * Chunks written by a thread: `written` holds (pack number, offset of the bytes, length, 0) per chunk and
   * `digests` their sha2-256 digests; `newPacks` the pack files the job created.
   */
  adopt(newPacks: readonly number[], written: readonly number[], digests: Uint8Array): void;
}

/**
 * A set of blobs written together. Nothing is visible under its final name until `commit`, which makes the
 * blobs durable first, then publishes them, then records the pins: a crash never leaves a partial blob under
 * its final name, nor a pin without its blobs.
 */
export interface BlobBatch {
  /** Is the blob in the store, or staged in this batch? */
  has(cid: CID): Promise<boolean>;
  /** Stages a block (the caller computed its CID from its bytes). Returns false if it was already there. */
  put(block: Block): Promise<boolean>;
  /** Reads a staged or stored blob, checked against its CID. */
  get(cid: CID): Promise<Uint8Array>;
  /**
   * Optional fast path for raw chunks hashed by the caller from these very bytes (the hashing threads), so the
   * store does not hash them again: `data` holds the chunks back to back, `lengths[i]` is chunk i's size and
   * `digests` their sha2-256 digests (32 bytes each). Stores each chunk not already present; returns the bytes added.
   * The store may keep using `data` after returning; `release`, when given, is called once it no longer does.
   */
  putRawChunks?(data: Uint8Array, lengths: readonly number[], digests: Uint8Array, release?: () => void): number;
  /** Optional: the pack store's fast path for hashing threads (see PackStaging), or null. */
  packStaging?(): PackStaging | null;
  /** Blobs and bytes this batch added. */
  readonly added: { blobs: number; bytes: number };
  commit(opts?: { pins?: readonly PinRecord[]; heads?: ReadonlyArray<{ source: string; cid: string }> }): Promise<void>;
  /** Drops everything staged. Idempotent. */
  abort(): Promise<void>;
}

export interface CompactReport {
  /** Files rewritten with their live blobs only. */
  readonly packsRewritten: number;
  /** Files removed (rewritten ones, and ones holding no live blob). */
  readonly packsRemoved: number;
  /** Disk space given back, net of what the rewrites wrote. */
  readonly bytesReclaimed: number;
}

/**
 * The content-addressed blob store. Every read is checked against the CID it was asked for.
 *
 * Garbage collection protocol: a writer registers itself (`begin`) before it relies on any blob being present
 * and deregisters on commit or abort; `lockForGc` takes the store's GC lock and fails with SNAPSHOT_STORE_BUSY
 * while a live writer is registered, and `begin` waits for (then fails on) a held GC lock. Each side records
 * itself before checking the other, so they cannot both proceed.
 */
export interface BlobStore {
  has(cid: CID): Promise<boolean>;
  /** The blob's bytes, checked against `cid`: SNAPSHOT_BLOB_MISSING / SNAPSHOT_BLOB_CORRUPT otherwise. */
  get(cid: CID): Promise<Uint8Array>;
  begin(): Promise<BlobBatch>;
  list(): AsyncIterable<StoredBlob>;
  delete(cid: CID): Promise<boolean>;
  pin(rec: PinRecord): Promise<void>;
  unpin(cid: CID): Promise<boolean>;
  pins(): Promise<PinRecord[]>;
  /** The last snapshot committed for a source, or null. */
  head(source: string): Promise<string | null>;
  lockForGc(): Promise<{ release(): Promise<void> }>;
  /**
   * Reclaims the space of deleted blobs (for stores that keep blobs in shared files, e.g. packs). Only while
   * holding the GC lock. Never makes a present blob unreadable.
   */
  compact(): Promise<CompactReport>;
  /** Removes staging left by crashed writers older than `olderThanMs`; returns how many were removed. */
  cleanupStaging(nowMs: number, olderThanMs: number): Promise<number>;
  close(): Promise<void>;
}
