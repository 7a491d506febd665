/**
 * The read models in SQLite: `<ASSAY_HOME>/projections/read-models.db`, a database of its own (never the ledger's).
 * Schema from `migrations/projections/NNNN_<name>.sql`, applied forward-only the way the ledger's migrations are
 * (each in its own BEGIN IMMEDIATE transaction with its row in `schema_version`; a newer database is refused). Rows
 * are canonical JSON (RFC 8785) so that a rebuild from empty writes the same bytes.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { AssayError } from '@assay/core';
import { canonicalJson, type JsonValue } from '@assay/ledger';
import type { Baseline } from '@assay/run';
import type { LeaderboardRow } from '../domain/leaderboard';
import { groupKeyOf } from '../domain/leaderboard';
import type { RunSlot } from '../domain/run-projection';
import type { Trajectory } from '../domain/trajectory';
import type { ProjectionBatch, ProjectionCheckpoint, ReadModelStore } from '../ports/read-model-store.port';

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

/** Canonical JSON of a plain value (undefined fields dropped first). */
export const canonical = (v: unknown): string => canonicalJson(JSON.parse(JSON.stringify(v)) as JsonValue);

export const readModelsPath = (home: string): string => join(home, 'projections', 'read-models.db');

export class SqliteReadModelStore implements ReadModelStore {
  private constructor(private readonly db: Database.Database) {}

  static open(path: string, migrationsDir: string = findProjectionMigrationsDir()): SqliteReadModelStore {
    mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = FULL');
      db.pragma('busy_timeout = 10000');
      SqliteReadModelStore.migrate(db, path, migrationsDir);
    } catch (e) {
      db.close();
      throw e;
    }
    return new SqliteReadModelStore(db);
  }

  private static migrate(db: Database.Database, path: string, dir: string): void {
    const migrations = loadMigrations(dir);
    db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, sha256 TEXT NOT NULL)');
    const current = (db.prepare('SELECT COALESCE(MAX(version), 0) FROM schema_version').pluck().get() as number) ?? 0;
    if (current > migrations.length)
      throw new AssayError(
        'PROJECTIONS_SCHEMA_TOO_NEW',
        'refused',
        `${path} has schema version ${current}, newer than this build's ${migrations.length}; delete it to rebuild the read models`,
      );
    for (const m of migrations.slice(current)) {
      db.exec('BEGIN IMMEDIATE');
      try {
        const again = db.prepare('SELECT COALESCE(MAX(version), 0) FROM schema_version').pluck().get() as number;
        if (again < m.version) {
          db.exec(m.sql);
          db.prepare('INSERT INTO schema_version (version, name, sha256) VALUES (?, ?, ?)').run(m.version, m.name, m.sha256);
          if (m.version === 1) db.prepare('INSERT INTO projection_checkpoint (id, position, last_hash) VALUES (1, 0, NULL)').run();
        }
        db.exec('COMMIT');
      } catch (e) {
        db.exec('ROLLBACK');
        throw e;
      }
    }
  }

  checkpoint(): ProjectionCheckpoint {
    const r = this.db.prepare('SELECT position, last_hash AS lastHash FROM projection_checkpoint WHERE id = 1').get() as ProjectionCheckpoint;
    return { position: r.position, lastHash: r.lastHash };
  }

  slot(run: string): RunSlot | null {
    const t = this.db.prepare('SELECT slot FROM run_slots WHERE run = ?').pluck().get(run) as string | undefined;
    return t === undefined ? null : (JSON.parse(t) as RunSlot);
  }

  apply(batch: ProjectionBatch, expectedFrom: number): void {
    const putSlot = this.db.prepare('INSERT OR REPLACE INTO run_slots (run, slot) VALUES (?, ?)');
    const putRow = this.db.prepare('INSERT OR REPLACE INTO leaderboard_rows (run, task, group_key, row) VALUES (?, ?, ?, ?)');
    const putTraj = this.db.prepare('INSERT OR REPLACE INTO trajectories (run, trajectory) VALUES (?, ?)');
    const putBaseline = this.db.prepare('INSERT OR REPLACE INTO baselines (position, task, baseline) VALUES (?, ?, ?)');
    const move = this.db.prepare('UPDATE projection_checkpoint SET position = ?, last_hash = ? WHERE id = 1 AND position = ?');
    this.db
      .transaction(() => {
        for (const s of batch.slots) putSlot.run(s.run, canonical(s));
        for (const r of batch.rows) putRow.run(r.run, r.task, groupKeyOf(r), canonical(r));
        for (const t of batch.trajectories) putTraj.run(t.run, canonical(t));
        for (const b of batch.baselines ?? []) putBaseline.run(b.position, b.task, canonical(b));
        const moved = move.run(batch.checkpoint.position, batch.checkpoint.lastHash, expectedFrom);
        if (moved.changes !== 1)
          throw new AssayError('PROJECTIONS_CONFLICT', 'conflict', `the read models moved past position ${expectedFrom} meanwhile (another projector)`);
      })
      .immediate();
  }

  rowsOfTask(task: string): LeaderboardRow[] {
    return (this.db.prepare('SELECT row FROM leaderboard_rows WHERE task = ? ORDER BY run').pluck().all(task) as string[]).map(
      (t) => JSON.parse(t) as LeaderboardRow,
    );
  }

  trajectory(run: string): Trajectory | null {
    const t = this.db.prepare('SELECT trajectory FROM trajectories WHERE run = ?').pluck().get(run) as string | undefined;
    return t === undefined ? null : (JSON.parse(t) as Trajectory);
  }

  baselinesOfTask(task: string): Baseline[] {
    return (this.db.prepare('SELECT baseline FROM baselines WHERE task = ? ORDER BY position').pluck().all(task) as string[]).map(
      (t) => JSON.parse(t) as Baseline,
    );
  }

  dump(): string {
    const lines: string[] = [];
    const cp = this.checkpoint();
    lines.push(`checkpoint ${cp.position} ${cp.lastHash ?? '-'}`);
    for (const [table, key, col] of [
      ['run_slots', 'run', 'slot'],
      ['leaderboard_rows', 'run', 'row'],
      ['trajectories', 'run', 'trajectory'],
      ['baselines', 'position', 'baseline'],
    ] as const)
      for (const r of this.db.prepare(`SELECT ${key} AS k, ${col} AS v FROM ${table} ORDER BY ${key}`).all() as Array<{ k: string; v: string }>)
        lines.push(`${table} ${r.k} ${r.v}`);
    return `${lines.join('\n')}\n`;
  }

  close(): void {
    this.db.close();
  }
}
