import { mkdtempSync, readdirSync, rmSync, writeFileSync, chmodSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CID } from 'multiformats/cid';
import { ManualClock, isAssayError } from '@assay/core';
import {
  FsBlobStore,
  MemoryBlobStore,
  MemoryStatCache,
  SqliteStatCache,
  encodeDirManifest,
  rawBlock,
  type BlobStore,
  type CachedEntry,
  type DirCacheRecord,
  type StatCache,
} from '@assay/snapshots';

/**
 * One contract, two adapters: the in-memory fakes used by unit tests must behave like the file-system blob
 * store and the SQLite stat cache.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'assay-snap-contract-'));
  dirs.push(d);
  return d;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return isAssayError(e) ? e.code : String(e);
  }
  return 'no error';
}

interface StoreKit {
  store: BlobStore;
  clock: ManualClock;
  /** Overwrites the stored bytes of a blob (tampering). */
  tamper(cid: string, bytes: Uint8Array): void;
}

const storeKits: Array<[string, () => StoreKit]> = [
  [
    'MemoryBlobStore',
    () => {
      const clock = new ManualClock('2030-01-01');
      const store = new MemoryBlobStore(clock);
      return {
        store,
        clock,
        tamper: (cid, bytes) => {
          const b = store.blobs.get(cid);
          if (b) store.blobs.set(cid, { ...b, bytes });
        },
      };
    },
  ],
  [
    'FsBlobStore',
    () => {
      const clock = new ManualClock('2030-01-01');
      const store = FsBlobStore.open(join(tmp(), 'blobs'), { clock, durability: 'batch', gcWaitMs: 200 });
      return {
        store,
        clock,
        tamper: (cid, bytes) => {
          const path = store.blobPath(CID.parse(cid));
          chmodSync(path, 0o644);
          writeFileSync(path, bytes);
        },
      };
    },
  ],
];

describe.each(storeKits)('BlobStore contract: %s', (_name, make) => {
  const a = rawBlock(new TextEncoder().encode('alpha'));
  const b = rawBlock(new TextEncoder().encode('beta'));
  const m = encodeDirManifest([{ name: 'a', kind: 'file', mode: 0o644, size: 5, cid: a.cid }]);

  it('keeps staged blobs invisible until commit, then serves them checked', async () => {
    const { store } = make();
    const batch = await store.begin();
    expect(await batch.put(a)).toBe(true);
    expect(await batch.put(a)).toBe(false);
    expect(await batch.has(a.cid)).toBe(true);
    expect(Buffer.from(await batch.get(a.cid)).toString()).toBe('alpha');
    expect(await store.has(a.cid)).toBe(false);
    await batch.put(m);
    expect(batch.added).toEqual({ blobs: 2, bytes: 5 + m.bytes.length });
    await batch.commit({ pins: [{ cid: m.cid.toString(), createdAt: 'now', source: 'src', origin: 'snapshot' }], heads: [{ source: 'src', cid: m.cid.toString() }] });
    expect(await store.has(a.cid)).toBe(true);
    expect(Buffer.from(await store.get(a.cid)).toString()).toBe('alpha');
    expect(await store.head('src')).toBe(m.cid.toString());
    expect(await store.head('other')).toBeNull();
    expect((await store.pins()).map((p) => p.cid)).toEqual([m.cid.toString()]);
    const listed = [];
    for await (const x of store.list()) listed.push(x.cid.toString());
    expect(listed.sort()).toEqual([a.cid.toString(), m.cid.toString()].sort());
    expect(await batch.put(b).then(() => 'accepted', () => 'refused')).toBe('refused');
  });

  it('drops everything on abort', async () => {
    const { store } = make();
    const batch = await store.begin();
    await batch.put(b);
    await batch.abort();
    await batch.abort();
    expect(await store.has(b.cid)).toBe(false);
    const listed = [];
    for await (const x of store.list()) listed.push(x);
    expect(listed).toEqual([]);
  });

  it('reports a missing blob and a tampered one with their CIDs', async () => {
    const kit = make();
    expect(await code(kit.store.get(a.cid))).toBe('SNAPSHOT_BLOB_MISSING');
    const batch = await kit.store.begin();
    await batch.put(a);
    await batch.commit();
    kit.tamper(a.cid.toString(), new TextEncoder().encode('alphA'));
    const err = await kit.store.get(a.cid).catch((e: Error) => e);
    expect(isAssayError(err) && err.code).toBe('SNAPSHOT_BLOB_CORRUPT');
    expect((err as Error).message).toContain(a.cid.toString());
  });

  it('pins, unpins and deletes', async () => {
    const { store } = make();
    const batch = await store.begin();
    await batch.put(a);
    await batch.commit();
    await store.pin({ cid: a.cid.toString(), createdAt: 't', source: null, origin: 'pin' });
    expect((await store.pins()).map((p) => [p.cid, p.origin])).toEqual([[a.cid.toString(), 'pin']]);
    expect(await store.unpin(a.cid)).toBe(true);
    expect(await store.unpin(a.cid)).toBe(false);
    expect(await store.delete(a.cid)).toBe(true);
    expect(await store.delete(a.cid)).toBe(false);
    expect(await store.has(a.cid)).toBe(false);
  });

  it('keeps garbage collection and writers apart', async () => {
    const { store } = make();
    const w = await store.begin();
    expect(await code(store.lockForGc())).toBe('SNAPSHOT_STORE_BUSY');
    await w.commit();
    const lock = await store.lockForGc();
    expect(await code(store.lockForGc())).toBe('SNAPSHOT_STORE_BUSY');
    expect(await code(store.begin())).toBe('SNAPSHOT_STORE_BUSY');
    await lock.release();
    await (await store.begin()).abort();
  });
});

describe('FsBlobStore on disk', () => {
  it('never shows a staged blob under its final name, and cleans up after a crashed writer', async () => {
    const dir = join(tmp(), 'blobs');
    const clock = new ManualClock('2030-01-01');
    const store = FsBlobStore.open(dir, { clock, durability: 'none' });
    const batch = await store.begin();
    const blk = rawBlock(new TextEncoder().encode('staged'));
    await batch.put(blk);
    const shard = FsBlobStore.shardOf(blk.cid);
    const names = readdirSync(join(dir, 'blocks', shard));
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^\.tmp\./);
    // Simulate a crash: the writer record names a dead process.
    const writers = readdirSync(join(dir, 'writers'));
    expect(writers).toHaveLength(1);
    const rec = JSON.parse(readFileSync(join(dir, 'writers', writers[0] as string), 'utf8')) as { pid: number };
    writeFileSync(join(dir, 'writers', writers[0] as string), JSON.stringify({ ...rec, pid: 2 ** 22 + 12345 }));
    const lock = await store.lockForGc();
    expect(await store.cleanupStaging(Date.now() + 10_000, 0)).toBe(1);
    await lock.release();
    expect(readdirSync(join(dir, 'blocks', shard))).toEqual([]);
    expect(readdirSync(join(dir, 'writers'))).toEqual([]);
  });

  it('refuses a store of another format', () => {
    const dir = join(tmp(), 'blobs');
    FsBlobStore.open(dir);
    writeFileSync(join(dir, 'store.json'), '{"format":"something-else"}');
    expect(() => FsBlobStore.open(dir)).toThrow(/expected assay-blobs\/1/);
  });
});

const cacheKits: Array<[string, () => StatCache]> = [
  ['MemoryStatCache', () => new MemoryStatCache()],
  ['SqliteStatCache', () => SqliteStatCache.open(join(tmp(), 'cache.sqlite'))],
];

describe.each(cacheKits)('StatCache contract: %s', (_name, make) => {
  const entry = (cid: string): CachedEntry => ({ kind: 'file', sig: '1:2:3:420:5:6', cid, mode: 0o644, size: 3, clean: true, target: '' });
  const record = (manifest: string, stored = true): DirCacheRecord => {
    const entries = new Map<string, CachedEntry>([
      ['f', entry('bafkf')],
      ['l', { kind: 'symlink', sig: '', cid: '', mode: 0o777, size: 1, clean: true, target: 'x' }],
    ]);
    return { manifest, size: 3, stored, allClean: true, filesKey: 'fk', dirsKey: 'dk', entries: () => entries };
  };
  const plain = (r: DirCacheRecord | null) => (r ? { ...r, entries: [...r.entries()] } : null);

  it('round-trips records per scope and directory', async () => {
    const c = make();
    expect(await c.lookupDir('/ws', '')).toBeNull();
    await c.commit('/ws', { upserts: [{ dir: '', record: record('m0') }, { dir: 'sub', record: record('m1') }], visitedDirs: new Set(['', 'sub']) });
    expect(plain(await c.lookupDir('/ws', 'sub'))).toEqual(plain(record('m1')));
    expect(await c.lookupDir('/other', 'sub')).toBeNull();
    await c.close();
  });

  it('drops directories a later snapshot did not visit, and forgets storage after a GC', async () => {
    const c = make();
    await c.commit('/ws', { upserts: [{ dir: '', record: record('m0') }, { dir: 'sub', record: record('m1') }], visitedDirs: new Set(['', 'sub']) });
    await c.commit('/ws', { upserts: [], visitedDirs: new Set(['']) });
    expect(await c.lookupDir('/ws', 'sub')).toBeNull();
    expect((await c.lookupDir('/ws', ''))?.stored).toBe(true);
    await c.forgetStored();
    expect((await c.lookupDir('/ws', ''))?.stored).toBe(false);
    await c.close();
  });
});
