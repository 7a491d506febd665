import { createHash } from 'node:crypto';
import { ManualClock, isAssayError } from '@assay/core';
import { MemoryTree } from '../adapters/memory-tree-source.adapter';
import { MemoryBlobStore } from '../adapters/memory-blob-store.adapter';
import { CHUNK_SIZE } from '../domain/format';
import { MemoryEventSink } from '../domain/events';
import { takeSnapshot } from './take-snapshot';
import { ingestTar, rootfsPolicy, ROOTFS_EXCLUDES } from './tar-ingest';
import { verifySnapshot } from './verify';
import { listSnapshot } from './browse';
import type { SnapshotPolicy } from '../domain/policy';

// ---- a small tar writer for tests (ustar, optional PAX or GNU long names, hostile variants) ----

interface T {
  name: string | Buffer;
  type?: string; // '0' file, '1' hardlink, '2' symlink, '3' chardev, '5' dir, '6' fifo
  mode?: number;
  content?: Buffer | string;
  link?: string;
  long?: 'pax' | 'gnu';
  badChecksum?: boolean;
  size?: number; // override the size field
}

function octal(n: number, len: number): string {
  return `${n.toString(8).padStart(len - 1, '0')}\0`;
}

function header(name: Buffer, type: string, mode: number, size: number, link: Buffer, bad = false): Buffer {
  const h = Buffer.alloc(512);
  name.copy(h, 0, 0, Math.min(100, name.length));
  h.write(octal(mode, 8), 100, 'latin1');
  h.write(octal(0, 8), 108, 'latin1');
  h.write(octal(0, 8), 116, 'latin1');
  h.write(octal(size, 12), 124, 'latin1');
  h.write(octal(0, 12), 136, 'latin1');
  h.fill(0x20, 148, 156);
  h.write(type, 156, 'latin1');
  link.copy(h, 157, 0, Math.min(100, link.length));
  h.write('ustar\0', 257, 'latin1');
  h.write('00', 263, 'latin1');
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += h[i] as number;
  h.write(octal(bad ? sum + 1 : sum, 7), 148, 'latin1');
  h[155] = 0x20;
  return h;
}

const pad = (n: number) => Buffer.alloc((512 - (n % 512)) % 512);

function paxRecord(key: string, value: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(` ${key}=`), value, Buffer.from('\n')]);
  let len = body.length + String(body.length).length;
  if (String(len).length !== String(body.length).length) len = body.length + String(len).length;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

function tar(entries: T[], o: { end?: boolean } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const type = e.type ?? '0';
    const name = Buffer.isBuffer(e.name) ? e.name : Buffer.from(e.name);
    const content = e.content === undefined ? Buffer.alloc(0) : Buffer.from(e.content);
    const link = Buffer.from(e.link ?? '');
    if (e.long === 'pax') {
      const body = Buffer.concat([paxRecord('path', name), ...(link.length ? [paxRecord('linkpath', link)] : [])]);
      parts.push(header(Buffer.from('PaxHeaders/x'), 'x', 0o644, body.length, Buffer.alloc(0)), body, pad(body.length));
    } else if (e.long === 'gnu') {
      const body = Buffer.concat([name, Buffer.from([0])]);
      parts.push(header(Buffer.from('././@LongLink'), 'L', 0o644, body.length, Buffer.alloc(0)), body, pad(body.length));
    }
    parts.push(header(name, type, e.mode ?? (type === '5' ? 0o755 : 0o644), e.size ?? (type === '0' ? content.length : 0), link, e.badChecksum));
    if (type === '0') parts.push(content, pad(content.length));
  }
  if (o.end !== false) parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** Yields the archive in uneven pieces, as a socket would. */
async function* pieces(b: Buffer, size = 7777): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, Math.min(b.length, i + size));
}

const big = (n: number, seed: number): Buffer => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed + Math.floor(i / 1000003)) & 255;
  return b;
};

const clock = () => new ManualClock(new Date('2026-01-01T00:00:00Z'));

async function ingest(b: Buffer, policy: Partial<SnapshotPolicy> = {}, store = new MemoryBlobStore()) {
  const r = await ingestTar({ store, clock: clock() }, pieces(b), { policy, label: null, previous: null });
  return { r, store };
}

async function fromTree(t: MemoryTree, policy: Partial<SnapshotPolicy> = {}) {
  const store = new MemoryBlobStore();
  const r = await takeSnapshot({ source: t, store, clock: clock() }, { policy, label: null, previous: null });
  return r.rootCid;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (isAssayError(e)) return `${e.code}: ${e.message}`;
    throw e;
  }
  throw new Error('expected a failure');
}

const LONG = `${'d'.repeat(80)}/${'e'.repeat(90)}/file-with-a-long-name.txt`;
const BIG = big(CHUNK_SIZE * 2 + 5, 1);

function sampleTree(): MemoryTree {
  return new MemoryTree()
    .file('a.txt', 'hello\n')
    .file('run.sh', '#!/bin/sh\necho hi\n', 0o755)
    .file('dir/b.bin', BIG)
    .file('dir/sub/c.txt', 'c')
    .file('dir/é.txt', 'accent')
    .file('empty.txt', '')
    .symlink('dir/link', '../a.txt')
    .symlink('abs', '/etc/passwd')
    .dir('empty')
    .file(LONG, 'long')
    .hardlink('dir/hard', 'a.txt');
}

function sampleTar(order: 'forward' | 'reverse' = 'forward', long: 'pax' | 'gnu' = 'pax'): Buffer {
  const entries: T[] = [
    { name: './', type: '5' },
    { name: 'a.txt', content: 'hello\n', mode: 0o640 },
    { name: 'run.sh', content: '#!/bin/sh\necho hi\n', mode: 0o700 },
    { name: 'dir/', type: '5', mode: 0o700 },
    { name: 'dir/b.bin', content: BIG },
    { name: 'dir/sub/c.txt', content: 'c' }, // parent not listed: implied
    { name: 'dir/é.txt', content: 'accent', long: 'pax' },
    { name: 'empty.txt', content: '' },
    { name: 'dir/link', type: '2', link: '../a.txt' },
    { name: 'abs', type: '2', link: '/etc/passwd' },
    { name: 'empty/', type: '5' },
    { name: LONG, content: 'long', long },
  ];
  if (order === 'reverse') entries.reverse();
  // a hard link must follow its target
  entries.push({ name: 'dir/hard', type: '1', link: 'a.txt' });
  return tar(entries);
}

describe('ingestTar', () => {
  it('gives the same root CID as takeSnapshot on the same tree, whatever the order or the long-name style', async () => {
    const expected = await fromTree(sampleTree());
    for (const [order, long] of [
      ['forward', 'pax'],
      ['reverse', 'pax'],
      ['forward', 'gnu'],
    ] as const) {
      const { r, store } = await ingest(sampleTar(order, long));
      expect(r.rootCid).toBe(expected);
      expect(r.files).toBe(8);
      expect(r.symlinks).toBe(2);
      expect(r.directories).toBe(5);
      expect(r.bytes).toBe(6 + 18 + BIG.length + 1 + 6 + 0 + 4 + 6);
      const v = await verifySnapshot(store, r.root);
      expect(v.files).toBe(8);
    }
  });

  it('stores chunks as they stream, shares hard-linked content, and lists like any snapshot', async () => {
    const { r, store } = await ingest(sampleTar());
    const l = await listSnapshot(store, r.root, 'dir');
    const byName = new Map(l.entries.map((e) => [e.name, e]));
    expect(byName.get('hard')?.cid).toBe((await listSnapshot(store, r.root, '')).entries.find((e) => e.name === 'a.txt')?.cid);
    expect(byName.get('b.bin')?.size).toBe(BIG.length);
    expect(byName.get('link')?.target).toBe('../a.txt');
    // every chunk of the big file is in the store under its own CID
    const first = BIG.subarray(0, CHUNK_SIZE);
    const d = createHash('sha256').update(first).digest('hex');
    let found = false;
    for await (const b of store.list()) if (Buffer.from(b.cid.multihash.digest).toString('hex') === d) found = true;
    expect(found).toBe(true);
    expect(r.taken?.policy.format).toBe('assay-snapshot/1');
  });

  it('applies exclusions (and everything beneath an excluded directory) like the disk walk', async () => {
    const b = tar([
      { name: 'proc/', type: '5' },
      { name: 'proc/1/status', content: 'x' },
      { name: 'dev/null', type: '3' },
      { name: 'keep/a.pyc', content: 'x' },
      { name: 'keep/b.py', content: 'y' },
      { name: 'tests/test.sh', content: 'fake tests' },
      { name: 'etc/hosts', content: '1.2.3.4 x' },
      { name: 'etc/passwd', content: 'root' },
    ]);
    const { r, store } = await ingest(b, rootfsPolicy({ exclude: ['*.pyc'] }));
    const t = new MemoryTree().file('keep/b.py', 'y').file('etc/passwd', 'root');
    expect(r.rootCid).toBe(await fromTree(t, rootfsPolicy({ exclude: ['*.pyc'] })));
    expect((await listSnapshot(store, r.root, '')).entries.map((e) => e.name)).toEqual(['etc', 'keep']);
    expect(r.policy.exclude.slice(0, ROOTFS_EXCLUDES.length)).toEqual([...ROOTFS_EXCLUDES]);
  });

  it('refuses or skips device files and fifos per policy', async () => {
    const b = tar([
      { name: 'a', content: '1' },
      { name: 'pipe', type: '6' },
    ]);
    expect(await code(ingest(b))).toMatch(/^SNAPSHOT_SPECIAL_FILE: pipe is a fifo/);
    const { r } = await ingest(b, { specialFiles: 'skip' });
    expect(r.skippedSpecialFiles).toEqual(['pipe']);
    expect(r.rootCid).toBe(await fromTree(new MemoryTree().file('a', '1')));
  });

  it('enforces limits and names the offending path', async () => {
    const b = tar([
      { name: 'd/a', content: '12345' },
      { name: 'd/b', content: '1234567890' },
    ]);
    expect(await code(ingest(b, { maxFileBytes: 8 }))).toMatch(/^SNAPSHOT_FILE_TOO_LARGE: d\/b is 10 bytes/);
    expect(await code(ingest(b, { maxTotalBytes: 12 }))).toMatch(/^SNAPSHOT_TOO_LARGE: d\/b \(10 bytes\)/);
    expect(await code(ingest(b, { maxFiles: 2 }))).toMatch(/^SNAPSHOT_TOO_MANY_FILES: d\/b:/);
    expect(await code(ingest(tar([{ name: 'a/b/c/f', content: '' }]), { maxDepth: 2 }))).toMatch(/^SNAPSHOT_TOO_DEEP: a\/b\/c is nested 3 levels/);
  });

  it('refuses path traversal, absolute names, duplicates and entries beneath a file', async () => {
    expect(await code(ingest(tar([{ name: '../evil', content: 'x' }])))).toMatch(/^SNAPSHOT_PATH_ESCAPE: \.\.\/evil/);
    expect(await code(ingest(tar([{ name: 'a/../../evil', content: 'x' }])))).toMatch(/^SNAPSHOT_PATH_ESCAPE/);
    expect(await code(ingest(tar([{ name: '/etc/passwd', content: 'x' }])))).toMatch(/^SNAPSHOT_PATH_ESCAPE: \/etc\/passwd: absolute/);
    expect(await code(ingest(tar([{ name: 'x'.repeat(20) + '/../y', content: 'x', long: 'pax' }])))).toMatch(/^SNAPSHOT_PATH_ESCAPE/);
    expect(
      await code(
        ingest(
          tar([
            { name: 'a', content: '1' },
            { name: 'a', content: '2' },
          ]),
        ),
      ),
    ).toMatch(/^SNAPSHOT_TAR_INVALID: a appears twice/);
    expect(
      await code(
        ingest(
          tar([
            { name: 'd/', type: '5' },
            { name: 'd/', type: '5' },
          ]),
        ),
      ),
    ).toMatch(/^SNAPSHOT_TAR_INVALID: d appears twice/);
    expect(
      await code(
        ingest(
          tar([
            { name: 'a', content: '1' },
            { name: 'a/b', content: '2' },
          ]),
        ),
      ),
    ).toMatch(/^SNAPSHOT_TAR_INVALID: a\/b: .* beneath a, which is a file/);
    expect(await code(ingest(tar([{ name: 'a//b', content: '1' }])))).toMatch(/^SNAPSHOT_NAME_INVALID: a\/\/b/);
    expect(await code(ingest(tar([{ name: Buffer.from([0x61, 0xff]), content: '1' }])))).toMatch(/^SNAPSHOT_NAME_NOT_UTF8: a\\xff/);
  });

  it('refuses hard links that do not name an earlier file (or name an excluded one)', async () => {
    expect(
      await code(
        ingest(
          tar([
            { name: 'h', type: '1', link: 'later' },
            { name: 'later', content: 'x' },
          ]),
        ),
      ),
    ).toMatch(/^SNAPSHOT_TAR_INVALID: h is a hard link to "later"/);
    expect(
      await code(
        ingest(
          tar([
            { name: 'd/', type: '5' },
            { name: 'h', type: '1', link: 'd' },
          ]),
        ),
      ),
    ).toMatch(/^SNAPSHOT_TAR_INVALID: h is a hard link/);
    expect(
      await code(
        ingest(
          tar([
            { name: 'tmp/x', content: 'x' },
            { name: 'h', type: '1', link: 'tmp/x' },
          ]),
          rootfsPolicy(),
        ),
      ),
    ).toMatch(/excluded by the policy/);
    expect(await code(ingest(tar([{ name: 'h', type: '1', link: '../../etc/shadow' }])))).toMatch(/^SNAPSHOT_PATH_ESCAPE/);
  });

  it('refuses bad checksums, truncated archives, odd types and non-files with content, and aborts the batch', async () => {
    const store = new MemoryBlobStore();
    expect(await code(ingest(tar([{ name: 'a', content: 'x', badChecksum: true }]), {}, store))).toMatch(
      /^SNAPSHOT_TAR_INVALID: bad tar header checksum at byte 0/,
    );
    const whole = tar([{ name: 'a', content: BIG }], { end: false });
    expect(await code(ingest(whole.subarray(0, 512 + 1000), {}, store))).toMatch(
      /^SNAPSHOT_TAR_INVALID: the archive is truncated: it ends in the middle of a file/,
    );
    expect(await code(ingest(whole.subarray(0, 300), {}, store))).toMatch(/^SNAPSHOT_TAR_INVALID: the archive is truncated: it ends inside a header/);
    expect(await code(ingest(tar([{ name: 's', type: 'S' }]), {}, store))).toMatch(/^SNAPSHOT_TAR_INVALID: unsupported tar entry type "S"/);
    expect(await code(ingest(tar([{ name: 'd', type: '5', size: 3 }]), {}, store))).toMatch(/is a dir with a size of 3 bytes/);
    // nothing of the failed ingestions was committed
    expect(await store.pins()).toEqual([]);
    let n = 0;
    for await (const _ of store.list()) n += 1;
    expect(n).toBe(0);
  });

  it('accepts an archive without an end marker, and an empty one', async () => {
    const { r } = await ingest(tar([{ name: 'a', content: 'x' }], { end: false }));
    expect(r.rootCid).toBe(await fromTree(new MemoryTree().file('a', 'x')));
    const e = await ingest(Buffer.alloc(0));
    expect(e.r.rootCid).toBe(await fromTree(new MemoryTree()));
  });

  it('records SnapshotTaken and WorkspaceEdited against the previous snapshot of the same label', async () => {
    const store = new MemoryBlobStore();
    const sink = new MemoryEventSink();
    const deps = { store, clock: clock(), sink };
    await ingestTar(deps, pieces(tar([{ name: 'a', content: '1' }])), { label: 'container:w' });
    const second = await ingestTar(
      deps,
      pieces(
        tar([
          { name: 'a', content: '2' },
          { name: 'b', content: '3' },
        ]),
      ),
      { label: 'container:w' },
    );
    expect(sink.events.map((e) => e.type)).toEqual(['SnapshotTaken', 'SnapshotTaken', 'WorkspaceEdited']);
    expect(second.edited?.paths.map((p) => [p.path, p.change])).toEqual([
      ['a', 'changed'],
      ['b', 'added'],
    ]);
    expect(await store.head('container:w')).toBe(second.rootCid);
  });
});
