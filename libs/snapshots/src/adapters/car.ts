import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { dirname, join, basename, resolve } from 'node:path';
import { CID } from 'multiformats/cid';
import * as dagCbor from '@ipld/dag-cbor';
import { AssayError, silentProgress, type Clock, type Progress } from '@assay/core';
import {
  CHUNK_SIZE,
  DAG_CBOR_CODE,
  MAX_NODE_BYTES,
  RAW_CODE,
  bytesEqual,
  decodeNode,
  isFormatCid,
  nodeLinks,
  sha256,
  type SnapshotNode,
} from '../domain/format';
import { atPath, ioError, snapshotError } from '../domain/snapshot.errors';
import type { BlobStore } from '../ports/blob-store.port';
import { NodeReader, type BlockGetter } from '../application/node-reader';
import { verifySnapshot } from '../application/verify';

/**
 * CAR v1 (https://ipld.io/specs/transport/car/carv1/) as a container only. Export writes the header and the
 * blocks of each root in depth-first pre-order (every block after the block that links it), each block once,
 * each read from the store and checked on the way. Import reads with its own strict parser (the @ipld/car reader
 * checks no hashes), checks every block against its CID, and refuses: malformed or truncated input (trailing
 * bytes that are not a complete section included), CIDs outside the format, duplicate blocks, roots that are
 * missing or not directory manifests, blocks missing from a root's DAG, blocks no root reaches, and nodes or
 * sizes that do not verify. Nothing becomes visible in the store (or pinned) unless the whole file passes.
 */
export const MAX_CAR_ROOTS = 1024;
const MAX_HEADER_BYTES = 1 << 20;
const MAX_SECTION_BYTES = MAX_NODE_BYTES + 64;

export interface ExportReport {
  readonly roots: string[];
  readonly blocks: number;
  readonly bytes: number;
  readonly file: string;
}

export async function exportCar(blocks: BlockGetter, roots: readonly CID[], out: string, options: { progress?: Progress } = {}): Promise<ExportReport> {
  if (roots.length === 0 || roots.length > MAX_CAR_ROOTS) {
    throw snapshotError('SNAPSHOT_CID_INVALID', `export needs 1 to ${MAX_CAR_ROOTS} root CIDs, got ${roots.length}`);
  }
  const progress = options.progress ?? silentProgress;
  const reader = new NodeReader(blocks);
  const target = resolve(out);
  const tmp = join(dirname(target), `.${basename(target)}.tmp-${randomBytes(6).toString('hex')}`);
  const dir = fs.statSync(dirname(target), { throwIfNoEntry: false });
  if (!dir?.isDirectory()) {
    throw new AssayError('SNAPSHOT_OUTPUT_DIR_MISSING', 'not_found', `cannot write ${out}: the directory ${dirname(target)} does not exist (create it first)`, {
      details: { output: out },
    });
  }
  const { CarWriter } = await import('@ipld/car');
  const { writer, out: stream } = CarWriter.create([...roots]);
  const piping = pipeline(Readable.from(stream), fs.createWriteStream(tmp, { flags: 'wx', mode: 0o644 }));
  piping.catch(() => undefined);
  const seen = new Set<string>();
  let count = 0;
  let bytes = 0;
  progress.start('export: blocks');

  const put = async (cid: CID, data: Uint8Array) => {
    await writer.put({ cid, bytes: data });
    count += 1;
    bytes += data.length;
    progress.tick(count);
  };

  const visit = async (cid: CID, where: string): Promise<void> => {
    const k = cid.toString();
    if (seen.has(k)) return;
    seen.add(k);
    if (cid.code === RAW_CODE) {
      let data: Uint8Array;
      try {
        data = await blocks.get(cid);
      } catch (e) {
        throw atPath(e, where);
      }
      await put(cid, data);
      return;
    }
    let data: Uint8Array;
    try {
      data = await blocks.get(cid);
    } catch (e) {
      throw atPath(e, where);
    }
    const node = decodeNode(cid, data, where);
    await put(cid, data);
    if (node.type === 'file') {
      for (let i = 0; i < node.chunks.length; i++) await visit(node.chunks[i] as CID, `${where} (chunk ${i})`);
    } else {
      for (const e of node.entries) if (e.kind !== 'symlink') await visit(e.cid, where === '' ? e.name : `${where}/${e.name}`);
    }
  };

  try {
    for (const r of roots) {
      await reader.readDir(r, '');
      await visit(r, '');
    }
    await writer.close();
    await piping;
    fs.renameSync(tmp, target);
  } catch (e) {
    await writer.close().catch(() => undefined);
    await piping.catch(() => undefined);
    fs.rmSync(tmp, { force: true });
    progress.end();
    throw e;
  }
  progress.end(`${count} blocks`);
  return { roots: roots.map((r) => r.toString()), blocks: count, bytes, file: target };
}

// ---------------------------------------------------------------------------------------------------------------
// Import

class CarInput {
  private buf = Buffer.alloc(0);
  private pos = 0; // position in buf
  offset = 0; // bytes consumed from the file
  private eof = false;
  private readonly chunk = Buffer.allocUnsafe(4 << 20);
  private filePos = 0;

  constructor(private readonly fd: number) {}

  private fill(need: number): void {
    while (this.buf.length - this.pos < need && !this.eof) {
      const n = fs.readSync(this.fd, this.chunk, 0, this.chunk.length, this.filePos);
      if (n === 0) {
        this.eof = true;
        break;
      }
      this.filePos += n;
      this.buf = Buffer.concat([this.buf.subarray(this.pos), this.chunk.subarray(0, n)]);
      this.pos = 0;
    }
  }

  atEnd(): boolean {
    this.fill(1);
    return this.buf.length - this.pos === 0;
  }

  /** An unsigned LEB128 varint, minimally encoded, at most `max`. */
  varint(what: string, max: number): number {
    const start = this.offset;
    let value = 0;
    let shift = 0;
    for (let i = 0; ; i++) {
      this.fill(1);
      if (this.pos >= this.buf.length) throw truncated(start, `in the ${what} length`);
      const b = this.buf[this.pos] as number;
      this.pos += 1;
      this.offset += 1;
      if (i > 0 && b === 0) throw malformed(start, `the ${what} length is not minimally encoded`);
      value += (b & 0x7f) * 2 ** shift;
      if (value > max) throw malformed(start, `the ${what} length ${value}+ exceeds ${max}`);
      if ((b & 0x80) === 0) return value;
      shift += 7;
      if (shift > 49) throw malformed(start, `the ${what} length varint is too long`);
    }
  }

  exactly(n: number, what: string): Uint8Array {
    const start = this.offset;
    this.fill(n);
    if (this.buf.length - this.pos < n) throw truncated(start, `${what}: ${n} bytes announced, ${this.buf.length - this.pos} present`);
    const out = new Uint8Array(n);
    out.set(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    this.offset += n;
    return out;
  }
}

function malformed(offset: number, why: string): Error {
  return snapshotError('SNAPSHOT_CAR_MALFORMED', `CAR file is malformed at byte ${offset}: ${why}`, { offset });
}

function truncated(offset: number, why: string): Error {
  return snapshotError(
    'SNAPSHOT_CAR_TRUNCATED',
    `CAR file ends inside a section at byte ${offset} (${why}): it is truncated or has trailing bytes that are not a block`,
    { offset },
  );
}

export interface ImportReport {
  readonly roots: string[];
  readonly blocks: number;
  readonly bytes: number;
  /** Blobs that were not in the store before. */
  readonly newBlobs: number;
}

export async function importCar(store: BlobStore, file: string, options: { clock: Clock; progress?: Progress }): Promise<ImportReport> {
  const progress = options.progress ?? silentProgress;
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch (e) {
    throw ioError('opening', file, e);
  }
  const batch = await store.begin();
  try {
    const input = new CarInput(fd);
    // Header.
    const hlen = input.varint('header', MAX_HEADER_BYTES);
    if (hlen === 0) throw malformed(0, 'empty header');
    const hbytes = input.exactly(hlen, 'header');
    let header: unknown;
    try {
      header = dagCbor.decode(hbytes);
    } catch (e) {
      throw malformed(1, `the header is not DAG-CBOR (${(e as Error).message})`);
    }
    const h = header as { version?: unknown; roots?: unknown };
    if (typeof header !== 'object' || header === null || Object.keys(header).sort().join(',') !== 'roots,version') {
      throw malformed(1, 'the header must be exactly {version, roots}');
    }
    if (h.version !== 1) throw snapshotError('SNAPSHOT_CAR_UNSUPPORTED', `CAR version ${String(h.version)}; only version 1 is accepted`);
    if (!Array.isArray(h.roots) || h.roots.length === 0 || h.roots.length > MAX_CAR_ROOTS) {
      throw malformed(1, `the header must list 1 to ${MAX_CAR_ROOTS} roots`);
    }
    const roots = h.roots.map((r) => {
      const c = CID.asCID(r);
      if (!c || !isFormatCid(c)) throw snapshotError('SNAPSHOT_CAR_UNSUPPORTED', `a root in the CAR header is not a snapshot CID: ${String(r)}`);
      return c;
    });

    // Blocks.
    const seen = new Map<string, { index: number; offset: number }>();
    const links = new Map<string, string[]>();
    const rawSizes = new Map<string, number>();
    const kinds = new Map<string, SnapshotNode['type']>();
    let index = 0;
    let total = 0;
    progress.start('import: blocks');
    while (!input.atEnd()) {
      const offset = input.offset;
      const len = input.varint('section', MAX_SECTION_BYTES);
      if (len === 0) throw malformed(offset, 'an empty section');
      const section = input.exactly(len, `block #${index}`);
      let cid: CID;
      let data: Uint8Array;
      try {
        [cid, data] = CID.decodeFirst(section) as unknown as [CID, Uint8Array];
      } catch (e) {
        throw malformed(offset, `block #${index} does not start with a CID (${(e as Error).message})`);
      }
      if (!isFormatCid(cid)) {
        throw snapshotError(
          'SNAPSHOT_CAR_UNSUPPORTED',
          `block #${index} at byte ${offset} has CID ${cid.toString()}: only CIDv1 sha2-256 raw or dag-cbor blocks are accepted`,
          { offset, cid: cid.toString() },
        );
      }
      const k = cid.toString();
      const actual = sha256(data);
      if (!bytesEqual(actual, cid.multihash.digest)) {
        throw snapshotError(
          'SNAPSHOT_CAR_BLOCK_MISMATCH',
          `block #${index} at byte ${offset} claims CID ${k} but its bytes hash to sha2-256 ${Buffer.from(actual).toString('hex')}`,
          { offset, cid: k, index },
        );
      }
      const dup = seen.get(k);
      if (dup) {
        throw snapshotError('SNAPSHOT_CAR_DUPLICATE_BLOCK', `block #${index} at byte ${offset} repeats block #${dup.index} (${k})`, {
          offset,
          cid: k,
        });
      }
      seen.set(k, { index, offset });
      if (cid.code === RAW_CODE) {
        if (data.length > CHUNK_SIZE) throw malformed(offset, `raw block ${k} is larger than a chunk (${CHUNK_SIZE} bytes)`);
        rawSizes.set(k, data.length);
      } else if (cid.code === DAG_CBOR_CODE) {
        const node = decodeNode(cid, data, `block #${index} at byte ${offset}`);
        links.set(
          k,
          nodeLinks(node).map((c) => c.toString()),
        );
        kinds.set(k, node.type);
      }
      await batch.put({ cid, bytes: data });
      index += 1;
      total += data.length;
      progress.tick(index);
    }

    // Roots present and directories; every block reachable and present.
    for (const r of roots) {
      const k = r.toString();
      if (!seen.has(k)) throw snapshotError('SNAPSHOT_CAR_MISSING_ROOT', `root ${k} named in the CAR header is not among its blocks`, { cid: k });
      if (kinds.get(k) !== 'dir') throw snapshotError('SNAPSHOT_CAR_BAD_ROOT', `root ${k} is not a snapshot directory manifest`, { cid: k });
    }
    const reached = new Set<string>();
    const stack: Array<{ k: string; from: string | null }> = roots.map((r) => ({ k: r.toString(), from: null }));
    while (stack.length > 0) {
      const { k, from } = stack.pop() as { k: string; from: string | null };
      if (reached.has(k)) continue;
      if (!seen.has(k)) {
        throw snapshotError('SNAPSHOT_CAR_MISSING_BLOCK', `block ${k}, linked from ${from ?? 'the header'}, is not in the CAR`, { cid: k, from });
      }
      reached.add(k);
      for (const c of links.get(k) ?? []) if (!reached.has(c)) stack.push({ k: c, from: k });
    }
    for (const [k, where] of seen) {
      if (!reached.has(k)) {
        throw snapshotError('SNAPSHOT_CAR_UNREFERENCED_BLOCK', `block #${where.index} at byte ${where.offset} (${k}) is not reachable from any root`, {
          cid: k,
          offset: where.offset,
        });
      }
    }
    // Sizes and structure of each root, from the staged blocks (raw blocks were checked as they arrived).
    for (const r of roots) await verifySnapshot(batch, r, { knownRaw: rawSizes });

    const newBlobs = batch.added.blobs;
    const now = options.clock.now().toISOString();
    await batch.commit({ pins: roots.map((r) => ({ cid: r.toString(), createdAt: now, source: null, origin: 'import' as const })) });
    progress.end(`${index} blocks`);
    return { roots: roots.map((r) => r.toString()), blocks: index, bytes: total, newBlobs };
  } catch (e) {
    await batch.abort().catch(() => undefined);
    progress.end();
    throw e;
  } finally {
    fs.closeSync(fd);
  }
}
