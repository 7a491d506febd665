/**
 * Forward-only schema migrations for the embedded SQLite store.
 *
 * Files: `migrations/NNNN_<name>.sql` at the repository (or installed package) root, numbered from 0001 without
 * gaps. At open, every file newer than the database's version is applied in numeric order, each in its own
 * `BEGIN IMMEDIATE` transaction together with its row in `schema_version`, so a crash or a concurrent opener
 * never leaves a half-applied migration. A database whose version is newer than the newest file is refused.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type Database from 'better-sqlite3';
import { systemClock, type Clock } from '@assay/core';
import { migrationsInvalid, notALedger, schemaTooNew, schemaVersionInvalid } from './sqlite.errors';

export interface Migration {
  version: number;
  name: string;
  file: string;
  sql: string;
  /** Hex SHA-256 of the file, recorded with the version. */
  sha256: string;
}

export interface MigrationResult {
  from: number;
  to: number;
  applied: number[];
}

const FILE_RE = /^(\d{4})_([a-z0-9_]+)\.sql$/;
const MARKER = '0001_ledger.sql';

/** Walks up from `start` to the first directory holding `migrations/0001_ledger.sql` (src under jest, dist/ after a build). */
export function findMigrationsDir(start: string = __dirname): string {
  let dir = start;
  for (;;) {
    const candidate = join(dir, 'migrations');
    if (existsSync(join(candidate, MARKER)) && statSync(candidate).isDirectory()) return candidate;
    const up = dirname(dir);
    if (up === dir) throw migrationsInvalid(start, `no migrations/${MARKER} found in this directory or above it`);
    dir = up;
  }
}

/** Reads and checks the migration files of a directory (numbered 1..n, no gaps or duplicates). */
export function loadMigrations(dir: string = findMigrationsDir()): Migration[] {
  const out: Migration[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.sql')) continue;
    const m = FILE_RE.exec(file);
    if (!m) throw migrationsInvalid(dir, `file ${file} is not named NNNN_<name>.sql`);
    const sql = readFileSync(join(dir, file), 'utf8');
    out.push({
      version: Number(m[1]),
      name: m[2]!,
      file,
      sql,
      sha256: createHash('sha256').update(sql, 'utf8').digest('hex'),
    });
  }
  out.sort((a, b) => a.version - b.version);
  out.forEach((mig, i) => {
    if (mig.version !== i + 1)
      throw migrationsInvalid(dir, `expected version ${i + 1} next, found ${mig.file} (numbers must run 0001, 0002, ... without gaps)`);
  });
  if (out.length === 0) throw migrationsInvalid(dir, 'no migration files');
  return out;
}

function userTables(db: Database.Database): string[] {
  return db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).pluck().all() as string[];
}

/**
 * The database's schema version (0 for an empty database). Read-only. Refuses a non-empty database that is not
 * an Assay ledger.
 */
export function schemaVersion(db: Database.Database, path: string): number {
  const tables = userTables(db);
  if (!tables.includes('schema_version')) {
    if (tables.length > 0) throw notALedger(path, tables);
    return 0;
  }
  const v = db.prepare('SELECT max(version) FROM schema_version').pluck().get() as unknown;
  // Migrations create schema_version together with the tables and its row in one transaction: an empty one beside
  // ledger tables was emptied by hand, and running the migrations again on it would fail half way or worse.
  if (v === null && tables.length > 1)
    throw schemaVersionInvalid(path, `schema_version is empty, but the database holds the tables ${tables.filter((t) => t !== 'schema_version').join(', ')}`);
  if (v !== null && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)) throw schemaVersionInvalid(path, `schema_version holds version ${String(v)}`);
  return (v as number | null) ?? 0;
}

/** Refuses (without writing anything) a database newer than the migrations we know. */
export function assertNotTooNew(db: Database.Database, path: string, migrations: Migration[]): number {
  const version = schemaVersion(db, path);
  const known = migrations[migrations.length - 1]?.version ?? 0;
  if (version > known) throw schemaTooNew(path, version, known);
  return version;
}

/** Applies every migration newer than the database, each in its own immediate transaction. Idempotent. */
export function applyMigrations(db: Database.Database, path: string, migrations: Migration[], clock: Clock = systemClock): MigrationResult {
  const from = assertNotTooNew(db, path, migrations);
  const applied: number[] = [];
  for (const mig of migrations) {
    if (mig.version <= from) continue;
    db.exec('BEGIN IMMEDIATE');
    try {
      // Another connection may have migrated since we looked: decide again under the write lock.
      const now = assertNotTooNew(db, path, migrations);
      if (now >= mig.version) {
        db.exec('COMMIT');
        continue;
      }
      db.exec(
        `CREATE TABLE IF NOT EXISTS schema_version (
           version    INTEGER PRIMARY KEY,
           name       TEXT NOT NULL,
           sha256     TEXT NOT NULL,
           applied_at TEXT NOT NULL
         )`,
      );
      db.exec(mig.sql);
      db.prepare('INSERT INTO schema_version (version, name, sha256, applied_at) VALUES (?, ?, ?, ?)').run(
        mig.version,
        mig.name,
        mig.sha256,
        clock.now().toISOString(),
      );
      db.exec('COMMIT');
      applied.push(mig.version);
    } catch (e) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw e;
    }
  }
  return { from, to: Math.max(from, migrations[migrations.length - 1]?.version ?? 0), applied };
}
