import * as fs from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import { fsyncDirectory, processAlive, processIdentity, systemClock, writeFileAtomic, type Clock } from '@assay/core';
import { CHUNK_SIZE, MAX_NODE_BYTES, RAW_CODE, isFormatCid, type Block } from '../domain/format';
import { ioError, snapshotError } from '../domain/snapshot.errors';
import type { BlobBatch, BlobStore, CompactReport, PackStaging, PinRecord, StoredBlob } from '../ports/blob-store.port';
import { checkBlob, missingBlob } from './memory-blob-store.adapter';
import {
  BLOB_HEADER,
  CID_BYTES,
  ENTRY_BYTES,
  PACK_MAGIC,
  PackIndex,
  RECORD_OVERHEAD,
  TOMBSTONE,
  appendRecord,
  ensureIndexFile,
  packName,
  parsePackName,
  type IndexEntry,
  type Loc,
} from './pack-index';

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

interface OwnerRecord {
  pid: number;
  host: string;
  startedAt: string;
  /**
   * Which process has that pid: `<boot id>:<start time>` (Linux: /proc/sys/kernel/random/boot_id, and field 22 of
   * /proc/<pid>/stat, the start time in clock ticks since boot). Absent where it cannot be read (other systems).
   */
  process?: string;
}

export { processIdentity };

function ownerRecord(clock: Clock): OwnerRecord {
  const identity = processIdentity(process.pid);
  return { pid: process.pid, host: hostname(), startedAt: clock.now().toISOString(), ...(identity ? { process: identity } : {}) };
}

function readOwner(path: string): OwnerRecord | null {
  try {
    const o = JSON.parse(fs.readFileSync(path, 'utf8')) as Partial<OwnerRecord>;
    return typeof o.pid === 'number'
      ? { pid: o.pid, host: String(o.host ?? ''), startedAt: String(o.startedAt ?? ''), ...(typeof o.process === 'string' ? { process: o.process } : {}) }
      : null;
  } catch {
    return null;
  }
}

/**
 * Is the process that wrote this record still running? Records from another host are assumed alive. On this host:
 * a process with that pid must exist and, when the record names the process (`process`), be that one: a pid reused
 * by another process since (a different start time, or a reboot) does not keep a dead writer's record alive.
 */
export function ownerAlive(o: OwnerRecord | null): boolean {
  if (!o) return false;
  if (o.host !== '' && o.host !== hostname()) return true;
  if (!processAlive(o.pid)) return false;
  if (o.process === undefined) return true;
  const now = processIdentity(o.pid);
  return now === null || now === o.process;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const DEFAULT_PACK_MAX = 512 << 20;
/** Appends smaller than this go through the batch's write buffer. */
const WRITE_BUFFER = 1 << 20;
/** Dirty bytes in a pack after which write-back is started in the background (fdatasync off the main thread). */
const BACKGROUND_SYNC_BYTES = 64 << 20;
/** Packs smaller than this are merged by compaction when there are several. */
const SMALL_PACK = 64 << 20;

/** The binary CID of a raw chunk from its digest, as the index's latin1 key. */
function rawKey(digests: Uint8Array, i: number): string {
  return `\x01\x55\x12\x20${Buffer.from(digests.buffer, digests.byteOffset + i * 32, 32).toString('latin1', 0, 32)}`;
}

function keyOf(cid: CID): string {
  return Buffer.from(cid.bytes.buffer, cid.bytes.byteOffset, cid.bytes.byteLength).toString('latin1', 0, cid.bytes.byteLength);
}

function cidOfKey(key: string): CID | null {
  if (key.length !== CID_BYTES) return null;
  try {
    const cid = CID.decode(Buffer.from(key, 'latin1'));
    return isFormatCid(cid) ? cid : null;
  } catch {
    return null;
  }
}

/** Positioned writev off the main thread, continued until every byte is written. */
function writevAll(fd: number, iov: Uint8Array[], at: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const step = (bufs: Uint8Array[], pos: number): void => {
      fs.writev(fd, bufs, pos, (err, n) => {
        if (err) return reject(err);
        let left = n;
        let i = 0;
        while (i < bufs.length && left >= (bufs[i] as Uint8Array).length) left -= (bufs[i++] as Uint8Array).length;
        if (i >= bufs.length) return resolve();
        const rest = bufs.slice(i);
        rest[0] = (rest[0] as Uint8Array).subarray(left);
        step(rest, pos + n);
      });
    };
    step(iov, at);
  });
}

function fdatasyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (e) => (e ? reject(e) : resolve())));
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
  private readonly readFds = new Map<number, number>();

  private constructor(
    readonly dir: string,
    options: FsBlobStoreOptions,
  ) {
    this.durable = (options.durability ?? 'batch') === 'batch';
    this.clock = options.clock ?? systemClock;
    this.gcWaitMs = options.gcWaitMs ?? 60_000;
    this.packMaxBytes = Math.max(1 << 16, options.packMaxBytes ?? DEFAULT_PACK_MAX);
    this.packsDir = join(dir, 'packs');
    this.index = new PackIndex(join(this.packsDir, 'index'));
    this.hasLoose = fs.existsSync(join(dir, 'blocks'));
  }

  static open(dir: string, options: FsBlobStoreOptions = {}): FsBlobStore {
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
    return new FsBlobStore(dir, options);
  }

  static shardOf(cid: CID): string {
    return ((cid.multihash.digest[0] ?? 0) + 0x100).toString(16).slice(1);
  }

  /** Where a loose blob of the earlier layout lives. */
  blobPath(cid: CID): string {
    return join(this.dir, 'blocks', FsBlobStore.shardOf(cid), cid.toString());
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
      this.dropReadFd(loc.pack);
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

  private readFd(pack: number): number {
    let fd = this.readFds.get(pack);
    if (fd === undefined) {
      fd = fs.openSync(this.packPath(pack), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
      if (this.readFds.size >= 64) {
        const [first, firstFd] = this.readFds.entries().next().value as [number, number];
        this.readFds.delete(first);
        fs.closeSync(firstFd);
      }
      this.readFds.set(pack, fd);
    }
    return fd;
  }

  private dropReadFd(pack: number): void {
    const fd = this.readFds.get(pack);
    if (fd !== undefined) {
      this.readFds.delete(pack);
      fs.closeSync(fd);
    }
  }

  /** Reads a packed blob and checks its header and its bytes against the CID asked for. */
  readPacked(cid: CID, key: string, loc: Loc, fd?: number): Uint8Array {
    const where = `${this.packPath(loc.pack)} at offset ${loc.offset}`;
    const limit = cid.code === RAW_CODE ? CHUNK_SIZE : MAX_NODE_BYTES;
    if (loc.length > limit || loc.offset < PACK_MAGIC.length + BLOB_HEADER) {
      throw snapshotError(
        'SNAPSHOT_BLOB_CORRUPT',
        `blob ${cid.toString()} (${where}) is indexed with ${loc.length} bytes, more than the ${limit} a block may have`,
        {
          cid: cid.toString(),
          where,
        },
      );
    }
    const buf = Buffer.allocUnsafe(BLOB_HEADER + loc.length);
    const f = fd ?? this.readFd(loc.pack);
    let n = 0;
    while (n < buf.length) {
      const r = fs.readSync(f, buf, n, buf.length - n, loc.offset - BLOB_HEADER + n);
      if (r === 0) break;
      n += r;
    }
    if (n < buf.length) {
      throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${where}) is cut short: ${n - BLOB_HEADER} of ${loc.length} bytes`, {
        cid: cid.toString(),
        where,
      });
    }
    if (buf.toString('latin1', 0, CID_BYTES) !== key || buf.readUInt32LE(CID_BYTES) !== loc.length) {
      throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${where}): the pack's header there names another blob`, {
        cid: cid.toString(),
        where,
      });
    }
    const bytes = new Uint8Array(buf.buffer, buf.byteOffset + BLOB_HEADER, loc.length);
    checkBlob(cid, bytes, where);
    return bytes;
  }

  async begin(): Promise<BlobBatch> {
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
    const writerFile = join(this.dir, 'writers', `${id}.json`);
    const me: OwnerRecord = ownerRecord(this.clock);
    writeFileAtomic(writerFile, JSON.stringify(me), { durable: false });
    // Registered first, then check for a collector: one of the two always sees the other.
    const lock = join(this.dir, 'gc.lock');
    const deadline = Date.now() + this.gcWaitMs;
    for (;;) {
      const owner = fs.existsSync(lock) ? readOwner(lock) : null;
      if (!fs.existsSync(lock) || (owner && !ownerAlive(owner))) break;
      if (Date.now() >= deadline) {
        fs.rmSync(writerFile, { force: true });
        throw snapshotError('SNAPSHOT_STORE_BUSY', `the blob store ${this.dir} is being garbage collected (${lock}); try again later`, {
          lock,
        });
      }
      await sleep(100);
    }
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
    const blocks = join(this.dir, 'blocks');
    for (const shard of fs.readdirSync(blocks).sort()) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of fs.readdirSync(join(blocks, shard)).sort()) {
        let cid: CID;
        try {
          cid = CID.parse(name);
        } catch {
          continue;
        }
        if (!isFormatCid(cid) || cid.toString() !== name || FsBlobStore.shardOf(cid) !== shard) continue;
        if (this.index.has(keyOf(cid))) continue;
        const st = fs.lstatSync(join(blocks, shard, name), { throwIfNoEntry: false });
        if (!st || !st.isFile()) continue;
        yield { cid, size: st.size, mtimeMs: st.mtimeMs };
      }
    }
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
   * Packs no index entry points into are removed; packs holding dead bytes, and small packs when there are several,
   * are rewritten: their live blobs (each checked against its CID; a pack holding a corrupt blob is left alone) are
   * copied into new packs, which are fdatasync'ed, then one index record moves the blobs there and is fdatasync'ed,
   * and only then are the old packs removed. The index file itself is rewritten (temp file, fsync, rename) when
   * most of its entries are superseded. A crash at any point leaves every index entry pointing at intact bytes.
   */
  async compact(): Promise<CompactReport> {
    this.index.refresh();
    const live = new Map<number, Array<{ key: string; loc: Loc }>>();
    for (const [key, loc] of this.index.entries()) {
      let l = live.get(loc.pack);
      if (!l) live.set(loc.pack, (l = []));
      l.push({ key, loc });
    }
    const sizes = new Map<number, number>();
    for (const name of fs.readdirSync(this.packsDir)) {
      const n = parsePackName(name);
      if (n === null) continue;
      const st = fs.lstatSync(join(this.packsDir, name), { throwIfNoEntry: false });
      if (st?.isFile()) sizes.set(n, st.size);
    }
    let packsRemoved = 0;
    let bytesReclaimed = 0;
    const drop: number[] = [];
    const rewrite: number[] = [];
    let small = 0;
    for (const [pack, size] of sizes) {
      const blobs = live.get(pack);
      if (!blobs) {
        drop.push(pack);
        continue;
      }
      const used = PACK_MAGIC.length + blobs.reduce((s, b) => s + BLOB_HEADER + b.loc.length, 0);
      if (used < size) rewrite.push(pack);
      else if (size < SMALL_PACK) small += 1;
    }
    if (small >= 2) {
      for (const [pack, size] of sizes) if (live.has(pack) && size < SMALL_PACK && !rewrite.includes(pack)) rewrite.push(pack);
    }
    let packsRewritten = 0;
    if (rewrite.length > 0) {
      const w = new PackWriter(this, this.durable);
      const moved: IndexEntry[] = [];
      const done: number[] = [];
      const now = this.clock.now().getTime();
      try {
        for (const pack of rewrite.sort((a, b) => a - b)) {
          const blobs = (live.get(pack) ?? []).sort((a, b) => a.loc.offset - b.loc.offset);
          let fd: number;
          try {
            fd = fs.openSync(this.packPath(pack), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
          } catch {
            continue;
          }
          const entries: IndexEntry[] = [];
          let ok = true;
          try {
            for (const b of blobs) {
              const cid = cidOfKey(b.key);
              if (!cid) continue;
              let bytes: Uint8Array;
              try {
                bytes = this.readPacked(cid, b.key, b.loc, fd);
              } catch {
                ok = false; // a damaged blob: keep the whole pack as it is, for `verify` to report
                break;
              }
              const at = w.append(b.key, bytes);
              entries.push({ key: b.key, pack: at.pack, offset: at.offset, length: bytes.length, timeMs: b.loc.timeMs || now });
            }
          } finally {
            fs.closeSync(fd);
          }
          if (!ok) continue;
          moved.push(...entries);
          done.push(pack);
        }
        await w.finish();
        appendRecord(this.index.path, moved, this.durable);
      } catch (e) {
        w.discard();
        throw ioError('compacting the packs of', this.dir, e);
      }
      w.close();
      for (const e of moved) this.index.apply(e);
      for (const pack of done) {
        drop.push(pack);
        packsRewritten += 1;
      }
      bytesReclaimed -= w.bytesWritten;
    }
    for (const pack of drop) {
      this.dropReadFd(pack);
      try {
        fs.unlinkSync(this.packPath(pack));
        packsRemoved += 1;
        bytesReclaimed += sizes.get(pack) ?? 0;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError('removing', this.packPath(pack), e);
      }
    }
    if (drop.length > 0 && this.durable) fsyncDirectory(this.packsDir);
    this.rewriteIndexIfBloated();
    return { packsRewritten, packsRemoved, bytesReclaimed: Math.max(0, bytesReclaimed) };
  }

  /** Writes the live entries to a fresh index file and renames it over the old one, when that saves most of it. */
  private rewriteIndexIfBloated(): void {
    const st = fs.statSync(this.index.path);
    const liveBytes = this.index.size * ENTRY_BYTES + RECORD_OVERHEAD;
    if (st.size < 1 << 16 || st.size < 2 * liveBytes) return;
    const entries: IndexEntry[] = [];
    for (const [key, loc] of this.index.entries()) entries.push({ key, ...loc });
    const tmp = `${this.index.path}.tmp-${randomBytes(6).toString('hex')}`;
    try {
      const fd = fs.openSync(tmp, 'wx', 0o644);
      try {
        fs.writeSync(fd, Buffer.from('ASXIDX01'));
      } finally {
        fs.closeSync(fd);
      }
      appendRecord(tmp, entries, this.durable);
      fs.renameSync(tmp, this.index.path);
      if (this.durable) fsyncDirectory(this.packsDir);
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw ioError('rewriting the index of', this.dir, e);
    }
    this.index.refresh();
  }

  clockNow(): number {
    return this.clock.now().getTime();
  }

  private pinPath(cid: string): string {
    return join(this.dir, 'roots', `${cid}.json`);
  }

  writePin(rec: PinRecord): void {
    writeFileAtomic(this.pinPath(rec.cid), `${JSON.stringify(rec)}\n`, { durable: this.durable });
  }

  writeHead(source: string, cid: string): void {
    const name = createHash('sha256').update(source).digest('hex');
    writeFileAtomic(join(this.dir, 'heads', `${name}.json`), `${JSON.stringify({ source, cid })}\n`, { durable: this.durable });
  }

  async pin(rec: PinRecord): Promise<void> {
    this.writePin(rec);
  }

  async unpin(cid: CID): Promise<boolean> {
    try {
      fs.unlinkSync(this.pinPath(cid.toString()));
      if (this.durable) fsyncDirectory(join(this.dir, 'roots'));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw ioError('unpinning', cid.toString(), e);
    }
  }

  async pins(): Promise<PinRecord[]> {
    const out: PinRecord[] = [];
    for (const name of fs.readdirSync(join(this.dir, 'roots')).sort()) {
      if (!name.endsWith('.json')) continue;
      const cid = name.slice(0, -5);
      let rec: Partial<PinRecord> = {};
      try {
        rec = JSON.parse(fs.readFileSync(join(this.dir, 'roots', name), 'utf8')) as Partial<PinRecord>;
      } catch {
        // A damaged pin record still pins its CID.
      }
      out.push({
        cid,
        createdAt: typeof rec.createdAt === 'string' ? rec.createdAt : '',
        source: typeof rec.source === 'string' ? rec.source : null,
        origin: rec.origin === 'import' || rec.origin === 'pin' ? rec.origin : 'snapshot',
      });
    }
    return out;
  }

  async head(source: string): Promise<string | null> {
    const name = createHash('sha256').update(source).digest('hex');
    try {
      const h = JSON.parse(fs.readFileSync(join(this.dir, 'heads', `${name}.json`), 'utf8')) as { source?: unknown; cid?: unknown };
      return h.source === source && typeof h.cid === 'string' ? h.cid : null;
    } catch {
      return null;
    }
  }

  async lockForGc(): Promise<{ release(): Promise<void> }> {
    const lock = join(this.dir, 'gc.lock');
    const me: OwnerRecord = ownerRecord(this.clock);
    for (let attempt = 0; ; attempt++) {
      try {
        const fd = fs.openSync(lock, 'wx', 0o644);
        fs.writeSync(fd, JSON.stringify(me));
        fs.closeSync(fd);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError('creating', lock, e);
        const owner = readOwner(lock);
        if (attempt === 0 && !ownerAlive(owner)) {
          fs.rmSync(lock, { force: true }); // left by a collector that died
          continue;
        }
        throw snapshotError('SNAPSHOT_STORE_BUSY', `another garbage collection holds ${lock} (pid ${owner?.pid ?? '?'})`, { lock });
      }
    }
    const release = async () => {
      fs.rmSync(lock, { force: true });
    };
    // Lock recorded first, then look for writers.
    const writersDir = join(this.dir, 'writers');
    for (const name of fs.readdirSync(writersDir)) {
      const path = join(writersDir, name);
      if (name.includes('.tmp-')) {
        // A registration cut short by a crash (a live writer renames its record within microseconds).
        if (Date.now() - (fs.statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 60_000) fs.rmSync(path, { force: true });
        continue;
      }
      const owner = readOwner(path);
      if (ownerAlive(owner)) {
        await release();
        throw snapshotError(
          'SNAPSHOT_STORE_BUSY',
          `a snapshot writer is active (pid ${owner?.pid}, since ${owner?.startedAt}); garbage collection must wait for it`,
          { writer: name },
        );
      }
      if (owner || Date.now() - (fs.statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0) > 60_000) {
        fs.rmSync(path, { force: true }); // a writer that died
      }
    }
    return { release };
  }

  /**
   * Removes what crashed writers left (call while holding the GC lock): pack files no index entry points into
   * and older than `olderThanMs`, and staged loose files of the earlier layout.
   */
  async cleanupStaging(nowMs: number, olderThanMs: number): Promise<number> {
    let n = 0;
    this.index.refresh();
    const used = new Set<number>();
    for (const [, loc] of this.index.entries()) used.add(loc.pack);
    for (const name of fs.readdirSync(this.packsDir)) {
      const pack = parsePackName(name);
      if (pack === null || used.has(pack)) continue;
      const st = fs.lstatSync(join(this.packsDir, name), { throwIfNoEntry: false });
      if (!st || nowMs - st.mtimeMs < olderThanMs) continue;
      this.dropReadFd(pack);
      fs.rmSync(join(this.packsDir, name), { force: true });
      n += 1;
    }
    for (const name of fs.readdirSync(this.packsDir)) {
      if (!name.startsWith('index.tmp-')) continue;
      const st = fs.lstatSync(join(this.packsDir, name), { throwIfNoEntry: false });
      if (st && nowMs - st.mtimeMs >= olderThanMs) {
        fs.rmSync(join(this.packsDir, name), { force: true });
        n += 1;
      }
    }
    if (!this.hasLoose) return n;
    const blocks = join(this.dir, 'blocks');
    for (const shard of fs.readdirSync(blocks)) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of fs.readdirSync(join(blocks, shard))) {
        if (!name.startsWith('.tmp.')) continue;
        const st = fs.lstatSync(join(blocks, shard, name), { throwIfNoEntry: false });
        if (!st || nowMs - st.mtimeMs < olderThanMs) continue;
        fs.rmSync(join(blocks, shard, name), { force: true });
        n += 1;
      }
    }
    return n;
  }

  async close(): Promise<void> {
    for (const fd of this.readFds.values()) fs.closeSync(fd);
    this.readFds.clear();
  }
}

/** Reads one loose blob file (earlier layout) and checks it against its CID (never follows a symlink, bounds the size first). */
export function readBlobFile(cid: CID, path: string): Uint8Array {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw missingBlob(cid, path);
    throw snapshotError('SNAPSHOT_BLOB_CORRUPT', `blob ${cid.toString()} (${path}) cannot be opened: ${(e as Error).message}`, {
      cid: cid.toString(),
      where: path,
    });
  }
  try {
    const st = fs.fstatSync(fd);
    const limit = cid.code === RAW_CODE ? CHUNK_SIZE : MAX_NODE_BYTES;
    if (!st.isFile() || st.size > limit) {
      throw snapshotError(
        'SNAPSHOT_BLOB_CORRUPT',
        `blob ${cid.toString()} (${path}) is ${st.isFile() ? `${st.size} bytes, more than the ${limit} a block may have` : 'not a regular file'}`,
        { cid: cid.toString(), where: path },
      );
    }
    const buf = Buffer.allocUnsafe(st.size);
    let n = 0;
    while (n < st.size) {
      const r = fs.readSync(fd, buf, n, st.size - n, n);
      if (r === 0) break;
      n += r;
    }
    const bytes = new Uint8Array(buf.buffer, buf.byteOffset, n);
    checkBlob(cid, bytes, path);
    return bytes;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Appends blobs to pack files this writer owns (created O_EXCL under a random number), rolling over to a new pack
 * at the store's `packMaxBytes`. Small appends are buffered; write-back of big batches is started in the
 * background (an fdatasync on libuv's thread pool) so that the flush at commit has little left to do.
 */
class PackWriter {
  readonly packs: number[] = [];
  bytesWritten = 0;
  private fd = -1;
  private pack = -1;
  /** File size of the current pack, buffered bytes included. */
  private size = 0;
  private readonly fds: number[] = [];
  private buf = Buffer.allocUnsafe(WRITE_BUFFER);
  private bufLen = 0;
  /** File offset of buf[0]. */
  private bufPos = 0;
  private dirty = 0;
  private background: Promise<void> | null = null;
  private failed: unknown = null;
  /** Positioned writes still running on libuv's thread pool (the main thread never copies the chunks). */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly store: FsBlobStore,
    private readonly durable: boolean,
  ) {}

  /**
   * Appends many blobs with positioned writes that run off the main thread; `release` is called once none of
   * their bytes is needed any more. Returns where each blob's bytes are.
   */
  appendMany(items: ReadonlyArray<{ key: string; data: Uint8Array }>, release: (() => void) | null): Array<{ pack: number; offset: number }> {
    const out: Array<{ pack: number; offset: number }> = [];
    let iov: Uint8Array[] = [];
    let iovAt = 0;
    let iovFd = -1;
    const writes: Array<Promise<void>> = [];
    const issue = () => {
      if (iov.length === 0) return;
      writes.push(writevAll(iovFd, iov, iovAt));
      iov = [];
    };
    for (const { key, data } of items) {
      const need = BLOB_HEADER + data.length;
      if (this.fd < 0 || this.size + need > this.store.packMaxBytes) {
        issue();
        if (this.fd >= 0) this.startBackgroundSync(true);
        this.roll();
      }
      if (iov.length === 0) {
        this.flushBuffer();
        iovAt = this.bufPos;
        iovFd = this.fd;
      }
      const header = Buffer.allocUnsafe(BLOB_HEADER);
      header.write(key, 0, CID_BYTES, 'latin1');
      header.writeUInt32LE(data.length, CID_BYTES);
      iov.push(header, data);
      out.push({ pack: this.pack, offset: this.bufPos + BLOB_HEADER });
      this.bufPos += need;
      this.size += need;
      this.bytesWritten += need;
      this.dirty += need;
      if (iov.length >= 512) issue();
    }
    issue();
    const all = Promise.all(writes).then(
      () => undefined,
      (e: unknown) => {
        this.failed ??= e;
      },
    );
    this.pending.add(all);
    void all.then(() => {
      this.pending.delete(all);
      release?.();
    });
    if (this.dirty >= BACKGROUND_SYNC_BYTES) this.startBackgroundSync(false);
    return out;
  }

  /** Waits for the positioned writes in flight. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    if (this.failed) throw this.failed;
  }

  private roll(): void {
    this.flushBuffer();
    for (let attempt = 0; ; attempt++) {
      const n = randomBytes(4).readUInt32LE(0);
      if (n === TOMBSTONE) continue;
      try {
        this.fd = fs.openSync(this.store.packPath(n), fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o444);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST' && attempt < 16) continue;
        throw e;
      }
      this.pack = n;
      break;
    }
    this.packs.push(this.pack);
    this.fds.push(this.fd);
    PACK_MAGIC.copy(this.buf, 0);
    this.bufLen = PACK_MAGIC.length;
    this.bufPos = 0;
    this.size = PACK_MAGIC.length;
    this.bytesWritten += PACK_MAGIC.length;
  }

  private flushBuffer(): void {
    if (this.bufLen === 0) return;
    let off = 0;
    while (off < this.bufLen) off += fs.writeSync(this.fd, this.buf, off, this.bufLen - off, this.bufPos + off);
    this.bufPos += this.bufLen;
    this.bufLen = 0;
  }

  /** Appends one blob (header, bytes) through the write buffer, or directly when large. Returns where its bytes are. */
  append(key: string, data: Uint8Array): { pack: number; offset: number } {
    if (this.fd < 0 || this.size + BLOB_HEADER + data.length > this.store.packMaxBytes) {
      if (this.fd >= 0) this.startBackgroundSync(true);
      this.roll();
    }
    const need = BLOB_HEADER + data.length;
    if (this.bufLen + need > this.buf.length) this.flushBuffer();
    const at = this.bufPos + this.bufLen;
    if (need <= this.buf.length) {
      this.buf.write(key, this.bufLen, CID_BYTES, 'latin1');
      this.buf.writeUInt32LE(data.length, this.bufLen + CID_BYTES);
      this.buf.set(data, this.bufLen + BLOB_HEADER);
      this.bufLen += need;
    } else {
      const header = Buffer.allocUnsafe(BLOB_HEADER);
      header.write(key, 0, CID_BYTES, 'latin1');
      header.writeUInt32LE(data.length, CID_BYTES);
      const parts = [header, data];
      let done = 0;
      while (done < need) {
        const n = done === 0 ? fs.writevSync(this.fd, parts, at) : fs.writeSync(this.fd, data, done - BLOB_HEADER, need - done, at + done);
        done += n;
        if (done > 0 && done < BLOB_HEADER) throw new Error(`short write to ${this.store.packPath(this.pack)}`);
      }
      this.bufPos = at + need;
    }
    this.size += need;
    this.bytesWritten += need;
    this.dirty += need;
    if (this.dirty >= BACKGROUND_SYNC_BYTES) this.startBackgroundSync(false);
    return { pack: this.pack, offset: at + BLOB_HEADER };
  }

  private startBackgroundSync(force: boolean): void {
    if (!this.durable || (this.background && !force)) return;
    this.flushBuffer();
    this.dirty = 0;
    const fd = this.fd;
    const prev = Promise.all([this.background, ...this.pending]);
    this.background = prev.then(() =>
      fdatasyncAsync(fd).catch((e: unknown) => {
        this.failed ??= e;
      }),
    );
    const mine = this.background;
    void mine.then(() => {
      if (this.background === mine) this.background = null;
    });
  }

  /** Makes everything written readable at its offset (flushes the write buffer, waits for writes in flight). */
  async readable(): Promise<void> {
    this.flushBuffer();
    await this.drain();
  }

  /** The file descriptor of a pack this writer wrote. */
  fdOf(pack: number): number {
    const i = this.packs.indexOf(pack);
    return this.fds[i] as number;
  }

  /** Everything written is on disk: packs fdatasync'ed, their directory entries fsync'ed. */
  async finish(): Promise<void> {
    this.flushBuffer();
    await this.drain();
    if (this.background) await this.background;
    if (this.failed) throw this.failed;
    if (!this.durable || this.fds.length === 0) return;
    await Promise.all(this.fds.map((fd) => fdatasyncAsync(fd)));
    fsyncDirectory(this.store.packsDir);
  }

  close(): void {
    for (const fd of this.fds.splice(0)) fs.closeSync(fd);
    this.fd = -1;
  }

  /** Closes and removes every pack this writer created. */
  discard(): void {
    this.close();
    for (const p of this.packs) fs.rmSync(this.store.packPath(p), { force: true });
  }

  async settle(): Promise<void> {
    await this.drain().catch(() => undefined);
    if (this.background) await this.background.catch(() => undefined);
  }
}

class FsBatch implements BlobBatch {
  readonly added = { blobs: 0, bytes: 0 };
  private readonly staged = new Map<string, IndexEntry>();
  private open = true;
  private readonly writer: PackWriter;
  /** Packs written by the hashing threads for this batch. */
  private readonly adopted = new Set<number>();
  private tableBuf: SharedArrayBuffer | null = null;

  constructor(
    private readonly store: FsBlobStore,
    readonly id: string,
    private readonly writerFile: string,
    private readonly durable: boolean,
  ) {
    this.writer = new PackWriter(store, durable);
  }

  private alive(): void {
    if (!this.open) throw snapshotError('SNAPSHOT_IO', 'the blob batch is already committed or aborted');
  }

  async has(cid: CID): Promise<boolean> {
    const key = keyOf(cid);
    return this.staged.has(key) || this.store.hasKey(key, cid);
  }

  private add(key: string, data: Uint8Array): void {
    const at = this.writer.append(key, data);
    this.staged.set(key, { key, pack: at.pack, offset: at.offset, length: data.length, timeMs: 0 });
    this.added.blobs += 1;
    this.added.bytes += data.length;
  }

  async put(block: Block): Promise<boolean> {
    this.alive();
    const key = keyOf(block.cid);
    if (this.staged.has(key) || this.store.hasKey(key, block.cid)) return false;
    try {
      this.add(key, block.bytes);
    } catch (e) {
      throw ioError('writing a pack of', this.store.dir, e);
    }
    return true;
  }

  putRawChunks(data: Uint8Array, lengths: readonly number[], digests: Uint8Array, release?: () => void): number {
    this.alive();
    let off = 0;
    let bytes = 0;
    const items: Array<{ key: string; data: Uint8Array }> = [];
    try {
      for (let i = 0; i < lengths.length; i++) {
        const len = lengths[i] as number;
        const key = rawKey(digests, i);
        if (!this.staged.has(key) && !this.store.hasKey(key, null)) {
          // Reserve the key now, so a duplicate later in this same call is skipped.
          this.staged.set(key, { key, pack: -1, offset: 0, length: len, timeMs: 0 });
          items.push({ key, data: data.subarray(off, off + len) });
          bytes += len;
        }
        off += len;
      }
      const at = this.writer.appendMany(items, release ?? null);
      items.forEach((it, i) => {
        const where = at[i] as { pack: number; offset: number };
        this.staged.set(it.key, { key: it.key, pack: where.pack, offset: where.offset, length: it.data.length, timeMs: 0 });
      });
    } catch (e) {
      for (const it of items) if (this.staged.get(it.key)?.pack === -1) this.staged.delete(it.key);
      throw ioError('writing a pack of', this.store.dir, e);
    }
    this.added.blobs += items.length;
    this.added.bytes += bytes;
    return bytes;
  }

  async get(cid: CID): Promise<Uint8Array> {
    const key = keyOf(cid);
    const s = this.staged.get(key);
    if (s) {
      await this.writer.readable();
      if (this.adopted.has(s.pack)) return this.store.readPacked(cid, key, s);
      return this.store.readPacked(cid, key, s, this.writer.fdOf(s.pack));
    }
    return this.store.get(cid);
  }

  packStaging(): PackStaging {
    return {
      dir: this.store.packsDir,
      batch: this.id,
      maxBytes: this.store.packMaxBytes,
      table: () => (this.tableBuf ??= this.buildTable()),
      adopt: (newPacks, written, digests) => this.adopt(newPacks, written, digests),
    };
  }

  /** The raw blobs in the index (open addressing, 32-byte slots), for the threads' dedup. */
  private buildTable(): SharedArrayBuffer {
    const raw: string[] = [];
    for (const key of this.store.index.keys()) if (key.charCodeAt(1) === RAW_CODE) raw.push(key);
    let slots = 1024;
    while (slots < raw.length * 2) slots *= 2;
    const sab = new SharedArrayBuffer(slots * 32);
    const tab = Buffer.from(sab);
    for (const key of raw) {
      let i = ((key.charCodeAt(4) | (key.charCodeAt(5) << 8) | (key.charCodeAt(6) << 16) | (key.charCodeAt(7) << 24)) >>> 0) & (slots - 1);
      while (tab.readUInt32LE(i * 32) !== 0 || tab.readUInt32LE(i * 32 + 4) !== 0) i = (i + 1) & (slots - 1);
      tab.write(key.slice(4), i * 32, 32, 'latin1');
    }
    return sab;
  }

  private adopt(newPacks: readonly number[], written: readonly number[], digests: Uint8Array): void {
    for (const p of newPacks) this.adopted.add(p);
    for (let k = 0; k * 4 < written.length; k++) {
      const key = rawKey(digests, k);
      const pack = written[k * 4] as number;
      if (this.staged.has(key) || this.store.hasKey(key, null)) continue; // written twice (two threads): dead bytes
      const length = written[k * 4 + 2] as number;
      this.staged.set(key, { key, pack, offset: written[k * 4 + 1] as number, length, timeMs: 0 });
      this.added.blobs += 1;
      this.added.bytes += length;
    }
  }

  async commit(opts: { pins?: readonly PinRecord[]; heads?: ReadonlyArray<{ source: string; cid: string }> } = {}): Promise<void> {
    this.alive();
    try {
      if (this.staged.size === 0) {
        for (const p of this.adopted) fs.rmSync(this.store.packPath(p), { force: true });
        this.adopted.clear();
      } else {
        // 1. Pack bytes durable. 2. One index record, durable. Only then the pins and heads.
        await this.writer.finish();
        // Thread packs holding only chunks another thread also wrote: nothing will point into them.
        const referenced = new Set<number>();
        for (const e of this.staged.values()) referenced.add(e.pack);
        for (const p of [...this.adopted]) {
          if (referenced.has(p)) continue;
          fs.rmSync(this.store.packPath(p), { force: true });
          this.adopted.delete(p);
        }
        if (this.durable && this.adopted.size > 0) {
          await Promise.all(
            [...this.adopted].map(async (p) => {
              const fd = fs.openSync(this.store.packPath(p), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
              try {
                await fdatasyncAsync(fd);
              } finally {
                fs.closeSync(fd);
              }
            }),
          );
          fsyncDirectory(this.store.packsDir);
        }
        const now = this.store.clockNow();
        const entries = [...this.staged.values()].map((e) => ({ ...e, timeMs: now }));
        appendRecord(this.store.index.path, entries, this.durable);
        // The next process loads the table in one read (a cache: failures only cost that process a full read).
        this.store.index.refresh();
        this.store.index.saveTable();
      }
      this.writer.close();
      for (const p of opts.pins ?? []) this.store.writePin(p);
      for (const h of opts.heads ?? []) this.store.writeHead(h.source, h.cid);
    } catch (e) {
      await this.abort();
      throw e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('SNAPSHOT_')
        ? e
        : ioError('committing blobs to', this.store.dir, e);
    }
    this.open = false;
    fs.rmSync(this.writerFile, { force: true });
  }

  async abort(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    await this.writer.settle();
    // Packs are this batch's own: removed whole. (If the index record was already appended, the blobs are
    // complete and durable; their packs are then kept.)
    if (!this.committedIndex()) {
      this.writer.discard();
      for (const p of this.adopted) fs.rmSync(this.store.packPath(p), { force: true });
    } else this.writer.close();
    fs.rmSync(this.writerFile, { force: true });
  }

  private committedIndex(): boolean {
    const first = this.staged.values().next().value as IndexEntry | undefined;
    if (!first) return false;
    this.store.index.refresh();
    const loc = this.store.index.get(first.key);
    return loc !== undefined && loc.pack === first.pack && loc.offset === first.offset;
  }
}
