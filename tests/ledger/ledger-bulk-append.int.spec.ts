/**
 * Bulk appends through the ledger library (what `assay ledger append --file` does): one write transaction, all or
 * none, each append decided as it would be alone; an id re-sent with other content is a conflict, in bulk and single
 * appends alike, on both stores; user-facing revision-conflict wording; position errors of prove and consistency.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { isAssayError } from '@assay/core';
import { LedgerHome, MemoryEventStore, SqliteLedgerDatabase, type AppendRequest, type ExpectedRevision, type NewEvent, initLedgerHome } from '@assay/ledger';
import { deps } from '../support/ledger-home-fixtures';
import { proposed, zeroSigSeal } from '../support/ledger-fixtures';
import { scratchDirs } from '../support/scratch';

const dirs = scratchDirs('assay-bulk-append-');

async function home(): Promise<LedgerHome> {
  const dir = dirs.fresh('home');
  await initLedgerHome(dir, { ...deps(), origin: 'assay.test/bulk' });
  return new LedgerHome(dir, deps());
}

async function caught(p: Promise<unknown>): Promise<{ code: string; kind: string; message: string; details: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    if (!isAssayError(e)) throw e;
    return e as unknown as { code: string; kind: string; message: string; details: Record<string, unknown> };
  }
  throw new Error('expected a rejection, but it resolved');
}

const note = (text: string, id: string = randomUUID()): NewEvent => ({ type: 'Note', data: { text }, id });
type Item = { stream: string; events: NewEvent[]; expected?: ExpectedRevision; where?: string };
const lines = (n: number, streams = 3): Item[] =>
  Array.from({ length: n }, (_, i) => ({ stream: `note-s${i % streams}`, events: [note(`line ${i}`)], where: `f.jsonl:${i + 1}` }));

describe('Ledger.appendGenericMany on SQLite', () => {
  it('writes every append in one transaction, in order, and a retry of the same items is all idempotent', async () => {
    const h = await home();
    try {
      const items = lines(1200);
      const before = { ...h.db.events.stats };
      const ticks: number[] = [];
      const r = await h.ledger.appendGenericMany(items, (d) => ticks.push(d));
      expect(h.db.events.stats.transactions - before.transactions).toBe(1);
      expect(r.map((x) => x.lastPosition)).toEqual(items.map((_, i) => 3 + i));
      expect(r.every((x) => !x.idempotent)).toBe(true);
      expect(ticks[ticks.length - 1]).toBe(1200);
      expect(await h.db.events.size()).toBe(1203);
      const again = await h.ledger.appendGenericMany(items);
      expect(again.every((x) => x.idempotent)).toBe(true);
      expect(again.map((x) => x.lastPosition)).toEqual(r.map((x) => x.lastPosition));
      expect(await h.db.events.size()).toBe(1203);
    } finally {
      await h.db.close();
    }
  });

  it('is all or none: a failing line writes nothing and the error names it', async () => {
    const h = await home();
    try {
      await h.ledger.appendGeneric('note-s1', [note('exists')]);
      const items = lines(600);
      items[400] = { ...items[400]!, stream: 'note-s1', expected: 'no_stream' };
      const err = await caught(h.ledger.appendGenericMany(items));
      expect(err.code).toBe('LEDGER_WRONG_EXPECTED_REVISION');
      expect(err.kind).toBe('conflict');
      // the lines before it in the same transaction already appended to note-s1
      expect(err.message).toBe('f.jsonl:401: stream "note-s1" already exists, at revision 133 (expected it not to exist)');
      expect(await h.db.events.size()).toBe(4);
    } finally {
      await h.db.close();
    }
  });

  it('an id re-sent with other data or type is LEDGER_EVENT_ID_CONFLICT (bulk and single); the same event is idempotent', async () => {
    const h = await home();
    try {
      const id = randomUUID();
      await h.ledger.appendGeneric('note-a', [note('first', id)]);
      const same = await h.ledger.appendGeneric('note-a', [note('first', id)]);
      expect(same.idempotent).toBe(true);
      const single = await caught(h.ledger.appendGeneric('note-a', [note('second', id)]));
      expect(single).toMatchObject({ code: 'LEDGER_EVENT_ID_CONFLICT', kind: 'conflict' });
      expect(single.message).toContain(id);
      expect(single.message).toContain('different data');
      const bulk = await caught(h.ledger.appendGenericMany([...lines(5), { stream: 'note-a', events: [note('second', id)], where: 'f.jsonl:6' }]));
      expect(bulk.code).toBe('LEDGER_EVENT_ID_CONFLICT');
      expect(bulk.message).toMatch(/^f\.jsonl:6: event id /);
      const elsewhere = await caught(h.ledger.appendGeneric('note-b', [note('first', id)]));
      expect(elsewhere.code).toBe('LEDGER_DUPLICATE_EVENT_ID');
      expect(await h.db.events.size()).toBe(4);
    } finally {
      await h.db.close();
    }
  });

  it('refuses a reserved type or stream on any line before writing anything, naming the line', async () => {
    const h = await home();
    try {
      const items = lines(10);
      items[7] = { stream: 'run-x', events: [note('forged')], where: 'f.jsonl:8' };
      const err = await caught(h.ledger.appendGenericMany(items));
      expect(err.code).toBe('LEDGER_STREAM_RESERVED');
      expect(err.message).toMatch(/^f\.jsonl:8: /);
      expect(await h.db.events.size()).toBe(3);
    } finally {
      await h.db.close();
    }
  });

  it('position errors: prove and consistency past the end are both not_found; sizes out of order are invalid input', async () => {
    const h = await home();
    try {
      expect(await caught(h.ledger.inclusionProof(99, { signIfNeeded: true }))).toMatchObject({ code: 'LEDGER_POSITION_OUT_OF_RANGE', kind: 'not_found' });
      expect(await caught(h.ledger.consistencyProof(1, 99))).toMatchObject({ code: 'LEDGER_POSITION_OUT_OF_RANGE', kind: 'not_found' });
      expect(await caught(h.ledger.consistencyProof(99))).toMatchObject({ code: 'LEDGER_POSITION_OUT_OF_RANGE', kind: 'not_found' });
      expect(await caught(h.ledger.consistencyProof(0, 2))).toMatchObject({ code: 'LEDGER_BAD_TREE_SIZES', kind: 'invalid_input' });
      expect(await caught(h.ledger.consistencyProof(3, 2))).toMatchObject({ code: 'LEDGER_BAD_TREE_SIZES', kind: 'invalid_input' });
    } finally {
      await h.db.close();
    }
  });
});

describe('waiting for another writer', () => {
  it('past the busy timeout: LEDGER_DB_UNAVAILABLE (unavailable) saying the database is busy and naming it', async () => {
    const file = join(dirs.fresh('busy'), 'ledger.db');
    mkdirSync(dirname(file));
    const db = new SqliteLedgerDatabase(file, { busyTimeoutMs: 200 });
    const other = new Database(file);
    try {
      other.exec('BEGIN IMMEDIATE');
      const err = await caught(db.events.appendMany!([{ stream: 'note-a', expected: 'any', events: [proposed('busy')], seal: zeroSigSeal }]));
      expect(err).toMatchObject({ code: 'LEDGER_DB_UNAVAILABLE', kind: 'unavailable' });
      expect(err.message).toContain(file);
      expect(err.message).toMatch(/busy/);
      other.exec('ROLLBACK');
      expect((await db.events.appendMany!([{ stream: 'note-a', expected: 'any', events: [proposed('busy')], seal: zeroSigSeal }]))[0]?.lastPosition).toBe(0);
    } finally {
      other.close();
      await db.close();
    }
  });
});

describe('MemoryEventStore.appendMany', () => {
  const req = (stream: string, expected: ExpectedRevision, label: string): AppendRequest => ({
    stream,
    expected,
    events: [proposed(label)],
    seal: zeroSigSeal,
  });

  it('undoes every request of the call on a failure, and names the failing request', async () => {
    const store = new MemoryEventStore();
    await store.append(req('note-a', 'no_stream', 'a0'));
    const err = await caught(store.appendMany!([req('note-b', 'any', 'b0'), req('note-c', 'any', 'c0'), req('note-a', 'no_stream', 'a1')]));
    expect(err.code).toBe('LEDGER_WRONG_EXPECTED_REVISION');
    expect(err.details['index']).toBe(2);
    expect(await store.size()).toBe(1);
    expect(await store.streamRevision('note-b')).toBeNull();
    const ok = await store.appendMany!([req('note-b', 'any', 'b0'), req('note-a', 0, 'a1')]);
    expect(ok.map((r) => r.lastPosition)).toEqual([1, 2]);
  });

  it('an id re-sent with other data is a conflict here too', async () => {
    const store = new MemoryEventStore();
    const first = proposed('x');
    await store.append({ stream: 'note-a', expected: 'any', events: [first], seal: zeroSigSeal });
    const err = await caught(store.append({ stream: 'note-a', expected: 'any', events: [{ ...first, data: { other: true } }], seal: zeroSigSeal }));
    expect(err.code).toBe('LEDGER_EVENT_ID_CONFLICT');
  });
});
