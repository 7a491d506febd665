/**
 * Assay's one tar writer: POSIX ustar with PAX extended headers where a name, link target or size does not fit.
 * Deterministic (mtime 0, uid/gid 0, no user names), so the same tree always gives the same bytes: build contexts,
 * the hidden tests streamed into a Judge, and test fixtures.
 */
import { tarError } from './tar.errors';
import { TAR_BLOCK } from './tar-reader';

export interface TarEntryInput {
  readonly path: string;
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode: number;
  /** Size of a file's content (0 for directories and links). */
  readonly size?: number;
  readonly linkTarget?: string;
}

/** An entry the writer cannot write (a caller's mistake, named). */
const tarEntryError = (message: string) => tarError('TAR_BAD_ENTRY', message);

const enc = new TextEncoder();

function writeString(buf: Buffer, off: number, len: number, s: string): void {
  const b = Buffer.from(s, 'utf8');
  b.copy(buf, off, 0, Math.min(len, b.length));
}

function writeOctal(buf: Buffer, off: number, len: number, n: number): void {
  const s = n.toString(8).padStart(len - 1, '0');
  if (s.length > len - 1) throw tarEntryError(`value ${n} does not fit a ${len}-byte tar field`);
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
  if (e.path.length === 0 || e.path.includes('\0')) throw tarEntryError(`invalid tar entry name ${JSON.stringify(e.path)}`);
  const name = e.type === 'dir' && !e.path.endsWith('/') ? `${e.path}/` : e.path;
  const size = e.type === 'file' ? (e.size ?? 0) : 0;
  const link = e.type === 'symlink' ? (e.linkTarget ?? '') : '';
  if (!Number.isSafeInteger(size) || size < 0) throw tarEntryError(`invalid size for ${e.path}`);
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
