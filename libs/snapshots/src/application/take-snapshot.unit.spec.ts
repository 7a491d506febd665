import { ManualClock } from '@assay/core';
import { MemoryTree } from '../adapters/memory-tree-source.adapter';
import { MemoryBlobStore } from '../adapters/memory-blob-store.adapter';
import { MemoryStatCache } from '../adapters/memory-stat-cache.adapter';
import { CHUNK_SIZE } from '../domain/format';
import { MemoryEventSink, isPlainJson } from '../domain/events';
import { policyDigest, resolvePolicy, type SnapshotPolicy } from '../domain/policy';
import { takeSnapshot, type SnapshotResult } from './take-snapshot';
import { verifySnapshot } from './verify';
import { failure } from '../../../../tests/support/failure';

const bigCache = new Map<string, Uint8Array>();
const big = (n: number, seed: number): Uint8Array => {
  const k = `${n}:${seed}`;
  let b = bigCache.get(k);
  if (!b) {
    b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = (i * 31 + seed + Math.floor(i / 1000003)) & 255;
    bigCache.set(k, b);
  }
  return b;
};

function sample(order: MemoryTree['order'] = 'insertion'): MemoryTree {
  const t = new MemoryTree();
  t.order = order;
  t.file('a.txt', 'hello\n')
    .file('run.sh', '#!/bin/sh\necho hi\n', 0o755)
    .file('dir/b.bin', big(CHUNK_SIZE * 2 + 5, 1))
    .file('dir/sub/c.txt', 'c')
    .file('dir/é.txt', 'accent')
    .file('dir/😀.txt', 'emoji')
    .symlink('dir/link', '../a.txt')
    .dir('empty')
    .dir('dir/empty-too');
  return t;
}

/** The same tree, built in a different order. */
function sampleReversed(): MemoryTree {
  const t = new MemoryTree();
  t.dir('dir/empty-too')
    .dir('empty')
    .symlink('dir/link', '../a.txt')
    .file('dir/😀.txt', 'emoji')
    .file('dir/é.txt', 'accent')
    .file('dir/sub/c.txt', 'c')
    .file('dir/b.bin', big(CHUNK_SIZE * 2 + 5, 1))
    .file('run.sh', '#!/bin/sh\necho hi\n', 0o755)
    .file('a.txt', 'hello\n');
  return t;
}

interface Env {
  store: MemoryBlobStore;
  cache: MemoryStatCache;
  clock: ManualClock;
  sink: MemoryEventSink;
}

function env(): Env {
  const clock = new ManualClock('2030-01-01T00:00:00.000Z');
  return { store: new MemoryBlobStore(clock), cache: new MemoryStatCache(), clock, sink: new MemoryEventSink() };
}

function snap(tree: MemoryTree, e: Env, opts: Parameters<typeof takeSnapshot>[1] = {}): Promise<SnapshotResult> {
  return takeSnapshot({ source: tree, store: e.store, cache: e.cache, clock: e.clock, sink: e.sink }, opts);
}

async function rootOf(tree: MemoryTree, policy: Partial<SnapshotPolicy> = {}): Promise<string> {
  return (await takeSnapshot({ source: tree, store: null, clock: new ManualClock('2030-01-01') }, { dryRun: true, policy })).rootCid;
}

describe('determinism', () => {
  it('gives the same root CID whatever the walk order and the order the tree was built in', async () => {
    const roots = await Promise.all([rootOf(sample('insertion')), rootOf(sample('reverse')), rootOf(sample('sorted')), rootOf(sampleReversed())]);
    expect(new Set(roots).size).toBe(1);
  });

  it('ignores mtimes and permission bits other than execute', async () => {
    const before = await rootOf(sample());
    const t = sample();
    t.now = 5n;
    t.file('a.txt', 'hello\n', 0o600); // rewritten with the same content, another time, another mode without x
    t.chmod('dir/sub/c.txt', 0o640);
    expect(await rootOf(t)).toBe(before);
  });

  it('stores and dry-runs to the same CID', async () => {
    const e = env();
    const stored = await snap(sample(), e);
    expect(stored.rootCid).toBe(await rootOf(sample()));
    await expect(verifySnapshot(e.store, stored.root)).resolves.toMatchObject({ files: 6, directories: 4, symlinks: 1 });
  });
});

describe('every change changes the root CID', () => {
  const base = rootOf(sample());
  it.each<[string, (t: MemoryTree) => void]>([
    ['content', (t) => t.file('dir/sub/c.txt', 'C')],
    [
      'one byte of a chunked file',
      (t) =>
        t.file(
          'dir/b.bin',
          Uint8Array.from(big(CHUNK_SIZE * 2 + 5, 1), (b, i) => (i === CHUNK_SIZE + 7 ? b ^ 1 : b)),
        ),
    ],
    ['a rename', (t) => t.remove('a.txt').file('A.txt', 'hello\n')],
    ['chmod +x', (t) => t.chmod('a.txt', 0o755)],
    ['chmod -x', (t) => t.chmod('run.sh', 0o644)],
    ['a symlink retarget', (t) => t.symlink('dir/link', '../run.sh')],
    ['a new empty directory', (t) => t.dir('dir/sub/new')],
    ['removing an empty directory', (t) => t.remove('empty')],
    ['a file turned into a symlink', (t) => t.remove('a.txt').symlink('a.txt', 'hello\n')],
    ['an empty file added', (t) => t.file('zero', '')],
  ])('%s', async (_what, change) => {
    const t = sample();
    change(t);
    expect(await rootOf(t)).not.toBe(await base);
  });
});

describe('policy refusals name the path and the limit', () => {
  it.each<[string, (t: MemoryTree) => void, Partial<SnapshotPolicy>, string, RegExp]>([
    [
      'a name that is not UTF-8',
      (t) => t.file([Buffer.from('dir'), Uint8Array.from([0x62, 0xff, 0x2e])], 'x'),
      {},
      'SNAPSHOT_NAME_NOT_UTF8',
      /dir\/b\\xff\.: the name is not valid UTF-8/,
    ],
    [
      'two names equal under NFC',
      (t) => t.file('dir/caf\u00e9', '1').file('dir/cafe\u0301', '2'),
      {},
      'SNAPSHOT_NAME_COLLISION',
      /dir\/caf.+ and dir\/caf.+ are different names that are equal under Unicode NFC/,
    ],
    ['a fifo', (t) => t.special('dir/pipe', 'fifo'), {}, 'SNAPSHOT_SPECIAL_FILE', /dir\/pipe is a fifo/],
    ['a socket', (t) => t.special('sock', 'socket'), {}, 'SNAPSHOT_SPECIAL_FILE', /sock is a socket/],
    ['a character device', (t) => t.special('null', 'char-device'), {}, 'SNAPSHOT_SPECIAL_FILE', /null is a char-device/],
    ['a block device', (t) => t.special('sda', 'block-device'), {}, 'SNAPSHOT_SPECIAL_FILE', /sda is a block-device/],
    ['too many entries', () => undefined, { maxFiles: 5 }, 'SNAPSHOT_TOO_MANY_FILES', /more than 5 entries \(policy maxFiles=5\)/],
    [
      'a file over maxFileBytes',
      () => undefined,
      { maxFileBytes: CHUNK_SIZE },
      'SNAPSHOT_FILE_TOO_LARGE',
      /dir\/b\.bin is 2097157 bytes, over the limit of 1048576 \(policy maxFileBytes\)/,
    ],
    ['too many bytes in all', () => undefined, { maxTotalBytes: 1000 }, 'SNAPSHOT_TOO_LARGE', /over the limit of 1000 \(policy maxTotalBytes\)/],
    ['too deep', (t) => t.file('dir/sub/x/y/z', 'deep'), { maxDepth: 3 }, 'SNAPSHOT_TOO_DEEP', /dir\/sub\/x\/y is nested 4 levels deep, over the limit of 3/],
    [
      'a symlink out of the root, when refused',
      (t) => t.symlink('dir/esc', '../../etc/passwd'),
      { outsideSymlinks: 'refuse' },
      'SNAPSHOT_SYMLINK_OUTSIDE',
      /dir\/esc -> \.\.\/\.\.\/etc\/passwd points outside/,
    ],
    [
      'an absolute symlink, when refused',
      (t) => t.symlink('abs', '/etc/passwd'),
      { outsideSymlinks: 'refuse' },
      'SNAPSHOT_SYMLINK_OUTSIDE',
      /abs -> \/etc\/passwd/,
    ],
    [
      'a symlink target that is not UTF-8',
      (t) => t.symlink('bad', Uint8Array.from([0x61, 0xfe])),
      {},
      'SNAPSHOT_SYMLINK_TARGET_INVALID',
      /bad: the symlink target "a\\xfe" is not valid UTF-8/,
    ],
  ])('%s', async (_what, change, policy, code, message) => {
    const t = sample();
    change(t);
    const e = env();
    const r = await failure(snap(t, e, { policy }));
    expect(r.code).toBe(code);
    expect(r.message).toMatch(message);
    // nothing of a refused snapshot is kept
    expect(e.store.blobs.size).toBe(0);
    expect(await e.store.pins()).toEqual([]);
    expect(e.sink.events).toEqual([]);
  });

  it('flags (and records) symlinks that point outside by default', async () => {
    const t = sample().symlink('dir/esc', '../../etc/passwd').symlink('via', 'dir/link/../../x');
    const r = await snap(t, env());
    // `via` goes through dir/link (-> ../a.txt) and then climbs two levels: above the root.
    expect(r.outsideSymlinks).toEqual(['dir/esc', 'via']);
    expect(r.taken?.outsideSymlinks).toEqual({ count: 2, paths: ['dir/esc', 'via'], truncated: false });
  });

  it('can skip special files instead of refusing them, and lists what it skipped', async () => {
    const t = sample().special('dir/pipe', 'fifo').special('sock', 'socket');
    const r = await snap(t, env(), { policy: { specialFiles: 'skip' } });
    expect(r.skippedSpecialFiles).toEqual(['dir/pipe', 'sock']);
    expect(r.rootCid).toBe(await rootOf(sample()));
  });

  it('leaves excluded paths out entirely', async () => {
    const t = sample().file('dir/x.pyc', 'bytecode').file('cache/__pycache__/m.pyc', 'x').dir('cache');
    const r = await rootOf(t, { exclude: ['*.pyc', 'cache/'] });
    expect(r).toBe(await rootOf(sample()));
  });
});

describe('hard links', () => {
  it('are hashed once and stored once, and recorded as ordinary files', async () => {
    const t = new MemoryTree().file('a', big(3 * CHUNK_SIZE, 9)).hardlink('b', 'a');
    const e = env();
    const r = await snap(t, e);
    expect(r.files).toBe(2);
    expect(r.bytes).toBe(6 * CHUNK_SIZE);
    expect(r.cache.hashed).toBe(1);
    const copies = new MemoryTree().file('a', big(3 * CHUNK_SIZE, 9)).file('b', big(3 * CHUNK_SIZE, 9));
    expect(await rootOf(copies)).toBe(r.rootCid);
    // 3 chunks + 1 file node + 1 manifest
    expect(e.store.blobs.size).toBe(5);
  });
});

describe('the stat cache', () => {
  it('rehashes only what changed', async () => {
    const e = env();
    const t = sample();
    const first = await snap(t, e);
    expect(first.cache).toEqual({ hits: 0, hashed: 6 });
    const second = await snap(t, e);
    expect(second.cache).toEqual({ hits: 6, hashed: 0 });
    expect(second.rootCid).toBe(first.rootCid);
    t.file('dir/sub/c.txt', 'changed');
    const third = await snap(t, e);
    expect(third.cache).toEqual({ hits: 5, hashed: 1 });
    expect(third.rootCid).toBe(await rootOf(t));
  });

  it('rehashes files that were racily clean when recorded', async () => {
    const e = env();
    const t = sample();
    // The snapshot starts less than the racy margin after the files' mtime: nothing may be trusted next time.
    e.clock = new ManualClock(new Date(Number(t.now / 1_000_000n) + 1000));
    await snap(t, e);
    const again = await snap(t, e);
    expect(again.cache.hits).toBe(0);
    expect(again.cache.hashed).toBe(6);
    // Now the clock is far ahead: entries recorded by `again` are clean... only once recorded after the margin.
    e.clock = new ManualClock('2030-01-01');
    await snap(t, e);
    expect((await snap(t, e)).cache.hits).toBe(6);
  });

  it('does not trust a dry run for blobs it never stored', async () => {
    const e = env();
    const t = sample();
    await snap(t, e, { dryRun: true });
    expect(e.store.blobs.size).toBe(0);
    const stored = await snap(t, e);
    // the CIDs came from the cache, but every blob was missing, so they were hashed and stored
    expect(stored.cache.hashed).toBe(6);
    await expect(verifySnapshot(e.store, stored.root)).resolves.toMatchObject({ files: 6 });
  });
});

describe('events', () => {
  it('emits SnapshotTaken with plain JSON data, and nothing on a dry run', async () => {
    const e = env();
    await snap(sample(), e, { dryRun: true, label: 'ws' });
    expect(e.sink.events).toEqual([]);
    const r = await snap(sample(), e, { label: 'run-1/workspace' });
    expect(e.sink.events.map((x) => x.type)).toEqual(['SnapshotTaken']);
    const data = e.sink.events[0]?.data;
    expect(isPlainJson(data)).toBe(true);
    expect(data).toMatchObject({
      rootCid: r.rootCid,
      format: 'assay-snapshot/1',
      chunkSize: CHUNK_SIZE,
      files: 6,
      directories: 4,
      symlinks: 1,
      bytes: 6 + 18 + CHUNK_SIZE * 2 + 5 + 1 + 6 + 5,
      policyDigest: policyDigest(resolvePolicy({})),
      source: 'run-1/workspace',
      startedAt: '2030-01-01T00:00:00.000Z',
      outsideSymlinks: { count: 0, paths: [], truncated: false },
    });
    expect(data && 'newBlobs' in data && data.newBlobs).toBeGreaterThan(0);
  });

  it('emits WorkspaceEdited against the previous snapshot of the same label', async () => {
    const e = env();
    const t = sample();
    const first = await snap(t, e, { label: 'ws' });
    await snap(t, e, { label: 'ws' }); // unchanged: no edit event
    expect(e.sink.events.map((x) => x.type)).toEqual(['SnapshotTaken', 'SnapshotTaken']);
    t.file('dir/sub/c.txt', 'cc').remove('a.txt').file('new/n.txt', 'new!').chmod('run.sh', 0o644);
    const second = await snap(t, e, { label: 'ws' });
    const edit = e.sink.events[3];
    expect(edit?.type).toBe('WorkspaceEdited');
    expect(isPlainJson(edit?.data)).toBe(true);
    expect(edit?.data).toEqual({
      fromCid: first.rootCid,
      toCid: second.rootCid,
      added: { files: 1, symlinks: 0, directories: 1, bytes: 4 },
      removed: { files: 1, symlinks: 0, directories: 0, bytes: 6 },
      changed: { files: 2, symlinks: 0, modeOnly: 1, bytesBefore: 1 + 18, bytesAfter: 2 + 18 },
      totalChanges: 5,
      paths: [
        { path: 'a.txt', change: 'removed', kind: 'file', sizeBefore: 6, sizeAfter: null },
        { path: 'dir/sub/c.txt', change: 'changed', kind: 'file', sizeBefore: 1, sizeAfter: 2 },
        { path: 'new', change: 'added', kind: 'dir', sizeBefore: null, sizeAfter: 4 },
        { path: 'new/n.txt', change: 'added', kind: 'file', sizeBefore: null, sizeAfter: 4 },
        { path: 'run.sh', change: 'changed', kind: 'file', sizeBefore: 18, sizeAfter: 18 },
      ],
      pathsTruncated: false,
    });
    expect(second.edited).toEqual(edit?.data);
  });

  it('diffs against an explicit previous snapshot and refuses one the store does not have', async () => {
    const e = env();
    const a = await snap(new MemoryTree().file('x', '1'), e, { label: null });
    const b = await snap(new MemoryTree().file('x', '2'), e, { label: null, previous: a.rootCid });
    expect(b.edited).toMatchObject({ fromCid: a.rootCid, changed: { files: 1 } });
    const other = await rootOf(new MemoryTree().file('y', 'never stored'));
    const r = await failure(snap(new MemoryTree().file('x', '3'), e, { previous: other }));
    expect(r.code).toBe('SNAPSHOT_NOT_FOUND');
  });

  /** A snapshot of d/x, then every manifest of it but the root lost from the store, then d/x changed. */
  async function lostPrevious(): Promise<{ e: Env; t: MemoryTree }> {
    const e = env();
    const t = new MemoryTree().file('d/x', '1');
    await snap(t, e, { label: 'ws' });
    const head = await e.store.head('ws');
    for (const [k, b] of [...e.store.blobs]) if (b.cid.code === 0x71 && k !== head) e.store.blobs.delete(k);
    t.file('d/x', '2');
    return { e, t };
  }

  it('still takes the snapshot when the previous one cannot be read (nor rebuilt from the stat cache), and says so', async () => {
    const { e, t } = await lostPrevious();
    const r = await snap(t, e, { label: 'ws', useCache: false });
    expect(r.edited).toBeNull();
    expect(r.warnings).toEqual([expect.stringMatching(/no WorkspaceEdited event: the previous snapshot bafy\w+ cannot be read/)]);
    expect(e.sink.events.map((x) => x.type)).toEqual(['SnapshotTaken', 'SnapshotTaken']);
  });

  it('diffs against manifests rebuilt from the stat cache when they match their CIDs, never otherwise', async () => {
    const { e, t } = await lostPrevious();
    const r = await snap(t, e, { label: 'ws' });
    expect(r.warnings).toEqual([]);
    expect(r.edited).toMatchObject({ totalChanges: 1, changed: { files: 1, bytesBefore: 1, bytesAfter: 1 }, paths: [{ path: 'd/x', change: 'changed' }] });

    // A damaged cache record (its entries no longer encode to the manifest it names) is not believed.
    const again = await lostPrevious();
    const rec = await again.e.cache.lookupDir(again.t.id, 'd');
    if (!rec) throw new Error('no cache record for d');
    const entries = new Map(rec.entries());
    const x = entries.get('x');
    if (!x) throw new Error('no cache entry for d/x');
    entries.set('x', { ...x, size: x.size + 1 });
    await again.e.cache.commit(again.t.id, { upserts: [{ dir: 'd', record: { ...rec, entries: () => entries } }], visitedDirs: new Set(['', 'd']) });
    const r2 = await snap(again.t, again.e, { label: 'ws' });
    expect(r2.edited).toBeNull();
    expect(r2.warnings).toEqual([expect.stringMatching(/no WorkspaceEdited event: the previous snapshot bafy\w+ cannot be read/)]);
  });

  it('pins every stored snapshot', async () => {
    const e = env();
    const r = await snap(sample(), e, { label: 'ws' });
    expect(await e.store.pins()).toEqual([{ cid: r.rootCid, createdAt: '2030-01-01T00:00:00.000Z', source: 'ws', origin: 'snapshot' }]);
    expect(await e.store.head('ws')).toBe(r.rootCid);
  });
});

describe('the root', () => {
  it('must be a directory; an empty one is a valid snapshot', async () => {
    const empty = await rootOf(new MemoryTree());
    expect(empty).toMatch(/^bafyrei/);
  });
});
