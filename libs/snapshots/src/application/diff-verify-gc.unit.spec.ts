import type { CID } from 'multiformats/cid';
import { ManualClock } from '@assay/core';
import { MemoryTree } from '../adapters/memory-tree-source.adapter';
import { MemoryBlobStore } from '../adapters/memory-blob-store.adapter';
import { MemoryStatCache } from '../adapters/memory-stat-cache.adapter';
import { CHUNK_SIZE, MODE_DIR, MODE_FILE, encodeDirManifest, rawBlock, type Entry } from '../domain/format';
import { EVENT_MAX_PATHS } from '../domain/events';
import { takeSnapshot } from './take-snapshot';
import { verifySnapshot } from './verify';
import { diffSnapshots, listSnapshot, summarizeSnapshots } from './browse';
import { collectGarbage } from './gc';
import { failure } from '../../../../tests/support/failure';

const clock = () => new ManualClock('2030-01-01T00:00:00.000Z');
const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed + Math.floor(i / 999_983)) & 255);

async function store(tree: MemoryTree, s: MemoryBlobStore, c = clock()): Promise<CID> {
  return (await takeSnapshot({ source: tree, store: s, clock: c }, { label: null })).root;
}

function tree(): MemoryTree {
  return new MemoryTree()
    .file('keep.txt', 'same')
    .file('edit.txt', 'before')
    .file('gone.txt', 'bye')
    .file('tool', 'x', 0o644)
    .symlink('link', 'keep.txt')
    .file('old/a', 'a')
    .file('old/deep/b', 'bb')
    .file('kind', 'was a file');
}

describe('diff', () => {
  it('lists added, removed and changed paths with sizes, from manifests alone', async () => {
    const s = new MemoryBlobStore();
    const a = await store(tree(), s);
    const t = tree()
      .file('edit.txt', 'after!!')
      .remove('gone.txt')
      .chmod('tool', 0o755)
      .symlink('link', 'edit.txt')
      .remove('old')
      .file('new/x', 'xyz')
      .dir('new/empty')
      .remove('kind')
      .dir('kind');
    const b = await store(t, s);
    const changes = [];
    for await (const c of diffSnapshots(s, a, b)) changes.push([c.change, c.path, c.kind, c.sizeBefore, c.sizeAfter]);
    expect(changes).toEqual([
      ['changed', 'edit.txt', 'file', 6, 7],
      ['removed', 'gone.txt', 'file', 3, null],
      ['removed', 'kind', 'file', 10, null],
      ['added', 'kind', 'dir', null, 0],
      ['changed', 'link', 'symlink', 8, 8],
      ['added', 'new', 'dir', null, 3],
      ['added', 'new/empty', 'dir', null, 0],
      ['added', 'new/x', 'file', null, 3],
      ['removed', 'old', 'dir', 3, null],
      ['removed', 'old/a', 'file', 1, null],
      ['removed', 'old/deep', 'dir', 2, null],
      ['removed', 'old/deep/b', 'file', 2, null],
      ['changed', 'tool', 'file', 1, 1],
    ]);
    const summary = await summarizeSnapshots(s, a, b);
    expect(summary).toMatchObject({
      added: { files: 1, symlinks: 0, directories: 3, bytes: 3 },
      removed: { files: 4, symlinks: 0, directories: 2, bytes: 3 + 10 + 1 + 2 },
      changed: { files: 2, symlinks: 1, modeOnly: 1, bytesBefore: 7, bytesAfter: 8 },
      totalChanges: 13,
      pathsTruncated: false,
    });
  });

  it('is empty between a snapshot and itself, and bounds the event path list', async () => {
    const s = new MemoryBlobStore();
    const a = await store(new MemoryTree().dir('d'), s);
    const many = new MemoryTree();
    for (let i = 0; i < 150; i++) many.file(`d/f${String(i).padStart(3, '0')}`, String(i));
    const b = await store(many, s);
    const none = [];
    for await (const c of diffSnapshots(s, a, a)) none.push(c);
    expect(none).toEqual([]);
    const summary = await summarizeSnapshots(s, a, b);
    expect(summary.totalChanges).toBe(150);
    expect(summary.paths).toHaveLength(EVENT_MAX_PATHS);
    expect(summary.pathsTruncated).toBe(true);
  });

  it('reads nothing but manifests (file blobs may be missing)', async () => {
    const s = new MemoryBlobStore();
    const a = await store(new MemoryTree().file('f', bytes(3 * CHUNK_SIZE, 1)), s);
    const b = await store(new MemoryTree().file('f', bytes(3 * CHUNK_SIZE, 2)), s);
    for (const [k, v] of s.blobs) if (v.cid.code === 0x55) s.blobs.delete(k);
    const changes = [];
    for await (const c of diffSnapshots(s, a, b)) changes.push(c.path);
    expect(changes).toEqual(['f']);
  });
});

describe('ls', () => {
  it('lists a directory, shows a single entry, flags outside symlinks, and names a missing path', async () => {
    const s = new MemoryBlobStore();
    const root = await store(tree().symlink('old/esc', '../../etc'), s);
    const l = await listSnapshot(s, root, 'old');
    expect(l.entries.map((e) => [e.name, e.kind, e.mode, e.size, e.outside])).toEqual([
      ['a', 'file', '0644', 1, null],
      ['deep', 'dir', '0755', 2, null],
      ['esc', 'symlink', '0777', 9, true],
    ]);
    expect((await listSnapshot(s, root, 'old/deep/b')).entries).toMatchObject([{ path: 'old/deep/b', kind: 'file', size: 2 }]);
    expect((await listSnapshot(s, root, '')).entries.find((e) => e.name === 'link')).toMatchObject({ target: 'keep.txt', outside: false });
    const r = await failure(listSnapshot(s, root, 'old/nope'));
    expect(r).toMatchObject({ code: 'SNAPSHOT_PATH_NOT_FOUND' });
    expect(r.message).toMatch(/old\/nope does not exist/);
    expect((await failure(listSnapshot(s, root, 'keep.txt/x'))).code).toBe('SNAPSHOT_PATH_NOT_FOUND');
  });
});

describe('verify', () => {
  it('accepts an intact snapshot and counts it', async () => {
    const s = new MemoryBlobStore();
    const root = await store(tree().file('big', bytes(2 * CHUNK_SIZE + 3, 5)), s);
    await expect(verifySnapshot(s, root)).resolves.toMatchObject({
      files: 8,
      directories: 2,
      symlinks: 1,
      bytes: 4 + 6 + 3 + 1 + 1 + 2 + 10 + 2 * CHUNK_SIZE + 3,
    });
  });

  it('catches a flipped byte in any stored blob, naming the path and the CID', async () => {
    const s = new MemoryBlobStore();
    const root = await store(tree().file('big', bytes(2 * CHUNK_SIZE + 3, 5)), s);
    for (const [k, b] of [...s.blobs]) {
      const copy = Uint8Array.from(b.bytes);
      if (copy.length === 0) continue;
      copy[copy.length >> 1] = (copy[copy.length >> 1] as number) ^ 0x01;
      s.blobs.set(k, { ...b, bytes: copy });
      const r = await failure(verifySnapshot(s, root));
      expect(r.code).toBe('SNAPSHOT_BLOB_CORRUPT');
      expect(r.message).toContain(k);
      s.blobs.set(k, b);
    }
    await expect(verifySnapshot(s, root)).resolves.toBeTruthy();
  });

  it('catches a missing blob', async () => {
    const s = new MemoryBlobStore();
    const root = await store(tree(), s);
    const victim = [...s.blobs.values()].find((b) => b.cid.code === 0x55 && new TextDecoder().decode(b.bytes) === 'bb');
    if (!victim) throw new Error('no victim');
    s.blobs.delete(victim.cid.toString());
    const r = await failure(verifySnapshot(s, root));
    expect(r.code).toBe('SNAPSHOT_BLOB_MISSING');
    expect(r.message).toMatch(/old\/deep\/b/);
  });

  it('catches a manifest whose sizes lie, even though every hash is right', async () => {
    const s = new MemoryBlobStore();
    const content = rawBlock(new TextEncoder().encode('four'));
    const lying = encodeDirManifest([{ name: 'f', kind: 'file', mode: MODE_FILE, size: 5, cid: content.cid }]);
    const root = encodeDirManifest([{ name: 'd', kind: 'dir', mode: MODE_DIR, size: 5, cid: lying.cid }]);
    const b = await s.begin();
    for (const blk of [content, lying, root]) await b.put(blk);
    await b.commit();
    const r = await failure(verifySnapshot(s, root.cid));
    expect(r.code).toBe('SNAPSHOT_MANIFEST_INVALID');
    expect(r.message).toMatch(/d\/f: the manifest says 5 bytes but the content is 4/);
  });

  it('checks a directory reused many times only once (a hostile DAG cannot blow it up)', async () => {
    const s = new MemoryBlobStore();
    let level = encodeDirManifest([{ name: 'f', kind: 'file', mode: MODE_FILE, size: 1, cid: rawBlock(new Uint8Array([1])).cid }]);
    const b = await s.begin();
    await b.put(rawBlock(new Uint8Array([1])));
    await b.put(level);
    let size = 1;
    for (let depth = 0; depth < 15; depth++) {
      const entries = Array.from({ length: 10 }, (_, i): Entry => ({ name: `d${i}`, kind: 'dir', mode: MODE_DIR, size, cid: level.cid }));
      size *= 10;
      level = encodeDirManifest(entries);
      await b.put(level);
    }
    await b.commit();
    const r = await verifySnapshot(s, level.cid);
    expect(r.files).toBe(1e15);
    expect(r.blocks).toBe(17);
  });
});

describe('garbage collection', () => {
  it('deletes blobs no pin reaches, keeps pinned and young ones', async () => {
    const c = clock();
    const s = new MemoryBlobStore(c);
    const cache = new MemoryStatCache();
    const keep = await store(new MemoryTree().file('shared', 'both').file('k', 'keep'), s, c);
    const drop = await store(new MemoryTree().file('shared', 'both').file('d', bytes(2 * CHUNK_SIZE, 3)), s, c);
    expect(await s.unpin(drop)).toBe(true);
    const before = s.blobs.size;
    // Too young: nothing goes.
    expect(await collectGarbage(s, { clock: c, graceMs: 60_000 })).toMatchObject({ deleted: 0, young: 4, pins: 1 });
    c.advance(120_000);
    const dry = await collectGarbage(s, { clock: c, graceMs: 60_000, dryRun: true });
    expect(dry).toMatchObject({ deleted: 4, dryRun: true });
    expect(s.blobs.size).toBe(before);
    const r = await collectGarbage(s, { clock: c, graceMs: 60_000, cache });
    expect(r).toMatchObject({ deleted: 4, young: 0, reachable: 3 });
    await expect(verifySnapshot(s, keep)).resolves.toMatchObject({ files: 2 });
    expect((await failure(verifySnapshot(s, drop))).code).toBe('SNAPSHOT_BLOB_MISSING');
  });

  it('refuses to run while a snapshot is being written, and writers wait for it', async () => {
    const s = new MemoryBlobStore();
    const batch = await s.begin();
    expect((await failure(collectGarbage(s, { clock: clock() }))).code).toBe('SNAPSHOT_STORE_BUSY');
    await batch.abort();
    const lock = await s.lockForGc();
    expect((await failure(s.begin())).code).toBe('SNAPSHOT_STORE_BUSY');
    await lock.release();
    await (await s.begin()).abort();
  });

  it('deletes nothing when a pinned snapshot cannot be read', async () => {
    const c = clock();
    const s = new MemoryBlobStore(c);
    const a = await store(new MemoryTree().file('d/x', 'x'), s, c);
    await store(new MemoryTree().file('y', 'y'), s, c);
    const manifest = [...s.blobs.values()].find((b) => b.cid.code === 0x71 && !b.cid.equals(a) && new TextDecoder().decode(b.bytes).includes('x'));
    if (!manifest) throw new Error('no manifest');
    s.blobs.delete(manifest.cid.toString());
    c.advance(10 * 3600_000);
    const before = s.blobs.size;
    const r = await failure(collectGarbage(s, { clock: c, graceMs: 0 }));
    expect(r.code).toBe('SNAPSHOT_GC_MARK_FAILED');
    expect(r.message).toMatch(/nothing was deleted/);
    expect(s.blobs.size).toBe(before);
  });
});
