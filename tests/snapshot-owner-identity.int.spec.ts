/**
 * The blob store's writer and collector records (writers/<batch>.json, gc.lock) name their process by pid and, on
 * Linux, by its start time and the boot: a dead process whose pid the kernel has given to another process no
 * longer counts as a live writer or collector.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { FsBlobStore, ownerAlive, processIdentity } from '../libs/snapshots/src/adapters/fs-blob-store.adapter';
import { makeTmpDir } from './support/ledger-fixtures';

const linux = existsSync('/proc/self/stat') && existsSync('/proc/sys/kernel/random/boot_id');
const onLinux = linux ? it : it.skip;

describe('blob store owner records: pid and process identity', () => {
  let tmp: { dir: string; cleanup(): void };
  beforeAll(() => {
    tmp = makeTmpDir('assay-owner-');
  });
  afterAll(() => tmp.cleanup());

  onLinux('names a process by boot id and start time, different for another process', async () => {
    const mine = processIdentity(process.pid);
    expect(mine).toMatch(/^[0-9a-f-]{36}:\d+$/);
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 5000)']);
    try {
      await new Promise((r) => setTimeout(r, 50));
      const theirs = processIdentity(child.pid as number);
      expect(theirs).toMatch(/^[0-9a-f-]{36}:\d+$/);
      expect(theirs?.split(':')[0]).toBe(mine?.split(':')[0]);
      expect(ownerAlive({ pid: child.pid as number, host: hostname(), startedAt: '', process: theirs as string })).toBe(true);
      // The same pid with another start time: the pid was reused, the recorded process is gone.
      expect(ownerAlive({ pid: child.pid as number, host: hostname(), startedAt: '', process: `${mine?.split(':')[0]}:1` })).toBe(false);
    } finally {
      child.kill();
    }
    // Records without the identity (older ones, other systems) fall back to the pid alone.
    expect(ownerAlive({ pid: process.pid, host: hostname(), startedAt: '' })).toBe(true);
    // Records from another machine are assumed alive.
    expect(ownerAlive({ pid: 999_999_999, host: 'elsewhere.example', startedAt: '' })).toBe(true);
  });

  onLinux('records the identity in writers/ and gc.lock', async () => {
    const store = new FsBlobStore(join(tmp.dir, 'record'), { durability: 'none' });
    const batch = await store.begin();
    const writers = join(tmp.dir, 'record', 'writers');
    const [file] = require('node:fs').readdirSync(writers) as string[];
    expect(JSON.parse(readFileSync(join(writers, file as string), 'utf8'))).toMatchObject({ pid: process.pid, process: processIdentity(process.pid) });
    await batch.abort();
    const gc = await store.lockForGc();
    expect(JSON.parse(readFileSync(join(tmp.dir, 'record', 'gc.lock'), 'utf8'))).toMatchObject({ pid: process.pid, process: processIdentity(process.pid) });
    await gc.release();
  });

  onLinux('a writer record whose pid now belongs to another process does not block garbage collection', async () => {
    const dir = join(tmp.dir, 'stale-writer');
    const store = new FsBlobStore(dir, { durability: 'none' });
    // A writer that died; its pid is now this process's (a live pid, another start time).
    const boot = (processIdentity(process.pid) as string).split(':')[0];
    writeFileSync(
      join(dir, 'writers', 'dead.json'),
      JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2026-01-01T00:00:00.000Z', process: `${boot}:1` }),
    );
    const gc = await store.lockForGc();
    expect(existsSync(join(dir, 'writers', 'dead.json'))).toBe(false);
    await gc.release();
    // The same record naming this very process blocks it, as a live writer must.
    writeFileSync(
      join(dir, 'writers', 'live.json'),
      JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2026-01-01T00:00:00.000Z', process: processIdentity(process.pid) }),
    );
    await expect(store.lockForGc()).rejects.toMatchObject({ code: 'SNAPSHOT_STORE_BUSY' });
  });

  onLinux('a collector lock whose pid now belongs to another process neither blocks writers nor a new collection', async () => {
    const dir = join(tmp.dir, 'stale-gc');
    mkdirSync(dir, { recursive: true });
    const store = new FsBlobStore(dir, { durability: 'none', gcWaitMs: 300 });
    const boot = (processIdentity(process.pid) as string).split(':')[0];
    writeFileSync(join(dir, 'gc.lock'), JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2026-01-01T00:00:00.000Z', process: `${boot}:1` }));
    const batch = await store.begin(); // would wait 300 ms and fail with SNAPSHOT_STORE_BUSY if the record counted
    await batch.abort();
    const gc = await store.lockForGc();
    await gc.release();
  });
});
