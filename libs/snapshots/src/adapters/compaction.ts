import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fsyncDirectory } from '@assay/core';
import { ioError } from '../domain/snapshot.errors';
import type { CompactReport } from '../ports/blob-store.port';
import { cidOfKey } from './blob-keys';
import { BLOB_HEADER, ENTRY_BYTES, PACK_MAGIC, RECORD_OVERHEAD, appendRecord, parsePackName, type IndexEntry, type Loc, type PackIndex } from './pack-index';
import type { PackReader } from './pack-reader';
import { PackWriter, type PackFiles } from './pack-writer';

/** Packs smaller than this are merged by compaction when there are several. */
const SMALL_PACK = 64 << 20;

/** What the garbage collector's maintenance of the packs works on: the store's packs, index and open pack files. */
export interface PackMaintenance extends PackFiles {
  readonly dir: string;
  readonly index: PackIndex;
  readonly reader: PackReader;
  readonly durable: boolean;
  nowMs(): number;
}

type LiveBlobs = Map<number, Array<{ key: string; loc: Loc }>>;

/**
 * Reclaims the space of deleted blobs; call only while holding the GC lock (no writer is then registered).
 * Packs no index entry points into are removed; packs holding dead bytes, and small packs when there are several,
 * are rewritten: their live blobs (each checked against its CID; a pack holding a corrupt blob is left alone) are
 * copied into new packs, which are fdatasync'ed, then one index record moves the blobs there and is fdatasync'ed,
 * and only then are the old packs removed. The index file itself is rewritten (temp file, fsync, rename) when
 * most of its entries are superseded. A crash at any point leaves every index entry pointing at intact bytes.
 */
export async function compactPacks(store: PackMaintenance): Promise<CompactReport> {
  store.index.refresh();
  const live = liveBlobsByPack(store.index);
  const sizes = packSizes(store.packsDir);
  const { drop, rewrite } = planCompaction(sizes, live);
  let packsRewritten = 0;
  let bytesWritten = 0;
  if (rewrite.length > 0) {
    const rewritten = await rewritePacks(store, rewrite, live);
    for (const pack of rewritten.done) {
      drop.push(pack);
      packsRewritten += 1;
    }
    bytesWritten = rewritten.bytesWritten;
  }
  const removed = removePacks(store, drop, sizes);
  if (drop.length > 0 && store.durable) fsyncDirectory(store.packsDir);
  rewriteIndexIfBloated(store);
  return { packsRewritten, packsRemoved: removed.packs, bytesReclaimed: Math.max(0, removed.bytes - bytesWritten) };
}

/** The live blobs of each pack, from the index. */
function liveBlobsByPack(index: PackIndex): LiveBlobs {
  const live: LiveBlobs = new Map();
  for (const [key, loc] of index.entries()) {
    let l = live.get(loc.pack);
    if (!l) live.set(loc.pack, (l = []));
    l.push({ key, loc });
  }
  return live;
}

/** The size of each pack file in the folder. */
function packSizes(packsDir: string): Map<number, number> {
  const sizes = new Map<number, number>();
  for (const name of fs.readdirSync(packsDir)) {
    const n = parsePackName(name);
    if (n === null) continue;
    const st = fs.lstatSync(join(packsDir, name), { throwIfNoEntry: false });
    if (st?.isFile()) sizes.set(n, st.size);
  }
  return sizes;
}

/** Packs to remove (no live blob) and to rewrite (dead bytes, or small when there are several small ones). */
function planCompaction(sizes: Map<number, number>, live: LiveBlobs): { drop: number[]; rewrite: number[] } {
  const drop: number[] = [];
  const rewrite: number[] = [];
  let small = 0;
  for (const [pack, size] of sizes) {
    const blobs = live.get(pack);
    if (!blobs) {
      drop.push(pack);
      continue;
    }
    const used = PACK_MAGIC.length + blobs.reduce((s, b) => s + BLOB_HEADER + b.loc.length, 0);
    if (used < size) rewrite.push(pack);
    else if (size < SMALL_PACK) small += 1;
  }
  if (small >= 2) {
    for (const [pack, size] of sizes) if (live.has(pack) && size < SMALL_PACK && !rewrite.includes(pack)) rewrite.push(pack);
  }
  return { drop, rewrite };
}

/**
 * Copies the live blobs of these packs into new packs, durably, then moves them there with one index record.
 * Returns the packs whose blobs all moved (to remove) and the bytes written.
 */
async function rewritePacks(store: PackMaintenance, rewrite: number[], live: LiveBlobs): Promise<{ done: number[]; bytesWritten: number }> {
  const w = new PackWriter(store, store.durable);
  const moved: IndexEntry[] = [];
  const done: number[] = [];
  const now = store.nowMs();
  try {
    for (const pack of rewrite.sort((a, b) => a - b)) {
      const entries = copyLiveBlobs(
        store,
        w,
        pack,
        (live.get(pack) ?? []).sort((a, b) => a.loc.offset - b.loc.offset),
        now,
      );
      if (!entries) continue;
      moved.push(...entries);
      done.push(pack);
    }
    await w.finish();
    appendRecord(store.index.path, moved, store.durable);
  } catch (e) {
    w.discard();
    throw ioError('compacting the packs of', store.dir, e);
  }
  w.close();
  for (const e of moved) store.index.apply(e);
  return { done, bytesWritten: w.bytesWritten };
}

/**
 * Appends one pack's live blobs (sorted by offset) to the writer; returns their new index entries, or null when the
 * pack cannot be opened or holds a damaged blob (then it is kept as it is, for `verify` to report).
 */
function copyLiveBlobs(store: PackMaintenance, w: PackWriter, pack: number, blobs: ReadonlyArray<{ key: string; loc: Loc }>, now: number): IndexEntry[] | null {
  let fd: number;
  try {
    fd = fs.openSync(store.packPath(pack), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch {
    return null;
  }
  const entries: IndexEntry[] = [];
  try {
    for (const b of blobs) {
      const cid = cidOfKey(b.key);
      if (!cid) continue;
      let bytes: Uint8Array;
      try {
        bytes = store.reader.readPacked(cid, b.key, b.loc, fd);
      } catch {
        return null; // a damaged blob: keep the whole pack as it is, for `verify` to report
      }
      const at = w.append(b.key, bytes);
      entries.push({ key: b.key, pack: at.pack, offset: at.offset, length: bytes.length, timeMs: b.loc.timeMs || now });
    }
  } finally {
    fs.closeSync(fd);
  }
  return entries;
}

/** Removes these packs (closing the store's open handles on them); counts those removed and their bytes. */
function removePacks(store: PackMaintenance, drop: readonly number[], sizes: Map<number, number>): { packs: number; bytes: number } {
  let packs = 0;
  let bytes = 0;
  for (const pack of drop) {
    store.reader.dropReadFd(pack);
    try {
      fs.unlinkSync(store.packPath(pack));
      packs += 1;
      bytes += sizes.get(pack) ?? 0;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError('removing', store.packPath(pack), e);
    }
  }
  return { packs, bytes };
}

/** Writes the live entries to a fresh index file and renames it over the old one, when that saves most of it. */
function rewriteIndexIfBloated(store: PackMaintenance): void {
  const st = fs.statSync(store.index.path);
  const liveBytes = store.index.size * ENTRY_BYTES + RECORD_OVERHEAD;
  if (st.size < 1 << 16 || st.size < 2 * liveBytes) return;
  const entries: IndexEntry[] = [];
  for (const [key, loc] of store.index.entries()) entries.push({ key, ...loc });
  const tmp = `${store.index.path}.tmp-${randomBytes(6).toString('hex')}`;
  try {
    const fd = fs.openSync(tmp, 'wx', 0o644);
    try {
      fs.writeSync(fd, Buffer.from('ASXIDX01'));
    } finally {
      fs.closeSync(fd);
    }
    appendRecord(tmp, entries, store.durable);
    fs.renameSync(tmp, store.index.path);
    if (store.durable) fsyncDirectory(store.packsDir);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw ioError('rewriting the index of', store.dir, e);
  }
  store.index.refresh();
}

/**
 * Removes what crashed writers left in the packs folder (call while holding the GC lock): pack files no index entry
 * points into, and temporary index files, older than `olderThanMs`. Returns how many files it removed.
 */
export function removeStalePacks(store: PackMaintenance, nowMs: number, olderThanMs: number): number {
  let n = 0;
  store.index.refresh();
  const used = new Set<number>();
  for (const [, loc] of store.index.entries()) used.add(loc.pack);
  for (const name of fs.readdirSync(store.packsDir)) {
    const pack = parsePackName(name);
    if (pack === null || used.has(pack)) continue;
    const st = fs.lstatSync(join(store.packsDir, name), { throwIfNoEntry: false });
    if (!st || nowMs - st.mtimeMs < olderThanMs) continue;
    store.reader.dropReadFd(pack);
    fs.rmSync(join(store.packsDir, name), { force: true });
    n += 1;
  }
  for (const name of fs.readdirSync(store.packsDir)) {
    if (!name.startsWith('index.tmp-')) continue;
    const st = fs.lstatSync(join(store.packsDir, name), { throwIfNoEntry: false });
    if (st && nowMs - st.mtimeMs >= olderThanMs) {
      fs.rmSync(join(store.packsDir, name), { force: true });
      n += 1;
    }
  }
  return n;
}
