import { appendFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsBlobStore, PackIndex, SnapshotHome, parseCid, rawBlock } from '@assay/snapshots';
import { assay } from './support/cli';
import { spawnTs } from './support/child-process';

/**
 * Crash safety of the pack store: a writer SIGKILLed in the middle of writing leaves a store whose index points
 * only at intact blobs, in which every snapshot it committed verifies, and whose leftovers the next collection
 * removes.
 */
const base = mkdtempSync(join(tmpdir(), 'assay-snap-crash-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('a writer killed mid-write', () => {
  it('leaves only intact, verifiable snapshots behind', async () => {
    const home = join(base, 'home');
    const ws = join(base, 'ws');
    const child = spawnTs('tests/support/snapshot-writer-child.ts', [home, ws]);
    const roots: string[] = [];
    let sawOrphan = false;
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
    const dir = join(home, 'blobs');
    /** Pack files the index does not name: what a batch writes before its commit. */
    const orphanPacks = (): string[] => {
      const index = new PackIndex(join(dir, 'packs', 'index'));
      index.refresh();
      const named = new Set<number>();
      for (const [, loc] of index.entries()) named.add(loc.pack);
      return readdirSync(join(dir, 'packs')).filter((n) => n.endsWith('.pack') && !named.has(parseInt(n, 16)));
    };
    await new Promise<void>((resolve, reject) => {
      let buf = '';
      let polling = false;
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        for (const m of buf.matchAll(/committed (\S+)\n/g)) if (!roots.includes(m[1] as string)) roots.push(m[1] as string);
        // After two commits, kill it as soon as the next snapshot has a pack on disk that no index entry names.
        if (roots.length >= 2 && !polling) {
          polling = true;
          const started = Date.now();
          const poll = setInterval(() => {
            sawOrphan = orphanPacks().length > 0;
            if (sawOrphan || Date.now() - started > 10_000) {
              clearInterval(poll);
              child.kill('SIGKILL');
              resolve();
            }
          }, 2);
        }
      });
      child.on('close', () => (roots.length >= 2 ? resolve() : reject(new Error(`the writer exited early: ${stderr}`))));
    });
    expect(await exited).toBe('SIGKILL');

    // The kill came while a batch was under way: a pack the index did not name was on disk. (The batch may still
    // have committed in the instant between that look and the kill, without printing its root: the checks below
    // hold either way.)
    expect(sawOrphan).toBe(true);
    const store = new FsBlobStore(dir);
    let blobs = 0;
    for await (const b of store.list()) {
      await store.get(b.cid); // every indexed blob is intact: this checks its bytes against its CID
      blobs += 1;
    }
    expect(blobs).toBeGreaterThan(80);
    await store.close();
    // Every committed snapshot verifies, through the CLI.
    for (const root of roots) {
      const v = await assay(['snapshot', 'verify', root], home);
      expect(v.stderr).toBe('');
      expect(v.code).toBe(0);
      expect(v.stdout).toContain(`ok ${root}`);
    }
    // The dead writer's leftovers go at the next collection; the committed snapshots stay.
    const packsBefore = readdirSync(join(dir, 'packs')).filter((n) => n.endsWith('.pack')).length;
    const h = new SnapshotHome(home);
    const g = await h.gc({ graceMs: 0 });
    // The dead writer's registration is gone (a half-written temp record may stay until it is a minute old).
    expect(readdirSync(join(dir, 'writers')).filter((n) => n.endsWith('.json'))).toEqual([]);
    expect(orphanPacks()).toEqual([]);
    expect(readdirSync(join(dir, 'packs')).filter((n) => n.endsWith('.pack')).length).toBeLessThanOrEqual(packsBefore);
    expect(g.deleted + g.reachable).toBeGreaterThan(0);
    for (const root of roots) await expect(h.verify(parseCid(root))).resolves.toBeTruthy();
    await h.close();
  }, 120_000);
});

describe('a damaged index', () => {
  it('ignores a torn record and still reads the records appended after it', async () => {
    const dir = join(base, 'torn');
    const store = new FsBlobStore(dir);
    const a = rawBlock(new TextEncoder().encode('before the tear'));
    const b = rawBlock(new TextEncoder().encode('after the tear'));
    const w1 = await store.begin();
    await w1.put(a);
    await w1.commit();
    // A record cut short by a crash: magic, a count of 3 entries, and only part of one.
    appendFileSync(join(dir, 'packs', 'index'), Buffer.concat([Buffer.from('ASXR'), Buffer.from([3, 0, 0, 0]), Buffer.alloc(30, 7)]));
    const w2 = await store.begin();
    await w2.put(b);
    await w2.commit();
    const fresh = new FsBlobStore(dir);
    expect(Buffer.from(await fresh.get(a.cid)).toString()).toBe('before the tear');
    expect(Buffer.from(await fresh.get(b.cid)).toString()).toBe('after the tear');
    expect(fresh.index.damagedRecords).toBe(1);
  });
});
