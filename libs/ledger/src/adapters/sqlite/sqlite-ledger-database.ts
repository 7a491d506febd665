/**
 * One embedded ledger database file: opened defensively (a damaged or foreign file is refused and left byte for
 * byte as it was), migrated forward, then shared by the event store, the Merkle node store and the checkpoints.
 */
import { closeSync, existsSync, openSync, readSync, statSync, type Stats } from 'node:fs';
import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { systemClock, type Clock } from '@assay/core';
import { SqliteEventStore } from './sqlite-event-store.adapter';
import { SqliteMerkleNodeStore } from './sqlite-merkle-node-store.adapter';
import { SqliteCheckpointStore } from './sqlite-checkpoint-store.adapter';
import { SqliteLedgerLock } from './sqlite-ledger-lock.adapter';
import { applyMigrations, assertNotTooNew, loadMigrations, type Migration, type MigrationResult } from './sqlite-migrations';
import { dbCorrupt, dbUnavailable, isCorruption, translateDbError } from './sqlite.errors';

export interface SqliteLedgerOptions {
  /**
   * How long a write waits for another connection's write lock before failing with LEDGER_DB_UNAVAILABLE. Default
   * 60 s: writers of other processes (a bulk append of tens of thousands of events holds the lock a few seconds)
   * line up and take their turn.
   */
  busyTimeoutMs?: number;
  /** Default: `migrations/` found by walking up from this file. */
  migrationsDir?: string;
  /** For `schema_version.applied_at`. */
  clock?: Clock;
  /** Subscription polling for other processes' writes. Default 100 ms. */
  pollIntervalMs?: number;
  /** Run `PRAGMA quick_check` (reads every page) before touching the file. Default false: only the cheap probes. */
  verifyOnOpen?: boolean;
  /** Most append requests per group-commit transaction. */
  maxRequestsPerCommit?: number;
  /**
   * Open an existing ledger for reading only (auditing a copy): no file is created, no migration applied, the
   * journal mode left as it is; appends fail. The schema must be the newest this build knows.
   */
  readOnly?: boolean;
}

/** The default wait for another writer's lock (SqliteLedgerOptions.busyTimeoutMs). */
export const DEFAULT_BUSY_TIMEOUT_MS = 60_000;

const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/** Reads the first 100 bytes (the database header) without opening the file for writing. */
function checkHeader(path: string): void {
  let st: Stats;
  try {
    st = statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // a new ledger
    throw dbUnavailable(path, (e as Error).message, e);
  }
  if (!st.isFile()) throw dbUnavailable(path, 'it is not a regular file');
  const size = st.size;
  if (size === 0) return; // SQLite treats an empty file as an empty database
  const head = Buffer.alloc(100);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    throw dbUnavailable(path, (e as Error).message, e);
  }
  try {
    const n = readSync(fd, head, 0, 100, 0);
    if (n < 100 || !head.subarray(0, 16).equals(SQLITE_MAGIC)) throw dbCorrupt(path, 'no SQLite header');
    const pageSize = head.readUInt16BE(16);
    const okPage = pageSize === 1 || (pageSize >= 512 && pageSize <= 32768 && (pageSize & (pageSize - 1)) === 0);
    if (!okPage) throw dbCorrupt(path, `invalid page size ${pageSize} in the header`);
  } finally {
    closeSync(fd);
  }
}

/** Touches the root and right edge of each table's b-tree, where damage would show first. */
function probe(db: Database.Database): void {
  const tables = db
    .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('events', 'merkle_nodes', 'checkpoints')`)
    .pluck()
    .all() as string[];
  if (tables.includes('events')) {
    db.prepare('SELECT max(position) FROM events').get();
    db.prepare('SELECT position, bytes FROM events ORDER BY position DESC LIMIT 1').get();
  }
  if (tables.includes('merkle_nodes')) db.prepare('SELECT max(idx) FROM merkle_nodes WHERE level = 0').get();
  if (tables.includes('checkpoints')) db.prepare('SELECT * FROM checkpoints ORDER BY seq DESC LIMIT 1').get();
}

/** The connection a SqliteLedgerDatabase runs on, opened and migrated (the checks are its constructor's). */
function connect(path: string, opts: SqliteLedgerOptions): { db: Database.Database; path: string; migration: MigrationResult } {
  const abs = resolve(path);
  const migrations = loadMigrations(opts.migrationsDir);
  checkHeader(abs);
  if (opts.readOnly && !existsSync(abs)) throw dbUnavailable(abs, 'no such file');
  let db: Database.Database;
  try {
    db = new Database(abs, {
      timeout: opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS,
      readonly: opts.readOnly === true,
      fileMustExist: opts.readOnly === true,
    });
  } catch (e) {
    const t = translateDbError(abs, e);
    throw t === e ? dbUnavailable(abs, (e as Error).message, e) : t;
  }
  try {
    // Read-only probes first: nothing is written until the file has shown itself to be a sound ledger.
    db.pragma('foreign_keys = ON');
    if (opts.verifyOnOpen) {
      const problems = (db.pragma('quick_check') as Array<Record<string, string>>).map((r) => Object.values(r)[0]);
      if (!(problems.length === 1 && problems[0] === 'ok')) throw dbCorrupt(abs, `quick_check: ${problems.slice(0, 5).join('; ')}`);
    }
    const version = assertNotTooNew(db, abs, migrations);
    if (version > 0) probe(db);
    if (opts.readOnly) {
      const newest = migrations[migrations.length - 1]?.version ?? 0;
      if (version !== newest)
        throw dbUnavailable(abs, `it has schema version ${version}; reading needs version ${newest} (open it once for writing to migrate a copy)`);
      return { db, path: abs, migration: { from: version, to: version, applied: [] } };
    }
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (String(mode).toLowerCase() !== 'wal') throw dbUnavailable(abs, `cannot switch to WAL (journal mode ${String(mode)})`);
    db.pragma('synchronous = FULL');
    const result = applyMigrations(db, abs, migrations, opts.clock ?? systemClock);
    return { db, path: abs, migration: result };
  } catch (e) {
    try {
      db.close();
    } catch {
      // already unusable
    }
    if (isCorruption(e)) throw dbCorrupt(abs, (e as Error).message, e);
    throw translateDbError(abs, e);
  }
}

export class SqliteLedgerDatabase {
  readonly events: SqliteEventStore;
  readonly merkleNodes: SqliteMerkleNodeStore;
  readonly checkpoints: SqliteCheckpointStore;
  /** The write lock the three stores share (BEGIN IMMEDIATE on their connection). */
  readonly lock: SqliteLedgerLock;
  private closed = false;

  private readonly db: Database.Database;
  readonly path: string;
  readonly migration: MigrationResult;
  private readonly opts: SqliteLedgerOptions;

  /**
   * Opens (creating when absent) and migrates the ledger database at `path`. Refuses: a file that is not SQLite or is
   * damaged (LEDGER_DB_CORRUPT, the file untouched), a SQLite file that is not a ledger (LEDGER_DB_NOT_A_LEDGER), a
   * schema newer than this build (LEDGER_SCHEMA_TOO_NEW).
   */
  constructor(path: string, opts: SqliteLedgerOptions = {}) {
    const c = connect(path, opts);
    const db = c.db;
    this.db = db;
    this.path = c.path;
    this.migration = c.migration;
    this.opts = opts;
    this.events = new SqliteEventStore(db, {
      path: c.path,
      ...(opts.pollIntervalMs !== undefined ? { pollIntervalMs: opts.pollIntervalMs } : {}),
      ...(opts.maxRequestsPerCommit !== undefined ? { maxRequestsPerCommit: opts.maxRequestsPerCommit } : {}),
    });
    this.merkleNodes = new SqliteMerkleNodeStore(db, c.path);
    this.checkpoints = new SqliteCheckpointStore(db, c.path);
    this.lock = new SqliteLedgerLock(db, c.path);
  }

  /** Schema version after opening. */
  get schemaVersion(): number {
    return this.migration.to;
  }

  /**
   * The structural checks of verification, beyond `integrityCheck`: the first problem, or null.
   * - VERIFY_SCHEMA_VERSION: `schema_version` must hold exactly one row per applied migration, versions 1..v in
   *   order, each with the migration's file name part and the SHA-256 of its file, and a TEXT applied_at;
   * - VERIFY_SCHEMA_MISMATCH: the schema (every table, index, view and trigger in sqlite_master, but SQLite's own
   *   `sqlite_stat*` tables, with its SQL text, whitespace runs taken as one space) must be exactly what migrations
   *   1..v create in an empty database:
   *   no constraint or index dropped or changed (the UNIQUE index on ids, the NOT NULL and CHECK constraints, the
   *   INTEGER PRIMARY KEY that makes every position an integer), nothing added.
   */
  storageProblem(): { code: string; message: string } | null {
    return this.run(() => {
      const migrations = loadMigrations(this.opts.migrationsDir);
      const rows = this.db.prepare('SELECT version, name, sha256, applied_at FROM schema_version ORDER BY version').raw(true).all() as unknown[][];
      const version = rows.length;
      for (const [i, [v, name, sha256, appliedAt]] of rows.entries()) {
        const m = migrations[i] as Migration | undefined;
        const problem =
          v !== i + 1
            ? `holds version ${String(v)} where ${i + 1} was expected (versions run 1, 2, 3, ... without gaps)`
            : !m
              ? `holds version ${i + 1}, newer than this Assay knows`
              : name !== m.name || sha256 !== m.sha256
                ? `says version ${i + 1} is ${String(name)} with SHA-256 ${String(sha256)}, but migration ${m.file} has SHA-256 ${m.sha256}`
                : typeof appliedAt !== 'string'
                  ? `records applied_at of version ${i + 1} as ${appliedAt === null ? 'NULL' : typeof appliedAt}, not text`
                  : null;
        if (problem) return { code: 'VERIFY_SCHEMA_VERSION', message: `schema_version ${problem}` };
      }
      if (version === 0) return { code: 'VERIFY_SCHEMA_VERSION', message: 'schema_version is empty, but the database holds ledger tables' };
      const expected = schemaOf(freshSchema(migrations.slice(0, version)));
      const actual = schemaOf(this.db);
      for (const key of new Set([...expected.keys(), ...actual.keys()])) {
        const want = expected.get(key);
        const got = actual.get(key);
        if (want !== got)
          return {
            code: 'VERIFY_SCHEMA_MISMATCH',
            message: `the schema differs from what migrations 1..${version} create: ${key} is ${got === undefined ? 'missing' : JSON.stringify(got)}${want === undefined ? ', which they do not create' : `, where they create ${JSON.stringify(want)}`}`,
          };
      }
      return null;
    });
  }

  private run<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      throw translateDbError(this.path, e);
    }
  }

  /** `PRAGMA integrity_check`: `['ok']` when sound, otherwise one line per problem. */
  integrityCheck(): string[] {
    try {
      return (this.db.pragma('integrity_check') as Array<Record<string, string>>).map((r) => String(Object.values(r)[0]));
    } catch (e) {
      if (isCorruption(e)) return [(e as Error).message];
      throw translateDbError(this.path, e);
    }
  }

  /** Commits what is queued, stops subscriptions and closes the connection (WAL checkpointed by SQLite). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.events.close();
    this.db.close();
  }
}

/** An empty in-memory database with these migrations applied (the reference schema). */
function freshSchema(migrations: Migration[]): Database.Database {
  const db = new Database(':memory:');
  applyMigrations(db, ':memory:', migrations, systemClock);
  return db;
}

/**
 * `<type> <name> (on <table>)` -> SQL text, whitespace runs collapsed to one space (null for the indexes SQLite
 * makes for UNIQUE and PRIMARY KEY constraints), of every schema object.
 */
function schemaOf(db: Database.Database): Map<string, string | null> {
  const rows = db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%' ORDER BY type, name").all() as Array<{
    type: unknown;
    name: unknown;
    tbl_name: unknown;
    sql: unknown;
  }>;
  if (db.memory) db.close();
  return new Map(
    rows.map((r) => [
      `${String(r.type)} ${String(r.name)} (on ${String(r.tbl_name)})`,
      typeof r.sql === 'string' ? r.sql.replace(/\s+/g, ' ').trim() : r.sql === null ? null : String(r.sql),
    ]),
  );
}
