import { execFileSync } from 'node:child_process';
import { chmodSync, linkSync, lstatSync, mkdirSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ManualClock } from '@assay/core';
import {
  FsTreeSource,
  ListingKey,
  SnapshotHome,
  childListings,
  decodeListing,
  digestBytes,
  nativeLister,
  nativeListerStatus,
  statSig,
  summarizeListing,
  type NativeLister,
  type SnapshotPolicy,
  type SourceEntry,
  type SourceStat,
} from '@assay/snapshots';
import { failure } from './support/failure';
import { scratchDirs } from './support/scratch';

/*
 * The native directory lister (libs/snapshots/native/fs-list.c) is built by `npm run build`; these tests need it
 * and fail (never skip) without it. Everything it produces is held equal to what node:fs gives, and snapshots
 * taken with it equal those taken without it.
 */
const { fresh } = scratchDirs('assay-native-lister-');
const future = () => new ManualClock('2099-01-01T00:00:00.000Z');

function lister(): NativeLister {
  const l = nativeLister();
  if (!l) throw new Error(`the native lister is not available: ${nativeListerStatus().why}`);
  return l;
}

function rootStat(dir: string) {
  const st = lstatSync(dir, { bigint: true });
  return { dev: st.dev, ino: st.ino };
}

/** What the node:fs path of FsTreeSource lists, sorted by name, as plain comparable records. */
async function viaNodeFs(dir: string): Promise<unknown[]> {
  const src = new FsTreeSource(dir, { nativeLister: false, workers: 0 });
  return plain(await src.listDir('', await src.statRoot()));
}

/** The stat signature rebuilt from the fields themselves (not a signature the source may have precomputed). */
function fieldSig(st: SourceStat): string {
  return statSig({ kind: st.kind, size: st.size, mode: st.mode, dev: st.dev, ino: st.ino, nlink: st.nlink, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs });
}

function plain(entries: SourceEntry[]): unknown[] {
  return entries
    .map((e) => ({
      name: e.invalidName ? Buffer.from(e.invalidName).toString('hex') : e.name,
      invalid: e.invalidName !== undefined,
      kind: e.stat.kind,
      size: e.stat.size,
      mode: e.stat.mode,
      nlink: e.stat.nlink,
      dev: e.stat.dev,
      ino: e.stat.ino,
      mtimeNs: e.stat.mtimeNs,
      ctimeNs: e.stat.ctimeNs,
      sig: fieldSig(e.stat),
      ownSig: statSig(e.stat),
    }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function writeMixed(dir: string): void {
  mkdirSync(join(dir, 'sub', 'deeper'), { recursive: true });
  writeFileSync(join(dir, 'a.txt'), 'alpha');
  writeFileSync(join(dir, 'empty'), '');
  writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\n');
  chmodSync(join(dir, 'run.sh'), 0o755);
  writeFileSync(join(dir, 'sub', 'b.bin'), Buffer.alloc(70_000, 7));
  linkSync(join(dir, 'a.txt'), join(dir, 'hard'));
  symlinkSync('a.txt', join(dir, 'link'));
  writeFileSync(join(dir, 'caf\u00e9 \u2603.txt'), 'unicode');
  writeFileSync(Buffer.from([...Buffer.from(`${dir}/`), 0x66, 0xff, 0x2e]), 'not utf-8');
  execFileSync('mkfifo', [join(dir, 'pipe')]);
}

describe('the native directory lister', () => {
  it('is built and loaded', () => {
    const s = nativeListerStatus();
    if (!s.active) throw new Error(`the native lister is not in use: ${s.why}`);
    expect(s.why).toMatch(/assay_fs_list\.node$/);
  });

  it('lists exactly what node:fs sees: names (also not UTF-8), kinds, sizes, modes, links, times, signatures', async () => {
    const dir = fresh('mixed');
    mkdirSync(dir);
    writeMixed(dir);
    const { dev, ino } = rootStat(dir);
    const native = plain(decodeListing(lister().listDirSync(dir, dev, ino)));
    expect(native).toHaveLength(9);
    expect(native).toEqual(await viaNodeFs(dir));
  });

  it('summarises a listing: counts, bytes, plain names and the files key the walk would compute', () => {
    const dir = fresh('plain');
    mkdirSync(join(dir, 'd1'), { recursive: true });
    writeFileSync(join(dir, 'z.txt'), 'zz');
    writeFileSync(join(dir, 'A b.txt'), 'x'.repeat(1000));
    writeFileSync(join(dir, 'm'), '');
    const { dev, ino } = rootStat(dir);
    const sum = summarizeListing(lister().listDirSync(dir, dev, ino));
    expect(sum).toMatchObject({ files: 3, dirs: 1, others: 0, allPlain: true, fileBytes: 1002, largestFile: 1000 });
    const files = sum
      .entries()
      .filter((e) => e.stat.kind === 'file')
      .sort((a, b) => (Buffer.from(a.name) < Buffer.from(b.name) ? -1 : 1));
    const key = new ListingKey();
    let text = '';
    for (const f of files) {
      const sig = fieldSig(f.stat);
      key.file(f.name, sig);
      text += `f\0${f.name}\0${sig}\n`;
    }
    expect(Buffer.from(sum.filesKeyText).toString('utf8')).toBe(text);
    expect(digestBytes(sum.filesKeyText)).toBe(key.filesKey());
    expect(sum.subdirectories().map((e) => e.name)).toEqual(['d1']);

    // A symlink, a name that is not plain ASCII, or one that is not UTF-8: the walk must look entry by entry.
    symlinkSync('z.txt', join(dir, 'l'));
    writeFileSync(join(dir, 'tab\there'), '');
    const again = summarizeListing(lister().listDirSync(dir, dev, ino));
    expect(again).toMatchObject({ files: 4, others: 1, allPlain: false });
  });

  it('refuses a directory that is not the one expected: other inode, symlink, missing, not a directory', async () => {
    const dir = fresh('changed');
    mkdirSync(join(dir, 'real'), { recursive: true });
    writeFileSync(join(dir, 'file'), 'x');
    symlinkSync('real', join(dir, 'alias'));
    const real = rootStat(join(dir, 'real'));
    const l = lister();
    expect(() => l.listDirSync(join(dir, 'real'), real.dev, real.ino + 1n)).toThrow(expect.objectContaining({ code: 'ASSAY_DIR_CHANGED' }));
    expect(() => l.listDirSync(join(dir, 'alias'), real.dev, real.ino)).toThrow(expect.objectContaining({ code: 'ASSAY_DIR_CHANGED' }));
    expect(() => l.listDirSync(join(dir, 'gone'))).toThrow(expect.objectContaining({ code: 'ASSAY_DIR_CHANGED' }));
    expect(() => l.listDirSync(join(dir, 'file'))).toThrow(expect.objectContaining({ code: 'ASSAY_DIR_CHANGED' }));
    // Through the tree source it is the walk's own error.
    const src = new FsTreeSource(dir, { workers: 0 });
    const entries = await src.listDir('', await src.statRoot());
    const realEntry = entries.find((e) => e.name === 'real');
    if (!realEntry) throw new Error('no entry for real');
    renameSync(join(dir, 'real'), join(dir, 'moved'));
    mkdirSync(join(dir, 'real'));
    expect((await failure(src.listDir('real', realEntry.stat))).code).toBe('SNAPSHOT_TREE_CHANGED');
  });

  it('prefetches: listings equal direct ones, subdirectories are queued in turn, errors reach the taker', async () => {
    const dir = fresh('prefetch');
    mkdirSync(join(dir, 'a', 'b', 'c'), { recursive: true });
    mkdirSync(join(dir, 'd'));
    writeFileSync(join(dir, 'a', 'f'), 'f');
    writeFileSync(join(dir, 'a', 'b', 'g'), 'g');
    const l = lister();
    const h = l.prefetcherCreate(16);
    try {
      const a = rootStat(join(dir, 'a'));
      const d = rootStat(join(dir, 'd'));
      const idBad = l.prefetcherAdd(h, join(dir, 'd'), d.dev, d.ino + 1n);
      expect(idBad).toBeGreaterThan(0);
      const { id: idA, listing: listingA } = await prefetched(l, h, join(dir, 'a'), a);
      expect(plain(decodeListing(listingA))).toEqual(plain(decodeListing(l.listDirSync(join(dir, 'a'), a.dev, a.ino))));
      const [b, ...more] = childListings(listingA);
      expect(more).toEqual([]);
      expect(b).toMatchObject({ name: 'b', ...rootStat(join(dir, 'a', 'b')) });
      const listingB = l.prefetcherTake(h, (b as { id: number }).id);
      if (!listingB) throw new Error('b was not queued by its parent');
      expect(
        decodeListing(listingB)
          .map((e) => e.name)
          .sort(),
      ).toEqual(['c', 'g']);
      expect(childListings(listingB).map((c) => c.name)).toEqual(['c']);
      // The wrong inode is an error for whoever takes it; an unknown id, or one taken already, is null.
      expect(() => l.prefetcherTake(h, idBad)).toThrow(expect.objectContaining({ code: 'ASSAY_DIR_CHANGED' }));
      expect(l.prefetcherTake(h, 999_999)).toBeNull();
      expect(l.prefetcherTake(h, idA)).toBeNull();
    } finally {
      // c is still queued or held: closing drops it.
      l.prefetcherClose(h);
    }
    expect(l.prefetcherTake(h, 1)).toBeNull();
  });

  it('lists only what it is asked for when told the walk may skip directories (exclusions)', async () => {
    const dir = fresh('hinted');
    mkdirSync(join(dir, 'a', 'b'), { recursive: true });
    const l = lister();
    const h = l.prefetcherCreate(16, false);
    try {
      const a = rootStat(join(dir, 'a'));
      const { listing } = await prefetched(l, h, join(dir, 'a'), a);
      expect(decodeListing(listing).map((e) => e.name)).toEqual(['b']);
      expect(childListings(listing)).toEqual([]);
    } finally {
      l.prefetcherClose(h);
    }
  });

  it('hands a request back when it has not started: the caller lists it, and it is never listed twice', () => {
    const dir = fresh('many');
    for (let i = 0; i < 300; i++) mkdirSync(join(dir, `d${i}`, 'x'), { recursive: true });
    const l = lister();
    const h = l.prefetcherCreate(1024);
    try {
      const ids = Array.from({ length: 300 }, (_, i) => {
        const st = rootStat(join(dir, `d${i}`));
        return l.prefetcherAdd(h, join(dir, `d${i}`), st.dev, st.ino);
      });
      // The first request is at the bottom of the stack: almost surely not started. Either way the answer is
      // a valid listing or null, and the request is finished after it.
      const first = l.prefetcherTake(h, ids[0] as number);
      if (first) expect(decodeListing(first).map((e) => e.name)).toEqual(['x']);
      expect(l.prefetcherTake(h, ids[0] as number)).toBeNull();
      for (const id of ids.slice(1)) {
        const b = l.prefetcherTake(h, id);
        if (b) expect(decodeListing(b).map((e) => e.name)).toEqual(['x']);
        expect(l.prefetcherTake(h, id)).toBeNull();
      }
    } finally {
      l.prefetcherClose(h);
    }
  });
});

describe('re-snapshots with the native lister', () => {
  /** Takes the same snapshot three ways: native lister + cache, node:fs + cache, and a cold dry run. */
  async function threeWays(homes: { native: SnapshotHome; nodeFs: SnapshotHome }, ws: string, policy?: Partial<SnapshotPolicy>) {
    const opts = policy ? { policy } : {};
    const native = await homes.native.create(ws, opts);
    const nodeFs = await homes.nodeFs.create(ws, opts);
    const cold = new SnapshotHome(fresh('cold'), { clock: future(), durability: 'none', nativeLister: false });
    const dry = await cold.create(ws, { ...opts, dryRun: true, useCache: false });
    await cold.close();
    expect(native.rootCid).toBe(dry.rootCid);
    expect(nodeFs.rootCid).toBe(dry.rootCid);
    return native;
  }

  it('give the CIDs of node:fs and of a cold dry run after every kind of change, rehashing only what changed', async () => {
    const ws = fresh('ws');
    mkdirSync(ws);
    for (let d = 0; d < 4; d++) {
      mkdirSync(join(ws, `d${d}`, 'sub'), { recursive: true });
      for (let f = 0; f < 5; f++) writeFileSync(join(ws, `d${d}`, f % 2 ? 'sub' : '', `f${f}.dat`), `content ${d}/${f}`);
    }
    const homes = {
      native: new SnapshotHome(fresh('home'), { clock: future(), durability: 'none' }),
      nodeFs: new SnapshotHome(fresh('home'), { clock: future(), durability: 'none', nativeLister: false }),
    };
    try {
      expect((await threeWays(homes, ws)).cache).toEqual({ hits: 0, hashed: 20 });
      expect((await threeWays(homes, ws)).cache).toEqual({ hits: 20, hashed: 0 });

      // Same size, and the mtime put back: the ctime still tells.
      const p = join(ws, 'd1', 'f0.dat');
      const before = lstatSync(p);
      writeFileSync(p, 'CONTENT 1/0');
      utimesSync(p, before.atime, before.mtime);
      const changed = await threeWays(homes, ws);
      expect(changed.cache).toEqual({ hits: 19, hashed: 1 });
      expect(changed.edited?.changed.files).toBe(1);

      writeFileSync(join(ws, 'd2', 'sub', 'new.dat'), 'new');
      rmSync(join(ws, 'd3', 'f0.dat'));
      expect((await threeWays(homes, ws)).cache).toEqual({ hits: 19, hashed: 1 });

      chmodSync(join(ws, 'd0', 'f2.dat'), 0o755);
      expect((await threeWays(homes, ws)).cache.hashed).toBe(1);

      renameSync(join(ws, 'd2'), join(ws, 'renamed'));
      mkdirSync(join(ws, 'd0', 'empty'));
      symlinkSync('../d1/f0.dat', join(ws, 'd0', 'link'));
      const moved = await threeWays(homes, ws);
      expect(moved.cache.hashed).toBeLessThanOrEqual(6);

      // Exclusions: the walk looks entry by entry (and the result is the same).
      await threeWays(homes, ws, { exclude: ['*.dat'] });
      await threeWays(homes, ws);
    } finally {
      await homes.native.close();
      await homes.nodeFs.close();
    }
  });

  it('never trust racily clean entries (a clock at the files own time): everything is rehashed', async () => {
    const ws = fresh('ws');
    mkdirSync(join(ws, 'd'), { recursive: true });
    for (let f = 0; f < 4; f++) writeFileSync(join(ws, 'd', `f${f}`), `${f}`);
    const racy = new SnapshotHome(fresh('home'), { clock: new ManualClock(new Date()), durability: 'none' });
    try {
      await racy.create(ws);
      expect((await racy.create(ws)).cache).toEqual({ hits: 0, hashed: 4 });
    } finally {
      await racy.close();
    }
  });
});

/**
 * Queues `path` and takes its listing once the prefetcher's threads have listed it. A request they have not started
 * yet is handed back (null) and dropped, so on a loaded machine the request is queued again after a longer wait,
 * instead of counting on the threads to start within a fixed time.
 */
async function prefetched(
  l: NativeLister,
  h: ReturnType<NativeLister['prefetcherCreate']>,
  path: string,
  st: { dev: bigint; ino: bigint },
): Promise<{ id: number; listing: Buffer }> {
  for (let attempt = 1; attempt <= 10; attempt++) {
    const id = l.prefetcherAdd(h, path, st.dev, st.ino);
    expect(id).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 300 * attempt));
    const listing = l.prefetcherTake(h, id);
    if (listing) return { id, listing };
  }
  throw new Error(`${path} was not prefetched in 10 tries`);
}
