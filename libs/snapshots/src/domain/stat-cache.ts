/** The stat cache's rules, as pure functions (the store is behind the StatCache port). */
import { hash } from 'node:crypto';

/** What a tree source reports for an entry (lstat; never follows a symlink). */
export type SourceKind = 'file' | 'dir' | 'symlink' | 'fifo' | 'socket' | 'char-device' | 'block-device' | 'unknown';

export interface SourceStat {
  readonly kind: SourceKind;
  readonly size: number;
  /** st_mode (type and permission bits). */
  readonly mode: number;
  readonly dev: bigint;
  readonly ino: bigint;
  readonly nlink: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  /** The signature (see statSig), when the source computed it already. */
  readonly sig?: string;
}

/**
 * What the cache remembers about one entry of a directory:
 * - file: `sig` (device, inode, size, mode, mtime ns, ctime ns), the content CID, and whether the entry was
 *   "clean" when recorded (see isClean);
 * - dir: the subdirectory's manifest CID and size;
 * - symlink: the target (symlinks are always re-read; they cost one readlink).
 */
export interface CachedEntry {
  readonly kind: 'file' | 'dir' | 'symlink';
  readonly sig: string;
  readonly cid: string;
  /** The mode recorded in the manifest (normalised). */
  readonly mode: number;
  readonly size: number;
  readonly clean: boolean;
  readonly target: string;
}

/**
 * One directory as last snapshotted: its entries (after exclusions) and its manifest. If every entry is
 * unchanged, the manifest CID is reused without re-encoding anything.
 */
export interface DirCacheRecord {
  readonly manifest: string;
  readonly size: number;
  /** Whether this directory's manifest and file blobs were written to this home's store (false after a dry run or a GC). */
  readonly stored: boolean;
  /** Every file entry was clean when recorded. */
  readonly allClean: boolean;
  /** Digest of the files' names and stat signatures and the symlinks' names and targets (see listingKey). */
  readonly filesKey: string;
  /** Digest of the subdirectories' names, manifest CIDs and sizes. */
  readonly dirsKey: string;
  /** The entries (parsed on demand: an unchanged directory is recognised from the keys alone). */
  entries(): ReadonlyMap<string, CachedEntry>;
}

/**
 * Accumulates a directory's keys. An unchanged directory (same filesKey, every file clean when recorded, same
 * dirsKey) reuses its manifest without looking at a single cached entry.
 */
export class ListingKey {
  private files = '';
  private dirs = '';
  file(name: string, sig: string): void {
    this.files += `f\0${name}\0${sig}\n`;
  }
  symlink(name: string, target: string): void {
    this.files += `l\0${name}\0${target}\n`;
  }
  dir(name: string, cid: string, size: number): void {
    this.dirs += `d\0${name}\0${cid}\0${size}\n`;
  }
  filesKey(): string {
    return digestHex(this.files);
  }
  dirsKey(): string {
    return digestHex(this.dirs);
  }
}

function digestHex(s: string): string {
  return hash('sha256', s, 'base64');
}

/** The digest ListingKey gives for a key text already encoded as UTF-8 bytes. */
export function digestBytes(b: Uint8Array): string {
  return hash('sha256', b, 'base64');
}

/**
 * Timestamps on disk come from a coarse kernel clock and some file systems keep 1 or 2 s granularity, so an
 * entry is only trusted if the file's mtime and ctime are older than the snapshot's start by this margin.
 */
export const RACY_MARGIN_NS = 2_000_000_000n;

/** The recording time of entries written by a snapshot that started at `snapshotStart`. */
export function recordedTimeNs(snapshotStart: Date): bigint {
  return BigInt(snapshotStart.getTime()) * 1_000_000n - RACY_MARGIN_NS;
}

/** The stat signature compared by the cache: device, inode, size, mode, mtime and ctime (ns). */
export function statSig(st: SourceStat): string {
  return st.sig ?? `${st.dev}:${st.ino}:${st.size}:${st.mode}:${st.mtimeNs}:${st.ctimeNs}`;
}

/**
 * "Racily clean" guard: an entry is only ever trusted if the file's mtime and ctime were strictly older than
 * its recording time. A file modified in the same timestamp tick as (or after) it was hashed could otherwise
 * keep a stat identical to the one recorded. ctime cannot be set from user space, so back-dating mtime with
 * `touch -d` does not fool the cache either.
 */
export function isClean(st: SourceStat, recordedNs: bigint): boolean {
  return st.mtimeNs < recordedNs && st.ctimeNs < recordedNs;
}

export type CacheVerdict = 'hit' | 'miss' | 'changed' | 'racy';

/** May the cached CID be used for a file with this stat (storage aside)? */
export function judgeCachedFile(entry: CachedEntry | undefined, st: SourceStat): CacheVerdict {
  if (!entry || entry.kind !== 'file') return 'miss';
  if (entry.sig !== statSig(st)) return 'changed';
  if (!entry.clean) return 'racy';
  return 'hit';
}
