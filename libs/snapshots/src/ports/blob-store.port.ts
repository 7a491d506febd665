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
 * Fast path for the file-system store: hashing workers write chunk blobs straight into the store, each under a
 * temporary name `<blocksDir>/<shard>/<tempPrefix><cid>` (O_EXCL) next to its final name `<blocksDir>/<shard>/<cid>`,
 * skipping any CID whose final file exists, and report what they staged through `register` (even when a job
 * fails, so an abort can remove it).
 */
export interface FsStaging {
  readonly blocksDir: string;
  readonly tempPrefix: string;
  register(cids: readonly string[], bytes: number): void;
  /** Lets the hasher's threads do the renames of `commit` in parallel (each pair: staged path, final path). */
  setPublisher(publish: ((from: string[], to: string[]) => Promise<void>) | null): void;
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
  /** The file-system fast path, or null for stores without one. */
  fsStaging(): FsStaging | null;
  /** Blobs and bytes this batch added. */
  readonly added: { blobs: number; bytes: number };
  commit(opts?: { pins?: readonly PinRecord[]; heads?: ReadonlyArray<{ source: string; cid: string }> }): Promise<void>;
  /** Drops everything staged. Idempotent. */
  abort(): Promise<void>;
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
  /** Removes staging left by crashed writers older than `olderThanMs`; returns how many were removed. */
  cleanupStaging(nowMs: number, olderThanMs: number): Promise<number>;
  close(): Promise<void>;
}
