import * as fs from 'node:fs';
import { resolve } from 'node:path';
import { CHUNK_SIZE, chunkCount, rawBlock } from '../domain/format';
import type { SourceKind, SourceStat } from '../domain/stat-cache';
import { ioError, showPath, snapshotError } from '../domain/snapshot.errors';
import { decodeUtf8Strict } from '../domain/names';
import type { BlobBatch, PackStaging } from '../ports/blob-store.port';
import type { ContentHasher, HashRequest, HashedFile, ListingSummary, PrefetchOptions, SourceEntry, TreeSource } from '../ports/tree-source.port';
import { STAT_WORDS, type KernelFailure, type KernelStat, type PackTarget, type PackedOutput, type RangeOutput } from './hash-kernel';
import { HashPool, defaultWorkers } from './hash-pool';
import { childListings, decodeListing, nativeLister, summarizeListing, type NativeLister, type PrefetcherHandle } from './native-lister';

export function kindOf(st: fs.BigIntStats | fs.Stats): SourceKind {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFIFO()) return 'fifo';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'char-device';
  if (st.isBlockDevice()) return 'block-device';
  return 'unknown';
}

export function sourceStat(st: fs.BigIntStats): SourceStat {
  return {
    kind: kindOf(st),
    size: Number(st.size),
    mode: Number(st.mode),
    dev: st.dev,
    ino: st.ino,
    nlink: Number(st.nlink),
    mtimeNs: st.mtimeNs,
    ctimeNs: st.ctimeNs,
  };
}

function kstat(st: SourceStat): KernelStat {
  return { dev: st.dev, ino: st.ino, size: st.size, mode: st.mode, nlink: st.nlink, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs };
}

function toSourceStat(k: KernelStat): SourceStat {
  return { kind: 'file', ...k };
}

export interface FsTreeSourceOptions {
  /** Hashing threads; 0 hashes on the calling thread. Default: one per core (at most 8). */
  readonly workers?: number;
  /** Use the native directory lister when it is built (default true); false lists through node:fs. */
  readonly nativeLister?: boolean;
}

/**
 * How many chunks one worker job hashes of a large file (32 MiB: long sequential reads, fine load balance); 16
 * when the job also returns the bytes for the store (bounds the memory held by jobs in flight).
 */
const RANGE_CHUNKS = 32;
const RANGE_CHUNKS_STORED = 16;
/** Small files are sent to workers in batches of at most this many files / bytes. */
const SMALL_BATCH_FILES = 128;
const SMALL_BATCH_BYTES = 8 << 20;
/** Files handed to the hasher and not yet done before the walk waits (bounds memory on huge trees). */
const MAX_INFLIGHT_FILES = 2048;
/** Attempts to read a file that keeps changing while it is read. */
const MAX_ATTEMPTS = 3;

/**
 * A directory on the local file system. The root is resolved once (realpath); below it nothing is followed:
 * entries come from readdir + lstat, files are opened with O_NOFOLLOW and checked against the walk's lstat and,
 * where /proc is mounted, against their expected absolute path.
 */
export class FsTreeSource implements TreeSource {
  readonly id: string;
  private readonly procCheck: boolean;
  private readonly workers: number;
  private readonly native: NativeLister | null;
  private prefetcher: ListingPrefetcher | null = null;

  /** Opens `dir` (resolved once with realpath; SNAPSHOT_ROOT_INVALID when it cannot be). */
  constructor(dir: string, options: FsTreeSourceOptions = {}) {
    let real: string;
    try {
      real = fs.realpathSync(resolve(dir));
    } catch (e) {
      throw snapshotError('SNAPSHOT_ROOT_INVALID', `cannot open ${dir}: ${(e as Error).message}`, { path: dir }, e);
    }
    this.id = real;
    this.procCheck = probeProc(real);
    this.workers = options.workers ?? defaultWorkers();
    const native = options.nativeLister === false ? null : nativeLister();
    this.native = native;
    this.listSummary = native ? async (rel, expected) => summarizeListing(this.nativeListing(native, rel, expected)) : undefined;
  }

  abs(rel: string): string {
    if (rel === '') return this.id;
    return this.id === '/' ? `/${rel}` : `${this.id}/${rel}`;
  }

  async statRoot(): Promise<SourceStat> {
    try {
      return sourceStat(fs.lstatSync(this.id, { bigint: true }));
    } catch (e) {
      throw snapshotError('SNAPSHOT_ROOT_INVALID', `cannot stat ${this.id}: ${(e as Error).message}`, { path: this.id }, e);
    }
  }

  /**
   * Lists a directory: through the native lister when it is in use (prefetched when it was hinted), else
   * readdir, then lstat of every entry on the calling thread (for the tens of thousands of small syscalls of a
   * re-snapshot, a round trip to a worker per directory costs more than it saves).
   */
  async listDir(rel: string, expected: SourceStat): Promise<SourceEntry[]> {
    if (this.native) return decodeListing(this.nativeListing(this.native, rel, expected));
    const abs = this.abs(rel);
    const prefix = abs === '/' ? '/' : `${abs}/`;
    let names: string[];
    try {
      names = fs.readdirSync(abs);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw changedDir(rel);
      throw ioError('listing', showPath(rel), e);
    }
    // readdir decodes names as UTF-8 with U+FFFD for invalid bytes: only then look at the raw bytes.
    if (names.some((n) => n.includes('\uFFFD'))) return this.listRaw(rel, abs, expected);
    const out: SourceEntry[] = [];
    for (const name of names) {
      let st: fs.BigIntStats | undefined;
      try {
        st = fs.lstatSync(prefix + name, { bigint: true, throwIfNoEntry: false });
      } catch (e) {
        throw ioError('lstat of an entry in', showPath(rel), e);
      }
      if (!st) continue; // removed since readdir: as if it had been removed before
      out.push({ name, stat: sourceStat(st) });
    }
    this.checkSame(rel, abs, expected);
    return out;
  }

  /** Present when the native lister is in use. */
  readonly listSummary: ((rel: string, expected: SourceStat) => Promise<ListingSummary>) | undefined;

  private nativeListing(native: NativeLister, rel: string, expected: SourceStat): Buffer {
    try {
      return this.prefetcher?.take(rel, expected) ?? native.listDirSync(this.abs(rel), expected.dev, expected.ino);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ASSAY_DIR_CHANGED') throw changedDir(rel);
      throw ioError('listing', showPath(rel), e);
    }
  }

  prefetch(dirs: ReadonlyArray<{ readonly rel: string; readonly stat: SourceStat }>, options: PrefetchOptions = {}): void {
    if (!this.native || dirs.length === 0) return;
    this.prefetcher ??= new ListingPrefetcher(this.native, (rel) => this.abs(rel), options.wholeTree === true);
    this.prefetcher.add(dirs);
  }

  release(): void {
    this.prefetcher?.close();
    this.prefetcher = null;
  }

  /** The slow path for a directory holding a name that may not be UTF-8. */
  private listRaw(rel: string, abs: string, expected: SourceStat): SourceEntry[] {
    const absBuf = Buffer.from(abs === '/' ? '' : abs);
    const slash = Buffer.from('/');
    const out: SourceEntry[] = [];
    for (const raw of fs.readdirSync(abs, { encoding: 'buffer' })) {
      const st = fs.lstatSync(Buffer.concat([absBuf, slash, raw]), { bigint: true, throwIfNoEntry: false });
      if (!st) continue;
      const bytes = Uint8Array.from(raw);
      const name = decodeUtf8Strict(bytes);
      out.push(name === null ? { name: '', invalidName: bytes, stat: sourceStat(st) } : { name, stat: sourceStat(st) });
    }
    this.checkSame(rel, abs, expected);
    return out;
  }

  /** The directory must still be the one the walk saw (not swapped for a symlink or another directory). */
  private checkSame(rel: string, abs: string, expected: SourceStat): void {
    const again = fs.lstatSync(abs, { bigint: true, throwIfNoEntry: false });
    if (!again || !again.isDirectory() || again.dev !== expected.dev || again.ino !== expected.ino) throw changedDir(rel);
  }

  async readLink(rel: string): Promise<Uint8Array> {
    try {
      const b = fs.readlinkSync(this.abs(rel), { encoding: 'buffer' });
      return new Uint8Array(b.buffer, b.byteOffset, b.length);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EINVAL' || code === 'ENOENT') {
        throw snapshotError('SNAPSHOT_FILE_CHANGED', `${showPath(rel)} stopped being a symlink during the snapshot`, { path: rel });
      }
      throw ioError('readlink', showPath(rel), e);
    }
  }

  openHasher(batch: BlobBatch | null): ContentHasher {
    return new FsHasher(this, new HashPool(this.workers), batch, this.procCheck);
  }

  /** lstat of an entry by relative path (retries after a change). */
  relstat(rel: string): SourceStat | null {
    const st = fs.lstatSync(this.abs(rel), { bigint: true, throwIfNoEntry: false });
    return st ? sourceStat(st) : null;
  }
}

/** Directory listings done ahead of the walk and not yet taken by it (the native side also caps their bytes). */
const PREFETCH_HELD = 1024;

/**
 * Lists directories ahead of a depth-first walk on threads of the native lister's own, so that their system calls
 * run on another core while the walk works on what it already has. The walk hints the root (and each directory's
 * subdirectories before it descends into them); the native side lists the most recent request first and, for a
 * walk that visits the whole tree, queues each listing's subdirectories itself, first in name order on top: the
 * walk's own order. At most PREFETCH_HELD listings wait to be taken (memory stays bounded on huge trees); a
 * directory the walk reaches before its listing started is listed on the spot.
 */
class ListingPrefetcher {
  private readonly handle: PrefetcherHandle;
  private readonly ids = new Map<string, { id: number; dev: bigint; ino: bigint }>();

  constructor(
    private readonly native: NativeLister,
    private readonly abs: (rel: string) => string,
    wholeTree: boolean,
  ) {
    // Listing the whole tree ahead only pays when the walk will visit all of it: with exclusions it could fill
    // the prefetcher with directories the walk never takes, so then only hinted directories are listed.
    this.handle = native.prefetcherCreate(PREFETCH_HELD, wholeTree);
  }

  add(dirs: ReadonlyArray<{ readonly rel: string; readonly stat: SourceStat }>): void {
    for (let i = dirs.length - 1; i >= 0; i--) {
      const d = dirs[i] as { rel: string; stat: SourceStat };
      if (this.ids.has(d.rel)) continue;
      const dev = d.stat.dev;
      const ino = d.stat.ino;
      const id = this.native.prefetcherAdd(this.handle, this.abs(d.rel), dev, ino);
      if (id !== 0) this.ids.set(d.rel, { id, dev, ino });
    }
  }

  /**
   * The listing done for `rel` as the directory `expected`, or null (list it now). Throws the listing's error.
   * The subdirectories it queued on its own are remembered, so that the walk finds them too.
   */
  take(rel: string, expected: SourceStat): Buffer | null {
    const r = this.ids.get(rel);
    if (!r) return null;
    this.ids.delete(rel);
    const listing = this.native.prefetcherTake(this.handle, r.id);
    if (!listing || r.dev !== expected.dev || r.ino !== expected.ino) return null;
    const prefix = rel === '' ? '' : `${rel}/`;
    for (const c of childListings(listing)) this.ids.set(prefix + c.name, { id: c.id, dev: c.dev, ino: c.ino });
    return listing;
  }

  close(): void {
    this.native.prefetcherClose(this.handle);
    this.ids.clear();
  }
}

function changedDir(rel: string): Error {
  return snapshotError('SNAPSHOT_TREE_CHANGED', `directory ${showPath(rel)} was replaced or removed during the snapshot`, { path: rel });
}

/** Is /proc/self/fd usable to check where an opened file really is? */
function probeProc(real: string): boolean {
  let fd: number | undefined;
  try {
    fd = fs.openSync(real, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
    return fs.readlinkSync(`/proc/self/fd/${fd}`) === real;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

interface SmallPending {
  abs: string;
  rel: string;
  stat: SourceStat;
  resolve(v: HashedFile | KernelFailure): void;
  reject(e: unknown): void;
}

class FsHasher implements ContentHasher {
  private small: SmallPending[] = [];
  private smallBytes = 0;
  private flushQueued = false;
  private inflight = 0;
  private waiters: Array<() => void> = [];
  /** The batch's raw-chunk fast path: the threads return the bytes they hashed, stored here without rehashing. */
  private readonly sink: ((data: Uint8Array, lengths: readonly number[], digests: Uint8Array, release?: () => void) => number) | null;

  constructor(
    private readonly src: FsTreeSource,
    private readonly pool: HashPool,
    private readonly batch: BlobBatch | null,
    private readonly procCheck: boolean,
  ) {
    this.sink = batch?.putRawChunks ? batch.putRawChunks.bind(batch) : null;
    this.packs = batch?.packStaging ? batch.packStaging() : null;
  }

  /** The pack store's thread fast path: threads append what they hash to packs of their own. */
  private readonly packs: PackStaging | null;
  private target: PackTarget | null = null;

  /** Where a job of this cost should write, if it runs on a worker thread (the dedup table is built then, once). */
  private packTarget(cost: number): PackTarget | null {
    if (!this.packs || !this.pool.wouldUseWorkers(cost)) return null;
    this.target ??= { dir: this.packs.dir, batch: this.packs.batch, maxBytes: this.packs.maxBytes, table: this.packs.table() };
    return this.target;
  }

  private adopt(p: PackedOutput | null | undefined): void {
    if (p && this.packs && (p.written.length > 0 || p.newPacks.length > 0)) this.packs.adopt(p.newPacks, p.written, p.digests);
  }

  async ready(): Promise<void> {
    if (this.inflight < MAX_INFLIGHT_FILES) return;
    await new Promise<void>((r) => this.waiters.push(r));
  }

  async hash(req: HashRequest): Promise<HashedFile> {
    this.inflight += 1;
    try {
      let stat = req.stat;
      for (let attempt = 1; ; attempt++) {
        const r = await this.once(req.rel, stat);
        if ('digests' in r) return r;
        if (r.code === 'ESCAPE') throw snapshotError('SNAPSHOT_PATH_ESCAPE', `${req.rel}: ${r.message}`, { path: req.rel });
        if (r.code === 'IO') throw snapshotError('SNAPSHOT_IO', r.message, { path: req.rel, errno: r.errno });
        const now = this.src.relstat(req.rel);
        if (attempt >= MAX_ATTEMPTS || !now || now.kind !== 'file') {
          throw snapshotError(
            'SNAPSHOT_FILE_CHANGED',
            `${req.rel} kept changing while it was read (${attempt} attempts): ${r.message}; pause the writer and retry`,
            { path: req.rel, attempts: attempt },
          );
        }
        stat = now;
      }
    } finally {
      this.inflight -= 1;
      if (this.inflight < MAX_INFLIGHT_FILES) for (const w of this.waiters.splice(0)) w();
    }
  }

  private once(rel: string, stat: SourceStat): Promise<HashedFile | KernelFailure> {
    const abs = this.src.abs(rel);
    if (this.batch && !this.sink) return this.viaBatch(abs, stat, this.batch);
    if (stat.size <= CHUNK_SIZE) {
      return new Promise((resolve, reject) => {
        this.small.push({ abs, rel, stat, resolve, reject });
        this.smallBytes += stat.size;
        if (this.small.length >= SMALL_BATCH_FILES || this.smallBytes >= SMALL_BATCH_BYTES) this.flush();
        else if (!this.flushQueued) {
          this.flushQueued = true;
          setImmediate(() => this.flush());
        }
      });
    }
    return this.large(abs, stat);
  }

  private flush(): void {
    this.flushQueued = false;
    const files = this.small;
    const bytes = this.smallBytes;
    if (files.length === 0) return;
    this.small = [];
    this.smallBytes = 0;
    const expect = new BigInt64Array(files.length * STAT_WORDS);
    files.forEach((f, i) => {
      const b = i * STAT_WORDS;
      expect[b] = BigInt.asIntN(64, f.stat.dev);
      expect[b + 1] = BigInt.asIntN(64, f.stat.ino);
      expect[b + 2] = BigInt(f.stat.size);
      expect[b + 3] = BigInt(f.stat.mode);
      expect[b + 4] = f.stat.mtimeNs;
      expect[b + 5] = f.stat.ctimeNs;
    });
    const cost = bytes + files.length * 4096;
    const job = {
      paths: files.map((f) => f.abs),
      expect,
      chunkSize: CHUNK_SIZE,
      collect: this.sink !== null,
      pack: this.packTarget(cost),
      procCheck: this.procCheck,
    };
    this.pool.run('hashSmallFiles', job, cost).then(
      (out) => {
        try {
          this.adopt(out.packed);
        } catch (e) {
          for (const f of files) f.reject(e);
          return;
        }
        // Every file read successfully is stored, an empty one too (no bytes, one empty chunk).
        if (this.sink && out.status.some((st: number) => st === 0)) {
          const lengths: number[] = [];
          const digests = new Uint8Array(files.length * 32);
          for (let i = 0; i < files.length; i++) {
            if (out.status[i] !== 0) continue;
            digests.set(out.digests.subarray(i * 32, i * 32 + 32), lengths.length * 32);
            lengths.push(Number(out.stats[i * STAT_WORDS + 2]));
          }
          try {
            this.sink(out.data, lengths, digests);
          } catch (e) {
            for (const f of files) f.reject(e);
            return;
          }
        }
        files.forEach((f, i) => {
          const status = out.status[i];
          if (status !== 0) {
            const code = status === 1 ? 'CHANGED' : status === 2 ? 'ESCAPE' : 'IO';
            f.resolve({ ok: false, code, message: out.messages[i] ?? '', errno: out.errnos[i] ?? '' });
            return;
          }
          const b = i * STAT_WORDS;
          const s = out.stats;
          f.resolve({
            size: Number(s[b + 2]),
            digests: out.digests.subarray(i * 32, i * 32 + 32),
            stat: {
              kind: 'file',
              dev: BigInt.asUintN(64, s[b] as bigint),
              ino: BigInt.asUintN(64, s[b + 1] as bigint),
              size: Number(s[b + 2]),
              mode: Number(s[b + 3]),
              nlink: f.stat.nlink,
              mtimeNs: s[b + 4] as bigint,
              ctimeNs: s[b + 5] as bigint,
            },
          });
        });
      },
      (e: unknown) => {
        for (const f of files) f.reject(e);
      },
    );
  }

  private async large(abs: string, stat: SourceStat): Promise<HashedFile | KernelFailure> {
    const n = chunkCount(stat.size);
    const jobs: Array<Promise<RangeOutput>> = [];
    const per = this.sink ? RANGE_CHUNKS_STORED : RANGE_CHUNKS;
    for (let start = 0; start < n; start += per) {
      const end = Math.min(n, start + per);
      const cost = Math.min(stat.size - start * CHUNK_SIZE, (end - start) * CHUNK_SIZE);
      const job = {
        abs,
        expect: kstat(stat),
        start,
        end,
        chunkSize: CHUNK_SIZE,
        collect: this.sink !== null,
        pack: this.packTarget(cost),
        procCheck: this.procCheck,
      };
      const run = this.pool.run('hashRange', job, cost);
      // Each range's bytes go to the store as soon as they arrive, so at most the ranges in flight are held.
      jobs.push(this.sink || this.packs ? run.then((o) => this.storeRange(o, stat.size, start, end)) : run);
    }
    const outs = await Promise.all(jobs);
    const digests = new Uint8Array(n * 32);
    let last: KernelStat | null = null;
    let fail: KernelFailure | null = null;
    outs.forEach((o, i) => {
      if (!o.ok) {
        fail ??= o;
        return;
      }
      digests.set(o.digests, i * per * 32);
      last = o.stat;
    });
    if (fail) return fail;
    if (!last) throw new Error('internal: no range hashed');
    return { size: stat.size, digests, stat: toSourceStat(last) };
  }

  private storeRange(o: RangeOutput, size: number, start: number, end: number): RangeOutput {
    this.adopt(o.packed);
    if (!o.ok || !this.sink || o.data.length === 0) return o;
    const lengths: number[] = [];
    for (let i = start; i < end; i++) lengths.push(Math.min(CHUNK_SIZE, size - i * CHUNK_SIZE));
    const data = o.data;
    const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
    this.sink(data, lengths, o.digests, whole ? () => this.pool.recycle(data.buffer as ArrayBuffer) : undefined);
    return { ...o, data: new Uint8Array(0) };
  }

  /** For stores without the raw-chunk fast path: read here, put each chunk through the batch. */
  private async viaBatch(abs: string, stat: SourceStat, batch: BlobBatch): Promise<HashedFile | KernelFailure> {
    let fh: fs.promises.FileHandle;
    try {
      fh = await fs.promises.open(abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    } catch (e) {
      return { ok: false, code: 'CHANGED', message: `${abs} could not be opened: ${(e as Error).message}` };
    }
    try {
      const st = await fh.stat({ bigint: true });
      if (!st.isFile() || st.ino !== stat.ino || st.dev !== stat.dev || Number(st.size) !== stat.size || st.mtimeNs !== stat.mtimeNs) {
        return { ok: false, code: 'CHANGED', message: `${abs} changed since it was listed` };
      }
      if (this.procCheck) {
        const real = fs.readlinkSync(`/proc/self/fd/${fh.fd}`);
        if (real !== abs) return { ok: false, code: 'ESCAPE', message: `opening ${abs} reached ${real}` };
      }
      const n = chunkCount(stat.size);
      const digests = new Uint8Array(n * 32);
      for (let i = 0; i < n; i++) {
        const len = Math.min(CHUNK_SIZE, stat.size - i * CHUNK_SIZE);
        const buf = Buffer.allocUnsafe(len);
        const { bytesRead } = await fh.read(buf, 0, len, i * CHUNK_SIZE);
        if (bytesRead !== len) return { ok: false, code: 'CHANGED', message: `${abs} shrank while it was read` };
        const block = rawBlock(buf);
        digests.set(block.cid.multihash.digest, i * 32);
        await batch.put(block);
      }
      const after = sourceStat(await fh.stat({ bigint: true }));
      if (after.size !== stat.size || after.mtimeNs !== stat.mtimeNs || after.ctimeNs !== stat.ctimeNs) {
        return { ok: false, code: 'CHANGED', message: `${abs} changed while it was read` };
      }
      return { size: stat.size, digests, stat: after };
    } finally {
      await fh.close();
    }
  }

  async close(): Promise<void> {
    const left = this.small.splice(0);
    for (const f of left) f.reject(snapshotError('SNAPSHOT_IO', 'the hasher was closed'));
    await this.pool.close();
  }
}
