import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CID_BYTES, ENTRY_BYTES, PackIndex, TABLE_MIN_BEHIND, TOMBSTONE, appendRecord, ensureIndexFile, type IndexEntry } from './pack-index';

const base = mkdtempSync(join(tmpdir(), 'assay-pack-index-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(base, `index-${++n}`);

/** A raw-block CID key (36 bytes as latin1) whose digest is sha256(seed). */
function key(seed: string): string {
  return Buffer.concat([Buffer.from([0x01, 0x55, 0x12, 0x20]), createHash('sha256').update(seed).digest()]).toString('latin1');
}

function entry(seed: string, i: number, pack = 1): IndexEntry {
  return { key: key(seed), pack, offset: i * 100 + 40, length: 100 + (i % 7), timeMs: 1_700_000_000_000 + i };
}

/** Everything an index holds, for comparing two loads. */
function contents(ix: PackIndex): Array<[string, unknown]> {
  return [...ix.entries()].map(([k, loc]) => [Buffer.from(k, 'latin1').toString('hex'), loc] as [string, unknown]).sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

/** A load that cannot use a table: the index copied where no table is. */
function fullParse(path: string): PackIndex {
  const copy = `${path}.copy-${++n}`;
  copyFileSync(path, copy);
  const ix = new PackIndex(copy);
  ix.refresh();
  expect(ix.loadedFromTable).toBe(false);
  return ix;
}

function write(path: string, entries: IndexEntry[]): void {
  ensureIndexFile(path);
  for (let i = 0; i < entries.length; i += 500) appendRecord(path, entries.slice(i, i + 500), false);
}

describe('PackIndex, the in-memory table', () => {
  it('finds every key, also keys that share the bytes buckets are chosen from; deletes; iterates the live set', () => {
    const path = fresh();
    // 64 keys identical in their first 28 digest bytes: the bucket words are the same for all of them.
    const shared = Buffer.alloc(CID_BYTES, 0xab);
    shared.set([0x01, 0x55, 0x12, 0x20], 0);
    const colliding = Array.from({ length: 64 }, (_, i) => {
      const b = Buffer.from(shared);
      b.writeUInt32LE(i, CID_BYTES - 4);
      return b.toString('latin1');
    });
    const entries = [
      ...colliding.map((k, i) => ({ key: k, pack: 2, offset: i, length: 1, timeMs: i })),
      ...Array.from({ length: 5000 }, (_, i) => entry(`k${i}`, i)),
    ];
    write(path, entries);
    const ix = new PackIndex(path);
    ix.refresh();
    expect(ix.size).toBe(5064);
    for (const e of entries) expect(ix.get(e.key)).toEqual({ pack: e.pack, offset: e.offset, length: e.length, timeMs: e.timeMs });
    expect(ix.has(key('absent'))).toBe(false);
    expect(ix.has('too short')).toBe(false);

    appendRecord(
      path,
      [
        { ...(entries[3] as IndexEntry), pack: TOMBSTONE },
        { ...(entries[100] as IndexEntry), pack: TOMBSTONE },
      ],
      false,
    );
    // The store deletes in memory right after appending the tombstone itself.
    appendRecord(path, [{ ...(entries[7] as IndexEntry), pack: TOMBSTONE }], false);
    ix.delete(entries[7]?.key as string);
    ix.refresh();
    expect(ix.size).toBe(5061);
    expect(ix.has(entries[3]?.key as string)).toBe(false);
    expect(ix.has(entries[7]?.key as string)).toBe(false);
    expect(ix.has(entries[100]?.key as string)).toBe(false);
    expect(ix.has(entries[4]?.key as string)).toBe(true);
    // Re-added after deletion (a compaction moving a blob): found at its new place.
    appendRecord(path, [{ ...(entries[3] as IndexEntry), pack: 9, offset: 7 }], false);
    ix.refresh();
    expect(ix.get(entries[3]?.key as string)).toMatchObject({ pack: 9, offset: 7 });
    expect([...ix.keys()]).toHaveLength(ix.size);
    expect(contents(ix)).toEqual(contents(fullParse(path)));
  });
});

describe('PackIndex, the saved table (index.tab)', () => {
  function saved(count: number): { path: string; first: PackIndex } {
    const path = fresh();
    write(
      path,
      Array.from({ length: count }, (_, i) => entry(`s${i}`, i)),
    );
    const first = new PackIndex(path);
    first.refresh();
    first.saveTable();
    expect(existsSync(first.tablePath)).toBe(true);
    return { path, first };
  }

  it('is loaded instead of the whole index, then the records appended since are replayed', () => {
    const { path, first } = saved(3000);
    const again = new PackIndex(path);
    again.refresh();
    expect(again.loadedFromTable).toBe(true);
    expect(contents(again)).toEqual(contents(first));

    appendRecord(path, [entry('late-1', 1), entry('late-2', 2), { ...entry('s5', 5), pack: TOMBSTONE }], false);
    const later = new PackIndex(path);
    later.refresh();
    expect(later.loadedFromTable).toBe(true);
    expect(later.has(key('late-2'))).toBe(true);
    expect(later.has(key('s5'))).toBe(false);
    expect(contents(later)).toEqual(contents(fullParse(path)));
  });

  it('is saved again only once a load would replay many records', () => {
    const { path, first } = saved(100);
    const stamp = readFileSync(first.tablePath);
    appendRecord(path, [entry('one-more', 1)], false);
    first.refresh();
    first.saveTable();
    expect(readFileSync(first.tablePath).equals(stamp)).toBe(true);
    write(
      path,
      Array.from({ length: TABLE_MIN_BEHIND }, (_, i) => entry(`bulk${i}`, i)),
    );
    first.refresh();
    first.saveTable();
    expect(readFileSync(first.tablePath).equals(stamp)).toBe(false);
    const again = new PackIndex(path);
    again.refresh();
    expect(again.loadedFromTable).toBe(true);
    expect(again.size).toBe(101 + TABLE_MIN_BEHIND);
  });

  it('is ignored when damaged, when the index was rewritten (another inode), or cut below what it covers', () => {
    const damaged = saved(2500);
    const bytes = readFileSync(damaged.first.tablePath);
    const mid = Math.floor(bytes.length / 2);
    bytes[mid] = (bytes[mid] as number) ^ 0x40;
    writeFileSync(damaged.first.tablePath, bytes);
    const a = new PackIndex(damaged.path);
    a.refresh();
    expect(a.loadedFromTable).toBe(false);
    expect(contents(a)).toEqual(contents(damaged.first));

    const rewritten = saved(2500);
    const tmp = `${rewritten.path}.tmp`;
    copyFileSync(rewritten.path, tmp);
    renameSync(tmp, rewritten.path);
    const b = new PackIndex(rewritten.path);
    b.refresh();
    expect(b.loadedFromTable).toBe(false);
    expect(contents(b)).toEqual(contents(rewritten.first));

    // The index lost its last records (written without fsync, then a crash): the table must not claim them.
    const cut = saved(2500);
    truncateSync(cut.path, 8 + 8 + 500 * ENTRY_BYTES + 8);
    const c = new PackIndex(cut.path);
    c.refresh();
    expect(c.loadedFromTable).toBe(false);
    expect(c.size).toBe(500);

    // Same length, different last record: the 8 bytes it remembers do not match.
    const swapped = saved(600);
    const index = readFileSync(swapped.path);
    index[index.length - 1] = (index[index.length - 1] as number) ^ 1;
    writeFileSync(swapped.path, index);
    const d = new PackIndex(swapped.path);
    d.refresh();
    expect(d.loadedFromTable).toBe(false);
  });
});
