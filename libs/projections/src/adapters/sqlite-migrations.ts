/**
 * Forward-only SQL migrations for the projections' own SQLite files (`migrations/projections/`, `migrations/imports/`),
 * applied the way the ledger's are: each in its own BEGIN IMMEDIATE transaction with its row in `schema_version`; a
 * database newer than the build is refused.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type Database from 'better-sqlite3';
import { AssayError } from '@assay/core';

const FILE_RE = /^(\d{4})_([a-z0-9_]+)\.sql$/;
const MARKER = join('projections', '0001_read_models.sql');

/** Walks up from `start` to the first `migrations/projections/` holding 0001 (src under jest, dist/ after a build). */
export function findProjectionMigrationsDir(start: string = __dirname): string {
  let dir = start;
  for (;;) {
    const candidate = join(dir, 'migrations');
    if (existsSync(join(candidate, MARKER)) && statSync(join(candidate, 'projections')).isDirectory()) return join(candidate, 'projections');
    const up = dirname(dir);
    if (up === dir) throw new AssayError('PROJECTIONS_MIGRATIONS_MISSING', 'internal', `no migrations/${MARKER} found in ${start} or above it`);
    dir = up;
  }
}

function loadMigrations(dir: string): Array<{ version: number; name: string; sql: string; sha256: string }> {
  const out = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((file) => {
      const m = FILE_RE.exec(file);
      if (!m) throw new AssayError('PROJECTIONS_MIGRATIONS_INVALID', 'internal', `${dir}: ${file} is not named NNNN_<name>.sql`);
      const sql = readFileSync(join(dir, file), 'utf8');
      return { version: Number(m[1]), name: m[2]!, sql, sha256: createHash('sha256').update(sql, 'utf8').digest('hex') };
    });
  out.forEach((mig, i) => {
    if (mig.version !== i + 1) throw new AssayError('PROJECTIONS_MIGRATIONS_INVALID', 'internal', `${dir}: migrations must run 0001, 0002, ... without gaps`);
  });
  return out;
}

/** Applies `dir`'s migrations newer than the database's version; `after(version)` runs inside each one's transaction. */
export function applyMigrations(db: Database.Database, path: string, dir: string, remedy: string, after: (version: number) => void = () => undefined): void {
  const migrations = loadMigrations(dir);
  db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, sha256 TEXT NOT NULL)');
  const current = (db.prepare('SELECT COALESCE(MAX(version), 0) FROM schema_version').pluck().get() as number) ?? 0;
  if (current > migrations.length)
    throw new AssayError(
      'PROJECTIONS_SCHEMA_TOO_NEW',
      'refused',
      `${path} has schema version ${current}, newer than this build's ${migrations.length}; ${remedy}`,
    );
  for (const m of migrations.slice(current)) {
    db.exec('BEGIN IMMEDIATE');
    try {
      const again = db.prepare('SELECT COALESCE(MAX(version), 0) FROM schema_version').pluck().get() as number;
      if (again < m.version) {
        db.exec(m.sql);
        db.prepare('INSERT INTO schema_version (version, name, sha256) VALUES (?, ?, ?)').run(m.version, m.name, m.sha256);
        after(m.version);
      }
      db.exec('COMMIT');
    } catch (e) {
      db.exec('ROLLBACK');
      throw e;
    }
  }
}
