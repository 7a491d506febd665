import type { CID } from 'multiformats/cid';
import { silentProgress, type Clock, type Progress } from '@assay/core';
import { DAG_CBOR_CODE, parseCid } from '../domain/format';
import { snapshotError } from '../domain/snapshot.errors';
import type { BlobStore, CompactReport } from '../ports/blob-store.port';
import type { StatCache } from '../ports/stat-cache.port';
import { NodeReader } from './node-reader';

/** Blobs younger than this are never collected (default 1 hour). */
export const DEFAULT_GC_GRACE_MS = 60 * 60 * 1000;

export interface GcOptions {
  readonly clock: Clock;
  readonly graceMs?: number;
  /** Report what would be deleted without deleting. */
  readonly dryRun?: boolean;
  /** Entries of this cache pointing at deleted blobs are marked not stored. */
  readonly cache?: StatCache | null;
  readonly progress?: Progress;
}

export interface GcReport {
  readonly pins: number;
  /** Distinct blobs reachable from the pins. */
  readonly reachable: number;
  readonly deleted: number;
  readonly deletedBytes: number;
  /** Unreachable blobs spared because they are younger than the grace period. */
  readonly young: number;
  /** Abandoned staging (packs, files) of crashed writers removed. */
  readonly stagingRemoved: number;
  /** Space reclaimed after the deletions (pack stores rewrite packs holding dead blobs); zeros on a dry run. */
  readonly compaction: CompactReport;
  readonly dryRun: boolean;
}

/**
 * Mark and sweep. Safety against concurrent snapshots, in three layers:
 * 1. the store's GC lock, taken only when no writer is registered (and writers wait while it is held), so no
 *    snapshot or import runs during a collection;
 * 2. pins: every committed snapshot and import pins its root before its writer deregisters;
 * 3. a grace period: unreachable blobs younger than `graceMs` are kept (covers writers that do not register,
 *    e.g. an older version, and clock skew between the blob's mtime and the clock).
 * If any pinned snapshot cannot be fully read, nothing is deleted (SNAPSHOT_GC_MARK_FAILED): a missing manifest
 * would hide what it references. Manifests and file nodes are deleted before raw chunks, so an interrupted
 * collection never leaves a node whose chunks are gone. Then the store compacts: a pack store rewrites the packs
 * that hold deleted blobs (and merges small packs), still under the lock.
 */
export async function collectGarbage(store: BlobStore, options: GcOptions): Promise<GcReport> {
  const graceMs = options.graceMs ?? DEFAULT_GC_GRACE_MS;
  const progress = options.progress ?? silentProgress;
  const lock = await store.lockForGc();
  try {
    const pins = await store.pins();
    const reader = new NodeReader(store);
    const reachable = new Set<string>();
    progress.start('gc: marking');
    for (const pin of pins) {
      let root: CID;
      try {
        root = parseCid(pin.cid);
      } catch (e) {
        throw snapshotError('SNAPSHOT_GC_MARK_FAILED', `pin ${pin.cid} is not a valid CID; nothing was deleted`, { pin: pin.cid }, e);
      }
      const stack: Array<{ cid: CID; where: string }> = [{ cid: root, where: '' }];
      while (stack.length > 0) {
        const { cid, where } = stack.pop() as { cid: CID; where: string };
        const k = cid.toString();
        if (reachable.has(k)) continue;
        if (cid.code === DAG_CBOR_CODE) {
          let node;
          try {
            node = await reader.readNode(cid, where);
          } catch (e) {
            throw snapshotError(
              'SNAPSHOT_GC_MARK_FAILED',
              `pinned snapshot ${pin.cid} cannot be read at ${where || '.'} (${(e as Error).message}); nothing was deleted`,
              { pin: pin.cid, cid: k },
              e,
            );
          }
          if (node.type === 'file') for (const c of node.chunks) stack.push({ cid: c, where });
          else for (const e of node.entries) if (e.kind !== 'symlink') stack.push({ cid: e.cid, where: where ? `${where}/${e.name}` : e.name });
        }
        reachable.add(k);
        if (reachable.size % 1024 === 0) progress.tick(reachable.size);
      }
    }
    progress.end();
    const now = options.clock.now().getTime();
    const nodes: Array<{ cid: CID; size: number }> = [];
    const raws: Array<{ cid: CID; size: number }> = [];
    let young = 0;
    for await (const b of store.list()) {
      if (reachable.has(b.cid.toString())) continue;
      if (now - b.mtimeMs < graceMs) {
        young += 1;
        continue;
      }
      (b.cid.code === DAG_CBOR_CODE ? nodes : raws).push({ cid: b.cid, size: b.size });
    }
    const victims = [...nodes, ...raws];
    let deleted = 0;
    let deletedBytes = 0;
    if (!options.dryRun) {
      progress.start('gc: deleting', victims.length);
      for (const v of victims) {
        if (await store.delete(v.cid)) {
          deleted += 1;
          deletedBytes += v.size;
        }
        if (deleted % 256 === 0) progress.tick(deleted);
      }
      progress.end();
      if (options.cache && victims.length > 0) await options.cache.forgetStored();
    } else {
      deleted = victims.length;
      deletedBytes = victims.reduce((s, v) => s + v.size, 0);
    }
    const stagingRemoved = options.dryRun ? 0 : await store.cleanupStaging(now, graceMs);
    const compaction = options.dryRun ? { packsRewritten: 0, packsRemoved: 0, bytesReclaimed: 0 } : await store.compact();
    return {
      pins: pins.length,
      reachable: reachable.size,
      deleted,
      deletedBytes,
      young,
      stagingRemoved,
      compaction,
      dryRun: options.dryRun === true,
    };
  } finally {
    await lock.release();
  }
}
