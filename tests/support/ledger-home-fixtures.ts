/**
 * A ledger home with a realistic run's worth of signed events (examples/ledger/sample-run.jsonl, what the run
 * controller writes: tests/support/sample-run.ts), for tests that need a real SQLite ledger file to verify and to
 * tamper with.
 */
import { cpSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ManualClock, SequentialIds } from '@assay/core';
import { LedgerHome, homePaths, type JsonObject, type VerifyDatabaseOptions, initLedgerHome } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { makeTmpDir } from './ledger-fixtures';

export const SAMPLE_RUN = join(__dirname, '..', '..', 'examples', 'ledger', 'sample-run.jsonl');

export function sampleEvents(): Array<{ stream: string; type: string; data: JsonObject }> {
  return readFileSync(SAMPLE_RUN, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { stream: string; type: string; data: JsonObject });
}

let opened = 0;
/** A clock and ids for one writer; every call gets its own id range so reopened ledgers never reuse ids. */
export const deps = (): { clock: ManualClock; ids: SequentialIds } => {
  opened += 1;
  return { clock: new ManualClock('2026-12-01T10:00:00.000Z', 1000), ids: new SequentialIds(`${opened.toString(16).padStart(8, '0')}-0000-4000-8000`) };
};

/**
 * Appends the sample run to an initialised home with its keys, through the ledger's own append (as the run
 * controller, the runtime and the Judge record their events; the generic `assay ledger append` refuses their types).
 * Returns the number of events.
 */
export async function appendSample(home: string, opts: { checkpoint?: boolean } = {}): Promise<number> {
  const h = new LedgerHome(home, deps());
  try {
    for (const e of sampleEvents()) await h.ledger.append(e.stream, [{ type: e.type, data: e.data }]);
    if (opts.checkpoint !== false) await h.ledger.checkpoint();
    return await h.db.events.size();
  } finally {
    await h.close();
  }
}

/** init + the sample run + a checkpoint. Returns the number of events. */
export async function buildSampleHome(home: string, opts: { checkpoint?: boolean } = {}): Promise<number> {
  await initLedgerHome(home, { ...deps(), origin: 'assay.test/ledger' });
  return appendSample(home, opts);
}

export function copyHome(from: string, to: string): void {
  cpSync(from, to, { recursive: true });
}

/** Runs SQL on a home's ledger database with a separate connection, as an attacker with file access would. */
export function tamper(home: string, fn: (db: Database.Database) => void): void {
  const db = new Database(homePaths(home).db);
  try {
    fn(db);
  } finally {
    db.close();
  }
}

/** Verifies a home's ledger with every step, the run's claims included (unless `claims` says otherwise). */
export async function verifyHome(home: string, opts: Partial<VerifyDatabaseOptions> = {}): ReturnType<LedgerHome['verify']> {
  const h = new LedgerHome(home, deps());
  try {
    return await h.verify({ workers: 0, claims: runClaimRules(), ...opts });
  } finally {
    await h.close();
  }
}

/**
 * For a describe block: one pristine sample home, built before its tests, and `fresh()` copies of it to damage, all
 * removed after. Read `pristine` and `total` (events in it) inside tests or hooks, once `beforeAll` has run.
 */
export function sampleHomes(prefix: string): { readonly pristine: string; readonly total: number; readonly dir: string; fresh(): string } {
  let tmp: { dir: string; cleanup(): void } | null = null;
  let total = 0;
  let n = 0;
  const dir = (): string => {
    if (!tmp) throw new Error('sampleHomes: used before beforeAll ran');
    return tmp.dir;
  };
  beforeAll(async () => {
    tmp = makeTmpDir(prefix);
    total = await buildSampleHome(join(tmp.dir, 'pristine'));
  });
  afterAll(() => tmp?.cleanup());
  return {
    get pristine() {
      return join(dir(), 'pristine');
    },
    get total() {
      return total;
    },
    get dir() {
      return dir();
    },
    fresh() {
      const home = join(dir(), `case-${n++}`);
      copyHome(join(dir(), 'pristine'), home);
      return home;
    },
  };
}
