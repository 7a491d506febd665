/**
 * Assay's one tar reader, streaming (docs/snapshots-format.md, "Ingesting a tar stream"): POSIX ustar with PAX
 * extended headers ('x'; global 'g' headers are validated and ignored) and GNU long names ('L', 'K'). It never holds
 * more than one entry's metadata and the bytes the caller asks for: file content is pulled by the caller in bounded
 * pieces (`read`), so a file of any size streams through. Snapshot ingestion reads with it directly; `readTarEntries`
 * (read-tar.ts) is the entry-at-a-time form the container runtime and the Judge use.
 *
 * The archive is hostile: every header checksum is verified, numeric fields must be octal (or GNU base-256),
 * metadata entries are bounded, names are returned as raw bytes (the caller decodes them strictly), and an archive
 * that ends inside a header or an entry is an error. Nothing here touches a file system. Why not tar-stream:
 * docs/architecture.md, "One tar codec".
 */
import { tarError } from './tar.errors';

export const TAR_BLOCK = 512;
/** Most bytes of one metadata entry (PAX header, GNU long name), unless the reader is given its own bound. */
export const MAX_TAR_META_BYTES = 1 << 20;

/** `other`: a type flag the reader was told to pass through (`unknownTypes: 'other'`), e.g. GNU sparse files. */
export type TarKind = 'file' | 'hardlink' | 'symlink' | 'dir' | 'chardev' | 'blockdev' | 'fifo' | 'other';

/** How a malformed archive is reported: the caller's own error (its code and kind), given the message and details. */
export type TarInvalid = (message: string, details: Record<string, unknown>) => Error;

export interface TarReaderOptions {
  /** The error for a malformed archive (default: AssayError TAR_INVALID, kind integrity). */
  readonly invalid?: TarInvalid;
  /** Most bytes of one metadata entry (default MAX_TAR_META_BYTES). */
  readonly maxMetaBytes?: number;
  /** A type flag outside ustar's (0-7, with PAX and GNU metadata): refused (default), or passed through as `other`. */
  readonly unknownTypes?: 'refuse' | 'other';
}

const defaultInvalid: TarInvalid = (message, details) => tarError('TAR_INVALID', message, details);

export interface TarEntryHeader {
  /** The entry's name as raw bytes (from PAX `path`, a GNU long name, or prefix + name). */
  readonly name: Uint8Array;
  /** Link target (symlinks, hard links) as raw bytes, else empty. */
  readonly link: Uint8Array;
  readonly kind: TarKind;
  /** Permission bits. */
  readonly mode: number;
  /** Content bytes that follow (files only; 0 for everything else). */
  readonly size: number;
  /** The raw type flag, for messages. */
  readonly flag: string;
}

const padded = (n: number): number => Math.ceil(n / TAR_BLOCK) * TAR_BLOCK;

function cString(b: Uint8Array, off: number, len: number): Uint8Array {
  const end = off + len;
  let i = off;
  while (i < end && b[i] !== 0) i++;
  return b.slice(off, i);
}

function numberField(b: Buffer, off: number, len: number, what: string, at: number, tarInvalid: TarInvalid): number {
  const first = b[off] as number;
  if (first & 0x80) {
    if (first !== 0x80) throw tarInvalid(`the tar header at byte ${at} has a negative or oversized ${what} field`, { offset: at });
    let n = 0;
    for (let i = 1; i < len; i++) n = n * 256 + (b[off + i] as number);
    if (!Number.isSafeInteger(n)) throw tarInvalid(`the tar header at byte ${at} has a ${what} field that is too large`, { offset: at });
    return n;
  }
  const s = b
    .toString('latin1', off, off + len)
    .replace(/[\0 ]+$/g, '')
    .replace(/^ +/, '');
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw tarInvalid(`the tar header at byte ${at} has a ${what} field that is not octal: ${JSON.stringify(s)}`, { offset: at });
  const n = parseInt(s, 8);
  if (!Number.isSafeInteger(n)) throw tarInvalid(`the tar header at byte ${at} has a ${what} field that is too large`, { offset: at });
  return n;
}

function checksumOk(h: Buffer, at: number, tarInvalid: TarInvalid): boolean {
  const stored = numberField(h, 148, 8, 'checksum', at, tarInvalid);
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < TAR_BLOCK; i++) {
    const v = i >= 148 && i < 156 ? 0x20 : (h[i] as number);
    unsigned += v;
    signed += v > 127 ? v - 256 : v;
  }
  return stored === unsigned || stored === signed;
}

/** PAX records `<len> <key>=<value>\n`; values kept as bytes. */
function parsePax(body: Buffer, at: number, tarInvalid: TarInvalid): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  let off = 0;
  while (off < body.length) {
    const sp = body.indexOf(0x20, off);
    if (sp < 0 || sp - off > 20) throw tarInvalid(`malformed PAX header at byte ${at}`, { offset: at });
    const lenText = body.toString('latin1', off, sp);
    if (!/^[1-9][0-9]*$/.test(lenText)) throw tarInvalid(`malformed PAX record length at byte ${at}`, { offset: at });
    const len = Number(lenText);
    if (off + len > body.length || body[off + len - 1] !== 0x0a) throw tarInvalid(`malformed PAX record at byte ${at}`, { offset: at });
    const rec = body.subarray(sp + 1, off + len - 1);
    const eq = rec.indexOf(0x3d);
    if (eq <= 0) throw tarInvalid(`malformed PAX record at byte ${at}`, { offset: at });
    out.set(rec.toString('latin1', 0, eq), Buffer.from(rec.subarray(eq + 1)));
    off += len;
  }
  return out;
}

function kindOf(flag: string): TarKind | null {
  switch (flag) {
    case '0':
    case '\0':
    case '7':
      return 'file';
    case '1':
      return 'hardlink';
    case '2':
      return 'symlink';
    case '3':
      return 'chardev';
    case '4':
      return 'blockdev';
    case '5':
      return 'dir';
    case '6':
      return 'fifo';
    default:
      return null;
  }
}

/** Pulls an archive from a byte source: headers one by one, each file's content in caller-sized pieces. */
export class TarReader {
  private readonly it: AsyncIterator<Uint8Array>;
  private chunks: Buffer[] = [];
  private have = 0;
  private ended = false;
  /** Bytes consumed so far (the offset of the next unread byte). */
  offset = 0;
  /** Content bytes of the current entry not yet read, and its padding. */
  private left = 0;
  private pad = 0;

  private readonly invalid: TarInvalid;
  private readonly maxMeta: number;
  private readonly passUnknown: boolean;

  constructor(source: AsyncIterable<Uint8Array>, o: TarReaderOptions = {}) {
    this.it = source[Symbol.asyncIterator]();
    this.invalid = o.invalid ?? defaultInvalid;
    this.maxMeta = o.maxMetaBytes ?? MAX_TAR_META_BYTES;
    this.passUnknown = o.unknownTypes === 'other';
  }

  private async fill(n: number): Promise<boolean> {
    while (this.have < n && !this.ended) {
      const r = await this.it.next();
      if (r.done) {
        this.ended = true;
        break;
      }
      const v = r.value;
      if (v.byteLength === 0) continue;
      const b = Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
      this.chunks.push(b);
      this.have += b.length;
    }
    return this.have >= n;
  }

  /** Exactly n bytes (n may be 0), or null when the input ended first (`partial` tells whether some were left). */
  private async take(n: number): Promise<{ bytes: Buffer | null; partial: boolean }> {
    if (!(await this.fill(n))) return { bytes: null, partial: this.have > 0 };
    let out: Buffer;
    const first = this.chunks[0];
    if (first && first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      const all = Buffer.concat(this.chunks);
      out = all.subarray(0, n);
      this.chunks = all.length > n ? [all.subarray(n)] : [];
    }
    this.have -= n;
    this.offset += n;
    return { bytes: out, partial: false };
  }

  private async mustTake(n: number, where: string): Promise<Buffer> {
    const r = await this.take(n);
    if (!r.bytes) throw this.invalid(`the archive is truncated: it ends ${where} (at byte ${this.offset + this.have})`, { offset: this.offset + this.have });
    return r.bytes;
  }

  /**
   * The next entry's header, or null at the end of the archive (two zero blocks, or, tolerated, the end of the
   * input exactly between entries). The previous entry's content must have been read completely.
   */
  async next(): Promise<TarEntryHeader | null> {
    if (this.left !== 0) throw new Error('internal: the previous tar entry was not read to its end');
    if (this.pad > 0) {
      await this.mustTake(this.pad, 'in the padding after an entry');
      this.pad = 0;
    }
    const tarInvalid = this.invalid;
    let pax: Map<string, Buffer> | null = null;
    let longName: Uint8Array | null = null;
    let longLink: Uint8Array | null = null;
    for (;;) {
      const at = this.offset;
      const r = await this.take(TAR_BLOCK);
      if (!r.bytes) {
        if (r.partial) throw tarInvalid(`the archive is truncated: it ends inside a header (at byte ${at + this.have})`, { offset: at });
        if (pax || longName || longLink) throw tarInvalid('the archive is truncated: it ends after a metadata entry', { offset: at });
        return null;
      }
      const h = r.bytes;
      if (h.every((x) => x === 0)) {
        if (pax || longName || longLink) throw tarInvalid(`the archive ends after a metadata entry (at byte ${at})`, { offset: at });
        return null;
      }
      if (!checksumOk(h, at, tarInvalid)) throw tarInvalid(`bad tar header checksum at byte ${at}`, { offset: at });
      const flag = String.fromCharCode(h[156] as number);
      let size = numberField(h, 124, 12, 'size', at, tarInvalid);
      if (flag === 'x' || flag === 'g' || flag === 'L' || flag === 'K') {
        if (size > this.maxMeta) throw tarInvalid(`a tar metadata entry of ${size} bytes at byte ${at} is over the limit of ${this.maxMeta}`, { offset: at });
        const body = (await this.mustTake(padded(size), 'inside a metadata entry')).subarray(0, size);
        if (flag === 'x') pax = parsePax(body, at, tarInvalid);
        else if (flag === 'L') longName = cString(body, 0, body.length);
        else if (flag === 'K') longLink = cString(body, 0, body.length);
        else parsePax(body, at, tarInvalid); // global header: validated, ignored
        continue;
      }
      const kind = kindOf(flag) ?? (this.passUnknown ? 'other' : null);
      if (kind === null) throw tarInvalid(`unsupported tar entry type ${JSON.stringify(flag)} at byte ${at}`, { offset: at, flag });
      const ustar = h.toString('latin1', 257, 262) === 'ustar';
      let name: Uint8Array = cString(h, 0, 100);
      if (ustar) {
        const prefix = cString(h, 345, 155);
        if (prefix.length > 0) name = Buffer.concat([prefix, Buffer.from('/'), name]);
      }
      let link: Uint8Array = cString(h, 157, 100);
      if (longName) name = longName;
      if (longLink) link = longLink;
      if (pax) {
        const p = pax.get('path');
        if (p) name = p;
        const l = pax.get('linkpath');
        if (l) link = l;
        const s = pax.get('size');
        if (s !== undefined) {
          const t = s.toString('latin1');
          if (!/^[0-9]{1,16}$/.test(t) || !Number.isSafeInteger(Number(t))) throw tarInvalid(`malformed PAX size at byte ${at}`, { offset: at });
          size = Number(t);
        }
      }
      const mode = numberField(h, 100, 8, 'mode', at, tarInvalid) & 0o7777;
      if (kind !== 'file' && kind !== 'other' && size !== 0) {
        throw tarInvalid(`the tar entry at byte ${at} is a ${kind} with a size of ${size} bytes (only files carry content)`, { offset: at });
      }
      this.left = size;
      this.pad = padded(size) - size;
      return { name, link, kind, mode, size, flag };
    }
  }

  /** Up to `max` bytes of the current entry's content (a file's, or an `other` entry's) (at least 1 while some is left); null when all was read. */
  async read(max: number): Promise<Buffer | null> {
    if (this.left === 0) return null;
    const n = Math.min(max, this.left);
    const b = await this.mustTake(n, 'in the middle of a file');
    this.left -= n;
    return b;
  }

  /** Reads and drops the rest of the current entry's content. */
  async skip(): Promise<void> {
    while ((await this.read(1 << 20)) !== null) {
      /* dropped */
    }
  }

  /** Stops reading the source (releases a response stream left unread). */
  async close(): Promise<void> {
    await this.it.return?.();
  }
}
