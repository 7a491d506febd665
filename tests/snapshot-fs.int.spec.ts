import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import * as dagCbor from '@ipld/dag-cbor';
import { sha256 as mfSha256 } from 'multiformats/hashes/sha2';
import * as raw from 'multiformats/codecs/raw';
import { ManualClock } from '@assay/core';
import { CHUNK_SIZE, FsBlobStore, FsTreeSource, MemoryTree, SnapshotHome, takeSnapshot, type SnapshotHomeOptions } from '@assay/snapshots';
import { failure } from './support/failure';
import { scratchDirs } from './support/scratch';

const { base, fresh } = scratchDirs('assay-snap-fs-');

/** A clock far ahead of the files' timestamps: stat cache entries recorded by it are clean. */
const future = () => new ManualClock('2099-01-01T00:00:00.000Z');

function home(opts: SnapshotHomeOptions = {}): SnapshotHome {
  return new SnapshotHome(fresh('home'), { clock: future(), durability: 'none', ...opts });
}

const pattern = (size: number, seed: number) => {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (i * 131 + seed + Math.floor(i / 65_521)) & 255;
  return b;
};

/** The sample workspace, created in the given order. */
function writeSample(dir: string, reverse = false): void {
  const steps: Array<() => void> = [
    () => writeFileSync(join(dir, 'a.txt'), 'hello\n'),
    () => writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 }),
    () => writeFileSync(join(dir, 'dir/big.bin'), pattern(5 * CHUNK_SIZE + 123, 1)),
    () => writeFileSync(join(dir, 'dir/sub/c.txt'), 'c'),
    () => writeFileSync(join(dir, 'dir/é.txt'), 'accent'),
    () => writeFileSync(join(dir, 'dir/😀.txt'), 'emoji'),
    () => writeFileSync(join(dir, 'dir/zero'), ''),
    () => symlinkSync('../a.txt', join(dir, 'dir/link')),
    () => mkdirSync(join(dir, 'empty'), { recursive: true }),
  ];
  mkdirSync(join(dir, 'dir/sub'), { recursive: true });
  for (const s of reverse ? [...steps].reverse() : steps) s();
}

function memorySample(): MemoryTree {
  return new MemoryTree()
    .file('a.txt', 'hello\n')
    .file('run.sh', '#!/bin/sh\necho hi\n', 0o755)
    .file('dir/big.bin', pattern(5 * CHUNK_SIZE + 123, 1))
    .file('dir/sub/c.txt', 'c')
    .file('dir/é.txt', 'accent')
    .file('dir/😀.txt', 'emoji')
    .file('dir/zero', '')
    .symlink('dir/link', '../a.txt')
    .dir('empty');
}

/** An independent implementation of the format (docs/snapshots-format.md) with multiformats and @ipld/dag-cbor. */
async function independentRoot(dir: string): Promise<string> {
  const dirCid = async (d: string): Promise<{ cid: CID; size: number }> => {
    const names = readdirSync(d).sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    const entries: Record<string, unknown>[] = [];
    let total = 0;
    for (const name of names) {
      const p = join(d, name);
      const st = lstatSync(p);
      if (st.isSymbolicLink()) {
        const target = readlinkSync(p);
        entries.push({ name, kind: 'symlink', mode: 0o777, size: Buffer.byteLength(target), target });
      } else if (st.isDirectory()) {
        const sub = await dirCid(p);
        total += sub.size;
        entries.push({ name, kind: 'dir', mode: 0o755, size: sub.size, cid: sub.cid });
      } else {
        const data = readFileSync(p);
        total += data.length;
        let cid: CID;
        if (data.length <= CHUNK_SIZE) cid = CID.createV1(raw.code, await mfSha256.digest(data));
        else {
          const chunks: CID[] = [];
          for (let off = 0; off < data.length; off += CHUNK_SIZE)
            chunks.push(CID.createV1(raw.code, await mfSha256.digest(data.subarray(off, off + CHUNK_SIZE))));
          const node = dagCbor.encode({ v: 1, type: 'file', size: data.length, chunkSize: CHUNK_SIZE, chunks });
          cid = CID.createV1(dagCbor.code, await mfSha256.digest(node));
        }
        entries.push({ name, kind: 'file', mode: st.mode & 0o111 ? 0o755 : 0o644, size: data.length, cid });
      }
    }
    const bytes = dagCbor.encode({ v: 1, type: 'dir', entries });
    return { cid: CID.createV1(dagCbor.code, await mfSha256.digest(bytes)), size: total };
  };
  return (await dirCid(dir)).cid.toString();
}

describe('determinism on a real file system', () => {
  it('gives one root CID for two copies made in different orders, with or without worker threads, stored or not, and agrees with an independent implementation and with the in-memory tree', async () => {
    const one = fresh('ws');
    const two = fresh('ws');
    writeSample(one);
    writeSample(two, true);
    const roots = new Set<string>();
    for (const workers of [0, 2]) {
      const h = home({ workers });
      roots.add((await h.create(one, { dryRun: true, useCache: false })).rootCid);
      roots.add((await h.create(two, { useCache: false })).rootCid);
      await h.close();
    }
    roots.add(await independentRoot(one));
    roots.add((await takeSnapshot({ source: memorySample(), store: null, clock: future() }, { dryRun: true })).rootCid);
    expect(roots.size).toBe(1);
  }, 30_000);

  it('ignores mtimes, counts the executable bit, symlink targets and empty directories', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const h = home();
    const root = async () => (await h.create(ws, { dryRun: true, useCache: false })).rootCid;
    const first = await root();
    utimesSync(join(ws, 'a.txt'), new Date('2001-01-01'), new Date('2001-01-01'));
    chmodSync(join(ws, 'dir/sub/c.txt'), 0o600);
    expect(await root()).toBe(first);
    chmodSync(join(ws, 'a.txt'), 0o755);
    const x = await root();
    expect(x).not.toBe(first);
    rmSync(join(ws, 'dir/link'));
    symlinkSync('../run.sh', join(ws, 'dir/link'));
    const y = await root();
    expect(y).not.toBe(x);
    mkdirSync(join(ws, 'empty/inner'));
    expect(await root()).not.toBe(y);
    await h.close();
  });
});

describe('refusals on a real file system', () => {
  it.each<[string, (ws: string) => void | (() => void), Record<string, unknown>, string, RegExp]>([
    [
      'a name that is not UTF-8',
      (ws) => writeFileSync(Buffer.concat([Buffer.from(`${ws}/dir/bad`), Buffer.from([0xff])]), 'x'),
      {},
      'SNAPSHOT_NAME_NOT_UTF8',
      /dir\/bad\\xff: the name is not valid UTF-8/,
    ],
    [
      'names equal under NFC',
      (ws) => {
        writeFileSync(join(ws, 'caf\u00e9'), '1');
        writeFileSync(join(ws, 'cafe\u0301'), '2');
      },
      {},
      'SNAPSHOT_NAME_COLLISION',
      /equal under Unicode NFC/,
    ],
    [
      'a fifo',
      (ws) => {
        execFileSync('mkfifo', [join(ws, 'dir/pipe')]);
      },
      {},
      'SNAPSHOT_SPECIAL_FILE',
      /dir\/pipe is a fifo/,
    ],
    ['too many entries', () => undefined, { maxFiles: 3 }, 'SNAPSHOT_TOO_MANY_FILES', /more than 3 entries \(policy maxFiles=3\)/],
    ['a file too large', () => undefined, { maxFileBytes: 1000 }, 'SNAPSHOT_FILE_TOO_LARGE', /dir\/big\.bin is 5243003 bytes, over the limit of 1000/],
    ['too many bytes', () => undefined, { maxTotalBytes: 5 * CHUNK_SIZE }, 'SNAPSHOT_TOO_LARGE', /over the limit of 5242880 \(policy maxTotalBytes\)/],
    [
      'too deep',
      (ws) => {
        mkdirSync(join(ws, 'dir/sub/1/2'), { recursive: true });
      },
      { maxDepth: 3 },
      'SNAPSHOT_TOO_DEEP',
      /dir\/sub\/1\/2 is nested 4 levels deep/,
    ],
    [
      'a symlink out of the root, when refused',
      (ws) => symlinkSync('/etc/passwd', join(ws, 'dir/pw')),
      { outsideSymlinks: 'refuse' },
      'SNAPSHOT_SYMLINK_OUTSIDE',
      /dir\/pw -> \/etc\/passwd points outside/,
    ],
  ])('%s', async (_what, setup, policy, code, message) => {
    const ws = fresh('ws');
    writeSample(ws);
    setup(ws);
    const h = home();
    const r = await failure(h.create(ws, { policy }));
    expect(r.code).toBe(code);
    expect(r.message).toMatch(message);
    expect(await h.pins()).toEqual([]);
    await h.close();
  });

  it('a socket', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const server: Server = createServer();
    await new Promise<void>((r) => server.listen(join(ws, 'dir/sock'), r));
    try {
      const h = home();
      const r = await failure(h.create(ws));
      expect(r).toMatchObject({ code: 'SNAPSHOT_SPECIAL_FILE' });
      expect(r.message).toMatch(/dir\/sock is a socket/);
      expect((await h.create(ws, { policy: { specialFiles: 'skip' }, dryRun: true })).skippedSpecialFiles).toEqual(['dir/sock']);
      await h.close();
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('records a symlink that points outside, flags it, and never reads through it', async () => {
    const outside = fresh('outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'secret'), 'do not read');
    const ws = fresh('ws');
    writeSample(ws);
    symlinkSync(outside, join(ws, 'escape'));
    const h = home();
    const r = await h.create(ws);
    expect(r.outsideSymlinks).toEqual(['escape']);
    const l = await h.ls(r.root, '');
    expect(l.entries.find((e) => e.name === 'escape')).toMatchObject({ kind: 'symlink', target: outside, outside: true });
    for await (const b of h.store.list()) expect(Buffer.from(await h.store.get(b.cid)).toString()).not.toBe('do not read');
    await h.close();
  });

  it('stores a hard-linked file once', async () => {
    const ws = fresh('ws');
    mkdirSync(ws);
    writeFileSync(join(ws, 'a'), pattern(2 * CHUNK_SIZE + 1, 4));
    linkSync(join(ws, 'a'), join(ws, 'b'));
    const h = home();
    const r = await h.create(ws);
    expect(r.files).toBe(2);
    expect(r.cache.hashed).toBe(1);
    expect(r.newBlobs).toBe(3 + 1 + 1); // three chunks, one file node, one manifest
    await h.close();
  });
});

describe('the file hasher guards against a tree changing under it', () => {
  it('re-reads a file whose stat changed since the walk', async () => {
    const ws = fresh('ws');
    mkdirSync(ws);
    writeFileSync(join(ws, 'f'), 'one');
    const src = new FsTreeSource(ws, { workers: 0 });
    const listed = (await src.listDir('', await src.statRoot()))[0];
    if (!listed) throw new Error('nothing listed');
    writeFileSync(join(ws, 'f'), 'two!');
    const hasher = src.openHasher(null);
    const h = await hasher.hash({ rel: 'f', stat: listed.stat });
    expect(h.size).toBe(4);
    await hasher.close();
  });

  it('refuses to read through a directory swapped for a symlink to the outside', async () => {
    const ws = fresh('ws');
    const outside = fresh('outside');
    mkdirSync(join(ws, 'dir'), { recursive: true });
    mkdirSync(outside);
    writeFileSync(join(ws, 'dir/f'), 'inside');
    writeFileSync(join(outside, 'f'), 'outside');
    const src = new FsTreeSource(ws, { workers: 0 });
    const dirStat = (await src.listDir('', await src.statRoot())).find((e) => e.name === 'dir');
    const f = dirStat ? (await src.listDir('dir', dirStat.stat))[0] : undefined;
    if (!f) throw new Error('nothing listed');
    renameSync(join(ws, 'dir'), join(ws, 'moved'));
    symlinkSync(outside, join(ws, 'dir'));
    const hasher = src.openHasher(null);
    const r = await failure(hasher.hash({ rel: 'dir/f', stat: f.stat }));
    expect(['SNAPSHOT_PATH_ESCAPE', 'SNAPSHOT_FILE_CHANGED']).toContain(r.code);
    if (existsSync('/proc/self/fd')) expect(r.code).toBe('SNAPSHOT_PATH_ESCAPE');
    await hasher.close();
    // and a listing of the swapped directory is refused outright
    if (dirStat) expect((await failure(src.listDir('dir', dirStat.stat))).code).toBe('SNAPSHOT_TREE_CHANGED');
  });
});

describe('incremental snapshots with the SQLite stat cache', () => {
  it('rehash only what changed, and everything when entries were racily clean', async () => {
    // Before any file is written: every file's mtime and ctime are at or after it (less the kernel clock's tick).
    const writtenAt = new Date();
    const ws = fresh('ws');
    writeSample(ws);
    const h = home();
    const a = await h.create(ws);
    expect(a.cache).toEqual({ hits: 0, hashed: 7 });
    const b = await h.create(ws);
    expect(b.cache).toEqual({ hits: 7, hashed: 0 });
    expect(b.rootCid).toBe(a.rootCid);
    writeFileSync(join(ws, 'dir/sub/c.txt'), 'changed');
    const c = await h.create(ws);
    expect(c.cache).toEqual({ hits: 6, hashed: 1 });
    expect(c.rootCid).toBe(await independentRoot(ws));
    expect(c.edited).toMatchObject({ fromCid: a.rootCid, toCid: c.rootCid, changed: { files: 1, bytesBefore: 1, bytesAfter: 7 } });
    await h.close();

    // A clock at the files' own time: entries are racily clean and never trusted. (The time the files were written,
    // not the time now: the snapshots above can take longer than the racy margin on a loaded machine, and files
    // written more than RACY_MARGIN_NS before the clock are clean, hence trusted.)
    const racy = new SnapshotHome(fresh('home'), { clock: new ManualClock(writtenAt), durability: 'none' });
    await racy.create(ws);
    expect((await racy.create(ws)).cache.hashed).toBe(7);
    await racy.close();
  });
});

describe('checkout', () => {
  it('materialises a snapshot exactly (bytes, executable bits, symlinks, empty directories)', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const h = home();
    const r = await h.create(ws);
    const out = fresh('out');
    const report = await h.checkout(r.root, out);
    expect(report).toMatchObject({ files: 7, directories: 3, symlinks: 1, bytes: r.bytes });
    expect(readFileSync(join(out, 'dir/big.bin')).equals(readFileSync(join(ws, 'dir/big.bin')))).toBe(true);
    expect(lstatSync(join(out, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(lstatSync(join(out, 'a.txt')).mode & 0o777).toBe(0o644);
    expect(readlinkSync(join(out, 'dir/link'))).toBe('../a.txt');
    expect(readdirSync(join(out, 'empty'))).toEqual([]);
    expect((await h.create(out, { dryRun: true })).rootCid).toBe(r.rootCid);
    // an existing empty directory is fine, a non-empty one is refused
    const empty = fresh('out');
    mkdirSync(empty);
    await h.checkout(r.root, empty);
    expect((await failure(h.checkout(r.root, out))).code).toBe('SNAPSHOT_TARGET_NOT_EMPTY');
    await h.close();
  });

  it('stores and materialises empty files, in a batch of their own and among others', async () => {
    const h = home();
    const alone = fresh('ws');
    mkdirSync(alone);
    writeFileSync(join(alone, 'main.py'), '');
    const mixed = fresh('ws');
    mkdirSync(join(mixed, 'd'), { recursive: true });
    writeFileSync(join(mixed, 'd', 'empty'), '');
    writeFileSync(join(mixed, 'full.txt'), 'x'.repeat(5000));
    for (const ws of [alone, mixed]) {
      const r = await h.create(ws);
      expect((await h.verify(r.root)).files).toBeGreaterThan(0); // throws on a missing or bad blob
      const out = fresh('out');
      await h.checkout(r.root, out);
      expect((await h.create(out, { dryRun: true })).rootCid).toBe(r.rootCid);
    }
    expect(readFileSync(join(alone, 'main.py')).length).toBe(0);
    await h.close();
  });

  it('fails on the first blob that does not match its CID, naming the path and the CID, and leaves nothing behind', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const h = home();
    const r = await h.create(ws);
    const store = h.store as FsBlobStore;
    const victims: string[] = [];
    for await (const b of store.list()) victims.push(b.cid.toString());
    expect(victims.length).toBeGreaterThan(8);
    for (const v of victims) {
      // Flip one byte of the blob inside its pack file.
      const at = store.locate(CID.parse(v));
      if (!at) throw new Error(`${v} is not in a pack`);
      if (at.length === 0) continue;
      const pack = readFileSync(at.path);
      const flipped = Buffer.from(pack);
      const i = at.offset + (at.length >> 1);
      flipped[i] = (flipped[i] as number) ^ 0x80;
      chmodSync(at.path, 0o644);
      writeFileSync(at.path, flipped);
      const out = fresh('out');
      const c = await failure(h.checkout(r.root, out));
      expect(c.code).toBe('SNAPSHOT_BLOB_CORRUPT');
      expect(c.message).toContain(v);
      expect(c.message).toContain(at.path);
      expect(existsSync(out)).toBe(false);
      expect(readdirSync(base).filter((x) => x.includes('assay-checkout'))).toEqual([]);
      const ver = await failure(h.verify(r.root));
      expect(ver.code).toBe('SNAPSHOT_BLOB_CORRUPT');
      expect(ver.message).toContain(v);
      expect(ver.message).toContain(at.path);
      writeFileSync(at.path, pack);
    }
    await expect(h.verify(r.root)).resolves.toMatchObject({ files: 7 });
    await h.close();
  });
});

describe('garbage collection on disk', () => {
  it('collects unpinned snapshots and the next snapshot stores again what the stat cache believed stored', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const h = home();
    const a = await h.create(ws);
    writeFileSync(join(ws, 'dir/sub/c.txt'), 'v2');
    const b = await h.create(ws);
    expect(await h.unpin(a.root)).toBe(true);
    const g = await h.gc({ graceMs: 0 });
    expect(g.deleted).toBe(4); // c.txt v1, the manifests of dir/sub, dir and the root of a
    expect(g.deleted + g.reachable).toBeGreaterThan(g.reachable);
    await expect(h.verify(b.root)).resolves.toBeTruthy();
    expect((await failure(h.verify(a.root))).code).toBe('SNAPSHOT_BLOB_MISSING');
    // Everything of b survived; unpin it too and collect: the store is empty.
    await h.unpin(b.root);
    await h.gc({ graceMs: 0 });
    const left = [];
    for await (const x of h.store.list()) left.push(x);
    expect(left).toEqual([]);
    // The stat cache no longer vouches for stored blobs: a new snapshot checks and writes them again.
    const c = await h.create(ws);
    expect(c.rootCid).toBe(b.rootCid);
    await expect(h.verify(c.root)).resolves.toMatchObject({ files: 7 });
    await h.close();
  });

  it('compacts packs: live blobs are copied out of packs holding dead ones, dead bytes are gone, small packs merge', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const h = home();
    const packBytes = () =>
      readdirSync(join(h.home, 'blobs', 'packs'))
        .filter((x) => x.endsWith('.pack'))
        .map((x) => readFileSync(join(h.home, 'blobs', 'packs', x)));
    const a = await h.create(ws);
    const secret = 'dead-bytes-'.repeat(50);
    writeFileSync(join(ws, 'dir/sub/c.txt'), secret);
    const b = await h.create(ws);
    writeFileSync(join(ws, 'dir/sub/c.txt'), 'v3');
    const c = await h.create(ws);
    // One pack or more per snapshot (the hashing threads write packs of their own, the batch one more).
    const packsBefore = packBytes().length;
    expect(packsBefore).toBeGreaterThanOrEqual(3);
    expect(packBytes().some((p) => p.includes(secret))).toBe(true);
    const before = packBytes().reduce((sum, p) => sum + p.length, 0);
    expect(await h.unpin(b.root)).toBe(true);
    // A reader in another process that loaded the index (and opened packs) before the collection.
    const reader = new SnapshotHome(h.home, { clock: future(), durability: 'none' });
    await expect(reader.verify(a.root)).resolves.toMatchObject({ files: 7 });
    const g = await h.gc({ graceMs: 0 });
    expect(g.deleted).toBe(4); // c.txt of b, the manifests of dir/sub, dir and the root of b
    // b's packs held only dead blobs: removed; a's and c's were small: merged into one.
    expect(g.compaction.packsRewritten).toBeGreaterThanOrEqual(2);
    expect(g.compaction.packsRemoved + g.stagingRemoved).toBe(packsBefore);
    expect(g.compaction.bytesReclaimed).toBeGreaterThanOrEqual(0);
    expect(packBytes()).toHaveLength(1);
    expect((packBytes()[0] as Buffer).length).toBeLessThan(before - secret.length);
    expect(packBytes().some((p) => p.includes(secret))).toBe(false);
    await expect(h.verify(a.root)).resolves.toMatchObject({ files: 7 });
    await expect(h.verify(c.root)).resolves.toMatchObject({ files: 7 });
    expect((await failure(h.verify(b.root))).code).toBe('SNAPSHOT_BLOB_MISSING');
    // The reader finds the moved blobs again (its index is stale: the packs it names are gone).
    await expect(reader.verify(c.root)).resolves.toMatchObject({ files: 7 });
    await h.unpin(a.root);
    await h.gc({ graceMs: 0 });
    await expect(reader.verify(c.root)).resolves.toMatchObject({ files: 7 });
    await reader.close();
    await h.close();
  });

  it('a snapshot started during a collection waits for it, then stores and dedups against what survived', async () => {
    const ws = fresh('ws');
    writeSample(ws);
    const h = new SnapshotHome(fresh('home'), { clock: future(), durability: 'batch' });
    const first = await h.create(ws);
    await h.unpin(first.root);
    const lock = await h.store.lockForGc();
    // While the lock is held a writer cannot begin; it waits, and proceeds once the collection is over.
    const other = new SnapshotHome(h.home, { clock: future(), durability: 'batch' });
    const pending = other.create(ws, { useCache: false });
    await new Promise((r) => setTimeout(r, 300));
    for await (const x of h.store.list()) await h.store.delete(x.cid);
    await h.store.compact();
    await lock.release();
    const second = await pending;
    expect(second.rootCid).toBe(first.rootCid);
    expect(second.newBlobs).toBeGreaterThan(8);
    await expect(h.verify(second.root)).resolves.toMatchObject({ files: 7 });
    // And a collection refuses to start while that writer is registered.
    const batch = await other.store.begin();
    expect((await failure(h.gc({ graceMs: 0 }))).code).toBe('SNAPSHOT_STORE_BUSY');
    await batch.abort();
    await other.close();
    await h.close();
  });
});
