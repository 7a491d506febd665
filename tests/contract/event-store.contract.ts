/**
 * The EventStore contract: written only against the port, so every adapter (memory, SQLite, EventStoreDB) runs it
 * unchanged. Append semantics follow EventStoreDB (expected revisions, idempotent retries by event id).
 */
import { createHash } from 'node:crypto';
import { isAssayError } from '@assay/core';
import { ZERO_HASH } from '../../libs/ledger/src/domain/envelope';
import type {
  AppendRequest,
  AppendResult,
  EventStore,
  ExpectedRevision,
  ProposedEvent,
  RecordedEvent,
  Seal,
  SealInput,
} from '../../libs/ledger/src/ports/event-store.port';
import { collect, envelopeOf, hex, proposed, proposedMany, waitFor, zeroSigSeal } from '../support/ledger-fixtures';

export interface EventStoreUnderTest {
  store: EventStore;
  cleanup(): Promise<void>;
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** Asserts that a promise rejects with an AssayError of this code (and returns it). */
async function rejectsWith(p: Promise<unknown>, code: string): Promise<{ code: string; kind: string; details: Record<string, unknown> }> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  if (err === undefined) throw new Error(`expected a rejection with ${code}, but it resolved`);
  if (!isAssayError(err)) throw new Error(`expected an AssayError ${code}, got ${String(err)}`);
  expect(err.code).toBe(code);
  return err as unknown as { code: string; kind: string; details: Record<string, unknown> };
}

export function eventStoreContract(name: string, make: () => Promise<EventStoreUnderTest>): void {
  describe(`EventStore contract: ${name}`, () => {
    let under: EventStoreUnderTest;
    let store: EventStore;

    beforeEach(async () => {
      under = await make();
      store = under.store;
    });
    afterEach(async () => {
      await under.cleanup();
    });

    const append = (stream: string, expected: ExpectedRevision, events: ProposedEvent[], seal: Seal = zeroSigSeal): Promise<AppendResult> =>
      store.append({ stream, expected, events, seal });

    async function streamIds(stream: string): Promise<string[]> {
      return (await collect(store.readStream(stream))).map((e) => e.id);
    }

    async function everything(): Promise<RecordedEvent[]> {
      return (await collect(store.readAll())).flat();
    }

    describe('append', () => {
      it('appends a new stream with no_stream: revisions and positions from 0, hash = SHA-256(bytes)', async () => {
        const r = await append('run-a', 'no_stream', proposedMany('a', 3));
        expect(r).toMatchObject({ stream: 'run-a', nextExpectedRevision: 2, lastPosition: 2, idempotent: false });
        expect(r.events.map((e) => [e.stream, e.revision, e.position, e.type])).toEqual([
          ['run-a', 0, 0, 'Note'],
          ['run-a', 1, 1, 'Note'],
          ['run-a', 2, 2, 'Note'],
        ]);
        expect(r.events.map((e) => e.id)).toEqual(proposedMany('a', 3).map((e) => e.id));
        for (const e of r.events) expect(hex(e.hash)).toBe(sha(e.bytes));
        expect(await store.streamRevision('run-a')).toBe(2);
        expect(await store.size()).toBe(3);
      });

      it('stores the exact bytes the seal returned, and hands the seal the fixed fields (no signer)', async () => {
        const inputs: SealInput[] = [];
        const outputs: Buffer[] = [];
        const seal: Seal = (input) => {
          inputs.push(JSON.parse(JSON.stringify(input)) as SealInput);
          const b = Buffer.from(zeroSigSeal(input));
          outputs.push(Buffer.from(b));
          return b;
        };
        await append('run-x', 'no_stream', [proposed('x0')]);
        const events = [proposed('s0', { n: 1 }, 'TaskRegistered'), proposed('s1', { nested: { a: [1, 'b'] } })];
        const r = await append('run-s', 'no_stream', events, seal);
        expect(inputs).toEqual([
          {
            type: 'TaskRegistered',
            data: events[0]!.data,
            stream: 'run-s',
            revision: 0,
            position: 1,
            id: events[0]!.id,
            time: events[0]!.time,
            prev: ZERO_HASH,
          },
          { type: 'Note', data: events[1]!.data, stream: 'run-s', revision: 1, position: 2, id: events[1]!.id, time: events[1]!.time, prev: sha(outputs[0]!) },
        ]);
        expect(r.events.map((e) => Buffer.from(e.bytes))).toEqual(outputs);
        const read = await collect(store.readStream('run-s'));
        expect(read.map((e) => Buffer.from(e.bytes))).toEqual(outputs);
        expect(read.map((e) => e.type)).toEqual(['TaskRegistered', 'Note']);
      });

      it('keeps its own copy of the bytes: changing the seal buffer or a read result changes nothing stored', async () => {
        let handedOut: Buffer | undefined;
        await append('run-c', 'no_stream', [proposed('c0')], (i) => (handedOut = Buffer.from(zeroSigSeal(i))));
        const original = Buffer.from(handedOut!);
        handedOut!.fill(0x41);
        const [first] = await collect(store.readStream('run-c'));
        expect(Buffer.from(first!.bytes)).toEqual(original);
        first!.bytes.fill(0x42);
        const [again] = await collect(store.readStream('run-c'));
        expect(Buffer.from(again!.bytes)).toEqual(original);
      });

      describe('expected revision', () => {
        it('any: creates a stream and appends to an existing one', async () => {
          await append('run-a', 'any', [proposed('a0')]);
          const r = await append('run-a', 'any', [proposed('a1')]);
          expect(r.nextExpectedRevision).toBe(1);
        });

        it('no_stream: refused once the stream exists', async () => {
          await append('run-a', 'no_stream', [proposed('a0')]);
          const err = await rejectsWith(append('run-a', 'no_stream', [proposed('a1')]), 'LEDGER_WRONG_EXPECTED_REVISION');
          expect(err.kind).toBe('conflict');
          expect(err.details).toEqual({ stream: 'run-a', expected: 'no_stream', actual: 0 });
        });

        it('stream_exists: refused for a missing stream, accepted for an existing one', async () => {
          const err = await rejectsWith(append('run-a', 'stream_exists', [proposed('a0')]), 'LEDGER_WRONG_EXPECTED_REVISION');
          expect(err.details).toEqual({ stream: 'run-a', expected: 'stream_exists', actual: null });
          expect(await store.streamRevision('run-a')).toBeNull();
          await append('run-a', 'no_stream', [proposed('a0')]);
          const r = await append('run-a', 'stream_exists', [proposed('a1')]);
          expect(r.events[0]!.revision).toBe(1);
        });

        it('n: accepted when the stream is at revision n', async () => {
          await append('run-a', 'no_stream', proposedMany('a', 3));
          const r = await append('run-a', 2, [proposed('a3')]);
          expect(r).toMatchObject({ nextExpectedRevision: 3, lastPosition: 3 });
        });

        it('n: refused when the stream is behind, ahead, or missing; nothing is written', async () => {
          await append('run-a', 'no_stream', proposedMany('a', 3));
          for (const expected of [1, 3, 0, 100]) {
            const err = await rejectsWith(append('run-a', expected, [proposed(`x${expected}`)]), 'LEDGER_WRONG_EXPECTED_REVISION');
            expect(err.details).toEqual({ stream: 'run-a', expected, actual: 2 });
          }
          const missing = await rejectsWith(append('run-b', 0, [proposed('b0')]), 'LEDGER_WRONG_EXPECTED_REVISION');
          expect(missing.details).toEqual({ stream: 'run-b', expected: 0, actual: null });
          expect(await store.size()).toBe(3);
          expect(await store.streamRevision('run-b')).toBeNull();
        });
      });

      describe('idempotency', () => {
        it('a retry of the same ids with the same expected revision succeeds without duplicates and without sealing', async () => {
          const batch = proposedMany('a', 3);
          const first = await append('run-a', 'no_stream', batch);
          let sealed = 0;
          const counting: Seal = (i) => {
            sealed++;
            return zeroSigSeal(i);
          };
          const retry = await append('run-a', 'no_stream', batch, counting);
          expect(sealed).toBe(0);
          expect(retry.idempotent).toBe(true);
          expect(retry.nextExpectedRevision).toBe(first.nextExpectedRevision);
          expect(retry.lastPosition).toBe(first.lastPosition);
          expect(retry.events.map((e) => [e.position, e.revision, e.id, hex(e.hash)])).toEqual(
            first.events.map((e) => [e.position, e.revision, e.id, hex(e.hash)]),
          );
          expect(await store.size()).toBe(3);
          expect(await streamIds('run-a')).toEqual(batch.map((e) => e.id));
        });

        it('a retry of an earlier batch is idempotent with its own expected revision or any, even after later appends', async () => {
          await append('run-a', 'no_stream', proposedMany('a', 2));
          const second = proposedMany('b', 2);
          await append('run-a', 1, second);
          await append('run-a', 3, [proposed('c')]);
          const r1 = await append('run-a', 1, second);
          expect(r1).toMatchObject({ idempotent: true, nextExpectedRevision: 3, lastPosition: 3 });
          const r2 = await append('run-a', 'any', second);
          expect(r2).toMatchObject({ idempotent: true, nextExpectedRevision: 3 });
          const r3 = await append('run-a', 'stream_exists', second);
          expect(r3.idempotent).toBe(true);
          expect(await store.size()).toBe(5);
        });

        it('a retry whose expected revision does not name where the run is stored is a wrong expected revision', async () => {
          const first = proposedMany('a', 2);
          await append('run-a', 'no_stream', first);
          const second = proposedMany('b', 2);
          await append('run-a', 1, second);
          await rejectsWith(append('run-a', 0, second), 'LEDGER_WRONG_EXPECTED_REVISION');
          await rejectsWith(append('run-a', 'no_stream', second), 'LEDGER_WRONG_EXPECTED_REVISION');
          await rejectsWith(append('run-a', 5, first), 'LEDGER_WRONG_EXPECTED_REVISION');
          expect(await store.size()).toBe(4);
        });

        it('a partial overlap (some ids stored, some new) is a wrong expected revision and writes nothing', async () => {
          const batch = proposedMany('a', 3);
          await append('run-a', 'no_stream', batch);
          const overlap = [batch[2]!, proposed('new-1')];
          const err = await rejectsWith(append('run-a', 'any', overlap), 'LEDGER_WRONG_EXPECTED_REVISION');
          expect(err.details).toMatchObject({ stream: 'run-a', actual: 2 });
          await rejectsWith(append('run-a', 2, overlap), 'LEDGER_WRONG_EXPECTED_REVISION');
          expect(await store.size()).toBe(3);
          expect(await streamIds('run-a')).toEqual(batch.map((e) => e.id));
        });

        it('stored ids out of order or with a gap are not a retry: wrong expected revision', async () => {
          const batch = proposedMany('a', 3);
          await append('run-a', 'no_stream', batch);
          await rejectsWith(append('run-a', 'any', [batch[0]!, batch[2]!]), 'LEDGER_WRONG_EXPECTED_REVISION');
          await rejectsWith(append('run-a', 'any', [batch[1]!, batch[0]!]), 'LEDGER_WRONG_EXPECTED_REVISION');
          // a contiguous sub-run is a retry of those events
          const sub = await append('run-a', 'any', [batch[1]!, batch[2]!]);
          expect(sub).toMatchObject({ idempotent: true, nextExpectedRevision: 2 });
          expect(await store.size()).toBe(3);
        });

        it('an id already stored in another stream is a duplicate event id, and nothing is written', async () => {
          const e = proposed('shared');
          await append('run-a', 'no_stream', [e]);
          const err = await rejectsWith(append('run-b', 'any', [proposed('b0'), e]), 'LEDGER_DUPLICATE_EVENT_ID');
          expect(err.kind).toBe('conflict');
          expect(err.details).toMatchObject({ id: e.id, stream: 'run-b', storedIn: 'run-a' });
          expect(await store.streamRevision('run-b')).toBeNull();
          expect(await store.size()).toBe(1);
        });

        it('a retry of an id with another type or other data is LEDGER_EVENT_ID_CONFLICT, and nothing is written', async () => {
          const e = proposed('x');
          await append('run-a', 'no_stream', [e]);
          const data = await rejectsWith(append('run-a', 'any', [{ ...e, data: { label: 'x', changed: true } }]), 'LEDGER_EVENT_ID_CONFLICT');
          expect(data.kind).toBe('conflict');
          expect(data.details).toMatchObject({ id: e.id, stream: 'run-a', revision: 0, position: 0, differs: 'data' });
          await rejectsWith(append('run-a', 'any', [{ ...e, type: 'Other' }]), 'LEDGER_EVENT_ID_CONFLICT');
          expect((await append('run-a', 'no_stream', [e])).idempotent).toBe(true);
          expect(await store.size()).toBe(1);
        });
      });

      describe('appendMany (when the adapter offers it)', () => {
        it('writes every request in order, each decided as alone; a failure undoes all and names the request', async () => {
          if (!store.appendMany) return;
          const req = (stream: string, expected: ExpectedRevision, e: ProposedEvent): AppendRequest => ({ stream, expected, events: [e], seal: zeroSigSeal });
          await append('run-a', 'no_stream', [proposed('a0')]);
          const err = await rejectsWith(
            store.appendMany([req('run-b', 'no_stream', proposed('b0')), req('run-a', 0, proposed('a1')), req('run-c', 'stream_exists', proposed('c0'))]),
            'LEDGER_WRONG_EXPECTED_REVISION',
          );
          expect(err.details['index']).toBe(2);
          expect(await store.size()).toBe(1);
          expect(await store.streamRevision('run-b')).toBeNull();
          const ok = await store.appendMany([req('run-b', 'no_stream', proposed('b0')), req('run-a', 0, proposed('a1')), req('run-a', 'any', proposed('a0'))]);
          expect(ok.map((r) => [r.stream, r.lastPosition, r.idempotent])).toEqual([
            ['run-b', 1, false],
            ['run-a', 2, false],
            ['run-a', 0, true],
          ]);
          expect(await store.size()).toBe(3);
        });
      });

      describe('invalid requests are refused before anything is written', () => {
        const cases: Array<[string, () => AppendRequest]> = [
          ['no events', () => ({ stream: 'run-a', expected: 'any', events: [], seal: zeroSigSeal })],
          ['a bad stream name', () => ({ stream: 'Run_A', expected: 'any', events: [proposed('a')], seal: zeroSigSeal })],
          ['a stream without a category', () => ({ stream: 'run', expected: 'any', events: [proposed('a')], seal: zeroSigSeal })],
          ['a non-UUID id', () => ({ stream: 'run-a', expected: 'any', events: [{ ...proposed('a'), id: 'abc' }], seal: zeroSigSeal })],
          [
            'an uppercase UUID',
            () => ({ stream: 'run-a', expected: 'any', events: [{ ...proposed('a'), id: proposed('a').id.toUpperCase() }], seal: zeroSigSeal }),
          ],
          ['a bad event type', () => ({ stream: 'run-a', expected: 'any', events: [{ ...proposed('a'), type: 'not a type' }], seal: zeroSigSeal })],
          ['the same id twice', () => ({ stream: 'run-a', expected: 'any', events: [proposed('a'), proposed('a')], seal: zeroSigSeal })],
          ['expected revision -1', () => ({ stream: 'run-a', expected: -1, events: [proposed('a')], seal: zeroSigSeal })],
          ['expected revision 1.5', () => ({ stream: 'run-a', expected: 1.5, events: [proposed('a')], seal: zeroSigSeal })],
          ['an unknown expected revision', () => ({ stream: 'run-a', expected: 'latest' as ExpectedRevision, events: [proposed('a')], seal: zeroSigSeal })],
        ];
        it.each(cases)('%s', async (_what, req) => {
          const err = await rejectsWith(store.append(req()), 'LEDGER_INVALID_APPEND');
          expect(err.kind).toBe('invalid_input');
          expect(await store.size()).toBe(0);
        });
      });

      describe('seal failures', () => {
        it('a seal that throws fails the append with its error and stores nothing', async () => {
          await append('run-a', 'no_stream', [proposed('a0')]);
          const boom = new Error('no key');
          let calls = 0;
          const failing: Seal = (i) => {
            calls++;
            if (calls === 2) throw boom;
            return zeroSigSeal(i);
          };
          await expect(append('run-a', 0, proposedMany('b', 3), failing)).rejects.toBe(boom);
          expect(calls).toBe(2);
          expect(await store.size()).toBe(1);
          expect(await store.streamRevision('run-a')).toBe(0);
          // the same events go through afterwards, at the same positions
          const r = await append('run-a', 0, proposedMany('b', 3));
          expect(r.events.map((e) => [e.revision, e.position])).toEqual([
            [1, 1],
            [2, 2],
            [3, 3],
          ]);
        });

        it('a seal that throws on a new stream leaves no stream behind', async () => {
          await expect(
            append('run-z', 'no_stream', [proposed('z')], () => {
              throw new Error('nope');
            }),
          ).rejects.toThrow('nope');
          expect(await store.streamRevision('run-z')).toBeNull();
          expect(await everything()).toEqual([]);
        });

        it('a seal that returns no bytes fails the append', async () => {
          await rejectsWith(
            append('run-z', 'any', [proposed('z')], () => new Uint8Array(0)),
            'LEDGER_INVALID_APPEND',
          );
          expect(await store.size()).toBe(0);
        });

        it("one append's failure does not fail concurrent appends", async () => {
          const results = await Promise.allSettled([
            append('run-a', 'no_stream', [proposed('a0')]),
            // fails on its second event, after the first one was sealed
            append('run-b', 'no_stream', proposedMany('b', 3), (input) => {
              if (input.revision === 1) throw new Error('bad seal');
              return zeroSigSeal(input);
            }),
            append('run-c', 5, [proposed('c0')]),
            append('run-d', 'no_stream', [proposed('d0')]),
          ]);
          expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
          const all = await everything();
          expect(all.map((e) => [e.position, e.stream])).toEqual([
            [0, 'run-a'],
            [1, 'run-d'],
          ]);
        });
      });

      describe('concurrency', () => {
        it('of 20 concurrent appends with expected no_stream exactly one wins', async () => {
          const attempts = Array.from({ length: 20 }, (_, w) => append('run-race', 'no_stream', proposedMany(`w${w}`, 2)));
          const settled = await Promise.allSettled(attempts);
          const won = settled.flatMap((s, w) => (s.status === 'fulfilled' ? [w] : []));
          expect(won).toHaveLength(1);
          for (const s of settled)
            if (s.status === 'rejected') {
              expect(isAssayError(s.reason) && s.reason.code).toBe('LEDGER_WRONG_EXPECTED_REVISION');
            }
          expect(await streamIds('run-race')).toEqual(proposedMany(`w${won[0]}`, 2).map((e) => e.id));
          expect(await store.size()).toBe(2);
        });

        it('of 20 concurrent appends with the same expected revision n exactly one wins', async () => {
          await append('run-race', 'no_stream', proposedMany('base', 3));
          const settled = await Promise.allSettled(Array.from({ length: 20 }, (_, w) => append('run-race', 2, [proposed(`w${w}`)])));
          expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
          const codes = settled.flatMap((s) => (s.status === 'rejected' && isAssayError(s.reason) ? [s.reason.code] : []));
          expect(codes).toEqual(Array(19).fill('LEDGER_WRONG_EXPECTED_REVISION'));
          expect(await store.streamRevision('run-race')).toBe(3);
        });

        it('concurrent appends with any to many streams all land, with dense global positions', async () => {
          const results = await Promise.all(Array.from({ length: 30 }, (_, i) => append(`run-s${i % 5}`, 'any', proposedMany(`c${i}`, 2))));
          expect(results.every((r) => !r.idempotent)).toBe(true);
          const all = await everything();
          expect(all.map((e) => e.position)).toEqual(Array.from({ length: 60 }, (_, i) => i));
          for (let s = 0; s < 5; s++) {
            const revs = (await collect(store.readStream(`run-s${s}`))).map((e) => e.revision);
            expect(revs).toEqual(Array.from({ length: 12 }, (_, i) => i));
          }
        });
      });

      it('global positions are dense and ordered across streams, and prev links each stream', async () => {
        await append('run-a', 'no_stream', proposedMany('a1', 2));
        await append('task-b', 'no_stream', proposedMany('b1', 1));
        await append('run-a', 1, proposedMany('a2', 3));
        await append('task-b', 0, proposedMany('b2', 2));
        const all = await everything();
        expect(all.map((e) => e.position)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        expect(all.map((e) => e.stream)).toEqual(['run-a', 'run-a', 'task-b', 'run-a', 'run-a', 'run-a', 'task-b', 'task-b']);
        for (const stream of ['run-a', 'task-b']) {
          const events = await collect(store.readStream(stream));
          events.forEach((e, i) => {
            const env = envelopeOf(e.bytes);
            expect(env.revision).toBe(i);
            expect(env.position).toBe(e.position);
            expect(env.stream).toBe(stream);
            expect(env.id).toBe(e.id);
            expect(env.prev).toBe(i === 0 ? ZERO_HASH : sha(events[i - 1]!.bytes));
            expect(hex(e.hash)).toBe(sha(e.bytes));
          });
        }
      });
    });

    describe('reads', () => {
      beforeEach(async () => {
        await append('run-a', 'no_stream', proposedMany('a', 5));
        await append('run-b', 'no_stream', proposedMany('b', 2));
        await append('run-a', 4, proposedMany('a2', 3));
      });

      it('readStream: forwards by default, all events of the stream in revision order', async () => {
        const events = await collect(store.readStream('run-a'));
        expect(events.map((e) => e.revision)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        expect(events.map((e) => e.position)).toEqual([0, 1, 2, 3, 4, 7, 8, 9]);
      });

      it('readStream: fromRevision and maxCount, forwards', async () => {
        expect((await collect(store.readStream('run-a', { fromRevision: 3 }))).map((e) => e.revision)).toEqual([3, 4, 5, 6, 7]);
        expect((await collect(store.readStream('run-a', { fromRevision: 3, maxCount: 2 }))).map((e) => e.revision)).toEqual([3, 4]);
        expect((await collect(store.readStream('run-a', { maxCount: 1 }))).map((e) => e.revision)).toEqual([0]);
        expect(await collect(store.readStream('run-a', { fromRevision: 8 }))).toEqual([]);
        expect(await collect(store.readStream('run-a', { maxCount: 0 }))).toEqual([]);
      });

      it('readStream: backwards from the end, from a revision, with maxCount', async () => {
        expect((await collect(store.readStream('run-a', { direction: 'backwards' }))).map((e) => e.revision)).toEqual([7, 6, 5, 4, 3, 2, 1, 0]);
        expect((await collect(store.readStream('run-a', { direction: 'backwards', fromRevision: 4 }))).map((e) => e.revision)).toEqual([4, 3, 2, 1, 0]);
        expect((await collect(store.readStream('run-a', { direction: 'backwards', maxCount: 2 }))).map((e) => e.revision)).toEqual([7, 6]);
        expect((await collect(store.readStream('run-a', { direction: 'backwards', fromRevision: 100, maxCount: 1 }))).map((e) => e.revision)).toEqual([7]);
      });

      it('readStream: a missing stream yields nothing', async () => {
        expect(await collect(store.readStream('run-none'))).toEqual([]);
        expect(await collect(store.readStream('run-none', { direction: 'backwards' }))).toEqual([]);
      });

      it('readAll: everything in position order, in batches no larger than batchSize', async () => {
        const batches = await collect(store.readAll({ batchSize: 3 }));
        for (const b of batches) {
          expect(b.length).toBeGreaterThan(0);
          expect(b.length).toBeLessThanOrEqual(3);
        }
        expect(batches.flat().map((e) => e.position)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        const byPos = batches.flat();
        expect(byPos.slice(5, 7).map((e) => e.stream)).toEqual(['run-b', 'run-b']);
      });

      it('readAll: fromPosition inclusive, toPosition exclusive', async () => {
        expect((await everythingIn({ fromPosition: 4, toPosition: 7 })).map((e) => e.position)).toEqual([4, 5, 6]);
        expect((await everythingIn({ fromPosition: 8 })).map((e) => e.position)).toEqual([8, 9]);
        expect((await everythingIn({ toPosition: 2, batchSize: 1 })).map((e) => e.position)).toEqual([0, 1]);
        expect(await everythingIn({ fromPosition: 10 })).toEqual([]);
        expect(await everythingIn({ fromPosition: 5, toPosition: 5 })).toEqual([]);
      });

      async function everythingIn(opts: { fromPosition?: number; toPosition?: number; batchSize?: number }): Promise<RecordedEvent[]> {
        return (await collect(store.readAll(opts))).flat();
      }

      it('readAll and readStream return the same events', async () => {
        const all = await everything();
        const a = await collect(store.readStream('run-a'));
        expect(a.map((e) => hex(e.hash))).toEqual(all.filter((e) => e.stream === 'run-a').map((e) => hex(e.hash)));
      });

      it('streamRevision and size', async () => {
        expect(await store.streamRevision('run-a')).toBe(7);
        expect(await store.streamRevision('run-b')).toBe(1);
        expect(await store.streamRevision('run-none')).toBeNull();
        expect(await store.size()).toBe(10);
      });
    });

    it('reads large streams and logs across batch boundaries', async () => {
      for (let i = 0; i < 12; i++) await append('run-big', 'any', proposedMany(`big${i}`, 100));
      await append('run-other', 'any', proposedMany('other', 5));
      const revs = (await collect(store.readStream('run-big', { fromRevision: 150, maxCount: 1000 }))).map((e) => e.revision);
      expect(revs).toEqual(Array.from({ length: 1000 }, (_, i) => 150 + i));
      const back = (await collect(store.readStream('run-big', { direction: 'backwards' }))).map((e) => e.revision);
      expect(back).toEqual(Array.from({ length: 1200 }, (_, i) => 1199 - i));
      const batches = await collect(store.readAll({ batchSize: 500 }));
      expect(batches.flat().map((e) => e.position)).toEqual(Array.from({ length: 1205 }, (_, i) => i));
      expect(Math.max(...batches.map((b) => b.length))).toBeLessThanOrEqual(500);
      expect(await store.size()).toBe(1205);
    });

    describe('subscribe', () => {
      it('catches up on existing events, resolves caughtUp, then delivers live events in order', async () => {
        await append('run-a', 'no_stream', proposedMany('a', 3));
        const seen: number[] = [];
        const sub = store.subscribe({ onEvent: (e) => void seen.push(e.position) });
        await sub.caughtUp;
        expect(seen).toEqual([0, 1, 2]);
        await append('run-b', 'no_stream', proposedMany('b', 2));
        await append('run-a', 2, proposedMany('a2', 1));
        await waitFor(() => seen.length === 6, 5000, 'live events');
        expect(seen).toEqual([0, 1, 2, 3, 4, 5]);
        await sub.stop();
      });

      it('starts from a position', async () => {
        await append('run-a', 'no_stream', proposedMany('a', 5));
        const seen: number[] = [];
        const sub = store.subscribe({ fromPosition: 3, onEvent: (e) => void seen.push(e.position) });
        await sub.caughtUp;
        expect(seen).toEqual([3, 4]);
        await append('run-a', 4, [proposed('a5')]);
        await waitFor(() => seen.length === 3);
        expect(seen).toEqual([3, 4, 5]);
        await sub.stop();
      });

      it('on an empty store: caught up at once, then live; a position beyond the end waits for it', async () => {
        const seen: number[] = [];
        const sub = store.subscribe({ onEvent: (e) => void seen.push(e.position) });
        await sub.caughtUp;
        expect(seen).toEqual([]);
        const later: number[] = [];
        const ahead = store.subscribe({ fromPosition: 2, onEvent: (e) => void later.push(e.position) });
        await ahead.caughtUp;
        await append('run-a', 'no_stream', proposedMany('a', 4));
        await waitFor(() => seen.length === 4 && later.length === 2);
        expect(seen).toEqual([0, 1, 2, 3]);
        expect(later).toEqual([2, 3]);
        await Promise.all([sub.stop(), ahead.stop()]);
      });

      it('hands over events one at a time (never concurrently), never twice, with a slow subscriber', async () => {
        await append('run-a', 'no_stream', proposedMany('a', 3));
        let active = 0;
        let maxActive = 0;
        const seen: string[] = [];
        const sub = store.subscribe({
          onEvent: async (e) => {
            active++;
            maxActive = Math.max(maxActive, active);
            await new Promise((r) => setTimeout(r, 2));
            seen.push(e.id);
            active--;
          },
        });
        const writes = Array.from({ length: 10 }, (_, i) => append(`run-w${i}`, 'no_stream', proposedMany(`w${i}`, 2)));
        await Promise.all(writes);
        await sub.caughtUp;
        await waitFor(() => seen.length === 23, 10000, 'all events');
        expect(maxActive).toBe(1);
        expect(new Set(seen).size).toBe(23);
        expect(seen).toEqual((await everything()).map((e) => e.id));
        await sub.stop();
      });

      it('stop: no events after stop resolves', async () => {
        await append('run-a', 'no_stream', proposedMany('a', 2));
        const seen: number[] = [];
        const sub = store.subscribe({ onEvent: (e) => void seen.push(e.position) });
        await sub.caughtUp;
        await sub.stop();
        await append('run-a', 1, proposedMany('b', 2));
        await new Promise((r) => setTimeout(r, 250));
        expect(seen).toEqual([0, 1]);
      });

      it('stop may be called from inside the handler', async () => {
        await append('run-a', 'no_stream', proposedMany('a', 5));
        const seen: number[] = [];
        let sub: { stop(): Promise<void> } | undefined;
        const stopped = new Promise<void>((resolve) => {
          sub = store.subscribe({
            onEvent: async (e) => {
              seen.push(e.position);
              if (e.position === 1) {
                await sub!.stop();
                resolve();
              }
            },
          });
        });
        await stopped;
        await new Promise((r) => setTimeout(r, 50));
        expect(seen).toEqual([0, 1]);
      });

      it('a handler that rejects stops the subscription and reports to onError', async () => {
        await append('run-a', 'no_stream', proposedMany('a', 3));
        const seen: number[] = [];
        const errors: unknown[] = [];
        const boom = new Error('projection failed');
        const sub = store.subscribe({
          onEvent: async (e) => {
            seen.push(e.position);
            if (e.position === 1) throw boom;
          },
          onError: (err) => errors.push(err),
        });
        await expect(sub.caughtUp).rejects.toBe(boom);
        await append('run-a', 2, [proposed('a3')]);
        await new Promise((r) => setTimeout(r, 50));
        expect(seen).toEqual([0, 1]);
        expect(errors).toEqual([boom]);
        await sub.stop();
      });
    });

    it('close: later appends are refused with LEDGER_STORE_CLOSED', async () => {
      await append('run-a', 'no_stream', [proposed('a0')]);
      await store.close();
      const err = await rejectsWith(append('run-a', 0, [proposed('a1')]), 'LEDGER_STORE_CLOSED');
      expect(err.kind).toBe('unavailable');
    });
  });
}
