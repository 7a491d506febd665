import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { CID } from 'multiformats/cid';
import { processIdentity, systemClock, writeFileAtomic, type Clock } from '@assay/core';
import { ioError, snapshotError } from '../domain/snapshot.errors';
import type { BlobBatch, BlobStore, CompactReport, PinRecord, StoredBlob } from '../ports/blob-store.port';
import { FsBatch } from './blob-batch';
import { cidOfKey, keyOf } from './blob-keys';
import { compactPacks, removeStalePacks, type PackMaintenance } from './compaction';
import { acquireGcLock, registerWriter } from './gc-lock';
import { listLooseBlobs, readBlobFile, removeLooseStaging, shardOf } from './loose-blobs';
import { missingBlob } from './memory-blob-store.adapter';
import { PackIndex, TOMBSTONE, appendRecord, ensureIndexFile, packName, type IndexEntry, type Loc } from './pack-index';
import { PackReader } from './pack-reader';
import { PinRegistry } from './pin-registry';

export const FS_STORE_FORMAT = 'assay-blobs/2';
/** The loose-file layout of earlier versions: still read (and its blobs listed, deleted), never written. */
export const FS_STORE_FORMAT_LOOSE = 'assay-blobs/1';

export interface FsBlobStoreOptions {
  /**
   * `batch` (default): a commit fdatasyncs the batch's pack files, then appends the batch's index record and
   * fdatasyncs the index, and only then writes the pins and heads (fsync'ed). `none`: no flush (a crash may lose
   * recent blobs, never index a partial one). Tests and throwaway stores only.
   */
  readonly durability?: 'batch' | 'none';
  readonly clock?: Clock;
  /** How long `begin` waits for a running garbage collection before failing (default 60 s). */
  readonly gcWaitMs?: number;
  /** A batch starts a new pack file once its current one holds this many bytes (default 512 MiB). */
  readonly packMaxBytes?: number;
}

export { processIdentity };
export { ownerAlive } from './gc-lock';
export { readBlobFile } from './loose-blobs';

const DEFAULT_PACK_MAX = 512 << 20;

/** Creates the store's layout under `dir` where absent and checks (or upgrades) its format marker. */
function prepareStoreDir(dir: string): void {
  try {
    for (const d of ['packs', 'roots', 'heads', 'writers']) fs.mkdirSync(join(dir, d), { recursive: true });
    const marker = join(dir, 'store.json');
    if (fs.existsSync(marker)) {
      const m = JSON.parse(fs.readFileSync(marker, 'utf8')) as { format?: unknown };
      if (m.format === FS_STORE_FORMAT_LOOSE) {
        // An earlier store: its loose blobs stay where they are and are still read; new blobs go to packs.
        writeFileAtomic(marker, `${JSON.stringify({ format: FS_STORE_FORMAT })}\n`, { durable: true });
      } else if (m.format !== FS_STORE_FORMAT) {
        throw snapshotError('SNAPSHOT_IO', `${dir} holds a blob store of format ${String(m.format)}, expected ${FS_STORE_FORMAT}`);
      }
    } else {
      writeFileAtomic(marker, `${JSON.stringify({ format: FS_STORE_FORMAT })}\n`, { durable: false });
    }
    ensureIndexFile(join(dir, 'packs', 'index'));
  } catch (e) {
    if (e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('SNAPSHOT_')) throw e;
    throw ioError('opening the blob store at', dir, e);
  }
}

/**
 * The blob store on disk (docs/snapshots-format.md, section 9):
 *
 * ```
 * <dir>/store.json               {"format": "assay-blobs/2"}
 * <dir>/packs/<8 hex>.pack       pack files: blobs appended back to back, each after a 40-byte header (its CID, length)
 * <dir>/packs/index              append-only index: checksummed records of (CID -> pack, offset, length, time)
 * <dir>/blocks/<xx>/<cid>        loose blobs of the earlier layout (assay-blobs/1): read, listed, deleted; never written
 * <dir>/roots/<cid>.json         pins (GC roots)
 * <dir>/heads/<sha256>.json      the last snapshot per source label
 * <dir>/writers/<batch>.json     registered writers (pid, host, start)
 * <dir>/gc.lock                  held during garbage collection
 * ```
 *
 * A batch appends to pack files of its own (never shared with another writer), and commits by fdatasync of its
 * packs, then one index record appended in one write and fdatasync'ed, then the pins: a crash never leaves an
 * index entry pointing at bytes that are not durably in a pack. Every read checks the blob against its CID.
 */
export class FsBlobStore implements BlobStore {
  private readonly durable: boolean;
  private readonly clock: Clock;
  private readonly gcWaitMs: number;
  readonly packMaxBytes: number;
  readonly packsDir: string;
  readonly index: PackIndex;
  private readonly hasLoose: boolean;
  private readonly reader: PackReader;
  private readonly pinRegistry: PinRegistry;
  private readonly maintenance: PackMaintenance;

  readonly dir: string;

  /**
   * Opens the store in `dir`, creating its layout where absent. Refuses a store of another format (SNAPSHOT_IO);
   * an assay-blobs/1 store is upgraded in place (its loose blobs stay and are still read).
   */
  constructor(dir: string, options: FsBlobStoreOptions = {}) {
    prepareStoreDir(dir);
    this.dir = dir;
    this.durable = (options.durability ?? 'batch') === 'batch';
    this.clock = options.clock ?? systemClock;
    this.gcWaitMs = options.gcWaitMs ?? 60_000;
    this.packMaxBytes = Math.max(1 << 16, options.packMaxBytes ?? DEFAULT_PACK_MAX);
    this.packsDir = join(dir, 'packs');
    this.index = new PackIndex(join(this.packsDir, 'index'));
    this.hasLoose = fs.existsSync(join(dir, 'blocks'));
    this.reader = new PackReader((pack) => this.packPath(pack));
    this.pinRegistry = new PinRegistry(dir, this.durable);
    this.maintenance = {
      dir,
      packsDir: this.packsDir,
      packMaxBytes: this.packMaxBytes,
      packPath: (pack) => this.packPath(pack),
      index: this.index,
      reader: this.reader,
      durable: this.durable,
      nowMs: () => this.clockNow(),
    };
  }

  static shardOf(cid: CID): string {
    return shardOf(cid);
  }

  /** Where a loose blob of the earlier layout lives. */
  blobPath(cid: CID): string {
    return join(this.dir, 'blocks', shardOf(cid), cid.toString());
  }

  packPath(pack: number): string {
    return join(this.packsDir, packName(pack));
  }

  /** Where a packed blob's bytes are (for tools and tests), or null. */
  locate(cid: CID): { path: string; offset: number; length: number } | null {
    const loc = this.lookup(keyOf(cid), true);
    return loc ? { path: this.packPath(loc.pack), offset: loc.offset, length: loc.length } : null;
  }

  /** The index entry for a key; refreshes the index from disk on a miss when `refresh`. */
  lookup(key: string, refresh: boolean): Loc | undefined {
    if (!this.index.loaded) this.index.refresh();
    let loc = this.index.get(key);
    if (!loc && refresh) {
      this.index.refresh();
      loc = this.index.get(key);
    }
    return loc;
  }

  /** Is the blob present (without refreshing: for the dedup checks of a batch, whose index was refreshed at begin). */
  hasKey(key: string, cid: CID | null): boolean {
    if (this.lookup(key, false)) return true;
    if (!this.hasLoose) return false;
    const c = cid ?? cidOfKey(key);
    if (!c) return false;
    const st = fs.lstatSync(this.blobPath(c), { throwIfNoEntry: false });
    return st !== undefined && st.isFile();
  }

  async has(cid: CID): Promise<boolean> {
    const key = keyOf(cid);
    return this.hasKey(key, cid) || this.lookup(key, true) !== undefined;
  }

  async get(cid: CID): Promise<Uint8Array> {
    const key = keyOf(cid);
    let loc = this.lookup(key, true);
    if (!loc && this.hasLoose) return readBlobFile(cid, this.blobPath(cid));
    if (!loc) throw missingBlob(cid, this.dir);
    try {
      return this.readPacked(cid, key, loc);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      // The pack was compacted away by a garbage collection since the index was read: look again.
      this.reader.dropReadFd(loc.pack);
      this.index.refresh();
      loc = this.index.get(key);
      if (!loc) throw missingBlob(cid, this.dir);
      try {
        return this.readPacked(cid, key, loc);
      } catch (e2) {
        if ((e2 as NodeJS.ErrnoException).code === 'ENOENT') throw missingBlob(cid, this.packPath(loc.pack));
        throw e2;
      }
    }
  }

  /** Reads a packed blob and checks its header and its bytes against the CID asked for. */
  readPacked(cid: CID, key: string, loc: Loc, fd?: number): Uint8Array {
    return this.reader.readPacked(cid, key, loc, fd);
  }

  async begin(): Promise<BlobBatch> {
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
    const writerFile = await registerWriter(this.dir, id, this.clock, this.gcWaitMs);
    // What a collection deleted or moved since this process last looked: dedup must not trust a stale index.
    this.index.refresh();
    return new FsBatch(this, id, writerFile, this.durable);
  }

  async *list(): AsyncIterable<StoredBlob> {
    this.index.refresh();
    const keys = [...this.index.keys()].sort();
    for (const key of keys) {
      const loc = this.index.get(key);
      const cid = cidOfKey(key);
      if (!loc || !cid) continue;
      yield { cid, size: loc.length, mtimeMs: loc.timeMs };
    }
    if (!this.hasLoose) return;
    yield* listLooseBlobs(join(this.dir, 'blocks'), (cid) => this.index.has(keyOf(cid)));
  }

  /**
   * Deletes a blob: a loose file is unlinked; a packed blob gets a tombstone in the index (its bytes stay in the
   * pack until `compact`). Only the garbage collector calls this, holding the GC lock.
   */
  async delete(cid: CID): Promise<boolean> {
    const key = keyOf(cid);
    let found = false;
    if (this.lookup(key, true)) {
      const rec: IndexEntry = { key, pack: TOMBSTONE, offset: 0, length: 0, timeMs: this.clock.now().getTime() };
      try {
        appendRecord(this.index.path, [rec], false);
      } catch (e) {
        throw ioError('deleting', cid.toString(), e);
      }
      this.index.delete(key);
      found = true;
    }
    if (this.hasLoose) {
      try {
        fs.unlinkSync(this.blobPath(cid));
        found = true;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError('deleting', this.blobPath(cid), e);
      }
    }
    return found;
  }

  /**
   * Reclaims the space of deleted blobs; call only while holding the GC lock (no writer is then registered).
   * See compactPacks.
   */
  async compact(): Promise<CompactReport> {
    return compactPacks(this.maintenance);
  }

  clockNow(): number {
    return this.clock.now().getTime();
  }

  writePin(rec: PinRecord): void {
    this.pinRegistry.writePin(rec);
  }

  writeHead(source: string, cid: string): void {
    this.pinRegistry.writeHead(source, cid);
  }

  async pin(rec: PinRecord): Promise<void> {
    this.writePin(rec);
  }

  async unpin(cid: CID): Promise<boolean> {
    return this.pinRegistry.unpin(cid);
  }

  async pins(): Promise<PinRecord[]> {
    return this.pinRegistry.pins();
  }

  async head(source: string): Promise<string | null> {
    return this.pinRegistry.head(source);
  }

  async lockForGc(): Promise<{ release(): Promise<void> }> {
    return acquireGcLock(this.dir, this.clock);
  }

  /**
   * Removes what crashed writers left (call while holding the GC lock): pack files no index entry points into
   * and older than `olderThanMs`, and staged loose files of the earlier layout.
   */
  async cleanupStaging(nowMs: number, olderThanMs: number): Promise<number> {
    const n = removeStalePacks(this.maintenance, nowMs, olderThanMs);
    if (!this.hasLoose) return n;
    return n + removeLooseStaging(join(this.dir, 'blocks'), nowMs, olderThanMs);
  }

  async close(): Promise<void> {
    this.reader.close();
  }
}
