/**
 * The file-reading and hashing kernel. It runs both on the main thread and inside worker threads: the worker
 * source is `createHashKernel.toString()`, so this function must stay self-contained (no references to anything
 * outside its body except `require` of Node built-ins).
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

export interface KernelStaging {
  blocksDir: string;
  tempPrefix: string;
}

/** Stats travel between threads packed as 6 int64 per file: dev, ino, size, mode, mtime ns, ctime ns. */
export const STAT_WORDS = 6;

export interface SmallFileJob {
  paths: string[];
  /** The walk's lstat of each file, packed (STAT_WORDS per file; dev and ino as two's complement int64). */
  expect: BigInt64Array;
  chunkSize: number;
  staging: KernelStaging | null;
  procCheck: boolean;
}

export interface RangeJob {
  abs: string;
  expect: KernelStat;
  /** First chunk index and one past the last. */
  start: number;
  end: number;
  chunkSize: number;
  staging: KernelStaging | null;
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
  staged: string[];
  stagedBytes: number;
}

export type RangeOutput =
  | { ok: true; digests: Uint8Array; stat: KernelStat; staged: string[]; stagedBytes: number }
  | (KernelFailure & { staged: string[]; stagedBytes: number });

/** Renames staged blobs to their final names (after they were made durable). */
export interface PublishJob {
  from: string[];
  to: string[];
}

export interface HashKernel {
  hashSmallFiles(job: SmallFileJob): SmallFilesOutput;
  hashRange(job: RangeJob): Promise<RangeOutput>;
  publish(job: PublishJob): { renamed: number };
}

/* istanbul ignore next */
export function createHashKernel(): HashKernel {
  const fs: typeof import('node:fs') = require('node:fs');
  const crypto: typeof import('node:crypto') = require('node:crypto');
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;
  const OPEN_READ = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
  const OPEN_NEW = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
  const READ_BLOCK = 4 << 20;
  const B32 = 'abcdefghijklmnopqrstuvwxyz234567';
  let small: Buffer | null = null;
  // Read buffers for hashRange; several ranges may be in flight at once, so each call takes its own pair.
  const spare: Buffer[] = [];

  /** CIDv1 raw sha2-256 as base32 (multibase 'b'), and its shard (hex of the digest's first byte). */
  function rawCid(digest: Uint8Array): { cid: string; shard: string } {
    const bytes = new Uint8Array(36);
    bytes[0] = 0x01;
    bytes[1] = 0x55;
    bytes[2] = 0x12;
    bytes[3] = 0x20;
    bytes.set(digest, 4);
    let out = 'b';
    let bits = 0;
    let value = 0;
    for (let i = 0; i < bytes.length; i++) {
      value = (value << 8) | (bytes[i] as number);
      bits += 8;
      while (bits >= 5) {
        out += B32[(value >>> (bits - 5)) & 31];
        bits -= 5;
      }
    }
    if (bits > 0) out += B32[(value << (5 - bits)) & 31];
    return { cid: out, shard: ((digest[0] as number) + 0x100).toString(16).slice(1) };
  }

  function stage(staging: KernelStaging, digest: Uint8Array, data: Uint8Array, staged: string[]): number {
    const { cid, shard } = rawCid(digest);
    const dir = `${staging.blocksDir}/${shard}/`;
    if (fs.existsSync(dir + cid)) return 0;
    let fd: number;
    try {
      fd = fs.openSync(dir + staging.tempPrefix + cid, OPEN_NEW, 0o444);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return 0; // staged by another job of this batch
      throw e;
    }
    staged.push(cid); // reported even if the write fails, so that an abort removes the file
    try {
      let off = 0;
      while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off);
    } finally {
      fs.closeSync(fd);
    }
    return data.length;
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
      staged: [],
      stagedBytes: 0,
    };
    const fail = (i: number, f: KernelFailure) => {
      out.status[i] = f.code === 'CHANGED' ? 1 : f.code === 'ESCAPE' ? 2 : 3;
      out.messages[i] = f.message;
      out.errnos[i] = f.errno ?? '';
    };
    if (!small || small.length < job.chunkSize + 1) small = Buffer.allocUnsafe(job.chunkSize + 1);
    const buf = small;
    const e = job.expect;
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
        let got = 0;
        for (;;) {
          const r = fs.readSync(o.fd, buf, got, buf.length - got, got);
          if (r === 0) break;
          got += r;
          if (got >= buf.length) break;
        }
        if (got !== o.st.size) {
          fail(i, changed(abs, `was ${o.st.size} bytes when opened but ${got} bytes were read`));
          continue;
        }
        const data = buf.subarray(0, got);
        const digest = crypto.createHash('sha256').update(data).digest();
        if (job.staging) out.stagedBytes += stage(job.staging, digest, data, out.staged);
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
      } catch (err) {
        fail(i, failure(abs, err));
      } finally {
        fs.closeSync(o.fd);
      }
    }
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

  /** Hashes chunks [start, end) of a file; reads are double-buffered so the next read overlaps this hash. */
  async function hashRange(job: RangeJob): Promise<RangeOutput> {
    const o = openChecked(job.abs, job.expect, job.procCheck);
    if (!('fd' in o)) return { ...o, staged: [], stagedBytes: 0 };
    const staged: string[] = [];
    let stagedBytes = 0;
    let next: Promise<number> | null = null;
    let bufs: Buffer[] = [];
    try {
      const cs = job.chunkSize;
      const perRead = Math.max(1, Math.floor(READ_BLOCK / cs));
      const blockBytes = perRead * cs;
      const take = (): Buffer => {
        const b = spare.pop();
        return b && b.length >= blockBytes ? b : Buffer.allocUnsafe(blockBytes);
      };
      bufs = [take(), take()];
      const size = o.st.size;
      const from = job.start * cs;
      const to = Math.min(size, job.end * cs);
      const digests = new Uint8Array((job.end - job.start) * 32);
      let pos = from;
      let which = 0;
      next = readAt(o.fd, bufs[0] as Buffer, Math.min(blockBytes, to - pos), pos);
      let chunkIndex = 0;
      while (next) {
        const want = Math.min(blockBytes, to - pos);
        const got: number = await next;
        next = null;
        if (got !== want) return { ...changed(job.abs, `shrank while it was read (expected ${want} bytes at offset ${pos})`), staged, stagedBytes };
        const buf = bufs[which] as Buffer;
        const nextPos: number = pos + got;
        which ^= 1;
        next = nextPos < to ? readAt(o.fd, bufs[which] as Buffer, Math.min(blockBytes, to - nextPos), nextPos) : null;
        for (let off = 0; off < got; off += cs) {
          const data = buf.subarray(off, Math.min(got, off + cs));
          const digest = crypto.createHash('sha256').update(data).digest();
          digests.set(digest, chunkIndex * 32);
          chunkIndex += 1;
          if (job.staging) stagedBytes += stage(job.staging, digest, data, staged);
        }
        pos = nextPos;
      }
      if (chunkIndex !== job.end - job.start) return { ...changed(job.abs, 'has fewer chunks than its size promised'), staged, stagedBytes };
      const after = toStat(fs.fstatSync(o.fd, { bigint: true }));
      if (!same(after, o.st)) return { ...changed(job.abs, 'changed while it was read'), staged, stagedBytes };
      return { ok: true, digests, stat: after, staged, stagedBytes };
    } catch (e) {
      return { ...failure(job.abs, e), staged, stagedBytes };
    } finally {
      // Never close the descriptor under a read still in flight.
      if (next) await next.catch(() => 0);
      fs.closeSync(o.fd);
      if (spare.length < 8) spare.push(...bufs);
    }
  }

  function publish(job: PublishJob): { renamed: number } {
    for (let i = 0; i < job.from.length; i++) fs.renameSync(job.from[i] as string, job.to[i] as string);
    return { renamed: job.from.length };
  }

  return { hashSmallFiles, hashRange, publish };
}
