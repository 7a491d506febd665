/**
 * The native directory lister (libs/snapshots/native/fs-list.c): one call per directory lists it and lstats every
 * entry relative to the directory's own descriptor, after checking that the directory is still the (dev, ino) the
 * walk saw. It is an optimisation only: when it is not built (no C compiler) or `ASSAY_NATIVE_LISTER=0`, the
 * file-system tree source lists through node:fs and produces exactly the same entries.
 *
 * Buffer layout (all integers little-endian), version 3:
 * - header, 48 bytes: u32 entry count, u32 total length in bytes, u32 regular files, u32 directories, u32 other
 *   entries, u32 flags (bit 0: every name is plain: printable ASCII other than `/`, and not `..`), u64 bytes of
 *   the regular files, u64 size of the largest, u32 offset and u32 length of the files' key;
 * - then one record per entry, each starting at a multiple of 8 bytes, the directories' first:
 *   - u8 kind: 0 unknown, 1 file, 2 dir, 3 symlink, 4 fifo, 5 socket, 6 char device, 7 block device;
 *   - u8 flags: bit 0 set when the name is ASCII only;
 *   - u16 name length N (bytes), u16 signature length S, 2 reserved bytes;
 *   - u32 st_mode, u32 st_nlink (saturated);
 *   - u64 st_dev, u64 st_ino, u64 st_size, i64 mtime in ns, i64 ctime in ns;
 *   - u32 prefetch id (directories listed by a prefetcher: the id under which the prefetcher queued this
 *     subdirectory's own listing; 0 otherwise), 4 reserved bytes;
 *   - N bytes of name (as on disk), S bytes of ASCII stat signature (`dev:ino:size:mode:mtimeNs:ctimeNs`, the
 *     string statSig would build), zero padding to the next multiple of 8;
 * - then the files' key: for every regular file in byte order of names, `f`, NUL, the name, NUL, the signature,
 *   `\n` (exactly the files' part of the walk's ListingKey, see domain/stat-cache.ts).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { SourceKind, SourceStat } from '../domain/stat-cache';
import { decodeUtf8Strict } from '../domain/names';
import type { ListingSummary, SourceEntry } from '../ports/tree-source.port';

export interface NativeLister {
  /** Lists `path`; with dev and ino, fails with code ASSAY_DIR_CHANGED unless the opened directory is that inode. */
  listDirSync(path: string, dev?: bigint, ino?: bigint): Buffer;
  /**
   * A background lister (threads of its own) holding at most `maxHeld` listings not yet taken; with `descend`
   * (the default) each listing's subdirectories are queued in turn, else only what prefetcherAdd queues.
   */
  prefetcherCreate(maxHeld: number, descend?: boolean): PrefetcherHandle;
  /**
   * Queues a listing (the most recently queued is listed first) and returns its id, or 0 if it could not be
   * queued. A listing's subdirectories are queued in turn; their ids are in the listing (see childListings).
   */
  prefetcherAdd(h: PrefetcherHandle, path: string, dev: bigint, ino: bigint): number;
  /** The listing of `id` (waiting while it is being listed), or null if it had not started (it is cancelled). */
  prefetcherTake(h: PrefetcherHandle, id: number): Buffer | null;
  /** Stops the thread and drops what was not taken. */
  prefetcherClose(h: PrefetcherHandle): void;
  readonly formatVersion: number;
}

declare const prefetcherBrand: unique symbol;
export type PrefetcherHandle = { readonly [prefetcherBrand]: true };

export const NATIVE_LISTER_FILE = 'assay_fs_list.node';
const FORMAT_VERSION = 3;
const HEADER = 48;
const FIXED = 64;
const KINDS: readonly SourceKind[] = ['unknown', 'file', 'dir', 'symlink', 'fifo', 'socket', 'char-device', 'block-device'];

/** Where the build puts the addon, seen from this file in the sources and in dist/. */
function candidates(): string[] {
  return [
    join(__dirname, '..', '..', 'native', 'build', NATIVE_LISTER_FILE),
    join(__dirname, '..', '..', '..', '..', '..', 'libs', 'snapshots', 'native', 'build', NATIVE_LISTER_FILE),
  ];
}

let loaded: { lister: NativeLister | null; why: string } | null = null;

/** The native lister, or null (with the reason in nativeListerStatus()). Loaded once. */
export function nativeLister(): NativeLister | null {
  return loadNative().lister;
}

/** Whether the native lister is in use, and if not, why. */
export function nativeListerStatus(): { active: boolean; why: string } {
  const l = loadNative();
  return { active: l.lister !== null, why: l.why };
}

function loadNative(): { lister: NativeLister | null; why: string } {
  if (loaded) return loaded;
  if (process.env.ASSAY_NATIVE_LISTER === '0') return (loaded = { lister: null, why: 'disabled by ASSAY_NATIVE_LISTER=0' });
  const file = candidates().find((f) => existsSync(f));
  if (!file) return (loaded = { lister: null, why: `not built (${NATIVE_LISTER_FILE} not found; run npm run build:native)` });
  try {
    const m = require(file) as NativeLister;
    if (m.formatVersion !== FORMAT_VERSION)
      return (loaded = { lister: null, why: `${file} has format ${m.formatVersion}, expected ${FORMAT_VERSION}; rebuild it` });
    return (loaded = { lister: m, why: file });
  } catch (e) {
    return (loaded = { lister: null, why: `${file} could not be loaded: ${(e as Error).message}` });
  }
}

/**
 * A stat read from a listing. Kind, size, mode, nlink and the signature are read up front (every entry needs
 * them); the 64-bit fields become BigInts only when asked for (only files that are hashed or hard-linked).
 */
class ListedStat implements SourceStat {
  constructor(
    private readonly buf: Buffer,
    private readonly at: number,
    readonly kind: SourceKind,
    readonly size: number,
    readonly mode: number,
    readonly nlink: number,
    readonly sig: string,
  ) {}
  get dev(): bigint {
    return this.buf.readBigUInt64LE(this.at + 16);
  }
  get ino(): bigint {
    return this.buf.readBigUInt64LE(this.at + 24);
  }
  get mtimeNs(): bigint {
    return this.buf.readBigInt64LE(this.at + 40);
  }
  get ctimeNs(): bigint {
    return this.buf.readBigInt64LE(this.at + 48);
  }
}

/** The subdirectories of a prefetched listing whose own listings the prefetcher queued: name, id, dev, ino. */
export function childListings(buf: Buffer): Array<{ name: string; id: number; dev: bigint; ino: bigint }> {
  checkHeader(buf);
  const out: Array<{ name: string; id: number; dev: bigint; ino: bigint }> = [];
  // The directories' records come first.
  const count = buf.readUInt32LE(12);
  let at = HEADER;
  for (let i = 0; i < count; i++) {
    if (at + FIXED > buf.length) throw malformed(`record ${i}`);
    const nameLen = buf.readUInt16LE(at + 2);
    const end = at + FIXED + nameLen + buf.readUInt16LE(at + 4);
    if (end > buf.length) throw malformed(`record ${i}`);
    const id = buf.readUInt32LE(at + 56);
    // Only names the walk can use as they are (a name that is not valid UTF-8 is refused before it descends).
    if (buf[at] === 2 && id !== 0 && ((buf[at + 1] as number) & 1) === 1) {
      out.push({ name: buf.toString('latin1', at + FIXED, at + FIXED + nameLen), id, dev: buf.readBigUInt64LE(at + 16), ino: buf.readBigUInt64LE(at + 24) });
    }
    at = (end + 7) & ~7;
  }
  return out;
}

/** Thrown for a listing that does not follow the layout (an addon from another build). */
function malformed(why: string): Error {
  return new Error(`internal: the native directory listing is malformed (${why}); rebuild it with npm run build:native`);
}

/** A listing's summary, with its entries decoded only when asked for. */
export function summarizeListing(buf: Buffer): ListingSummary {
  checkHeader(buf);
  const keyAt = buf.readUInt32LE(40);
  const keyLength = buf.readUInt32LE(44);
  if (keyAt + keyLength !== buf.length) throw malformed('key section');
  let all: SourceEntry[] | null = null;
  return {
    files: buf.readUInt32LE(8),
    dirs: buf.readUInt32LE(12),
    others: buf.readUInt32LE(16),
    allPlain: (buf.readUInt32LE(20) & 1) === 1,
    fileBytes: Number(buf.readBigUInt64LE(24)),
    largestFile: Number(buf.readBigUInt64LE(32)),
    filesKeyText: buf.subarray(keyAt, keyAt + keyLength),
    entries: () => (all ??= decodeListing(buf)),
    subdirectories: () => (all ? all.filter((e) => e.stat.kind === 'dir') : decodeListing(buf, buf.readUInt32LE(12))),
  };
}

function checkHeader(buf: Buffer): void {
  if (buf.length < HEADER) throw malformed('short header');
  if (buf.readUInt32LE(4) !== buf.length) throw malformed('length');
}

/** Decodes a listing into entries (unsorted, directories first); with `first`, only that many records. */
export function decodeListing(buf: Buffer, first = -1): SourceEntry[] {
  checkHeader(buf);
  const count = first >= 0 ? Math.min(first, buf.readUInt32LE(0)) : buf.readUInt32LE(0);
  const out: SourceEntry[] = [];
  let at = HEADER;
  for (let i = 0; i < count; i++) {
    if (at + FIXED > buf.length) throw malformed(`record ${i}`);
    const kind = KINDS[buf[at] as number] ?? 'unknown';
    const ascii = ((buf[at + 1] as number) & 1) === 1;
    const nameLen = buf.readUInt16LE(at + 2);
    const sigLen = buf.readUInt16LE(at + 4);
    const end = at + FIXED + nameLen + sigLen;
    if (end > buf.length) throw malformed(`record ${i}`);
    const mode = buf.readUInt32LE(at + 8);
    const nlink = buf.readUInt32LE(at + 12);
    const size = buf.readUInt32LE(at + 32) + buf.readUInt32LE(at + 36) * 0x1_0000_0000;
    const nameAt = at + FIXED;
    const sig = buf.toString('latin1', nameAt + nameLen, end);
    const stat = new ListedStat(buf, at, kind, size, mode, nlink, sig);
    if (ascii) out.push({ name: buf.toString('latin1', nameAt, nameAt + nameLen), stat });
    else {
      const bytes = Uint8Array.prototype.slice.call(buf, nameAt, nameAt + nameLen);
      const name = decodeUtf8Strict(bytes);
      out.push(name === null ? { name: '', invalidName: bytes, stat } : { name, stat });
    }
    at = (end + 7) & ~7;
  }
  return out;
}
