import * as fs from 'node:fs';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import { systemClock, type Clock } from '@assay/core';
import { CHUNK_SIZE, MAX_NODE_BYTES, RAW_CODE, isFormatCid, type Block } from '../domain/format';
import { ioError, snapshotError } from '../domain/snapshot.errors';
import type { BlobBatch, BlobStore, FsStaging, PinRecord, StoredBlob } from '../ports/blob-store.port';
import { checkBlob, missingBlob } from './memory-blob-store.adapter';

export const FS_STORE_FORMAT = 'assay-blobs/1';

/**
 * Batches of at most this many new blobs are made durable with one fsync per blob and per shard directory;
 * larger ones with one syncfs of the store's file system (cheaper than thousands of fsyncs, but it also
 * flushes whatever else is dirty on that file system).
 */
const FEW_BLOBS = 32;

export interface FsBlobStoreOptions {
  /**
   * `batch` (default): a commit makes the batch's blobs durable before publishing them under their final names
   * (one syncfs through `sync -f` for a large batch, an fsync per blob for a handful), then makes the names
   * durable, and only then writes the pins (fsync'ed). Blobs are never fsync'ed one by one as they are written. `none`: no flush (a
   * crash may lose recent blobs, never publish a partial one). Tests and throwaway stores only.
   */
  readonly durability?: 'batch' | 'none';
  readonly clock?: Clock;
  /** How long `begin` waits for a running garbage collection before failing (default 60 s). */
  readonly gcWaitMs?: number;
}

/** Flush the file system holding `path`: one syncfs for a whole batch. */
export function syncFileSystem(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('sync', ['-f', path], { timeout: 600_000 }, (err) => (err ? reject(err) : resolve()));
  });
}

function fsyncPath(path: string): void {
  const fd = fs.openSync(path, fs.constants.O_RDONLY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Write-temp, fsync, rename, fsync the directory: for the small records (pins, heads). */
function writeDurable(path: string, text: string, durable: boolean): void {
  const tmp = `${path}.tmp-${randomBytes(6).toString('hex')}`;
  const fd = fs.openSync(tmp, 'wx', 0o644);
  try {
    fs.writeSync(fd, text);
    if (durable) fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, path);
  if (durable) fsyncPath(join(path, '..'));
}

function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

interface OwnerRecord {
  pid: number;
  host: string;
  startedAt: string;
}

function readOwner(path: string): OwnerRecord | null {
  try {
    const o = JSON.parse(fs.readFileSync(path, 'utf8')) as Partial<OwnerRecord>;
    return typeof o.pid === 'number' ? { pid: o.pid, host: String(o.host ?? ''), startedAt: String(o.startedAt ?? '') } : null;
  } catch {
    return null;
  }
}

/** Is the process that wrote this record still running? (Records from another host are assumed alive.) */
function ownerAlive(o: OwnerRecord | null): boolean {
  if (!o) return false;
  if (o.host !== '' && o.host !== hostname()) return true;
  return alive(o.pid);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The blob store on disk:
 *
 * ```
 * <dir>/store.json            {"format": "assay-blobs/1"}
 * <dir>/blocks/<xx>/<cid>     one file per blob, named by its CID (base32); xx = hex of the digest's first byte
 * <dir>/blocks/<xx>/.tmp.<batch>.<cid>   a batch's staged blob, renamed to its final name on commit
 * <dir>/roots/<cid>.json      pins (GC roots)
 * <dir>/heads/<sha256>.json   the last snapshot per source label
 * <dir>/writers/<batch>.json  registered writers (pid, host, start)
 * <dir>/gc.lock               held during garbage collection
 * ```
 */
export class FsBlobStore implements BlobStore {
  private readonly durable: boolean;
  private readonly clock: Clock;

  private constructor(
    readonly dir: string,
    options: FsBlobStoreOptions,
  ) {
    this.durable = (options.durability ?? 'batch') === 'batch';
    this.clock = options.clock ?? systemClock;
    this.gcWaitMs = options.gcWaitMs ?? 60_000;
  }

  private readonly gcWaitMs: number;

  static open(dir: string, options: FsBlobStoreOptions = {}): FsBlobStore {
    try {
      for (const d of ['blocks', 'roots', 'heads', 'writers']) fs.mkdirSync(join(dir, d), { recursive: true });
      const have = new Set(fs.readdirSync(join(dir, 'blocks')));
      for (let i = 0; i < 256; i++) {
        const shard = (i + 0x100).toString(16).slice(1);
        if (!have.has(shard)) fs.mkdirSync(join(dir, 'blocks', shard), { recursive: true });
      }
      const marker = join(dir, 'store.json');
      if (fs.existsSync(marker)) {
        const m = JSON.parse(fs.readFileSync(marker, 'utf8')) as { format?: unknown };
        if (m.format !== FS_STORE_FORMAT) {
          throw snapshotError('SNAPSHOT_IO', `${dir} holds a blob store of format ${String(m.format)}, expected ${FS_STORE_FORMAT}`);
        }
      } else {
        writeDurable(marker, `${JSON.stringify({ format: FS_STORE_FORMAT })}\n`, false);
      }
    } catch (e) {
      if (e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('SNAPSHOT_')) throw e;
      throw ioError('opening the blob store at', dir, e);
    }
    return new FsBlobStore(dir, options);
  }

  static shardOf(cid: CID): string {
    return ((cid.multihash.digest[0] ?? 0) + 0x100).toString(16).slice(1);
  }

  blobPath(cid: CID): string {
    return join(this.dir, 'blocks', FsBlobStore.shardOf(cid), cid.toString());
  }

  async has(cid: CID): Promise<boolean> {
    const st = fs.lstatSync(this.blobPath(cid), { throwIfNoEntry: false });
    return st !== undefined && st.isFile();
  }

  async get(cid: CID): Promise<Uint8Array> {
    return readBlobFile(cid, this.blobPath(cid));
  }

  async begin(): Promise<BlobBatch> {
    const id = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
    const writerFile = join(this.dir, 'writers', `${id}.json`);
    const me: OwnerRecord = { pid: process.pid, host: hostname(), startedAt: this.clock.now().toISOString() };
    writeDurable(writerFile, JSON.stringify(me), false);
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
    return new FsBatch(this, id, writerFile, this.durable);
  }

  async *list(): AsyncIterable<StoredBlob> {
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
        const st = fs.lstatSync(join(blocks, shard, name), { throwIfNoEntry: false });
        if (!st || !st.isFile()) continue;
        yield { cid, size: st.size, mtimeMs: st.mtimeMs };
      }
    }
  }

  async delete(cid: CID): Promise<boolean> {
    try {
      fs.unlinkSync(this.blobPath(cid));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw ioError('deleting', this.blobPath(cid), e);
    }
  }

  private pinPath(cid: string): string {
    return join(this.dir, 'roots', `${cid}.json`);
  }

  writePin(rec: PinRecord): void {
    writeDurable(this.pinPath(rec.cid), `${JSON.stringify(rec)}\n`, this.durable);
  }

  writeHead(source: string, cid: string): void {
    const name = createHash('sha256').update(source).digest('hex');
    writeDurable(join(this.dir, 'heads', `${name}.json`), `${JSON.stringify({ source, cid })}\n`, this.durable);
  }

  async pin(rec: PinRecord): Promise<void> {
    this.writePin(rec);
  }

  async unpin(cid: CID): Promise<boolean> {
    try {
      fs.unlinkSync(this.pinPath(cid.toString()));
      if (this.durable) fsyncPath(join(this.dir, 'roots'));
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
    const me: OwnerRecord = { pid: process.pid, host: hostname(), startedAt: this.clock.now().toISOString() };
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

  async cleanupStaging(nowMs: number, olderThanMs: number): Promise<number> {
    const blocks = join(this.dir, 'blocks');
    const live = new Map<string, boolean>();
    let n = 0;
    for (const shard of fs.readdirSync(blocks)) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of fs.readdirSync(join(blocks, shard))) {
        if (!name.startsWith('.tmp.')) continue;
        const batch = name.split('.')[2] ?? '';
        let isLive = live.get(batch);
        if (isLive === undefined) {
          isLive = ownerAlive(readOwner(join(this.dir, 'writers', `${batch}.json`)));
          live.set(batch, isLive);
        }
        if (isLive) continue;
        const st = fs.lstatSync(join(blocks, shard, name), { throwIfNoEntry: false });
        if (!st || nowMs - st.mtimeMs < olderThanMs) continue;
        fs.rmSync(join(blocks, shard, name), { force: true });
        n += 1;
      }
    }
    return n;
  }

  async close(): Promise<void> {}
}

/** The shard of a blob from its CID string (hex of the digest's first byte), without parsing the CID. */
export function shardOfString(cid: string): string {
  // 'b' + base32 of the binary CID (0x01, codec, 0x12, 0x20, digest...): the digest's first byte is bits 32..39,
  // which base32 characters 6 and 7 (string positions 7 and 8) carry as their low 8 of 10 bits.
  const B32 = 'abcdefghijklmnopqrstuvwxyz234567';
  const v = (B32.indexOf(cid.charAt(7)) << 5) | B32.indexOf(cid.charAt(8));
  return ((v & 0xff) + 0x100).toString(16).slice(1);
}

/** Reads one blob file and checks it against its CID (never follows a symlink, bounds the size first). */
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

class FsBatch implements BlobBatch {
  readonly added = { blobs: 0, bytes: 0 };
  private readonly staged = new Set<string>();
  private open = true;
  private bytesSinceSync = 0;
  private background: Promise<void> | null = null;
  private publisher: ((from: string[], to: string[]) => Promise<void>) | null = null;
  private readonly blocks: string;
  private readonly prefix: string;

  constructor(
    private readonly store: FsBlobStore,
    private readonly id: string,
    private readonly writerFile: string,
    private readonly durable: boolean,
  ) {
    this.blocks = `${store.dir}/blocks`;
    this.prefix = `.tmp.${id}.`;
  }

  private alive(): void {
    if (!this.open) throw snapshotError('SNAPSHOT_IO', 'the blob batch is already committed or aborted');
  }

  private tempPath(k: string): string {
    return `${this.blocks}/${shardOfString(k)}/${this.prefix}${k}`;
  }

  async has(cid: CID): Promise<boolean> {
    return this.staged.has(cid.toString()) || this.store.has(cid);
  }

  async put(block: Block): Promise<boolean> {
    this.alive();
    const k = block.cid.toString();
    if (this.staged.has(k) || (await this.store.has(block.cid))) return false;
    const fd = fs.openSync(this.tempPath(k), 'wx', 0o444);
    this.staged.add(k);
    try {
      let off = 0;
      while (off < block.bytes.length) off += fs.writeSync(fd, block.bytes, off, block.bytes.length - off);
    } finally {
      fs.closeSync(fd);
    }
    this.note([], block.bytes.length, 1);
    return true;
  }

  private note(cids: readonly string[], bytes: number, blobs = cids.length): void {
    for (const c of cids) this.staged.add(c);
    this.added.blobs += blobs;
    this.added.bytes += bytes;
    this.bytesSinceSync += bytes;
    // Start write-back early on big batches so the flush at commit has little left to do.
    if (this.durable && this.bytesSinceSync >= 256 << 20 && !this.background) {
      this.bytesSinceSync = 0;
      this.background = syncFileSystem(this.blocks)
        .catch(() => undefined)
        .finally(() => {
          this.background = null;
        });
    }
  }

  async get(cid: CID): Promise<Uint8Array> {
    const k = cid.toString();
    if (this.staged.has(k)) return readBlobFile(cid, this.tempPath(k));
    return this.store.get(cid);
  }

  fsStaging(): FsStaging {
    return {
      blocksDir: this.blocks,
      tempPrefix: this.prefix,
      register: (cids, bytes) => this.note(cids, bytes),
      setPublisher: (p) => {
        this.publisher = p;
      },
    };
  }

  async commit(opts: { pins?: readonly PinRecord[]; heads?: ReadonlyArray<{ source: string; cid: string }> } = {}): Promise<void> {
    this.alive();
    try {
      if (this.background) await this.background;
      if (this.staged.size > 0) {
        // 1. Staged data durable. 2. Published under final names. 3. Names durable. Only then the pins.
        const few = this.staged.size <= FEW_BLOBS;
        const from: string[] = [];
        const to: string[] = [];
        const touched = new Set<string>();
        for (const k of this.staged) {
          const shard = shardOfString(k);
          touched.add(shard);
          from.push(`${this.blocks}/${shard}/${this.prefix}${k}`);
          to.push(`${this.blocks}/${shard}/${k}`);
        }
        if (this.durable) {
          if (few) for (const f of from) fsyncPath(f);
          else await this.flush(from);
        }
        if (this.publisher && !few) await this.publisher(from, to);
        else for (let i = 0; i < from.length; i++) fs.renameSync(from[i] as string, to[i] as string);
        if (this.durable) {
          if (few) for (const shard of touched) fsyncPath(`${this.blocks}/${shard}`);
          else await this.flush(null);
        }
      }
      for (const p of opts.pins ?? []) this.store.writePin(p);
      for (const h of opts.heads ?? []) this.store.writeHead(h.source, h.cid);
    } catch (e) {
      await this.abort();
      throw e instanceof Error && 'code' in e ? e : ioError('committing blobs to', this.store.dir, e);
    }
    this.open = false;
    fs.rmSync(this.writerFile, { force: true });
  }

  /** syncfs of the store's file system; if `sync -f` is unavailable, fsync each file (or each shard dir). */
  private async flush(files: string[] | null): Promise<void> {
    try {
      await syncFileSystem(this.blocks);
    } catch {
      if (files) for (const f of files) fsyncPath(f);
      else for (const shard of fs.readdirSync(this.blocks)) fsyncPath(`${this.blocks}/${shard}`);
    }
  }

  async abort(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    if (this.background) await this.background;
    // Staged files not yet renamed are removed; renamed ones are complete, durable blobs that GC may collect.
    for (const k of this.staged) fs.rmSync(this.tempPath(k), { force: true });
    fs.rmSync(this.writerFile, { force: true });
  }
}
