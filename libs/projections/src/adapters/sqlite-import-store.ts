/**
 * Imported bundles' rows: `<ASSAY_HOME>/imports/imports.db` (SQLite, schema in `migrations/imports/`), with the
 * verified bundle files beside it as `<ASSAY_HOME>/imports/<hex sha256>.bundle`. Not derived from the ledger: deleting
 * the read models leaves it; deleting it forgets the imports (re-import the kept files).
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { AssayError } from '@assay/core';
import type { LeaderboardRow } from '../domain/leaderboard';
import { applyMigrations, findProjectionMigrationsDir } from './sqlite-migrations';
import { canonical } from './sqlite-read-model-store';
import type { ImportStore } from '../ports/import-store.port';

export const importsDir = (home: string): string => join(home, 'imports');
export const importsDbPath = (home: string): string => join(importsDir(home), 'imports.db');

export class SqliteImportStore implements ImportStore {
  private readonly db: Database.Database;

  /** Opens (creating and migrating when needed) the imports database; PROJECTIONS_UNAVAILABLE when it cannot be opened. */
  constructor(path: string, migrationsDir: string = join(dirname(findProjectionMigrationsDir()), 'imports')) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    let db: Database.Database;
    try {
      db = new Database(path);
    } catch (e) {
      throw new AssayError('PROJECTIONS_UNAVAILABLE', 'unavailable', `cannot open the imports at ${path}: ${(e as Error).message}`, { cause: e });
    }
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.pragma('busy_timeout = 10000');
      applyMigrations(db, path, migrationsDir, 'use a newer Assay to read it');
    } catch (e) {
      db.close();
      throw e;
    }
    this.db = db;
  }

  /** Records an imported row; false when that bundle was imported already (nothing changes). */
  put(row: LeaderboardRow): boolean {
    const p = row.imported;
    if (row.source !== 'imported' || !p) throw new AssayError('PROJECTIONS_IMPORT_CLAIM', 'internal', 'only an imported row can be stored as an import');
    const r = this.db
      .prepare('INSERT OR IGNORE INTO imports (bundle_digest, task, run, publisher_key, imported_at, row) VALUES (?, ?, ?, ?, ?, ?)')
      .run(p.bundleDigest, row.task, row.run, p.publisherKey, p.importedAt, canonical(row));
    return r.changes === 1;
  }

  get(bundleDigest: string): LeaderboardRow | null {
    const t = this.db.prepare('SELECT row FROM imports WHERE bundle_digest = ?').pluck().get(bundleDigest) as string | undefined;
    return t === undefined ? null : (JSON.parse(t) as LeaderboardRow);
  }

  rowsOfTask(task: string): LeaderboardRow[] {
    return (this.db.prepare('SELECT row FROM imports WHERE task = ? ORDER BY bundle_digest').pluck().all(task) as string[]).map(
      (t) => JSON.parse(t) as LeaderboardRow,
    );
  }

  tasks(): Array<{ task: string; runs: number }> {
    return this.db.prepare('SELECT task, COUNT(*) AS runs FROM imports GROUP BY task ORDER BY task').all() as Array<{ task: string; runs: number }>;
  }

  count(): number {
    return this.db.prepare('SELECT COUNT(*) FROM imports').pluck().get() as number;
  }

  close(): void {
    this.db.close();
  }
}
