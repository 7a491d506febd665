/**
 * The LedgerLock contract, run against every adapter (memory, SQLite): the write lock under which the Merkle
 * integration and checkpoint signing run. Written only against the ports. (That the SQLite lock also holds other
 * processes off is shown by tests/ledger/ledger-concurrency.int.spec.ts, with real processes.)
 */
import type { EventStore } from '../../libs/ledger/src/ports/event-store.port';
import type { MerkleNodeStore } from '../../libs/ledger/src/ports/merkle-node-store.port';
import type { CheckpointStore } from '../../libs/ledger/src/ports/checkpoint-store.port';
import type { LedgerLock, LockedEvent, LockedLog } from '../../libs/ledger/src/ports/ledger-lock.port';
import { consistencyProof, leafHash, rootAt } from '../../libs/ledger/src/domain/merkle';
import { collect, proposedMany, zeroSigSeal } from '../support/ledger-fixtures';
import { codeOf } from '../support/failure';

export interface LedgerLockUnderTest {
  lock: LedgerLock;
  events: EventStore;
  merkle: MerkleNodeStore;
  checkpoints: CheckpointStore;
  cleanup(): Promise<void>;
}

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

export function ledgerLockContract(name: string, make: () => Promise<LedgerLockUnderTest>): void {
  describe(`LedgerLock contract: ${name}`, () => {
    let u: LedgerLockUnderTest;
    beforeEach(async () => {
      u = await make();
      await u.events.append({ stream: 'note-a', expected: 'no_stream', events: proposedMany('lock-a', 5), seal: zeroSigSeal });
      await u.events.append({ stream: 'note-b', expected: 'no_stream', events: proposedMany('lock-b', 2500), seal: zeroSigSeal });
    });
    afterEach(async () => {
      await u.cleanup();
    });

    /** What a checkpoint signer does under the lock: index what is missing, then store a checkpoint of it all. */
    const integrateAndCheckpoint = (log: LockedLog, alter?: (root: string) => string) => {
      const size = log.size();
      const from = u.merkle.leafCount();
      log.forEach(from, size, (batch) => u.merkle.appendLeaves(batch.map((e) => leafHash(e.bytes))));
      const node = (l: number, i: number) => u.merkle.node(l, i);
      const rootHash = b64(rootAt(size, node));
      const stated = alter ? alter(rootHash) : rootHash;
      return u.checkpoints.add({ treeSize: size, rootHash, note: `example.org/log\n${size}\n${stated}\n\n— example.org/log AAAAAA==\n` }, (old) =>
        consistencyProof(old, size, node),
      );
    };

    it("runs the work and returns its value; the log it sees is the store's, in order, in batches", async () => {
      const all = (await collect(u.events.readAll({ batchSize: 5000 }))).flat();
      const seen: LockedEvent[] = [];
      const batches: number[] = [];
      const size = u.lock.exclusive((log) => {
        log.forEach(3, log.size(), (batch) => {
          batches.push(batch.length);
          seen.push(...batch);
        });
        return log.size();
      });
      expect(size).toBe(2505);
      expect(size).toBe(await u.events.size());
      expect(seen.map((e) => e.position)).toEqual(all.slice(3).map((e) => e.position));
      expect(seen.map((e) => e.type)).toEqual(all.slice(3).map((e) => e.type));
      expect(seen.every((e, i) => Buffer.from(e.bytes).equals(Buffer.from(all[i + 3]!.bytes)))).toBe(true);
      expect(batches.length).toBeGreaterThan(1);
      const typed = u.lock.exclusive((log) => {
        const out: LockedEvent[] = [];
        log.forEachOfType('Bogus', 0, log.size(), (batch) => out.push(...batch));
        log.forEachOfType('Note', 1, 2504, (batch) => out.push(...batch));
        return out;
      });
      expect(typed.map((e) => e.position)).toEqual(all.slice(1, 2504).map((e) => e.position));
      expect(
        u.lock.exclusive((log) => {
          let n = 0;
          log.forEach(7, 7, () => n++);
          log.forEach(2505, 9999, () => n++);
          return n;
        }),
      ).toBe(0);
    });

    it('keeps what the work wrote through the stores', () => {
      const stored = u.lock.exclusive((log) => integrateAndCheckpoint(log));
      expect(stored).toMatchObject({ seq: 0, treeSize: 2505 });
      expect(u.merkle.leafCount()).toBe(2505);
      expect(u.checkpoints.all()).toEqual([stored]);
    });

    it('undoes everything the work wrote when it throws, and rethrows its error unchanged', () => {
      u.lock.exclusive((log) => {
        log.forEach(0, 5, (batch) => u.merkle.appendLeaves(batch.map((e) => leafHash(e.bytes))));
      });
      const before = { leaves: u.merkle.leafCount(), root: b64(u.merkle.node(2, 0)) };
      const boom = new Error('boom');
      expect(() =>
        u.lock.exclusive((log) => {
          integrateAndCheckpoint(log);
          throw boom;
        }),
      ).toThrow(boom);
      expect(u.merkle.leafCount()).toBe(before.leaves);
      expect(b64(u.merkle.node(2, 0))).toBe(before.root);
      expect(codeOf(() => u.merkle.node(0, 5))).toBe('MERKLE_NODE_MISSING');
      expect(u.checkpoints.all()).toEqual([]);
      // A checkpoint store refusal under the lock undoes the Merkle integration done before it, too.
      expect(codeOf(() => u.lock.exclusive((log) => integrateAndCheckpoint(log, () => b64(Buffer.alloc(32)))))).toBe('LEDGER_INVALID_CHECKPOINT');
      expect(u.merkle.leafCount()).toBe(before.leaves);
      // And the lock can be taken again afterwards.
      expect(u.lock.exclusive((log) => integrateAndCheckpoint(log)).treeSize).toBe(2505);
    });

    it('is not reentrant, and the log handed to the work is dead once it returns', () => {
      expect(codeOf(() => u.lock.exclusive(() => u.lock.exclusive(() => 1)))).toBe('LEDGER_LOCK_REENTERED');
      const kept = u.lock.exclusive((log) => log);
      expect(codeOf(() => kept.size())).toBe('LEDGER_LOCK_REENTERED');
      expect(u.lock.exclusive((log) => log.size())).toBe(2505);
    });

    it('sees every append acknowledged before it', async () => {
      await u.events.append({ stream: 'note-c', expected: 'no_stream', events: proposedMany('lock-c', 3), seal: zeroSigSeal });
      expect(u.lock.exclusive((log) => log.size())).toBe(2508);
    });
  });
}
