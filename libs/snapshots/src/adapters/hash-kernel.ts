/**
 * The file-reading and hashing kernel. It runs both on the main thread (small amounts of work) and inside the
 * hashing threads (hash.worker.ts, a module of its own that imports this one).
 *
 * Every file is opened with O_NOFOLLOW | O_NONBLOCK (a symlink or fifo swapped in after the walk's lstat is not
 * followed or waited on), checked by fstat to still be the regular file the walk saw (device, inode, size,
 * mtime, ctime), checked through /proc/self/fd to resolve to the expected path (so a directory swapped for a
 * symlink cannot redirect the read outside the root), read in large blocks, hashed chunk by chunk with
 * node:crypto, and fstat'ed again after reading: any difference reports CHANGED and the caller retries.
 */

export interface KernelStat {
  dev: bigint;
  ino: bigint;
  size: number;
  mode: number;
  nlink: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

/** Stats travel between threads packed as 6 int64 per file: dev, ino, size, mode, mtime ns, ctime ns. */
export const STAT_WORDS = 6;

/**
 * Where a hashing thread appends the raw chunks it hashes, in pack files of its own (docs/snapshots-format.md, section 9): a
 * thread writes a chunk right after hashing it, unless `table` (the raw blobs already in the store at the start of
 * the batch) or the thread's own earlier writes in this batch already have it.
 */
export interface PackTarget {
  dir: string;
  /** A new batch id makes the thread start new packs (and forget what it wrote). */
  batch: string;
  maxBytes: number;
  /** 32-byte digests, open addressing on the first 4 bytes (little endian) & (slots - 1); all-zero = empty. */
  table: SharedArrayBuffer | null;
}

/** What a job appended to packs: `written` holds quadruples (pack number, offset of the bytes, length, unused). */
export interface PackedOutput {
  written: number[];
  /** The digests of the written chunks, 32 bytes each, in `written` order. */
  digests: Uint8Array;
  /** Pack files this job created. */
  newPacks: number[];
}

export interface SmallFileJob {
  paths: string[];
  /** The walk's lstat of each file, packed (STAT_WORDS per file; dev and ino as two's complement int64). */
  expect: BigInt64Array;
  chunkSize: number;
  /** Return the files' bytes (for the blob store) as well as their digests. */
  collect: boolean;
  /** On a worker thread, write the bytes to packs instead of returning them (`collect` then only applies inline). */
  pack: PackTarget | null;
  procCheck: boolean;
}

export interface RangeJob {
  abs: string;
  expect: KernelStat;
  /** First chunk index and one past the last. */
  start: number;
  end: number;
  chunkSize: number;
  /** Return the range's bytes (for the blob store) as well as their digests. */
  collect: boolean;
  pack: PackTarget | null;
  procCheck: boolean;
}

export type KernelFailure = { ok: false; code: 'CHANGED' | 'ESCAPE' | 'IO'; message: string; errno?: string };
/** Per file: status 0 = ok (digest and stat after reading filled in), else 1 CHANGED, 2 ESCAPE, 3 IO with a message. */
export interface SmallFilesOutput {
  status: Uint8Array;
  digests: Uint8Array;
  stats: BigInt64Array;
  messages: string[];
  errnos: string[];
  /** With `collect`: the bytes of the files read successfully (status 0), back to back in job order; else empty. */
  data: Uint8Array;
  packed: PackedOutput | null;
}

/** With `collect`, `data` holds the range's bytes (else it is empty). */
export type RangeOutput = ({ ok: true; digests: Uint8Array; stat: KernelStat; data: Uint8Array } | KernelFailure) & {
  /** Chunks appended to packs, reported even when the job failed (their bytes are intact, indexed or not). */
  packed?: PackedOutput | null;
};

export interface HashKernel {
  hashSmallFiles(job: SmallFileJob): SmallFilesOutput;
  hashRange(job: RangeJob): Promise<RangeOutput>;
  /** Takes back a buffer a `collect` job returned, for reuse by a later job of the same size. */
  recycle(buf: ArrayBuffer): void;
  /** Closes the thread's pack files (end of the batch). */
  closePacks(): { closed: number };
}

/* istanbul ignore next */
export function createHashKernel(inWorker = false): HashKernel {
  const fs: typeof import('node:fs') = require('node:fs');
  const crypto: typeof import('node:crypto') = require('node:crypto');
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  const OPEN_READ = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
  const READ_BLOCK = 4 << 20;
  let small: Buffer | null = null;
  let scratch: Buffer | null = null;
  // Read buffers for hashRange; several ranges may be in flight at once, so each call takes its own pair.
  const spare: Buffer[] = [];
  // Buffers of collected ranges handed back by the caller once stored (bounds memory: no garbage to wait for).
  const collectSpare: Buffer[] = [];
  function takeCollect(n: number): Buffer {
    const i = collectSpare.findIndex((b) => b.length === n);
    if (i >= 0) return collectSpare.splice(i, 1)[0] as Buffer;
    return Buffer.allocUnsafeSlow(n);
  }
  function recycle(buf: ArrayBuffer): void {
    if (collectSpare.length < 6) collectSpare.push(Buffer.from(buf));
  }

  // ---- this thread's pack files (worker threads only)
  const PACK_MAGIC = Buffer.from('ASXPACK1');
  let packBatch = '';
  let packFd = -1;
  let packNo = -1;
  let packPos = 0;
  const packFds: number[] = [];
  let mine = new Set<string>();

  // A thread's packs are rolled over at THREAD_PACK_BYTES (or the store's limit if smaller), and a full one is
  // written back in the background (an fdatasync on libuv's thread pool; its outcome does not matter, the commit
  // fdatasyncs every pack anyway), so the commit's flush has little left to do.
  const THREAD_PACK_BYTES = 128 << 20;
  let unsynced = 0;
  let syncing = 0;

  function closePacks(): { closed: number } {
    const n = packFds.length;
    const fds = packFds.splice(0);
    packFd = -1;
    if (syncing === 0) for (const fd of fds) fs.closeSync(fd);
    else closeLater.push(...fds);
    return { closed: n };
  }
  const closeLater: number[] = [];

  function writeback(fd: number): void {
    unsynced = 0;
    if (syncing > 0) return;
    syncing += 1;
    fs.fdatasync(fd, () => {
      syncing -= 1;
      if (syncing === 0) for (const f of closeLater.splice(0)) fs.closeSync(f);
    });
  }

  function inTable(t: PackTarget, digest: Uint8Array): boolean {
    if (!t.table) return false;
    const tab = new Uint8Array(t.table);
    const slots = tab.length >>> 5;
    if (slots === 0) return false;
    const d = Buffer.from(digest.buffer, digest.byteOffset, 32);
    let i = d.readUInt32LE(0) & (slots - 1);
    for (let probes = 0; probes < slots; probes++) {
      const at = i << 5;
      let empty = true;
      for (let k = 0; k < 8; k++) if (tab[at + k] !== 0) empty = false;
      if (empty) return false;
      if (d.compare(tab, at, at + 32) === 0) return true;
      i = (i + 1) & (slots - 1);
    }
    return false;
  }

  /** Appends chunks (header: binary raw CID, u32 length; then the bytes) with one writev; records where they went. */
  function appendChunks(t: PackTarget, items: Array<{ index: number; digest: Uint8Array; data: Uint8Array }>, out: PackedOutput): void {
    if (t.batch !== packBatch) {
      closePacks();
      packBatch = t.batch;
      mine = new Set();
    }
    let iov: Uint8Array[] = [];
    let iovAt = 0;
    // Recorded as written only once the bytes are: a failed write reports nothing it did not write.
    let pending: Array<{ key: string; digest: Uint8Array; pack: number; offset: number; length: number }> = [];
    const flush = () => {
      if (iov.length === 0) return;
      let done = 0;
      let want = 0;
      for (const b of iov) want += b.length;
      while (done < want) {
        let skip = done;
        const rest: Uint8Array[] = [];
        for (const b of iov) {
          if (skip >= b.length) {
            skip -= b.length;
            continue;
          }
          rest.push(skip > 0 ? b.subarray(skip) : b);
          skip = 0;
        }
        done += fs.writevSync(packFd, rest, iovAt + done);
      }
      iov = [];
      unsynced += want;
      if (pending.length > 0) {
        const d = new Uint8Array(out.digests.length + pending.length * 32);
        d.set(out.digests, 0);
        pending.forEach((p, k) => {
          d.set(p.digest.subarray(0, 32), out.digests.length + k * 32);
          out.written.push(p.pack, p.offset, p.length, 0);
          mine.add(p.key);
        });
        out.digests = d;
        pending = [];
      }
    };
    for (const it of items) {
      const key = Buffer.from(it.digest.buffer, it.digest.byteOffset, 32).toString('latin1');
      if (mine.has(key) || inTable(t, it.digest) || pending.some((p) => p.key === key)) continue;
      const need = 40 + it.data.length;
      if (packFd < 0 || packPos + need > Math.min(t.maxBytes, THREAD_PACK_BYTES)) {
        flush();
        // A full pack is written back in the background while the next one fills (never one being written to).
        if (packFd >= 0 && unsynced > 0) writeback(packFd);
        for (let attempt = 0; ; attempt++) {
          const n = crypto.randomBytes(4).readUInt32LE(0);
          if (n === 0xffffffff) continue;
          const path = `${t.dir}/${(n + 0x100000000).toString(16).slice(1)}.pack`;
          try {
            packFd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o444);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === 'EEXIST' && attempt < 16) continue;
            throw e;
          }
          packNo = n;
          break;
        }
        packFds.push(packFd);
        out.newPacks.push(packNo);
        fs.writeSync(packFd, PACK_MAGIC, 0, PACK_MAGIC.length, 0);
        packPos = PACK_MAGIC.length;
      }
      if (iov.length === 0) iovAt = packPos;
      const header = Buffer.allocUnsafe(40);
      header[0] = 0x01;
      header[1] = 0x55;
      header[2] = 0x12;
      header[3] = 0x20;
      header.set(it.digest.subarray(0, 32), 4);
      header.writeUInt32LE(it.data.length, 36);
      iov.push(header, it.data);
      pending.push({ key, digest: it.digest, pack: packNo, offset: packPos + 40, length: it.data.length });
      packPos += need;
      if (iov.length >= 512) flush();
    }
    flush();
  }

  function toStat(st: import('node:fs').BigIntStats): KernelStat {
    return {
      dev: st.dev,
      ino: st.ino,
      size: Number(st.size),
      mode: Number(st.mode),
      nlink: Number(st.nlink),
      mtimeNs: st.mtimeNs,
      ctimeNs: st.ctimeNs,
    };
  }

  function same(a: KernelStat, b: KernelStat): boolean {
    return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
  }

  function changed(abs: string, why: string): KernelFailure {
    return { ok: false, code: 'CHANGED', message: `${abs} ${why}` };
  }

  function failure(abs: string, e: unknown): KernelFailure {
    const errno = (e as NodeJS.ErrnoException).code;
    if (errno === 'ENOENT' || errno === 'ELOOP' || errno === 'ENOTDIR' || errno === 'ENXIO') {
      return changed(abs, `is gone or no longer a regular file (${errno})`);
    }
    return { ok: false, code: 'IO', message: `reading ${abs}: ${(e as Error).message}`, errno: errno ?? 'EIO' };
  }

  /** Opens and checks a file against the walk's stat; returns the fd and stat, or a failure. */
  function openChecked(abs: string, expect: KernelStat, procCheck: boolean): { fd: number; st: KernelStat } | KernelFailure {
    let fd: number;
    try {
      fd = fs.openSync(abs, OPEN_READ);
    } catch (e) {
      return failure(abs, e);
    }
    try {
      const raw = fs.fstatSync(fd, { bigint: true });
      if (!raw.isFile()) {
        fs.closeSync(fd);
        return changed(abs, 'is no longer a regular file');
      }
      const st = toStat(raw);
      if (!same(st, expect)) {
        fs.closeSync(fd);
        return changed(abs, 'changed since it was listed');
      }
      if (procCheck) {
        const real = fs.readlinkSync(`/proc/self/fd/${fd}`);
        if (real !== abs) {
          fs.closeSync(fd);
          return { ok: false, code: 'ESCAPE', message: `opening ${abs} reached ${real}, outside the expected path` };
        }
      }
      return { fd, st };
    } catch (e) {
      fs.closeSync(fd);
      return failure(abs, e);
    }
  }

  function hashSmallFiles(job: SmallFileJob): SmallFilesOutput {
    const n = job.paths.length;
    const out: SmallFilesOutput = {
      status: new Uint8Array(n),
      digests: new Uint8Array(n * 32),
      stats: new BigInt64Array(n * 6),
      messages: [],
      errnos: [],
      data: new Uint8Array(0),
      packed: null,
    };
    const packing = inWorker && job.pack ? job.pack : null;
    const toPack: Array<{ index: number; digest: Uint8Array; data: Uint8Array }> = [];
    const fail = (i: number, f: KernelFailure) => {
      out.status[i] = f.code === 'CHANGED' ? 1 : f.code === 'ESCAPE' ? 2 : 3;
      out.messages[i] = f.message;
      out.errnos[i] = f.errno ?? '';
    };
    if (!small || small.length < job.chunkSize + 1) small = Buffer.allocUnsafe(job.chunkSize + 1);
    const e = job.expect;
    // Collected bytes are read straight into the output (one spare byte past the end detects a file that grew).
    let total = 0;
    const gather = job.collect || packing !== null;
    if (gather) for (let i = 0; i < n; i++) total += Number(e[i * 6 + 2]);
    // Bytes going to this thread's packs are written before the job returns: a reused scratch buffer will do
    // (no fresh pages to fault in per job); bytes returned to the caller need a buffer of their own.
    let collected: Buffer | null = null;
    if (packing) {
      if (!scratch || scratch.length < total + 1) scratch = Buffer.allocUnsafeSlow(Math.max(total + 1, 8 << 20));
      collected = scratch;
    } else if (gather) collected = Buffer.allocUnsafeSlow(total + 1);
    let used = 0;
    for (let i = 0; i < n; i++) {
      const abs = job.paths[i] as string;
      const b = i * 6;
      const expect: KernelStat = {
        dev: BigInt.asUintN(64, e[b] as bigint),
        ino: BigInt.asUintN(64, e[b + 1] as bigint),
        size: Number(e[b + 2]),
        mode: Number(e[b + 3]),
        nlink: 1,
        mtimeNs: e[b + 4] as bigint,
        ctimeNs: e[b + 5] as bigint,
      };
      const o = openChecked(abs, expect, job.procCheck);
      if (!('fd' in o)) {
        fail(i, o);
        continue;
      }
      try {
        const buf = collected ?? (small as Buffer);
        const base = collected ? used : 0;
        const room = collected ? Math.min(o.st.size + 1, buf.length - base) : buf.length;
        let got = 0;
        for (;;) {
          const r = fs.readSync(o.fd, buf, base + got, room - got, got);
          if (r === 0) break;
          got += r;
          if (got >= room) break;
        }
        if (got !== o.st.size) {
          fail(i, changed(abs, `was ${o.st.size} bytes when opened but ${got} bytes were read`));
          continue;
        }
        const data = buf.subarray(base, base + got);
        const digest = crypto.createHash('sha256').update(data).digest();
        const after = toStat(fs.fstatSync(o.fd, { bigint: true }));
        if (!same(after, o.st)) {
          fail(i, changed(abs, 'changed while it was read'));
          continue;
        }
        out.digests.set(digest, i * 32);
        out.stats[b] = BigInt.asIntN(64, after.dev);
        out.stats[b + 1] = BigInt.asIntN(64, after.ino);
        out.stats[b + 2] = BigInt(after.size);
        out.stats[b + 3] = BigInt(after.mode);
        out.stats[b + 4] = after.mtimeNs;
        out.stats[b + 5] = after.ctimeNs;
        if (packing) toPack.push({ index: i, digest: out.digests.subarray(i * 32, i * 32 + 32), data });
        used += got;
      } catch (err) {
        fail(i, failure(abs, err));
      } finally {
        fs.closeSync(o.fd);
      }
    }
    if (packing) {
      out.packed = { written: [], digests: new Uint8Array(0), newPacks: [] };
      try {
        appendChunks(packing, toPack, out.packed);
      } catch (err) {
        // Nothing of this job is stored: fail its files (reported as I/O errors, with what was written so far).
        for (const f of toPack) {
          out.status[f.index] = 3;
          out.messages[f.index] = `writing a pack in ${packing.dir}: ${(err as Error).message}`;
          out.errnos[f.index] = (err as NodeJS.ErrnoException).code ?? 'EIO';
        }
      }
    } else if (collected) out.data = used === collected.length ? collected : new Uint8Array(collected.buffer, 0, used);
    return out;
  }

  function readAt(fd: number, buf: Buffer, len: number, pos: number): Promise<number> {
    return new Promise((resolve, reject) => {
      let got = 0;
      const step = (): void => {
        fs.read(fd, buf, got, len - got, pos + got, (err, n) => {
          if (err) return reject(err);
          got += n;
          if (n === 0 || got >= len) return resolve(got);
          step();
        });
      };
      step();
    });
  }

  /**
   * Hashes chunks [start, end) of a file; reads are double-buffered so the next read overlaps this hash. With
   * `collect`, the range is read into one fresh buffer returned to the caller (transferred, not copied).
   */
  async function hashRange(job: RangeJob): Promise<RangeOutput> {
    const o = openChecked(job.abs, job.expect, job.procCheck);
    if (!('fd' in o)) return o;
    let next: Promise<number> | null = null;
    let bufs: Buffer[] = [];
    const packing = inWorker && job.pack ? job.pack : null;
    const packed: PackedOutput | null = packing ? { written: [], digests: new Uint8Array(0), newPacks: [] } : null;
    try {
      const cs = job.chunkSize;
      const perRead = Math.max(1, Math.floor(READ_BLOCK / cs));
      const blockBytes = perRead * cs;
      const size = o.st.size;
      const from = job.start * cs;
      const to = Math.min(size, job.end * cs);
      const whole = job.collect && !packing ? takeCollect(Math.max(0, to - from)) : null;
      const take = (): Buffer => {
        const b = spare.pop();
        return b && b.length >= blockBytes ? b : Buffer.allocUnsafe(blockBytes);
      };
      if (!whole) bufs = [take(), take()];
      const target = (p: number, which: number): Buffer => (whole ? whole.subarray(p - from, Math.min(to, p + blockBytes) - from) : (bufs[which] as Buffer));
      const digests = new Uint8Array((job.end - job.start) * 32);
      let pos = from;
      let which = 0;
      next = readAt(o.fd, target(pos, 0), Math.min(blockBytes, to - pos), pos);
      let chunkIndex = 0;
      while (next) {
        const want = Math.min(blockBytes, to - pos);
        const got: number = await next;
        next = null;
        if (got !== want) return { ...changed(job.abs, `shrank while it was read (expected ${want} bytes at offset ${pos})`), packed };
        const buf = target(pos, which);
        const nextPos: number = pos + got;
        which ^= 1;
        next = nextPos < to ? readAt(o.fd, target(nextPos, which), Math.min(blockBytes, to - nextPos), nextPos) : null;
        const items: Array<{ index: number; digest: Uint8Array; data: Uint8Array }> = [];
        for (let off = 0; off < got; off += cs) {
          const data = buf.subarray(off, Math.min(got, off + cs));
          const digest = crypto.createHash('sha256').update(data).digest();
          digests.set(digest, chunkIndex * 32);
          if (packing) items.push({ index: chunkIndex, digest, data });
          chunkIndex += 1;
        }
        // Written before the next block is read into this buffer (the read in flight uses the other one).
        if (packing && packed) appendChunks(packing, items, packed);
        pos = nextPos;
      }
      if (chunkIndex !== job.end - job.start) return { ...changed(job.abs, 'has fewer chunks than its size promised'), packed };
      const after = toStat(fs.fstatSync(o.fd, { bigint: true }));
      if (!same(after, o.st)) return { ...changed(job.abs, 'changed while it was read'), packed };
      return { ok: true, digests, stat: after, data: whole ?? new Uint8Array(0), packed };
    } catch (e) {
      return { ...failure(job.abs, e), packed };
    } finally {
      // Never close the descriptor under a read still in flight.
      if (next) await next.catch(() => 0);
      fs.closeSync(o.fd);
      if (spare.length < 8) spare.push(...bufs);
    }
  }

  return { hashSmallFiles, hashRange, recycle, closePacks };
}
