/**
 * SQLite-specific behaviour of the embedded ledger database: opening, migrations, refusals of damaged, foreign and
 * newer files, group commit, several connections and processes on one file.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { isAssayError } from '@assay/core';
import { ZERO_HASH } from '../../domain/envelope';
import type { RecordedEvent } from '../../ports/event-store.port';
import { SqliteLedgerDatabase } from './sqlite-ledger-database';
import { findMigrationsDir, loadMigrations } from './sqlite-migrations';
import { collect, envelopeOf, hex, makeTmpDir, proposed, proposedMany, waitFor, zeroSigSeal } from '../../../../../tests/support/ledger-fixtures';
import { REPO_ROOT, spawnTs, finished, type ChildResult } from '../../../../../tests/support/child-process';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

function caught(f: () => unknown): { code: string; kind: string; message: string; details: Record<string, unknown> } {
  try {
    f();
  } catch (e) {
    if (!isAssayError(e)) throw new Error(`expected an AssayError, got ${String(e)}`);
    return e as unknown as { code: string; kind: string; message: string; details: Record<string, unknown> };
  }
  throw new Error('expected an error, none was thrown');
}

async function allEvents(db: SqliteLedgerDatabase): Promise<RecordedEvent[]> {
  return (await collect(db.events.readAll())).flat();
}

/** Positions 0..n-1 and every stream's chain linked. */
function expectDenseAndLinked(events: RecordedEvent[]): void {
  expect(events.map((e) => e.position)).toEqual(events.map((_, i) => i));
  const heads = new Map<string, RecordedEvent>();
  for (const e of events) {
    const env = envelopeOf(e.bytes);
    const prev = heads.get(e.stream);
    expect(e.revision).toBe(prev ? prev.revision + 1 : 0);
    expect(env.prev).toBe(prev ? sha(prev.bytes) : ZERO_HASH);
    expect(env.position).toBe(e.position);
    heads.set(e.stream, e);
  }
}

/**
 * A temporary directory in memory (tmpfs, /dev/shm) where the system has one, else makeTmpDir's. For tests whose
 * subject is not durability but that commit many times: every commit is an fsync (synchronous = FULL), and on a disk
 * other work is using an fsync can take tens of milliseconds instead of a fraction of one.
 */
function memoryTmpDir(): { dir: string; cleanup(): void } {
  if (!existsSync('/dev/shm')) return makeTmpDir();
  const dir = mkdtempSync(join('/dev/shm', 'assay-ledger-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

describe('SqliteLedgerDatabase', () => {
  let tmp: { dir: string; cleanup(): void };
  let file: string;
  const open: SqliteLedgerDatabase[] = [];
  const openDb = (opts: ConstructorParameters<typeof SqliteLedgerDatabase>[1] = {}, path = file): SqliteLedgerDatabase => {
    const db = new SqliteLedgerDatabase(path, opts);
    open.push(db);
    return db;
  };

  beforeEach(() => {
    tmp = makeTmpDir();
    file = join(tmp.dir, 'ledger.db');
  });
  afterEach(async () => {
    for (const db of open.splice(0)) await db.close();
    tmp.cleanup();
  });

  describe('opening and migrations', () => {
    it('creates the schema once, records it, and sets WAL, full sync and foreign keys', async () => {
      const db = openDb();
      const known = loadMigrations();
      expect(db.migration).toEqual({ from: 0, to: known.length, applied: known.map((m) => m.version) });
      expect(db.integrityCheck()).toEqual(['ok']);
      await db.close();
      const again = openDb();
      expect(again.migration).toEqual({ from: known.length, to: known.length, applied: [] });
      await again.close();

      const raw = new Database(file, { readonly: true });
      try {
        expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
        const rows = raw.prepare('SELECT version, name, sha256 FROM schema_version ORDER BY version').all();
        expect(rows).toEqual(known.map((m) => ({ version: m.version, name: m.name, sha256: m.sha256 })));
        const tables = raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all();
        expect(tables).toEqual(expect.arrayContaining(['events', 'merkle_nodes', 'checkpoints', 'schema_version']));
        const merkleSql = raw.prepare(`SELECT sql FROM sqlite_master WHERE name = 'merkle_nodes'`).pluck().get() as string;
        expect(merkleSql).toMatch(/WITHOUT ROWID/);
      } finally {
        raw.close();
      }
    });

    it('sets synchronous = FULL and foreign keys on its connection', () => {
      const db = openDb();
      const conn = (db as unknown as { db: Database.Database }).db;
      expect(conn.pragma('synchronous', { simple: true })).toBe(2);
      expect(conn.pragma('foreign_keys', { simple: true })).toBe(1);
      expect(conn.pragma('busy_timeout', { simple: true })).toBeGreaterThan(0);
    });

    it('applies newer migration files in numeric order, each once, and rolls back one that fails', async () => {
      const dir = join(tmp.dir, 'migrations');
      mkdirSync(dir);
      writeFileSync(join(dir, '0001_ledger.sql'), readFileSync(join(findMigrationsDir(), '0001_ledger.sql')));
      writeFileSync(join(dir, '0002_extra.sql'), 'CREATE TABLE extra (a INTEGER);');
      let db = openDb({ migrationsDir: dir });
      expect(db.migration.applied).toEqual([1, 2]);
      await db.close();
      writeFileSync(join(dir, '0003_broken.sql'), 'CREATE TABLE half (a INTEGER);\nTHIS IS NOT SQL;');
      const err = caught(() => openDb({ migrationsDir: join(dir) }));
      expect(err.code).toBe('LEDGER_DB_ERROR');
      writeFileSync(join(dir, '0003_broken.sql'), 'CREATE TABLE half (a INTEGER);\nINSERT INTO extra VALUES (1);');
      db = openDb({ migrationsDir: dir });
      expect(db.migration).toEqual({ from: 2, to: 3, applied: [3] });
      await db.close();
      const raw = new Database(file, { readonly: true });
      expect(raw.prepare('SELECT count(*) FROM extra').pluck().get()).toBe(1);
      raw.close();
    });

    it('refuses a migrations folder with a gap or a badly named file', () => {
      const dir = join(tmp.dir, 'gap');
      mkdirSync(dir);
      writeFileSync(join(dir, '0001_a.sql'), 'SELECT 1;');
      writeFileSync(join(dir, '0003_c.sql'), 'SELECT 1;');
      expect(caught(() => loadMigrations(dir)).code).toBe('LEDGER_MIGRATIONS_INVALID');
      const bad = join(tmp.dir, 'bad');
      mkdirSync(bad);
      writeFileSync(join(bad, '1_a.sql'), 'SELECT 1;');
      expect(caught(() => loadMigrations(bad)).code).toBe('LEDGER_MIGRATIONS_INVALID');
    });

    it('finds migrations/ from the source tree and from a built dist/ tree', () => {
      expect(findMigrationsDir()).toBe(join(REPO_ROOT, 'migrations'));
      expect(findMigrationsDir(join(REPO_ROOT, 'dist', 'libs', 'ledger', 'src', 'adapters', 'sqlite'))).toBe(join(REPO_ROOT, 'migrations'));
    });

    it('opens an empty (0-byte) file as a new ledger', () => {
      writeFileSync(file, '');
      const db = openDb();
      expect(db.schemaVersion).toBeGreaterThanOrEqual(1);
    });

    it('refuses a database with a newer schema, naming both versions, without changing it', async () => {
      const db = openDb();
      const known = db.schemaVersion;
      await db.close();
      const raw = new Database(file);
      raw.prepare(`INSERT INTO schema_version (version, name, sha256, applied_at) VALUES (7, 'future', '', '')`).run();
      raw.close();
      const before = readFileSync(file);
      const err = caught(() => openDb());
      expect(err.code).toBe('LEDGER_SCHEMA_TOO_NEW');
      expect(err.kind).toBe('refused');
      expect(err.message).toBe(`ledger database ${file} has schema version 7, this Assay knows up to ${known}; upgrade Assay`);
      expect(readFileSync(file).equals(before)).toBe(true);
    });

    it('refuses a file that is not a SQLite database, naming it, and leaves it byte for byte', () => {
      const text = Buffer.from('this is a text file that someone named ledger.db\n'.repeat(50));
      writeFileSync(file, text);
      const err = caught(() => openDb());
      expect(err).toMatchObject({ code: 'LEDGER_DB_CORRUPT', kind: 'integrity' });
      expect(err.message).toContain(file);
      expect(err.details).toEqual({ path: file });
      expect(readFileSync(file).equals(text)).toBe(true);
      writeFileSync(file, 'short');
      expect(caught(() => openDb()).code).toBe('LEDGER_DB_CORRUPT');
    });

    async function writtenLedger(): Promise<Buffer> {
      const db = openDb();
      for (let i = 0; i < 40; i++) await db.events.append({ stream: `run-${i % 4}`, expected: 'any', events: proposedMany(`c${i}`, 20), seal: zeroSigSeal });
      db.merkleNodes.appendLeaves([Buffer.alloc(32, 1)]);
      await db.close();
      return readFileSync(file);
    }

    function corruptAndOpen(original: Buffer, from: number, to: number, opts = {}): { code: string; message: string } {
      const damaged = Buffer.from(original);
      damaged.fill(0x5a, from, to);
      writeFileSync(file, damaged);
      const err = caught(() => openDb(opts));
      expect(readFileSync(file).equals(damaged)).toBe(true);
      return err;
    }

    it('refuses a corrupted ledger (schema page, table pages) and leaves it byte for byte', async () => {
      const original = await writtenLedger();
      const page = original.readUInt16BE(16);
      expect(original.length / page).toBeGreaterThan(50);
      for (const [from, to] of [
        [100, page], // sqlite_master
        [page, 2 * page],
        [original.length - page, original.length],
        [0, 16], // the header magic
        [16, 18], // the page size
      ] as const) {
        const err = corruptAndOpen(original, from, to);
        expect(err.code).toBe('LEDGER_DB_CORRUPT');
        expect(err.message).toContain(file);
      }
    });

    it('verifyOnOpen finds damage deep inside the file; without it, reads of damaged pages fail with LEDGER_DB_CORRUPT', async () => {
      const original = await writtenLedger();
      const page = original.readUInt16BE(16);
      const mid = Math.floor(original.length / page / 2) * page;
      expect(corruptAndOpen(original, mid, mid + page, { verifyOnOpen: true }).code).toBe('LEDGER_DB_CORRUPT');
      const damaged = readFileSync(file);
      const db = openDb();
      expect(db.integrityCheck()).not.toEqual(['ok']);
      let err: unknown;
      try {
        await allEvents(db);
      } catch (e) {
        err = e;
      }
      expect(isAssayError(err) && err.code).toBe('LEDGER_DB_CORRUPT');
      await db.close();
      expect(readFileSync(file).equals(damaged)).toBe(true);
    });

    it('refuses a SQLite database that is not a ledger, and leaves it alone', () => {
      const raw = new Database(file);
      raw.exec('CREATE TABLE customers (name TEXT); INSERT INTO customers VALUES (1);');
      raw.close();
      const before = readFileSync(file);
      const err = caught(() => openDb());
      expect(err).toMatchObject({ code: 'LEDGER_DB_NOT_A_LEDGER', kind: 'refused' });
      expect(readFileSync(file).equals(before)).toBe(true);
    });

    it('reports a path it cannot open as unavailable', () => {
      const err = caught(() => openDb({}, join(tmp.dir, 'no-such-dir', 'ledger.db')));
      expect(err).toMatchObject({ code: 'LEDGER_DB_UNAVAILABLE', kind: 'unavailable' });
      expect(caught(() => openDb({}, tmp.dir)).code).toBe('LEDGER_DB_UNAVAILABLE');
    });
  });

  describe('group commit', () => {
    it('commits 100 concurrent appends in far fewer transactions', async () => {
      const db = openDb();
      const before = { ...db.events.stats };
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          db.events.append({ stream: `run-g${i % 10}`, expected: 'any', events: proposedMany(`g${i}`, 2), seal: zeroSigSeal }),
        ),
      );
      const transactions = db.events.stats.transactions - before.transactions;
      process.stdout.write(`group commit: 100 concurrent appends (200 events) in ${transactions} transaction(s)\n`);
      expect(transactions).toBeLessThanOrEqual(5);
      expect(db.events.stats.requests - before.requests).toBe(100);
      expect(db.events.stats.events - before.events).toBe(200);
      expect(results.map((r) => r.lastPosition).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => 2 * i + 1));
      expectDenseAndLinked(await allEvents(db));
    });

    it('splits a long queue into transactions of at most maxRequestsPerCommit', async () => {
      const db = openDb({ maxRequestsPerCommit: 10 });
      await Promise.all(
        Array.from({ length: 95 }, (_, i) => db.events.append({ stream: 'run-q', expected: 'any', events: [proposed(`q${i}`)], seal: zeroSigSeal })),
      );
      expect(db.events.stats.transactions).toBe(10);
      expect(await db.events.streamRevision('run-q')).toBe(94);
    });

    it('sequential appends each commit on their own', async () => {
      const db = openDb();
      for (let i = 0; i < 5; i++)
        await db.events.append({ stream: 'run-s', expected: i === 0 ? 'no_stream' : i - 1, events: [proposed(`s${i}`)], seal: zeroSigSeal });
      expect(db.events.stats.transactions).toBe(5);
    });

    it('close commits what is queued', async () => {
      const db = new SqliteLedgerDatabase(file);
      const pending = db.events.append({ stream: 'run-c', expected: 'no_stream', events: [proposed('c0')], seal: zeroSigSeal });
      await db.close();
      await expect(pending).resolves.toMatchObject({ lastPosition: 0 });
      const again = openDb();
      expect(await again.events.size()).toBe(1);
    });

    it('a write lock held too long by another connection fails the batch as unavailable, then writes go on', async () => {
      const db = openDb({ busyTimeoutMs: 50 });
      const blocker = new Database(file);
      blocker.exec('BEGIN IMMEDIATE');
      const results = await Promise.allSettled([
        db.events.append({ stream: 'run-b', expected: 'any', events: [proposed('b0')], seal: zeroSigSeal }),
        db.events.append({ stream: 'run-b', expected: 'any', events: [proposed('b1')], seal: zeroSigSeal }),
      ]);
      for (const r of results) {
        expect(r.status).toBe('rejected');
        const reason = (r as PromiseRejectedResult).reason as unknown;
        expect(isAssayError(reason) && [reason.code, reason.kind]).toEqual(['LEDGER_DB_UNAVAILABLE', 'unavailable']);
      }
      blocker.exec('ROLLBACK');
      blocker.close();
      const r = await db.events.append({ stream: 'run-b', expected: 'no_stream', events: [proposed('b0')], seal: zeroSigSeal });
      expect(r.lastPosition).toBe(0);
    });
  });

  describe('several connections and processes on one file', () => {
    it('two connections in one process alternate on one stream: positions and revisions come from the file', async () => {
      const a = openDb();
      const b = openDb();
      for (let i = 0; i < 20; i++) {
        const db = i % 2 === 0 ? a : b;
        await db.events.append({ stream: 'run-shared', expected: i === 0 ? 'no_stream' : 2 * i - 1, events: proposedMany(`alt${i}`, 2), seal: zeroSigSeal });
        await (i % 2 === 0 ? b : a).events.append({ stream: `run-own${i % 2}`, expected: 'any', events: [proposed(`own${i}`)], seal: zeroSigSeal });
      }
      const all = await allEvents(a);
      expect(all).toHaveLength(60);
      expectDenseAndLinked(all);
      expect(hex((await allEvents(b))[59]!.hash)).toBe(hex(all[59]!.hash));
    });

    it('two processes appending concurrently keep positions dense and every chain linked', async () => {
      // 600 commits, each an fsync: on a shared disk under load those took 20 s where they take 0.5 s on an idle one,
      // which is not what this test is about (positions and chains under two writers), so the file lives in memory.
      const mem = memoryTmpDir();
      file = join(mem.dir, 'ledger.db');
      try {
        openDb(); // create and migrate first, so the children race on appends, not on the schema
        const children = ['px', 'py'].map((label) => spawnTs('tests/support/sqlite-writer-child.ts', [file, label, '300', '3', 'wait']));
        const done = children.map((c) => finished(c));
        // both open first, then start together, so that their appends really contend for the file
        // (or one exits before it is ready: then its exit code and stderr below say why)
        await Promise.all(children.map((c) => new Promise<void>((resolve) => (c.stdout.once('data', () => resolve()), c.once('close', () => resolve())))));
        for (const c of children) if (c.exitCode === null) c.stdin.end('GO\n');
        const [x, y] = (await Promise.all(done)) as [ChildResult, ChildResult];
        expect([x.code, x.stderr]).toEqual([0, '']);
        expect([y.code, y.stderr]).toEqual([0, '']);
        const written = (r: { stdout: string }): number => Number(/DONE (\d+)/.exec(r.stdout)![1]);
        const db = openDb();
        const all = await allEvents(db);
        expect(all).toHaveLength(written(x) + written(y));
        expect(written(x)).toBe(600);
        expectDenseAndLinked(all);
        const streams = new Set(all.map((e) => e.stream));
        expect([...streams].sort()).toEqual(['run-px-0', 'run-px-1', 'run-px-2', 'run-py-0', 'run-py-1', 'run-py-2']);
        // the two writers really interleaved
        const switches = all.filter((e, i) => i > 0 && e.stream.slice(0, 6) !== all[i - 1]!.stream.slice(0, 6)).length;
        process.stdout.write(`two processes: ${all.length} events, writer switched ${switches} times\n`);
        // both opened before either wrote, so even one switch shows nothing came from a counter cached at open
        expect(switches).toBeGreaterThanOrEqual(1);
        expect(db.integrityCheck()).toEqual(['ok']);
      } finally {
        for (const db of open.splice(0)) await db.close();
        mem.cleanup();
      }
      // Two Node processes that compile the TypeScript they load and commit 600 times, on a machine that may be shared:
      // about 1.5 s of CPU in all, more than jest's default 5 s of wall time when four other jobs share two cores. The
      // children themselves are killed after 30 s (finished()), and this waits for their report.
    }, 40_000);

    it('a subscription sees events written by another process (polling)', async () => {
      const db = openDb({ pollIntervalMs: 20 });
      const seen: RecordedEvent[] = [];
      const sub = db.events.subscribe({ onEvent: (e) => void seen.push(e) });
      await sub.caughtUp;
      const child = spawnTs('tests/support/sqlite-writer-child.ts', [file, 'remote', '30', '2']);
      const result = await finished(child);
      expect(result.code).toBe(0);
      const total = Number(/DONE (\d+)/.exec(result.stdout)![1]);
      await waitFor(() => seen.length === total, 10_000, 'remote events');
      expect(seen.map((e) => e.position)).toEqual(Array.from({ length: total }, (_, i) => i));
      await sub.stop();
    });

    it('an idempotent retry from another connection returns the stored run', async () => {
      const a = openDb();
      const b = openDb();
      const batch = proposedMany('retry', 3);
      const first = await a.events.append({ stream: 'run-r', expected: 'no_stream', events: batch, seal: zeroSigSeal });
      const retry = await b.events.append({ stream: 'run-r', expected: 'no_stream', events: batch, seal: zeroSigSeal });
      expect(retry.idempotent).toBe(true);
      expect(retry.events.map((e) => hex(e.hash))).toEqual(first.events.map((e) => hex(e.hash)));
      expect(existsSync(file)).toBe(true);
    });
  });
});
