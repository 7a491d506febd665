/**
 * The projector over a real signed SQLite ledger (no mocks): rebuilds from empty are byte-identical whatever the
 * batch size, a catch-up after more events equals a rebuild, a projector SIGKILLed mid-way resumes to the same read
 * models, nothing past the latest signed checkpoint is projected, a ledger that does not verify is refused with
 * nothing projected, and read models of another ledger are refused.
 */
import { join } from 'node:path';
import { randomIds, systemClock, AssayError } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { catchUp, leaderboardOf, SqliteReadModelStore, type CatchUpOptions } from '@assay/projections';
import { spawnTs } from '../support/child-process';
import { makeTmpDir } from '../support/ledger-fixtures';
import { copyHome, tamper, verifyHome } from '../support/ledger-home-fixtures';
import { appendTo, baselineEvents, homeWith, noValidRun, preamble, sampleVariant } from './projection-fixtures';

jest.setTimeout(120_000);

const FP_B = 'sha256:' + 'b'.repeat(64);

let tmp: { dir: string; cleanup(): void };
let home: string;
let total: number;
let n = 0;
const freshDb = (): string => join(tmp.dir, `rm-${n++}.db`);

async function project(h: string, db: string, o: CatchUpOptions = {}): Promise<{ dump: string; result: Awaited<ReturnType<typeof catchUp>> }> {
  const lh = new LedgerHome(h, { clock: systemClock, ids: randomIds, readOnly: true });
  const store = new SqliteReadModelStore(db);
  try {
    const result = await catchUp(lh, store, { workers: 0, ...o });
    return { dump: store.dump(), result };
  } finally {
    store.close();
    await lh.close();
  }
}

beforeAll(async () => {
  tmp = makeTmpDir('assay-projections-');
  home = join(tmp.dir, 'home');
  total = await homeWith(home, [
    ...preamble(),
    ...sampleVariant({ run: 'r-a' }),
    ...sampleVariant({ run: 'r-b', fingerprint: FP_B, scores: [0.3, 0.2, 0.1] }),
    ...noValidRun('r-none'),
    ...baselineEvents({ kind: 'start', scores: [0.95, 0.9, 0.92] }),
    ...sampleVariant({ run: 'r-tie' }),
    // a newer start baseline of the same protocol: the one rows are compared with
    ...baselineEvents({ kind: 'start', scores: [0.5, 0.45, 0.48] }),
  ]);
});
afterAll(() => tmp.cleanup());

describe('projector', () => {
  it('the fixture ledger verifies (claims included)', async () => {
    expect((await verifyHome(home)).ok).toBe(true);
  });

  it('rebuilds from empty are byte-identical, whatever the batch size', async () => {
    const a = await project(home, freshDb());
    const b = await project(home, freshDb());
    const c = await project(home, freshDb(), { batchSize: 7 });
    expect(a.result).toMatchObject({ from: 0, to: total, checkpointSize: total, verified: true });
    expect(b.dump).toBe(a.dump);
    expect(c.dump).toBe(a.dump);
    expect(a.dump).toContain('"source":"ledger"');
    expect(a.dump.split('\n').filter((l) => l.startsWith('baselines '))).toHaveLength(2);
    // nothing new: no verification, nothing written
    const db = freshDb();
    await project(home, db);
    const again = await project(home, db);
    expect(again.result).toMatchObject({ from: total, to: total, verified: false });
  });

  it('stores the leaderboard grouped by fingerprint and ranked', async () => {
    const db = freshDb();
    await project(home, db);
    const store = new SqliteReadModelStore(db);
    try {
      const groups = leaderboardOf(store, 'tiny-optimizer');
      expect(groups.map((g) => [g.fingerprint === FP_B, g.rows.map((r) => [r.run, r.rank])])).toEqual([
        [
          false,
          [
            ['r-a', 1],
            ['r-tie', 2],
            ['r-none', null],
          ],
        ],
        [true, [['r-b', 1]]],
      ]);
      expect(leaderboardOf(store, 'no-such-task')).toEqual([]);
      // the latest matched start baseline (0.45-0.5) is the one shown and compared; r-a's 0.433 lies below it
      expect(groups[0]!.baselines.start).toMatchObject({ median: 0.48, min: 0.45, max: 0.5, completed: 3 });
      expect(groups[0]!.rows[0]!.vsBaseline).toMatchObject({ matched: true, verdict: 'improvement' });
      expect(groups[1]!.baselines).toEqual({ start: null, oracle: null });
      expect(groups[1]!.rows[0]!.vsBaseline).toMatchObject({ matched: false, reason: expect.stringContaining('another protocol fingerprint') });
      expect(store.trajectory('r-a')!.rounds.map((r) => r.bestSoFar)).toEqual([0.912, 0.574, 0.574, 0.574, 0.433]);
    } finally {
      store.close();
    }
  });

  it('projects only up to the latest signed checkpoint, and catches up incrementally to what a rebuild gives', async () => {
    const h = join(tmp.dir, 'growing');
    copyHome(home, h);
    const db = freshDb();
    await project(h, db);
    const unsigned = await appendTo(h, sampleVariant({ run: 'r-late', scores: [0.2, 0.2, 0.2] }), { checkpoint: false });
    const before = await project(h, db);
    expect(before.result).toMatchObject({ from: total, to: total });
    expect(before.dump).not.toContain('r-late');
    const size = await appendTo(h, [], { checkpoint: true });
    expect(size).toBe(unsigned);
    const after = await project(h, db, { batchSize: 5 });
    expect(after.result).toMatchObject({ from: total, to: size });
    expect(after.dump).toContain('r-late');
    expect(after.dump).toBe((await project(h, freshDb())).dump);
  });

  it('a projector SIGKILLed mid-way resumes without skipping or double-applying', async () => {
    const db = freshDb();
    const child = spawnTs('tests/projections/projector-child.ts', [home, db, '3', '150']);
    let out = '';
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const closed = new Promise<void>((r) => child.on('close', () => r()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`child never reached batch 4: ${out} ${err}`)), 60_000);
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if ((out.match(/^batch /gm) ?? []).length >= 4) {
          clearTimeout(timer);
          child.kill('SIGKILL');
          resolve();
        }
      });
    });
    await closed;
    expect(out).not.toContain('done');
    const store = new SqliteReadModelStore(db);
    const killedAt = store.checkpoint().position;
    store.close();
    expect(killedAt).toBeGreaterThanOrEqual(12);
    expect(killedAt).toBeLessThan(total);
    const resumed = await project(home, db, { batchSize: 2 });
    expect(resumed.result.from).toBe(killedAt);
    expect(resumed.dump).toBe((await project(home, freshDb())).dump);
  });

  it('refuses a ledger that does not verify, projecting nothing', async () => {
    const h = join(tmp.dir, 'tampered');
    copyHome(home, h);
    tamper(h, (db) => {
      // a better score for r-a's round 1, in place: same length, the signature no longer matches
      const rows = db.prepare('SELECT position, bytes FROM events ORDER BY position').all() as Array<{ position: number; bytes: Buffer }>;
      const row = rows.find((r) => r.bytes.toString('utf8').includes('"primaryScore":0.912'))!;
      const bytes = Buffer.from(row.bytes.toString('utf8').replace('"primaryScore":0.912', '"primaryScore":0.012'), 'utf8');
      db.prepare('UPDATE events SET bytes = ? WHERE position = ?').run(bytes, row.position);
    });
    const db = freshDb();
    const e = await project(h, db).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AssayError);
    expect((e as AssayError).code).toBe('LEDGER_VERIFICATION_FAILED');
    expect((e as AssayError).kind).toBe('integrity');
    const store = new SqliteReadModelStore(db);
    expect(store.checkpoint().position).toBe(0);
    expect(store.dump()).toBe('checkpoint 0 -\n');
    store.close();
  });

  it('refuses read models projected from another ledger', async () => {
    const db = freshDb();
    await project(home, db);
    const other = join(tmp.dir, 'other');
    await homeWith(other, [...preamble(), ...sampleVariant({ run: 'r-other' }), ...sampleVariant({ run: 'r-other2' })]);
    const e = await project(other, db).catch((x: unknown) => x);
    expect((e as AssayError).code).toBe('PROJECTIONS_LEDGER_MISMATCH');
  });
});
