/**
 * A small, strict tar codec (POSIX ustar with PAX extended headers), enough for what Assay moves in and out of
 * containers: build contexts, the hidden tests streamed into a Judge, and archives the daemon hands back.
 *
 * Writing is deterministic (mtime 0, uid/gid 0, no user names), so the same tree always gives the same bytes.
 * Reading is defensive: every header checksum is verified, sizes are bounded by the caller, names are never
 * resolved against a file system here (the caller decides what a name means), and an archive that ends in the
 * middle of an entry is an error.
 */
import { AssayError } from '@assay/core';

export const TAR_BLOCK = 512;

export type TarEntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'other';

export interface TarHeader {
  /** The name as written in the archive (`/`-separated; a directory may end with `/`). */
  readonly path: string;
  readonly type: TarEntryType;
  /** Permission bits (0o7777 at most). */
  readonly mode: number;
  readonly size: number;
  /** Target of a symlink or hard link, else ''. */
  readonly linkTarget: string;
  /** The raw type flag, for messages. */
  readonly flag: string;
}

export interface TarEntryInput {
  readonly path: string;
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode: number;
  /** Size of a file's content (0 for directories and links). */
  readonly size?: number;
  readonly linkTarget?: string;
}

function tarError(message: string, details: Record<string, unknown> = {}): AssayError {
  return new AssayError('CONTAINER_ARCHIVE_INVALID', 'integrity', message, { details });
}

const enc = new TextEncoder();

function writeString(buf: Buffer, off: number, len: number, s: string): void {
  const b = Buffer.from(s, 'utf8');
  b.copy(buf, off, 0, Math.min(len, b.length));
}

function writeOctal(buf: Buffer, off: number, len: number, n: number): void {
  const s = n.toString(8).padStart(len - 1, '0');
  if (s.length > len - 1) throw tarError(`value ${n} does not fit a ${len}-byte tar field`);
  writeString(buf, off, len - 1, s);
  buf[off + len - 1] = 0;
}

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  const bodyLen = Buffer.byteLength(body, 'utf8');
  let len = bodyLen + String(bodyLen).length;
  if (String(len).length !== String(bodyLen).length) len = bodyLen + String(len).length;
  return Buffer.from(`${len}${body}`, 'utf8');
}

function rawHeader(name: string, flag: string, mode: number, size: number, linkname: string): Buffer {
  const h = Buffer.alloc(TAR_BLOCK);
  writeString(h, 0, 100, name);
  writeOctal(h, 100, 8, mode & 0o7777);
  writeOctal(h, 108, 8, 0);
  writeOctal(h, 116, 8, 0);
  writeOctal(h, 124, 12, size);
  writeOctal(h, 136, 12, 0);
  h.fill(0x20, 148, 156);
  h.write(flag, 156, 'latin1');
  writeString(h, 157, 100, linkname);
  h.write('ustar\0', 257, 'latin1');
  h.write('00', 263, 'latin1');
  let sum = 0;
  for (let i = 0; i < TAR_BLOCK; i++) sum += h[i] as number;
  writeOctal(h, 148, 7, sum);
  h[155] = 0x20;
  return h;
}

/** Zero padding after `size` bytes of content. */
export function tarPadding(size: number): Buffer {
  const rem = size % TAR_BLOCK;
  return Buffer.alloc(rem === 0 ? 0 : TAR_BLOCK - rem);
}

/** The end-of-archive marker: two zero blocks. */
export const TAR_END: Buffer = Buffer.alloc(TAR_BLOCK * 2);

/** Header block(s) for one entry; a PAX header precedes it when the name, link or size does not fit ustar. */
export function tarHeader(e: TarEntryInput): Buffer {
  if (e.path.length === 0 || e.path.includes('\0')) throw tarError(`invalid tar entry name ${JSON.stringify(e.path)}`);
  const name = e.type === 'dir' && !e.path.endsWith('/') ? `${e.path}/` : e.path;
  const size = e.type === 'file' ? (e.size ?? 0) : 0;
  const link = e.type === 'symlink' ? (e.linkTarget ?? '') : '';
  if (!Number.isSafeInteger(size) || size < 0) throw tarError(`invalid size for ${e.path}`);
  const flag = e.type === 'file' ? '0' : e.type === 'dir' ? '5' : '2';
  const pax: Buffer[] = [];
  if (enc.encode(name).length > 100 || /[^\x20-\x7e]/.test(name)) pax.push(paxRecord('path', name));
  if (enc.encode(link).length > 100 || /[^\x20-\x7e]/.test(link)) pax.push(paxRecord('linkpath', link));
  if (size > 0o77777777777) pax.push(paxRecord('size', String(size)));
  const main = rawHeader(name.slice(0, 100), flag, e.mode, size > 0o77777777777 ? 0 : size, link.slice(0, 100));
  if (pax.length === 0) return main;
  const body = Buffer.concat(pax);
  return Buffer.concat([rawHeader('PaxHeaders/entry', 'x', 0o644, body.length, ''), body, tarPadding(body.length), main]);
}

/** A complete archive held in memory (small inputs only: tests and unit fixtures). */
export function packTarSync(entries: ReadonlyArray<TarEntryInput & { content?: Uint8Array | string }>): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const content = e.content === undefined ? Buffer.alloc(0) : Buffer.from(e.content);
    parts.push(tarHeader({ ...e, size: e.type === 'file' ? content.length : 0 }));
    if (e.type === 'file') parts.push(content, tarPadding(content.length));
  }
  parts.push(TAR_END);
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

function readString(b: Buffer, off: number, len: number): string {
  const end = b.indexOf(0, off);
  return b.toString('utf8', off, end < 0 || end > off + len ? off + len : end);
}

function readNumber(b: Buffer, off: number, len: number, what: string): number {
  const first = b[off] as number;
  if (first & 0x80) {
    // GNU base-256
    let n = 0;
    for (let i = 1; i < len; i++) n = n * 256 + (b[off + i] as number);
    n += (first & 0x7f) * 256 ** (len - 1);
    if (!Number.isSafeInteger(n)) throw tarError(`tar ${what} field is too large`);
    return n;
  }
  const s = b
    .toString('latin1', off, off + len)
    .replace(/[\0 ]+$/g, '')
    .replace(/^[ ]+/, '');
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw tarError(`tar ${what} field is not octal: ${JSON.stringify(s)}`);
  const n = parseInt(s, 8);
  if (!Number.isSafeInteger(n)) throw tarError(`tar ${what} field is too large`);
  return n;
}

function checksumOk(h: Buffer): boolean {
  const stored = readNumber(h, 148, 8, 'checksum');
  let sum = 0;
  for (let i = 0; i < TAR_BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (h[i] as number);
  return sum === stored;
}

function parsePax(body: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let off = 0;
  while (off < body.length) {
    const sp = body.indexOf(0x20, off);
    if (sp < 0) throw tarError('malformed PAX header');
    const len = Number(body.toString('latin1', off, sp));
    if (!Number.isSafeInteger(len) || len <= 0 || off + len > body.length) throw tarError('malformed PAX record length');
    const rec = body.toString('utf8', sp + 1, off + len - 1);
    const eq = rec.indexOf('=');
    if (eq < 0) throw tarError('malformed PAX record');
    out.set(rec.slice(0, eq), rec.slice(eq + 1));
    off += len;
  }
  return out;
}

function typeOf(flag: string): TarEntryType {
  if (flag === '0' || flag === '\0' || flag === '7') return 'file';
  if (flag === '5') return 'dir';
  if (flag === '2') return 'symlink';
  if (flag === '1') return 'hardlink';
  return 'other';
}

export interface ReadTarOptions {
  /** Most archive bytes read; beyond it the read fails with CONTAINER_ARCHIVE_TOO_LARGE. */
  readonly maxArchiveBytes: number;
  /** Most metadata bytes (PAX / GNU long names) per entry. */
  readonly maxMetaBytes?: number;
  /** Whether to keep an entry's content, and at most how many bytes (larger contents are reported, not kept). */
  readonly keep?: (h: TarHeader) => number | false;
}

export interface TarRecord {
  readonly header: TarHeader;
  /** The content when `keep` asked for it and it fits, else null. */
  readonly content: Buffer | null;
  /** True when `keep` asked for the content but it was larger than allowed. */
  readonly tooLarge: boolean;
}

/** A byte source consumed block by block. */
class Blocks {
  private chunks: Buffer[] = [];
  private have = 0;
  private done = false;
  total = 0;
  constructor(
    private readonly it: AsyncIterator<Uint8Array>,
    private readonly max: number,
  ) {}

  private async fill(n: number): Promise<boolean> {
    while (this.have < n && !this.done) {
      const r = await this.it.next();
      if (r.done) {
        this.done = true;
        break;
      }
      const b = Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength);
      this.total += b.length;
      if (this.total > this.max) {
        throw new AssayError('CONTAINER_ARCHIVE_TOO_LARGE', 'refused', `the archive is larger than ${this.max} bytes`, { details: { limit: this.max } });
      }
      this.chunks.push(b);
      this.have += b.length;
    }
    return this.have >= n;
  }

  /** Exactly n bytes, or null at a clean end of input (nothing left). */
  async take(n: number): Promise<Buffer | null> {
    if (!(await this.fill(n))) {
      if (this.have === 0) return null;
      throw tarError(`the archive ends in the middle of a block (${this.have} of ${n} bytes)`);
    }
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.have = rest.length;
    return Buffer.from(out);
  }

  /** Skips n bytes without keeping them. */
  async skip(n: number): Promise<void> {
    let left = n;
    while (left > 0) {
      const step = Math.min(left, 1 << 20);
      const b = await this.take(step);
      if (!b) throw tarError('the archive ends in the middle of an entry');
      left -= step;
    }
  }
}

const padded = (n: number): number => Math.ceil(n / TAR_BLOCK) * TAR_BLOCK;

/** Reads an archive entry by entry. Content is kept only where `keep` says so, within its bound. */
export async function* readTar(source: AsyncIterable<Uint8Array>, o: ReadTarOptions): AsyncGenerator<TarRecord> {
  const it = source[Symbol.asyncIterator]();
  try {
    yield* readTarFrom(it, o);
  } finally {
    // Close the source even when the archive ended early (end marker, error, or the caller stopped): a response
    // stream left paused would keep its connection open.
    await it.return?.();
  }
}

async function* readTarFrom(it: AsyncIterator<Uint8Array>, o: ReadTarOptions): AsyncGenerator<TarRecord> {
  const blocks = new Blocks(it, o.maxArchiveBytes);
  const maxMeta = o.maxMetaBytes ?? 64 * 1024;
  let pax: Map<string, string> | null = null;
  let gnuName: string | null = null;
  let gnuLink: string | null = null;
  for (;;) {
    const h = await blocks.take(TAR_BLOCK);
    if (!h) return; // no end marker: tolerated (Go's writer always adds it; an empty archive has none)
    if (h.every((b) => b === 0)) return;
    if (!checksumOk(h)) throw tarError('tar header checksum mismatch', { offset: blocks.total });
    const flag = String.fromCharCode(h[156] as number);
    let size = readNumber(h, 124, 12, 'size');
    if (flag === 'x' || flag === 'g' || flag === 'L' || flag === 'K') {
      if (size > maxMeta) throw tarError(`tar metadata entry of ${size} bytes exceeds ${maxMeta}`);
      const body = await blocks.take(padded(size));
      if (!body) throw tarError('the archive ends in a metadata entry');
      const data = body.subarray(0, size);
      if (flag === 'x') pax = parsePax(data);
      else if (flag === 'L') gnuName = readString(data, 0, data.length);
      else if (flag === 'K') gnuLink = readString(data, 0, data.length);
      continue; // global headers ('g') are ignored
    }
    const magic = h.toString('latin1', 257, 262);
    const prefix = magic === 'ustar' ? readString(h, 345, 155) : '';
    let path = readString(h, 0, 100);
    if (prefix) path = `${prefix}/${path}`;
    let linkTarget = readString(h, 157, 100);
    if (gnuName !== null) path = gnuName;
    if (gnuLink !== null) linkTarget = gnuLink;
    if (pax) {
      path = pax.get('path') ?? path;
      linkTarget = pax.get('linkpath') ?? linkTarget;
      const s = pax.get('size');
      if (s !== undefined) {
        if (!/^\d{1,16}$/.test(s)) throw tarError('malformed PAX size');
        size = Number(s);
      }
    }
    pax = null;
    gnuName = null;
    gnuLink = null;
    const type = typeOf(flag);
    const header: TarHeader = { path, type, mode: readNumber(h, 100, 8, 'mode') & 0o7777, size: type === 'file' ? size : 0, linkTarget, flag };
    const limit = o.keep ? o.keep(header) : false;
    if (limit !== false && size <= limit) {
      const body = await blocks.take(padded(size));
      if (!body && size > 0) throw tarError(`the archive ends in the middle of ${path}`);
      yield { header, content: body ? body.subarray(0, size) : Buffer.alloc(0), tooLarge: false };
    } else {
      await blocks.skip(padded(size));
      yield { header, content: null, tooLarge: limit !== false };
    }
  }
}
