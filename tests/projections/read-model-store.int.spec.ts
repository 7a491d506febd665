/**
 * The read models' SQLite store on its own: a fresh file starts at position 0, a batch whose expected position is not
 * the stored one is refused as a whole (two projectors cannot both commit it), a file of schema 1 is started over by
 * migration 0002, and a file of a newer schema is refused.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { AssayError } from '@assay/core';
import { canonical, findProjectionMigrationsDir, SqliteReadModelStore, projectRunEvent, leaderboardRow, trajectoryOf, type RunSlot } from '@assay/projections';
import { makeTmpDir } from '../support/ledger-fixtures';
import { asRecords, preamble, sampleVariant } from './projection-fixtures';

let tmp: { dir: string; cleanup(): void };
beforeAll(() => (tmp = makeTmpDir('assay-read-models-')));
afterAll(() => tmp.cleanup());

function slotOf(run: string): RunSlot {
  let slot: RunSlot | null = null;
  for (const e of asRecords([...preamble(), ...sampleVariant({ run })])) slot = e.stream.startsWith('run-') || slot ? projectRunEvent(slot, e) : slot;
  return slot!;
}

describe('SqliteReadModelStore', () => {
  it('starts empty at position 0, applies a batch with its position, refuses a stale one whole', () => {
    const path = join(tmp.dir, 'a.db');
    const store = new SqliteReadModelStore(path);
    const other = new SqliteReadModelStore(path); // a second projector on the same file
    try {
      expect(store.checkpoint()).toEqual({ position: 0, lastHash: null });
      const s = slotOf('r-1');
      store.apply({ slots: [s], rows: [leaderboardRow(s)!], trajectories: [trajectoryOf(s)!], checkpoint: { position: 10, lastHash: 'ab' } }, 0);
      expect(other.checkpoint()).toEqual({ position: 10, lastHash: 'ab' });
      const s2 = slotOf('r-2');
      let e: unknown = null;
      try {
        other.apply({ slots: [s2], rows: [leaderboardRow(s2)!], trajectories: [], checkpoint: { position: 10, lastHash: 'cd' } }, 0);
      } catch (x) {
        e = x;
      }
      expect((e as AssayError).code).toBe('PROJECTIONS_CONFLICT');
      expect(store.slot('r-2')).toBeNull();
      expect(store.rowsOfTask('tiny-optimizer').map((r) => r.run)).toEqual(['r-1']);
      expect(store.trajectory('r-1')!.rounds).toHaveLength(5);
    } finally {
      store.close();
      other.close();
    }
  });

  it('migrating read models of schema 1 (no baselines table) starts them over from position 0, so baselines are not missed', () => {
    const v1 = join(tmp.dir, 'migrations-v1');
    mkdirSync(v1);
    copyFileSync(join(findProjectionMigrationsDir(), '0001_read_models.sql'), join(v1, '0001_read_models.sql'));
    const path = join(tmp.dir, 'old.db');
    new SqliteReadModelStore(path, v1).close();
    // what a schema-1 projector left: a run projected up to position 44 (written as it wrote it)
    const s = slotOf('r-1');
    const db = new Database(path);
    db.prepare('INSERT INTO run_slots (run, slot) VALUES (?, ?)').run('r-1', canonical(s));
    db.prepare('INSERT INTO leaderboard_rows (run, task, group_key, row) VALUES (?, ?, ?, ?)').run('r-1', 'tiny-optimizer', 'k', canonical(leaderboardRow(s)));
    db.prepare('INSERT INTO trajectories (run, trajectory) VALUES (?, ?)').run('r-1', canonical(trajectoryOf(s)));
    db.prepare("UPDATE projection_checkpoint SET position = 44, last_hash = 'ab'").run();
    db.close();
    const store = new SqliteReadModelStore(path);
    try {
      expect(store.checkpoint()).toEqual({ position: 0, lastHash: null });
      expect(store.slot('r-1')).toBeNull();
      expect(store.rowsOfTask('tiny-optimizer')).toEqual([]);
      expect(store.trajectory('r-1')).toBeNull();
      expect(store.baselinesOfTask('tiny-optimizer')).toEqual([]);
    } finally {
      store.close();
    }
  });

  it('refuses a database of a newer schema', () => {
    const path = join(tmp.dir, 'b.db');
    new SqliteReadModelStore(path).close();
    const db = new Database(path);
    db.prepare("INSERT INTO schema_version (version, name, sha256) VALUES (99, 'future', 'x')").run();
    db.close();
    expect(() => new SqliteReadModelStore(path)).toThrow(expect.objectContaining({ code: 'PROJECTIONS_SCHEMA_TOO_NEW', kind: 'refused' }));
  });
});
