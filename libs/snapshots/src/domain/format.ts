import { createHash } from 'node:crypto';
import { CID } from 'multiformats/cid';
import * as Digest from 'multiformats/hashes/digest';
import * as dagCbor from '@ipld/dag-cbor';
import { snapshotError, showPath } from './snapshot.errors';
import { compareNames, utf8, validateEntryName, findNfcCollision } from './names';
import { cidToString, encodeDirBytes, encodeFileNodeBytes } from './cbor';

/**
 * The snapshot format, version 1 (docs/snapshots-format.md is the normative description).
 *
 * - A directory is a DAG-CBOR manifest `{v: 1, type: "dir", entries: [...]}` whose entries are sorted by the
 *   UTF-8 bytes of their names. Entries: `{name, kind: "file", mode, size, cid}`, `{name, kind: "dir", mode, size,
 *   cid}`, `{name, kind: "symlink", mode, size, target}`.
 * - File content is cut into fixed chunks of CHUNK_SIZE bytes. A file of at most one chunk (the empty file
 *   included) is one raw block and its CID is that block's CID; a longer file is a DAG-CBOR node
 *   `{v: 1, type: "file", size, chunkSize, chunks: [raw CIDs]}`.
 * - Every CID is CIDv1 with sha2-256; codecs raw (0x55) and dag-cbor (0x71) only.
 * - Modes are normalised: files 0o644 or 0o755 (any execute bit set), directories 0o755, symlinks 0o777.
 *   Owners, groups, timestamps and the other permission bits are not recorded.
 * - A directory's `size` is the total of the file sizes beneath it; a symlink's is the byte length of its target.
 */
export const FORMAT_ID = 'assay-snapshot/1';
export const FORMAT_VERSION = 1;
export const CHUNK_SIZE = 1 << 20;
/** The most chunks one file node may list: files up to 128 GiB. */
export const MAX_CHUNKS_PER_FILE = 1 << 17;
export const MAX_FILE_BYTES_FORMAT = CHUNK_SIZE * MAX_CHUNKS_PER_FILE;
/**
 * No DAG-CBOR block (manifest or file node) may exceed this: a bound on every hostile decode. A directory's
 * manifest takes about 90 bytes per entry, so a single directory can hold about 180,000 entries.
 */
export const MAX_NODE_BYTES = 16 << 20;
export const MAX_SYMLINK_TARGET_BYTES = 4095;
export const MAX_SNAPSHOT_DEPTH = 1024;

export const RAW_CODE = 0x55;
export const DAG_CBOR_CODE = 0x71;
export const SHA2_256_CODE = 0x12;

export const MODE_FILE = 0o644;
export const MODE_EXEC = 0o755;
export const MODE_DIR = 0o755;
export const MODE_SYMLINK = 0o777;

export type EntryKind = 'file' | 'dir' | 'symlink';

export interface FileEntry {
  readonly name: string;
  readonly kind: 'file';
  readonly mode: typeof MODE_FILE | typeof MODE_EXEC;
  readonly size: number;
  readonly cid: CID;
}
export interface DirEntry {
  readonly name: string;
  readonly kind: 'dir';
  readonly mode: typeof MODE_DIR;
  readonly size: number;
  readonly cid: CID;
}
export interface SymlinkEntry {
  readonly name: string;
  readonly kind: 'symlink';
  readonly mode: typeof MODE_SYMLINK;
  readonly size: number;
  readonly target: string;
}
export type Entry = FileEntry | DirEntry | SymlinkEntry;

export interface DirManifest {
  readonly type: 'dir';
  readonly entries: readonly Entry[];
}
export interface FileNode {
  readonly type: 'file';
  readonly size: number;
  readonly chunkSize: number;
  readonly chunks: readonly CID[];
}
export type SnapshotNode = DirManifest | FileNode;

export interface Block {
  readonly cid: CID;
  readonly bytes: Uint8Array;
}

export function sha256(bytes: Uint8Array): Uint8Array {
  return createHash('sha256').update(bytes).digest();
}

export function cidFromDigest(code: typeof RAW_CODE | typeof DAG_CBOR_CODE, digest: Uint8Array): CID {
  return CID.createV1(code, Digest.create(SHA2_256_CODE, digest));
}

export function rawBlock(bytes: Uint8Array): Block {
  return { cid: cidFromDigest(RAW_CODE, sha256(bytes)), bytes };
}

/** The file mode recorded for a regular file: 0o755 if any execute bit is set, else 0o644. */
export function normaliseFileMode(mode: number): typeof MODE_FILE | typeof MODE_EXEC {
  return (mode & 0o111) !== 0 ? MODE_EXEC : MODE_FILE;
}

export function chunkCount(size: number, chunkSize = CHUNK_SIZE): number {
  return size <= chunkSize ? 1 : Math.ceil(size / chunkSize);
}

/** Is this CID one this format can contain (v1, sha2-256 with a 32-byte digest, raw or dag-cbor)? */
export function isFormatCid(cid: CID): boolean {
  return cid.version === 1 && (cid.code === RAW_CODE || cid.code === DAG_CBOR_CODE) && cid.multihash.code === SHA2_256_CODE && cid.multihash.size === 32;
}

/** Parses a CID given by a user, refusing anything outside the format. */
export function parseCid(text: string): CID {
  let cid: CID;
  try {
    cid = CID.parse(text.trim());
  } catch (e) {
    // multiformats' own messages speak of its API ("multibase decoder must be provided"); say what a CID looks like
    throw snapshotError(
      'SNAPSHOT_CID_INVALID',
      `"${text}" is not a CID: expected a base32 CIDv1 such as bafkrei... or bafyrei... (the root CID that \`assay snapshot create\` prints)`,
      { cid: text },
      e,
    );
  }
  if (!isFormatCid(cid)) {
    throw snapshotError('SNAPSHOT_CID_INVALID', `${text} is not a snapshot CID (expected CIDv1, sha2-256, codec raw or dag-cbor)`, { cid: text });
  }
  return cid;
}

/** Sorts entries by the UTF-8 bytes of their names; refuses duplicates. */
export function sortEntries(entries: readonly Entry[]): Entry[] {
  const sorted = [...entries].sort((a, b) => compareNames(a.name, b.name));
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    const cur = sorted[i];
    if (prev && cur && prev.name === cur.name) {
      throw snapshotError('SNAPSHOT_NAME_COLLISION', `two entries are named "${cur.name}"`, { name: cur.name });
    }
  }
  return sorted;
}

/** Encodes a directory manifest (entries sorted here, whatever order they come in). */
export function encodeDirManifest(entries: readonly Entry[]): Block {
  return encodeSortedDirManifest(entries).block;
}

/** encodeDirManifest, also returning the entries in manifest order (what decodeNode would give back). */
export function encodeSortedDirManifest(entries: readonly Entry[]): { block: Block; sorted: readonly Entry[] } {
  const sorted = sortEntries(entries);
  const bytes = encodeDirBytes(sorted);
  return { block: { cid: cidFromDigest(DAG_CBOR_CODE, sha256(bytes)), bytes }, sorted };
}

/** The usual string form of a CID (base32), computed without multiformats' allocations. */
export function cidString(cid: CID): string {
  return cidToString(cid);
}

/**
 * The content CID of a file from its chunk digests (32 bytes each, in order). One chunk: the raw block's CID.
 * More: the CID of a file node, returned with the node's bytes so the caller can store it.
 */
export function fileContent(size: number, digests: Uint8Array): { cid: CID; node: Block | null } {
  const n = digests.length / 32;
  if (!Number.isInteger(n) || n !== chunkCount(size)) {
    throw new Error(`internal: ${n} chunk digests for a file of ${size} bytes`);
  }
  if (n === 1) return { cid: cidFromDigest(RAW_CODE, digests.subarray(0, 32)), node: null };
  const chunks: CID[] = new Array<CID>(n);
  for (let i = 0; i < n; i++) chunks[i] = cidFromDigest(RAW_CODE, digests.subarray(i * 32, i * 32 + 32));
  const bytes = encodeFileNodeBytes(size, CHUNK_SIZE, chunks);
  const cid = cidFromDigest(DAG_CBOR_CODE, sha256(bytes));
  return { cid, node: { cid, bytes } };
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding: every block may come from an attacker (an imported CAR, a tampered store). Decode strictly, check
// every field, and refuse anything that is not the one canonical encoding of a valid node.

function bad(where: string, cid: CID, why: string): Error {
  return snapshotError('SNAPSHOT_MANIFEST_INVALID', `block ${cid.toString()} at ${showPath(where)} is not a valid snapshot node: ${why}`, {
    path: where,
    cid: cid.toString(),
  });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !CID.asCID(v);
}

function hasExactKeys(o: Record<string, unknown>, keys: readonly string[]): boolean {
  const k = Object.keys(o);
  return k.length === keys.length && keys.every((x) => Object.prototype.hasOwnProperty.call(o, x));
}

function isSize(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

const FILE_KEYS = ['name', 'kind', 'mode', 'size', 'cid'] as const;
const LINK_KEYS = ['name', 'kind', 'mode', 'size', 'target'] as const;

function decodeEntry(raw: unknown, where: string, cid: CID): Entry {
  if (!isPlainObject(raw)) throw bad(where, cid, 'an entry is not a map');
  const name = raw.name;
  if (typeof name !== 'string') throw bad(where, cid, 'an entry name is not a string');
  const why = validateEntryName(name);
  if (why) throw bad(where, cid, `entry name ${JSON.stringify(name)} ${why}`);
  const kind = raw.kind;
  const size = raw.size;
  if (!isSize(size)) throw bad(where, cid, `entry "${name}" has an invalid size`);
  if (kind === 'symlink') {
    if (!hasExactKeys(raw, LINK_KEYS)) throw bad(where, cid, `symlink entry "${name}" has unexpected fields`);
    if (raw.mode !== MODE_SYMLINK) throw bad(where, cid, `symlink entry "${name}" has mode ${String(raw.mode)}`);
    const target = raw.target;
    const problem = validateSymlinkTarget(target);
    if (problem || typeof target !== 'string') throw bad(where, cid, `symlink "${name}" ${problem ?? 'is invalid'}`);
    if (utf8(target).length !== size) throw bad(where, cid, `symlink "${name}" size does not match its target`);
    return { name, kind, mode: MODE_SYMLINK, size, target };
  }
  if (kind !== 'file' && kind !== 'dir') throw bad(where, cid, `entry "${name}" has unknown kind ${String(kind)}`);
  if (!hasExactKeys(raw, FILE_KEYS)) throw bad(where, cid, `${kind} entry "${name}" has unexpected fields`);
  const link = CID.asCID(raw.cid);
  if (!link || !isFormatCid(link)) throw bad(where, cid, `entry "${name}" has an invalid CID`);
  if (kind === 'dir') {
    if (raw.mode !== MODE_DIR) throw bad(where, cid, `directory entry "${name}" has mode ${String(raw.mode)}`);
    if (link.code !== DAG_CBOR_CODE) throw bad(where, cid, `directory entry "${name}" does not link a manifest`);
    return { name, kind, mode: MODE_DIR, size, cid: link };
  }
  if (raw.mode !== MODE_FILE && raw.mode !== MODE_EXEC) {
    throw bad(where, cid, `file entry "${name}" has mode ${String(raw.mode)}`);
  }
  if (size > MAX_FILE_BYTES_FORMAT) throw bad(where, cid, `file "${name}" is larger than the format allows`);
  if ((link.code === RAW_CODE) !== size <= CHUNK_SIZE) {
    throw bad(where, cid, `file "${name}" of ${size} bytes must link a ${size <= CHUNK_SIZE ? 'raw block' : 'file node'}`);
  }
  return { name, kind, mode: raw.mode, size, cid: link };
}

/** Why a symlink target is unacceptable, or null. */
export function validateSymlinkTarget(target: unknown): string | null {
  if (typeof target !== 'string') return 'has a target that is not a string';
  if (target.length === 0) return 'has an empty target';
  if (target.includes('\0')) return 'has a target containing NUL';
  if (utf8(target).length > MAX_SYMLINK_TARGET_BYTES) {
    return `has a target longer than ${MAX_SYMLINK_TARGET_BYTES} bytes`;
  }
  return null;
}

/**
 * Decodes and validates a DAG-CBOR block of this format (the hash was checked by whoever read it). `where` is the
 * path inside the snapshot for messages. Refuses non-canonical encodings, so each node has exactly one CID.
 */
export function decodeNode(cid: CID, bytes: Uint8Array, where: string): SnapshotNode {
  if (cid.code !== DAG_CBOR_CODE) throw bad(where, cid, 'expected a dag-cbor block');
  if (bytes.length > MAX_NODE_BYTES) throw bad(where, cid, `block is larger than ${MAX_NODE_BYTES} bytes`);
  let raw: unknown;
  try {
    raw = dagCbor.decode(bytes);
  } catch (e) {
    throw bad(where, cid, `not DAG-CBOR (${(e as Error).message})`);
  }
  if (!isPlainObject(raw)) throw bad(where, cid, 'not a map');
  if (raw.v !== FORMAT_VERSION) throw bad(where, cid, `unsupported version ${String(raw.v)}`);
  let node: SnapshotNode;
  if (raw.type === 'dir') {
    if (!hasExactKeys(raw, ['v', 'type', 'entries'])) throw bad(where, cid, 'manifest has unexpected fields');
    if (!Array.isArray(raw.entries)) throw bad(where, cid, 'entries is not a list');
    const entries = raw.entries.map((e) => decodeEntry(e, where, cid));
    for (let i = 1; i < entries.length; i++) {
      const a = entries[i - 1];
      const b = entries[i];
      if (a && b && compareNames(a.name, b.name) >= 0) {
        throw bad(where, cid, `entries are not strictly sorted by name ("${a.name}" before "${b.name}")`);
      }
    }
    const collision = findNfcCollision(entries.map((e) => e.name));
    if (collision) throw bad(where, cid, `names "${collision[0]}" and "${collision[1]}" collide under Unicode NFC`);
    node = { type: 'dir', entries };
  } else if (raw.type === 'file') {
    if (!hasExactKeys(raw, ['v', 'type', 'size', 'chunkSize', 'chunks'])) {
      throw bad(where, cid, 'file node has unexpected fields');
    }
    if (raw.chunkSize !== CHUNK_SIZE) throw bad(where, cid, `chunk size ${String(raw.chunkSize)}, expected ${CHUNK_SIZE}`);
    const size = raw.size;
    if (!isSize(size) || size <= CHUNK_SIZE || size > MAX_FILE_BYTES_FORMAT) {
      throw bad(where, cid, `file node size ${String(size)} out of range (${CHUNK_SIZE + 1}..${MAX_FILE_BYTES_FORMAT})`);
    }
    const chunks = raw.chunks;
    if (!Array.isArray(chunks) || chunks.length !== chunkCount(size)) {
      throw bad(where, cid, `a file of ${size} bytes must list ${chunkCount(size)} chunks`);
    }
    const links = chunks.map((c) => {
      const l = CID.asCID(c);
      if (!l || !isFormatCid(l) || l.code !== RAW_CODE) throw bad(where, cid, 'a chunk is not a raw sha2-256 CIDv1');
      return l;
    });
    node = { type: 'file', size, chunkSize: CHUNK_SIZE, chunks: links };
  } else {
    throw bad(where, cid, `unknown node type ${String(raw.type)}`);
  }
  const again = node.type === 'dir' ? encodeDirBytes(node.entries) : encodeFileNodeBytes(node.size, node.chunkSize, node.chunks);
  if (!bytesEqual(again, bytes)) throw bad(where, cid, 'not the canonical encoding');
  return node;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}

/** The expected length of chunk `i` of a file of `size` bytes. */
export function chunkLength(size: number, i: number, chunkSize = CHUNK_SIZE): number {
  return Math.min(chunkSize, size - i * chunkSize);
}

/** The CIDs a node links to (manifest entries with a CID, or file chunks). */
export function nodeLinks(node: SnapshotNode): CID[] {
  if (node.type === 'file') return [...node.chunks];
  const out: CID[] = [];
  for (const e of node.entries) if (e.kind !== 'symlink') out.push(e.cid);
  return out;
}
