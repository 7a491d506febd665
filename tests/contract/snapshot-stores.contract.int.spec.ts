import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync, writeSync, chmodSync, readFileSync } from 'node:fs';
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
      const store = new FsBlobStore(join(tmp(), 'blobs'), { clock, durability: 'batch', gcWaitMs: 200 });
      return {
        store,
        clock,
        tamper: (cid, bytes) => {
          const at = store.locate(CID.parse(cid));
          if (!at || at.length !== bytes.length) throw new Error('test: tamper needs a packed blob of the same length');
          chmodSync(at.path, 0o644);
          const fd = openSync(at.path, 'r+');
          writeSync(fd, bytes, 0, bytes.length, at.offset);
          closeSync(fd);
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
    await batch.commit({
      pins: [{ cid: m.cid.toString(), createdAt: 'now', source: 'src', origin: 'snapshot' }],
      heads: [{ source: 'src', cid: m.cid.toString() }],
    });
    expect(await store.has(a.cid)).toBe(true);
    expect(Buffer.from(await store.get(a.cid)).toString()).toBe('alpha');
    expect(await store.head('src')).toBe(m.cid.toString());
    expect(await store.head('other')).toBeNull();
    expect((await store.pins()).map((p) => p.cid)).toEqual([m.cid.toString()]);
    const listed = [];
    for await (const x of store.list()) listed.push(x.cid.toString());
    expect(listed.sort()).toEqual([a.cid.toString(), m.cid.toString()].sort());
    expect(
      await batch.put(b).then(
        () => 'accepted',
        () => 'refused',
      ),
    ).toBe('refused');
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

  it('compacts under the GC lock: deleted blobs stay gone, live ones stay readable', async () => {
    const { store } = make();
    const batch = await store.begin();
    await batch.put(a);
    await batch.put(b);
    await batch.put(m);
    await batch.commit();
    const lock = await store.lockForGc();
    expect(await store.delete(b.cid)).toBe(true);
    const r = await store.compact();
    expect(r.packsRewritten).toBeGreaterThanOrEqual(0);
    expect(r.bytesReclaimed).toBeGreaterThanOrEqual(0);
    await lock.release();
    expect(await store.has(b.cid)).toBe(false);
    expect(await code(store.get(b.cid))).toBe('SNAPSHOT_BLOB_MISSING');
    expect(Buffer.from(await store.get(a.cid)).toString()).toBe('alpha');
    expect((await store.get(m.cid)).length).toBe(m.bytes.length);
    const listed: string[] = [];
    for await (const x of store.list()) listed.push(x.cid.toString());
    expect(listed.sort()).toEqual([a.cid.toString(), m.cid.toString()].sort());
  });

  it('stores raw chunks through putRawChunks where offered, deduplicating them', async () => {
    const { store } = make();
    const batch = await store.begin();
    if (!batch.putRawChunks) {
      await batch.abort();
      return;
    }
    const data = new Uint8Array([...a.bytes, ...b.bytes, ...a.bytes]);
    const digests = new Uint8Array([...a.cid.multihash.digest, ...b.cid.multihash.digest, ...a.cid.multihash.digest]);
    expect(batch.putRawChunks(data, [a.bytes.length, b.bytes.length, a.bytes.length], digests)).toBe(a.bytes.length + b.bytes.length);
    expect(await batch.put(a)).toBe(false);
    expect(Buffer.from(await batch.get(b.cid)).toString()).toBe('beta');
    await batch.commit();
    expect(Buffer.from(await store.get(a.cid)).toString()).toBe('alpha');
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
  it('keeps a batch in a pack of its own that the index names only after commit, and cleans up after a crashed writer', async () => {
    const dir = join(tmp(), 'blobs');
    const clock = new ManualClock('2030-01-01');
    const store = new FsBlobStore(dir, { clock, durability: 'none' });
    const batch = await store.begin();
    const blk = rawBlock(new TextEncoder().encode('staged'));
    await batch.put(blk);
    const packs = () => readdirSync(join(dir, 'packs')).filter((n) => n.endsWith('.pack'));
    expect(packs()).toHaveLength(1);
    expect(store.locate(blk.cid)).toBeNull();
    // Another process opening the store does not see it either.
    expect(await new FsBlobStore(dir).has(blk.cid)).toBe(false);
    // Simulate a crash: the writer record names a dead process.
    const writers = readdirSync(join(dir, 'writers'));
    expect(writers).toHaveLength(1);
    const rec = JSON.parse(readFileSync(join(dir, 'writers', writers[0] as string), 'utf8')) as { pid: number };
    writeFileSync(join(dir, 'writers', writers[0] as string), JSON.stringify({ ...rec, pid: 2 ** 22 + 12345 }));
    const lock = await store.lockForGc();
    expect(await store.cleanupStaging(Date.now() + 10_000, 0)).toBe(1);
    await lock.release();
    expect(packs()).toEqual([]);
    expect(readdirSync(join(dir, 'writers'))).toEqual([]);
  });

  it('rolls over to a new pack at packMaxBytes, and a second process sees what the first committed', async () => {
    const dir = join(tmp(), 'blobs');
    const store = new FsBlobStore(dir, { durability: 'none', packMaxBytes: 1 << 16 });
    const batch = await store.begin();
    const blocks = Array.from({ length: 6 }, (_, i) => rawBlock(new Uint8Array(30_000).fill(i + 1)));
    for (const b of blocks) await batch.put(b);
    await batch.commit();
    expect(readdirSync(join(dir, 'packs')).filter((n) => n.endsWith('.pack')).length).toBeGreaterThanOrEqual(3);
    const other = new FsBlobStore(dir);
    for (const b of blocks) expect(Buffer.from(await other.get(b.cid)).equals(Buffer.from(b.bytes))).toBe(true);
    const late = rawBlock(new TextEncoder().encode('late'));
    const b2 = await store.begin();
    await b2.put(late);
    await b2.commit();
    expect(await other.has(late.cid)).toBe(true);
  });

  it('still reads, lists and deletes the loose blobs of an assay-blobs/1 store, and writes new blobs to packs', async () => {
    const dir = join(tmp(), 'blobs');
    const old = rawBlock(new TextEncoder().encode('from an older store'));
    const shard = FsBlobStore.shardOf(old.cid);
    mkdirSync(join(dir, 'blocks', shard), { recursive: true });
    writeFileSync(join(dir, 'blocks', shard, old.cid.toString()), old.bytes);
    writeFileSync(join(dir, 'store.json'), '{"format":"assay-blobs/1"}');
    const store = new FsBlobStore(dir);
    expect(JSON.parse(readFileSync(join(dir, 'store.json'), 'utf8'))).toEqual({ format: 'assay-blobs/2' });
    expect(Buffer.from(await store.get(old.cid)).toString()).toBe('from an older store');
    const batch = await store.begin();
    expect(await batch.put(old)).toBe(false);
    const fresh = rawBlock(new TextEncoder().encode('new'));
    expect(await batch.put(fresh)).toBe(true);
    await batch.commit();
    expect(store.locate(fresh.cid)).not.toBeNull();
    const listed: string[] = [];
    for await (const b of store.list()) listed.push(b.cid.toString());
    expect(listed.sort()).toEqual([old.cid.toString(), fresh.cid.toString()].sort());
    expect(await store.delete(old.cid)).toBe(true);
    expect(await store.has(old.cid)).toBe(false);
  });

  it('refuses a store of another format', () => {
    const dir = join(tmp(), 'blobs');
    new FsBlobStore(dir);
    writeFileSync(join(dir, 'store.json'), '{"format":"something-else"}');
    expect(() => new FsBlobStore(dir)).toThrow(/expected assay-blobs\/2/);
  });
});

const cacheKits: Array<[string, () => StatCache]> = [
  ['MemoryStatCache', () => new MemoryStatCache()],
  ['SqliteStatCache', () => new SqliteStatCache(join(tmp(), 'cache.sqlite'))],
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
    await c.commit('/ws', {
      upserts: [
        { dir: '', record: record('m0') },
        { dir: 'sub', record: record('m1') },
      ],
      visitedDirs: new Set(['', 'sub']),
    });
    expect(plain(await c.lookupDir('/ws', 'sub'))).toEqual(plain(record('m1')));
    expect(await c.lookupDir('/other', 'sub')).toBeNull();
    await c.close();
  });

  it('drops directories a later snapshot did not visit, and forgets storage after a GC', async () => {
    const c = make();
    await c.commit('/ws', {
      upserts: [
        { dir: '', record: record('m0') },
        { dir: 'sub', record: record('m1') },
      ],
      visitedDirs: new Set(['', 'sub']),
    });
    await c.commit('/ws', { upserts: [], visitedDirs: new Set(['']) });
    expect(await c.lookupDir('/ws', 'sub')).toBeNull();
    expect((await c.lookupDir('/ws', ''))?.stored).toBe(true);
    await c.forgetStored();
    expect((await c.lookupDir('/ws', ''))?.stored).toBe(false);
    await c.close();
  });
});
