import * as fs from 'node:fs';
import { createHash } from 'node:crypto';

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
 * Parses records from `buf` (which starts at a record boundary); calls `apply` for each entry of each valid
 * record. Returns how many bytes were consumed: everything up to the first record cut short by the end of `buf`.
 */
export function parseRecords(buf: Buffer, apply: (e: IndexEntry) => void): { consumed: number; damaged: number } {
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
    for (let o = pos + 8; o < end; o += ENTRY_BYTES) {
      apply({
        key: buf.toString('latin1', o, o + CID_BYTES),
        pack: buf.readUInt32LE(o + 36),
        offset: buf.readUInt32LE(o + 40) + buf.readUInt16LE(o + 44) * 0x100000000,
        length: buf.readUInt32LE(o + 46),
        timeMs: buf.readDoubleLE(o + 56),
      });
    }
    pos = end + 8;
  }
  return { consumed: pos, damaged };
}

function validAt(buf: Buffer, pos: number): boolean {
  if (pos + RECORD_OVERHEAD > buf.length) return false;
  const end = pos + 8 + buf.readUInt32LE(pos + 4) * ENTRY_BYTES;
  if (end + 8 > buf.length) return false;
  return createHash('sha256').update(buf.subarray(pos, end)).digest().compare(buf, end, end + 8, 0, 8) === 0;
}

/**
 * The index as loaded in memory: CID key -> slot in parallel typed arrays (no object per blob: loading 20,000
 * entries costs a few ms). Refreshed by reading what other processes appended since (the file only grows), or
 * reloaded whole when the garbage collector replaced the file (another inode).
 */
export class PackIndex {
  private readonly slots = new Map<string, number>();
  private packs = new Uint32Array(1024);
  private offsets = new Float64Array(1024);
  private lengths = new Uint32Array(1024);
  private times = new Float64Array(1024);
  private used = 0;
  private ino = -1;
  private pos = 0;
  /** Entries read, superseded ones included: how much a rewrite would save. */
  entriesRead = 0;
  damagedRecords = 0;

  constructor(readonly path: string) {}

  get loaded(): boolean {
    return this.ino !== -1;
  }

  get size(): number {
    return this.slots.size;
  }

  has(key: string): boolean {
    return this.slots.has(key);
  }

  get(key: string): Loc | undefined {
    const i = this.slots.get(key);
    return i === undefined ? undefined : this.loc(i);
  }

  private loc(i: number): Loc {
    return { pack: this.packs[i] as number, offset: this.offsets[i] as number, length: this.lengths[i] as number, timeMs: this.times[i] as number };
  }

  keys(): IterableIterator<string> {
    return this.slots.keys();
  }

  *entries(): IterableIterator<[string, Loc]> {
    for (const [key, i] of this.slots) yield [key, this.loc(i)];
  }

  delete(key: string): void {
    this.slots.delete(key);
  }

  private clear(): void {
    this.slots.clear();
    this.used = 0;
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
        this.ino = st.ino;
        this.pos = INDEX_MAGIC.length;
      }
      if (st.size <= this.pos) return;
      const buf = Buffer.allocUnsafe(st.size - this.pos);
      let n = 0;
      while (n < buf.length) {
        const r = fs.readSync(fd, buf, n, buf.length - n, this.pos + n);
        if (r === 0) break;
        n += r;
      }
      const { consumed, damaged } = parseRecords(buf.subarray(0, n), (e) => this.apply(e));
      this.damagedRecords += damaged;
      this.pos += consumed;
    } finally {
      fs.closeSync(fd);
    }
  }

  apply(e: IndexEntry): void {
    this.entriesRead += 1;
    if (e.pack === TOMBSTONE) {
      this.slots.delete(e.key);
      return;
    }
    let i = this.slots.get(e.key);
    if (i === undefined) {
      if (this.used === this.packs.length) this.grow();
      i = this.used++;
      this.slots.set(e.key, i);
    }
    this.packs[i] = e.pack;
    this.offsets[i] = e.offset;
    this.lengths[i] = e.length;
    this.times[i] = e.timeMs;
  }

  private grow(): void {
    const n = this.packs.length * 2;
    const p = new Uint32Array(n);
    p.set(this.packs);
    const o = new Float64Array(n);
    o.set(this.offsets);
    const l = new Uint32Array(n);
    l.set(this.lengths);
    const t = new Float64Array(n);
    t.set(this.times);
    this.packs = p;
    this.offsets = o;
    this.lengths = l;
    this.times = t;
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
