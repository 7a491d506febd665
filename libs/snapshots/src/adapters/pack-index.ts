import * as fs from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';

/**
 * The on-disk formats of the pack store (docs/snapshots-format.md, section 9):
 *
 * Pack file `packs/<8 hex>.pack`: the 8 bytes `ASXPACK1`, then blobs back to back, each as
 *   cid (36 bytes: the binary CIDv1, version 0x01, codec 0x55 raw or 0x71 dag-cbor, 0x12 0x20, 32-byte sha2-256 digest)
 *   length (u32 LE) | the blob's bytes.
 * Index file `packs/index`: the 8 bytes `ASXIDX01`, then records appended by commits, each one write():
 *   magic `ASXR` | count (u32 LE) | count entries of 64 bytes | the first 8 bytes of the sha2-256 of everything before.
 * Entry (64 bytes): cid (36) | pack number (u32 LE; 0xffffffff = tombstone: the blob was deleted) |
 *   offset of the blob's bytes in the pack (u48 LE) | length (u32 LE) | 6 zero bytes | commit time (f64 LE, ms).
 * Later entries for the same CID replace earlier ones. A record that fails its checksum is ignored and parsing
 * resumes at the next `ASXR` that starts a valid record; a record cut short at the end of the file is not read yet.
 */
export const PACK_MAGIC = Buffer.from('ASXPACK1');
export const INDEX_MAGIC = Buffer.from('ASXIDX01');
export const RECORD_MAGIC = Buffer.from('ASXR');
export const TABLE_MAGIC = Buffer.from('ASXTAB01');
/** A table is saved again once a load would have to replay at least this many entries (or 1/8 of the table). */
export const TABLE_MIN_BEHIND = 2048;
export const CID_BYTES = 36;
export const BLOB_HEADER = CID_BYTES + 4;
export const ENTRY_BYTES = 64;
export const RECORD_OVERHEAD = 8 + 8;
export const TOMBSTONE = 0xffffffff;

export interface Loc {
  /** Pack number (file `<8 hex>.pack`). */
  readonly pack: number;
  /** Offset of the blob's bytes (its 40-byte header is just before). */
  readonly offset: number;
  readonly length: number;
  readonly timeMs: number;
}

export interface IndexEntry extends Loc {
  /** The binary CID, as a latin1 string (the in-memory key). */
  readonly key: string;
}

export function packName(pack: number): string {
  return `${(pack + 0x100000000).toString(16).slice(1)}.pack`;
}

export function parsePackName(name: string): number | null {
  const m = /^([0-9a-f]{8})\.pack$/.exec(name);
  return m ? parseInt(m[1] as string, 16) : null;
}

/** One record: the entries it holds, ready to append in one write. */
export function encodeRecord(entries: readonly IndexEntry[]): Buffer {
  const buf = Buffer.alloc(8 + entries.length * ENTRY_BYTES + 8);
  RECORD_MAGIC.copy(buf, 0);
  buf.writeUInt32LE(entries.length, 4);
  let o = 8;
  for (const e of entries) {
    buf.write(e.key, o, CID_BYTES, 'latin1');
    buf.writeUInt32LE(e.pack, o + 36);
    buf.writeUIntLE(e.offset, o + 40, 6);
    buf.writeUInt32LE(e.length, o + 46);
    buf.writeDoubleLE(e.timeMs, o + 56);
    o += ENTRY_BYTES;
  }
  createHash('sha256').update(buf.subarray(0, o)).digest().copy(buf, o, 0, 8);
  return buf;
}

/**
 * Parses records from `buf` (which starts at a record boundary); calls `apply(buf, at)` with the offset of each
 * 64-byte entry of each valid record (no object per entry: loading an index of many thousand blobs stays in the
 * milliseconds). Returns how many bytes were consumed: everything up to the first record cut short by the end of
 * `buf`.
 */
export function parseRecords(buf: Buffer, apply: (buf: Buffer, at: number) => void): { consumed: number; damaged: number } {
  let pos = 0;
  let damaged = 0;
  while (pos + RECORD_OVERHEAD <= buf.length) {
    if (buf.compare(RECORD_MAGIC, 0, 4, pos, pos + 4) !== 0) {
      damaged += 1;
      const next = buf.indexOf(RECORD_MAGIC, pos + 1);
      if (next < 0) return { consumed: buf.length, damaged };
      pos = next;
      continue;
    }
    const count = buf.readUInt32LE(pos + 4);
    const end = pos + 8 + count * ENTRY_BYTES;
    if (end + 8 > buf.length) {
      // Cut short: either still being written by another process, or torn by a crash and followed by nothing
      // valid. Look for a complete valid record after it; if there is none, wait for more bytes.
      const next = buf.indexOf(RECORD_MAGIC, pos + 4);
      if (next < 0 || !validAt(buf, next)) return { consumed: pos, damaged };
      damaged += 1;
      pos = next;
      continue;
    }
    const sum = createHash('sha256').update(buf.subarray(pos, end)).digest();
    if (sum.compare(buf, end, end + 8, 0, 8) !== 0) {
      damaged += 1;
      const next = buf.indexOf(RECORD_MAGIC, pos + 4);
      if (next < 0) return { consumed: buf.length, damaged };
      pos = next;
      continue;
    }
    for (let o = pos + 8; o < end; o += ENTRY_BYTES) apply(buf, o);
    pos = end + 8;
  }
  return { consumed: pos, damaged };
}

function validAt(buf: Buffer, pos: number): boolean {
  if (pos + RECORD_OVERHEAD > buf.length) return false;
  const end = pos + 8 + buf.readUInt32LE(pos + 4) * ENTRY_BYTES;
  if (end + 8 > buf.length) return false;
  return (
    createHash('sha256')
      .update(buf.subarray(pos, end))
      .digest()
      .compare(buf, end, end + 8, 0, 8) === 0
  );
}

const EMPTY = 0;
const DELETED = -1;

/**
 * The index as loaded in memory: an open-addressing hash table over the 36 CID bytes, with the locations in
 * parallel typed arrays (no string or object per blob: loading an index of 20,000 blobs costs a few ms, and the
 * table costs about 80 bytes per blob). Refreshed by reading what other processes appended since (the file only
 * grows), or reloaded whole when the garbage collector replaced the file (another inode). Keys are the binary
 * CIDs as latin1 strings at the interface.
 */
export class PackIndex {
  /** Bucket -> slot + 1, EMPTY, or DELETED. Its size is a power of two, at least twice the slots in use. */
  private table = new Int32Array(4096);
  private keyBytes = Buffer.alloc(1024 * CID_BYTES);
  private packs = new Uint32Array(1024);
  private offsets = new Float64Array(1024);
  private lengths = new Uint32Array(1024);
  private times = new Float64Array(1024);
  private live = new Uint8Array(1024);
  private used = 0;
  private count = 0;
  private ino = -1;
  private pos = 0;
  private readonly probe = Buffer.alloc(CID_BYTES);
  /** The index file and position the saved table covers (-1: none known). */
  private tableIno = -1;
  private tablePos = 0;
  /** A secret mixed into bucket choice (blob CIDs come from content an agent controls); kept with a saved table. */
  private seed = randomBytes(4).readUInt32LE(0) >>> 0;
  /** Entries read, superseded ones included: how much a rewrite would save. */
  entriesRead = 0;
  damagedRecords = 0;
  /** Whether the last full load started from a saved table (see saveTable). */
  loadedFromTable = false;

  constructor(readonly path: string) {}

  get loaded(): boolean {
    return this.ino !== -1;
  }

  get size(): number {
    return this.count;
  }

  has(key: string): boolean {
    return this.find(key) >= 0;
  }

  get(key: string): Loc | undefined {
    const i = this.find(key);
    return i < 0 ? undefined : this.loc(i);
  }

  private loc(i: number): Loc {
    return { pack: this.packs[i] as number, offset: this.offsets[i] as number, length: this.lengths[i] as number, timeMs: this.times[i] as number };
  }

  private keyAt(i: number): string {
    return this.keyBytes.toString('latin1', i * CID_BYTES, (i + 1) * CID_BYTES);
  }

  *keys(): IterableIterator<string> {
    for (let i = 0; i < this.used; i++) if (this.live[i] === 1) yield this.keyAt(i);
  }

  *entries(): IterableIterator<[string, Loc]> {
    for (let i = 0; i < this.used; i++) if (this.live[i] === 1) yield [this.keyAt(i), this.loc(i)];
  }

  delete(key: string): void {
    if (key.length !== CID_BYTES) return;
    this.probe.write(key, 0, CID_BYTES, 'latin1');
    this.remove(this.probe, 0);
  }

  private clear(): void {
    this.table.fill(EMPTY);
    this.live.fill(0);
    this.used = 0;
    this.count = 0;
  }

  /** The bucket to start probing at for the 36 key bytes at `at` in `buf` (two digest words, mixed with SEED). */
  private bucket(buf: Buffer, at: number): number {
    let h = Math.imul(buf.readUInt32LE(at + 4) ^ this.seed, 0x9e3779b1);
    h ^= Math.imul(buf.readUInt32LE(at + 8) + this.seed, 0x85ebca77);
    h ^= h >>> 15;
    return (h >>> 0) & (this.table.length - 1);
  }

  private same(slot: number, buf: Buffer, at: number): boolean {
    // A plain loop: Buffer#compare's fixed cost is several times that of comparing 36 bytes.
    const k = this.keyBytes;
    const base = slot * CID_BYTES;
    for (let i = CID_BYTES - 1; i >= 0; i--) if (k[base + i] !== buf[at + i]) return false;
    return true;
  }

  /** The slot of the key at `at` in `buf`, or -1. */
  private lookup(buf: Buffer, at: number): number {
    const mask = this.table.length - 1;
    for (let b = this.bucket(buf, at); ; b = (b + 1) & mask) {
      const v = this.table[b] as number;
      if (v === EMPTY) return -1;
      if (v > 0 && this.same(v - 1, buf, at)) return v - 1;
    }
  }

  private find(key: string): number {
    if (key.length !== CID_BYTES) return -1;
    this.probe.write(key, 0, CID_BYTES, 'latin1');
    return this.lookup(this.probe, 0);
  }

  private remove(buf: Buffer, at: number): void {
    const mask = this.table.length - 1;
    for (let b = this.bucket(buf, at); ; b = (b + 1) & mask) {
      const v = this.table[b] as number;
      if (v === EMPTY) return;
      if (v > 0 && this.same(v - 1, buf, at)) {
        this.table[b] = DELETED;
        this.live[v - 1] = 0;
        this.count -= 1;
        return;
      }
    }
  }

  /** Where the table is saved between processes (see saveTable). */
  get tablePath(): string {
    return `${this.path}.tab`;
  }

  /**
   * Saves the loaded table next to the index (`index.tab`), so that the next process loads it in one read
   * instead of inserting every entry again, and then reads only the records appended since. It is a cache: it
   * names the index file (inode), the position it covers and the 8 checksum bytes that end the index there, and
   * carries a SHA-256 of itself; any mismatch and the index is read whole, as without it. Written to a temporary
   * file and renamed; not fsynced (losing it costs one full read). Blob reads check every CID whatever it says.
   *
   * Layout (little-endian): `ASXTAB01`, u32 seed, u32 used slots, u32 live entries, u32 table buckets, f64 index
   * inode, f64 position, 8 bytes of the index before that position; then the buckets (i32 each), the keys (36
   * bytes per slot), packs (u32), offsets (f64), lengths (u32), times (f64), live flags (u8); then the first 16
   * bytes of the SHA-256 of everything before.
   */
  saveTable(): void {
    if (!this.loaded || this.ino === 0 || this.pos < INDEX_MAGIC.length + RECORD_OVERHEAD) return;
    // Only when the records a load would have to replay are many: most commits add a few entries, and writing the
    // whole table each time would cost more than replaying them.
    const behind = (this.pos - this.tablePos) / ENTRY_BYTES;
    if (this.tableIno === this.ino && behind < Math.max(TABLE_MIN_BEHIND, this.count / 8)) return;
    const tail = this.readAt(this.pos - 8, 8);
    if (!tail) return;
    const u = this.used;
    const parts: Uint8Array[] = [];
    const head = Buffer.alloc(48);
    TABLE_MAGIC.copy(head, 0);
    head.writeUInt32LE(this.seed, 8);
    head.writeUInt32LE(u, 12);
    head.writeUInt32LE(this.count, 16);
    head.writeUInt32LE(this.table.length, 20);
    head.writeDoubleLE(this.ino, 24);
    head.writeDoubleLE(this.pos, 32);
    tail.copy(head, 40);
    parts.push(head);
    const bytesOf = (a: Int32Array | Uint32Array | Float64Array | Uint8Array, n: number) => new Uint8Array(a.buffer, a.byteOffset, n * a.BYTES_PER_ELEMENT);
    parts.push(bytesOf(this.table, this.table.length), this.keyBytes.subarray(0, u * CID_BYTES));
    parts.push(bytesOf(this.packs, u), bytesOf(this.offsets, u), bytesOf(this.lengths, u), bytesOf(this.times, u), bytesOf(this.live, u));
    const h = createHash('sha256');
    for (const p of parts) h.update(p);
    parts.push(h.digest().subarray(0, 16));
    const tmp = `${this.tablePath}.${process.pid}.tmp`;
    try {
      fs.writeFileSync(tmp, Buffer.concat(parts));
      fs.renameSync(tmp, this.tablePath);
      this.tableIno = this.ino;
      this.tablePos = this.pos;
    } catch {
      fs.rmSync(tmp, { force: true });
    }
  }

  /** Loads a saved table that matches the index file `ino` of `size` bytes; false if there is none that does. */
  private loadTable(ino: number, size: number): boolean {
    let buf: Buffer;
    try {
      buf = fs.readFileSync(this.tablePath);
    } catch {
      return false;
    }
    if (buf.length < 64 || !buf.subarray(0, 8).equals(TABLE_MAGIC)) return false;
    const u = buf.readUInt32LE(12);
    const buckets = buf.readUInt32LE(20);
    const pos = buf.readDoubleLE(32);
    const want = 48 + buckets * 4 + u * (CID_BYTES + 4 + 8 + 4 + 8 + 1) + 16;
    if (buf.length !== want || buckets === 0 || (buckets & (buckets - 1)) !== 0 || u * 2 > buckets) return false;
    if (buf.readDoubleLE(24) !== ino || pos > size || pos < INDEX_MAGIC.length) return false;
    const sum = createHash('sha256')
      .update(buf.subarray(0, want - 16))
      .digest();
    if (sum.compare(buf, want - 16, want, 0, 16) !== 0) return false;
    const tail = this.readAt(pos - 8, 8);
    if (!tail || tail.compare(buf, 40, 48) !== 0) return false;
    let cap = 1024;
    while (cap < u) cap *= 2;
    let at = 48;
    const take = <T extends Int32Array | Uint32Array | Float64Array | Uint8Array>(into: T, n: number): T => {
      const bytes = n * into.BYTES_PER_ELEMENT;
      buf.copy(new Uint8Array(into.buffer, into.byteOffset, bytes), 0, at, at + bytes);
      at += bytes;
      return into;
    };
    this.table = take(new Int32Array(buckets), buckets);
    const keys = Buffer.alloc(cap * CID_BYTES);
    buf.copy(keys, 0, at, at + u * CID_BYTES);
    at += u * CID_BYTES;
    this.keyBytes = keys;
    this.packs = take(new Uint32Array(cap), u);
    this.offsets = take(new Float64Array(cap), u);
    this.lengths = take(new Uint32Array(cap), u);
    this.times = take(new Float64Array(cap), u);
    this.live = take(new Uint8Array(cap), u);
    this.seed = buf.readUInt32LE(8);
    this.used = u;
    this.count = buf.readUInt32LE(16);
    this.ino = ino;
    this.pos = pos;
    this.tableIno = ino;
    this.tablePos = pos;
    return true;
  }

  private readAt(pos: number, n: number): Buffer | null {
    let fd: number;
    try {
      fd = fs.openSync(this.path, 'r');
    } catch {
      return null;
    }
    try {
      const b = Buffer.alloc(n);
      return fs.readSync(fd, b, 0, n, pos) === n ? b : null;
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Reads what was appended since the last call (or everything, after a rewrite). */
  refresh(): void {
    let fd: number;
    try {
      fd = fs.openSync(this.path, 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
        this.clear();
        this.ino = 0;
        this.pos = 0;
        return;
      }
      throw e;
    }
    try {
      const st = fs.fstatSync(fd);
      if (st.ino !== this.ino) {
        this.clear();
        this.entriesRead = 0;
        this.damagedRecords = 0;
        this.loadedFromTable = this.loadTable(st.ino, st.size);
        if (!this.loadedFromTable) {
          this.clear();
          this.ino = st.ino;
          this.pos = INDEX_MAGIC.length;
        }
      }
      if (st.size <= this.pos) return;
      const buf = Buffer.allocUnsafe(st.size - this.pos);
      let n = 0;
      while (n < buf.length) {
        const r = fs.readSync(fd, buf, n, buf.length - n, this.pos + n);
        if (r === 0) break;
        n += r;
      }
      const { consumed, damaged } = parseRecords(buf.subarray(0, n), (b, o) => this.applyAt(b, o));
      this.damagedRecords += damaged;
      this.pos += consumed;
    } finally {
      fs.closeSync(fd);
    }
  }

  apply(e: IndexEntry): void {
    const b = Buffer.from(e.key, 'latin1');
    if (b.length !== CID_BYTES) throw new Error(`internal: a pack index key must be ${CID_BYTES} bytes`);
    this.set(b, 0, e.pack, e.offset, e.length, e.timeMs);
  }

  /** Applies the 64-byte entry at `at` in `buf`. */
  private applyAt(buf: Buffer, at: number): void {
    this.set(
      buf,
      at,
      buf.readUInt32LE(at + 36),
      buf.readUInt32LE(at + 40) + buf.readUInt16LE(at + 44) * 0x100000000,
      buf.readUInt32LE(at + 46),
      buf.readDoubleLE(at + 56),
    );
  }

  private set(buf: Buffer, at: number, pack: number, offset: number, length: number, timeMs: number): void {
    this.entriesRead += 1;
    if (pack === TOMBSTONE) {
      this.remove(buf, at);
      return;
    }
    let i = this.lookup(buf, at);
    if (i < 0) {
      if (this.used === this.packs.length) this.grow();
      // Buckets in use (deleted ones included) stay under half the table.
      if ((this.used + 1) * 2 > this.table.length) this.rehash(this.table.length * 2);
      i = this.used++;
      const k = this.keyBytes;
      const base = i * CID_BYTES;
      for (let j = 0; j < CID_BYTES; j++) k[base + j] = buf[at + j] as number;
      this.live[i] = 1;
      this.count += 1;
      this.insert(i);
    }
    this.packs[i] = pack;
    this.offsets[i] = offset;
    this.lengths[i] = length;
    this.times[i] = timeMs;
  }

  private insert(slot: number): void {
    const mask = this.table.length - 1;
    let b = this.bucket(this.keyBytes, slot * CID_BYTES);
    while ((this.table[b] as number) > 0) b = (b + 1) & mask;
    this.table[b] = slot + 1;
  }

  private rehash(size: number): void {
    this.table = new Int32Array(size);
    for (let i = 0; i < this.used; i++) if (this.live[i] === 1) this.insert(i);
  }

  private grow(): void {
    const n = this.packs.length * 2;
    const k = Buffer.alloc(n * CID_BYTES);
    this.keyBytes.copy(k);
    this.keyBytes = k;
    const grown = <T extends Uint32Array | Float64Array | Uint8Array>(a: T, make: (n: number) => T): T => {
      const b = make(n);
      b.set(a);
      return b;
    };
    this.packs = grown(this.packs, (x) => new Uint32Array(x));
    this.offsets = grown(this.offsets, (x) => new Float64Array(x));
    this.lengths = grown(this.lengths, (x) => new Uint32Array(x));
    this.times = grown(this.times, (x) => new Float64Array(x));
    this.live = grown(this.live, (x) => new Uint8Array(x));
  }
}

/** Creates the index file if missing (magic only), durably. */
export function ensureIndexFile(path: string): void {
  try {
    const fd = fs.openSync(path, 'wx', 0o644);
    try {
      fs.writeSync(fd, INDEX_MAGIC);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
}

/** Appends one record (one write on an O_APPEND descriptor, so concurrent writers never interleave) and fdatasyncs it. */
export function appendRecord(path: string, entries: readonly IndexEntry[], durable: boolean): void {
  if (entries.length === 0) return;
  const rec = encodeRecord(entries);
  const fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_APPEND);
  try {
    let off = 0;
    while (off < rec.length) off += fs.writeSync(fd, rec, off, rec.length - off);
    if (durable) fs.fdatasyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
