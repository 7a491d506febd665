import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fsyncDirectory } from '@assay/core';
import { BLOB_HEADER, CID_BYTES, PACK_MAGIC, TOMBSTONE } from './pack-index';

/** Appends smaller than this go through the batch's write buffer. */
const WRITE_BUFFER = 1 << 20;
/** Dirty bytes in a pack after which write-back is started in the background (fdatasync off the main thread). */
const BACKGROUND_SYNC_BYTES = 64 << 20;

/** Where a writer's pack files go (the store's `packs/` folder) and how large one may grow. */
export interface PackFiles {
  readonly packsDir: string;
  readonly packMaxBytes: number;
  packPath(pack: number): string;
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

export function fdatasyncAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.fdatasync(fd, (e) => (e ? reject(e) : resolve())));
}

/**
 * Appends blobs to pack files this writer owns (created O_EXCL under a random number), rolling over to a new pack
 * at the store's `packMaxBytes`. Small appends are buffered; write-back of big batches is started in the
 * background (an fdatasync on libuv's thread pool) so that the flush at commit has little left to do.
 */
export class PackWriter {
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
    private readonly store: PackFiles,
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
