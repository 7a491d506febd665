import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { dirname, join, basename, resolve } from 'node:path';
import { CID } from 'multiformats/cid';
import { AssayError, silentProgress, type Clock, type Progress } from '@assay/core';
import { RAW_CODE, decodeNode } from '../domain/format';
import { atPath, ioError, snapshotError } from '../domain/snapshot.errors';
import { CarCheck, carMalformed, carTruncated, MAX_CAR_HEADER_BYTES, MAX_CAR_ROOTS, MAX_CAR_SECTION_BYTES } from '../domain/car-check';
import type { BlobStore } from '../ports/blob-store.port';
import { NodeReader, type BlockGetter } from './node-reader';
import { verifySnapshot } from './verify';

/**
 * CAR v1 (https://ipld.io/specs/transport/car/carv1/) as a container only. Export writes the header and the
 * blocks of each root in depth-first pre-order (every block after the block that links it), each block once,
 * each read from the store and checked on the way. Import reads with its own strict parser (the @ipld/car reader
 * checks no hashes), checks every block against its CID, and refuses: malformed or truncated input (trailing
 * bytes that are not a complete section included), CIDs outside the format, duplicate blocks, roots that are
 * missing or not directory manifests, blocks missing from a root's DAG, blocks no root reaches, and nodes or
 * sizes that do not verify. Nothing becomes visible in the store (or pinned) unless the whole file passes.
 */
export { MAX_CAR_ROOTS };

export interface ExportReport {
  readonly roots: string[];
  readonly blocks: number;
  readonly bytes: number;
  readonly file: string;
}

export interface ExportCarOptions {
  readonly progress?: Progress;
  /**
   * Names of root directory entries whose blocks are not written (a task's hidden `tests/` and `solution/` in a
   * result bundle): the root manifest still names them, by CID and size. A block they share with written content is
   * written for that content.
   */
  readonly withholdRootEntries?: readonly string[];
}

export async function exportCar(blocks: BlockGetter, roots: readonly CID[], out: string, options: ExportCarOptions = {}): Promise<ExportReport> {
  if (roots.length === 0 || roots.length > MAX_CAR_ROOTS) {
    throw snapshotError('SNAPSHOT_CID_INVALID', `export needs 1 to ${MAX_CAR_ROOTS} root CIDs, got ${roots.length}`);
  }
  const progress = options.progress ?? silentProgress;
  const withheld = new Set(options.withholdRootEntries ?? []);
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
      for (const e of node.entries)
        if (e.kind !== 'symlink' && !(where === '' && withheld.has(e.name))) await visit(e.cid, where === '' ? e.name : `${where}/${e.name}`);
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

const malformed = carMalformed;
const truncated = carTruncated;

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
    const check = new CarCheck();
    const hlen = input.varint('header', MAX_CAR_HEADER_BYTES);
    if (hlen === 0) throw carMalformed(0, 'empty header');
    const roots = check.header(input.exactly(hlen, 'header'));
    progress.start('import: blocks');
    while (!input.atEnd()) {
      const offset = input.offset;
      const len = input.varint('section', MAX_CAR_SECTION_BYTES);
      if (len === 0) throw carMalformed(offset, 'an empty section');
      const { cid, data } = check.block(input.exactly(len, `block #${check.blocks}`), offset);
      await batch.put({ cid, bytes: data });
      progress.tick(check.blocks);
    }
    check.finish();
    const rawSizes = check.rawSizes;
    const index = check.blocks;
    const total = check.bytes;
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
