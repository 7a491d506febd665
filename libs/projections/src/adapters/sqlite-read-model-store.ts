/**
 * The read models in SQLite: `<ASSAY_HOME>/projections/read-models.db`, a database of its own (never the ledger's).
 * Schema from `migrations/projections/NNNN_<name>.sql`, applied forward-only the way the ledger's migrations are
 * (each in its own BEGIN IMMEDIATE transaction with its row in `schema_version`; a newer database is refused). Rows
 * are canonical JSON (RFC 8785) so that a rebuild from empty writes the same bytes.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { AssayError } from '@assay/core';
import { applyMigrations, findProjectionMigrationsDir } from './sqlite-migrations';
import { canonicalJson, type JsonValue } from '@assay/ledger';
import type { Baseline } from '@assay/run';
import type { LeaderboardRow } from '../domain/leaderboard';
import { groupKeyOf } from '../domain/leaderboard';
import type { RunSlot } from '../domain/run-projection';
import type { Trajectory } from '../domain/trajectory';
import type { RejudgeView } from '../domain/reports';
import type { ProjectionBatch, ProjectionCheckpoint, ReadModelStore } from '../ports/read-model-store.port';

export { findProjectionMigrationsDir };

/** Canonical JSON of a plain value (undefined fields dropped first). */
export const canonical = (v: unknown): string => canonicalJson(JSON.parse(JSON.stringify(v)) as JsonValue);

export const readModelsPath = (home: string): string => join(home, 'projections', 'read-models.db');

export class SqliteReadModelStore implements ReadModelStore {
  /** Statements prepared once per SQL text: preparing is most of a small read's cost (a read per API request). */
  private readonly statements = new Map<string, Database.Statement>();

  private readonly db: Database.Database;

  /** Opens (creating and migrating when needed) the read models' database. */
  constructor(path: string, migrationsDir: string = findProjectionMigrationsDir()) {
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
    this.db = db;
  }

  private sql(text: string): Database.Statement {
    let s = this.statements.get(text);
    if (!s) {
      s = this.db.prepare(text);
      this.statements.set(text, s);
    }
    return s;
  }

  private static migrate(db: Database.Database, path: string, dir: string): void {
    applyMigrations(db, path, dir, 'delete it to rebuild the read models', (version) => {
      if (version === 1) db.prepare('INSERT INTO projection_checkpoint (id, position, last_hash) VALUES (1, 0, NULL)').run();
    });
  }

  checkpoint(): ProjectionCheckpoint {
    const r = this.sql('SELECT position, last_hash AS lastHash FROM projection_checkpoint WHERE id = 1').get() as ProjectionCheckpoint;
    return { position: r.position, lastHash: r.lastHash };
  }

  slot(run: string): RunSlot | null {
    const t = this.sql('SELECT slot FROM run_slots WHERE run = ?').pluck().get(run) as string | undefined;
    return t === undefined ? null : (JSON.parse(t) as RunSlot);
  }

  apply(batch: ProjectionBatch, expectedFrom: number): void {
    const putSlot = this.sql('INSERT OR REPLACE INTO run_slots (run, slot) VALUES (?, ?)');
    const putRow = this.sql('INSERT OR REPLACE INTO leaderboard_rows (run, task, group_key, row) VALUES (?, ?, ?, ?)');
    const putTraj = this.sql('INSERT OR REPLACE INTO trajectories (run, trajectory) VALUES (?, ?)');
    const putBaseline = this.sql('INSERT OR REPLACE INTO baselines (position, task, baseline) VALUES (?, ?, ?)');
    const putRejudge = this.sql('INSERT OR REPLACE INTO rejudges (position, run, rejudge) VALUES (?, ?, ?)');
    const move = this.sql('UPDATE projection_checkpoint SET position = ?, last_hash = ? WHERE id = 1 AND position = ?');
    this.db
      .transaction(() => {
        for (const s of batch.slots) putSlot.run(s.run, canonical(s));
        for (const r of batch.rows) putRow.run(r.run, r.task, groupKeyOf(r), canonical(r));
        for (const t of batch.trajectories) putTraj.run(t.run, canonical(t));
        for (const b of batch.baselines ?? []) putBaseline.run(b.position, b.task, canonical(b));
        for (const j of batch.rejudges ?? []) putRejudge.run(j.position, j.run, canonical(j));
        const moved = move.run(batch.checkpoint.position, batch.checkpoint.lastHash, expectedFrom);
        if (moved.changes !== 1)
          throw new AssayError('PROJECTIONS_CONFLICT', 'conflict', `the read models moved past position ${expectedFrom} meanwhile (another projector)`);
      })
      .immediate();
  }

  rowsOfTask(task: string): LeaderboardRow[] {
    return (this.sql('SELECT row FROM leaderboard_rows WHERE task = ? ORDER BY run').pluck().all(task) as string[]).map((t) => JSON.parse(t) as LeaderboardRow);
  }

  trajectory(run: string): Trajectory | null {
    const t = this.sql('SELECT trajectory FROM trajectories WHERE run = ?').pluck().get(run) as string | undefined;
    return t === undefined ? null : (JSON.parse(t) as Trajectory);
  }

  baselinesOfTask(task: string): Baseline[] {
    return (this.sql('SELECT baseline FROM baselines WHERE task = ? ORDER BY position').pluck().all(task) as string[]).map((t) => JSON.parse(t) as Baseline);
  }

  rejudgesOfRun(run: string): RejudgeView[] {
    return (this.sql('SELECT rejudge FROM rejudges WHERE run = ? ORDER BY position').pluck().all(run) as string[]).map((t) => JSON.parse(t) as RejudgeView);
  }

  rejudgesOfTask(task: string): RejudgeView[] {
    return (
      this.sql('SELECT rejudge FROM rejudges WHERE run IN (SELECT run FROM leaderboard_rows WHERE task = ?) ORDER BY position').pluck().all(task) as string[]
    ).map((t) => JSON.parse(t) as RejudgeView);
  }

  tasks(): Array<{ task: string; runs: number }> {
    return this.sql('SELECT task, COUNT(*) AS runs FROM leaderboard_rows GROUP BY task ORDER BY task').all() as Array<{ task: string; runs: number }>;
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
      ['rejudges', 'position', 'rejudge'],
    ] as const)
      for (const r of this.sql(`SELECT ${key} AS k, ${col} AS v FROM ${table} ORDER BY ${key}`).all() as Array<{ k: string; v: string }>)
        lines.push(`${table} ${r.k} ${r.v}`);
    return `${lines.join('\n')}\n`;
  }

  close(): void {
    this.db.close();
  }
}
