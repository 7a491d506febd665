/** The CheckpointStore contract, run against every adapter (memory, SQLite). */
import { isAssayError } from '@assay/core';
import type { CheckpointStore, ProveConsistencyFrom } from '../../libs/ledger/src/ports/checkpoint-store.port';
import { MemoryMerkleNodeStore } from '../../libs/ledger/src/adapters/memory/memory-merkle-node-store.adapter';
import { consistencyProof, leafHash, rootAt } from '../../libs/ledger/src/domain/merkle';
import { codeOf } from '../support/failure';

export interface CheckpointStoreUnderTest {
  store: CheckpointStore;
  /** For persistent adapters: close and open again on the same storage. */
  reopen?: () => Promise<CheckpointStore>;
  cleanup(): Promise<void>;
}

/** A log of 64 leaves, and a fork of it that shares only its first 5. */
function tree(label: string, shared = 64): MemoryMerkleNodeStore {
  const t = new MemoryMerkleNodeStore();
  t.appendLeaves(Array.from({ length: 64 }, (_, i) => leafHash(Buffer.from(i < shared ? `event ${i}` : `${label} ${i}`))));
  return t;
}
const main = tree('main');
const fork = tree('fork', 5);
const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');
const root = (n: number, t = main): string => b64(rootAt(n, (l, i) => t.node(l, i)));
const note = (size: number, t = main): string => `example.org/log\n${size}\n${root(size, t)}\n\n— example.org/log AAAAAA==\n`;
/** The consistency proofs of the tree of `size` leaves of `t`, as a ledger computes them from its stored tree. */
const prove =
  (size: number, t = main): ProveConsistencyFrom =>
  (old: number) =>
    consistencyProof(old, size, (l, i) => t.node(l, i));
const cp = (size: number, t = main) => ({ treeSize: size, rootHash: root(size, t), note: note(size, t) });

export function checkpointStoreContract(name: string, make: () => Promise<CheckpointStoreUnderTest>): void {
  describe(`CheckpointStore contract: ${name}`, () => {
    let under: CheckpointStoreUnderTest;
    beforeEach(async () => {
      under = await make();
    });
    afterEach(async () => {
      await under.cleanup();
    });

    it('starts empty', () => {
      expect(under.store.latest()).toBeNull();
      expect(under.store.all()).toEqual([]);
    });

    it('numbers checkpoints from 0 in issue order and returns what it stored', () => {
      const a = under.store.add(cp(0), prove(0));
      const b = under.store.add(cp(5), prove(5));
      const c = under.store.add(cp(9), prove(9));
      expect([a.seq, b.seq, c.seq]).toEqual([0, 1, 2]);
      expect(b).toEqual({ seq: 1, treeSize: 5, rootHash: root(5), note: note(5) });
      expect(under.store.latest()).toEqual(c);
      expect(under.store.all()).toEqual([a, b, c]);
    });

    it('keeps the note text exactly (unicode, blank lines, trailing newline)', () => {
      const text = 'origin ✓\n3\n' + root(3) + '\n\n— origin ✓ q83vEg==\n— witness AAAA\n';
      under.store.add({ treeSize: 3, rootHash: root(3), note: text }, prove(3));
      expect(under.store.latest()!.note).toBe(text);
    });

    it('hands out copies: changing a returned checkpoint changes nothing stored', () => {
      const a = under.store.add(cp(1), prove(1));
      a.treeSize = 99;
      const l = under.store.latest()!;
      l.note = 'changed';
      expect(under.store.all()).toEqual([{ seq: 0, treeSize: 1, rootHash: root(1), note: note(1) }]);
    });

    it.each([
      ['a negative tree size', { treeSize: -1, rootHash: root(1), note: note(1) }],
      ['a fractional tree size', { treeSize: 1.5, rootHash: root(1), note: note(1) }],
      ['a root that is not base64 of 32 bytes', { treeSize: 1, rootHash: Buffer.alloc(31).toString('base64'), note: note(1) }],
      ['a hex root', { treeSize: 1, rootHash: 'ab'.repeat(32), note: note(1) }],
      ['an empty note', { treeSize: 1, rootHash: root(1), note: '' }],
      ['a note without signature lines', { treeSize: 1, rootHash: root(1), note: `example.org/log\n1\n${root(1)}\n` }],
      ['a note that states another size', { treeSize: 1, rootHash: root(2), note: note(2) }],
      ['a note that states another root', { treeSize: 2, rootHash: root(2), note: note(2).replace(root(2), root(3)) }],
    ])('refuses %s with LEDGER_INVALID_CHECKPOINT', (_what, bad) => {
      let err: unknown;
      try {
        under.store.add(bad, prove(1));
      } catch (e) {
        err = e;
      }
      expect(isAssayError(err) && err.code).toBe('LEDGER_INVALID_CHECKPOINT');
      expect(under.store.all()).toEqual([]);
    });

    it('remembers checkpoints across a reopen (persistent adapters)', async () => {
      if (!under.reopen) return; // nothing to remember for an in-memory adapter
      under.store.add(cp(4), prove(4));
      under.store.add(cp(8), prove(8));
      const again = await under.reopen();
      expect(again.latest()).toEqual({ seq: 1, ...cp(8) });
      // The order guard holds across the reopen too.
      expect(codeOf(() => again.add(cp(6), prove(6)))).toBe('LEDGER_CHECKPOINT_ROLLBACK');
      expect(again.add(cp(10), prove(10)).seq).toBe(2);
      expect(again.all().map((c) => c.treeSize)).toEqual([4, 8, 10]);
    });

    describe('order guard: every checkpoint is larger than, and consistent with, the last one stored', () => {
      it('asks for the consistency proof from the last stored size, and stores a consistent extension', () => {
        under.store.add(cp(6), prove(6));
        const asked: number[] = [];
        const stored = under.store.add(cp(13), (old) => {
          asked.push(old);
          return prove(13)(old);
        });
        expect(asked).toEqual([6]);
        expect(stored).toEqual({ seq: 1, ...cp(13) });
      });

      it('needs no proof after a checkpoint of the empty tree', () => {
        under.store.add(cp(0), prove(0));
        expect(
          under.store.add(cp(7), () => {
            throw new Error('not asked');
          }).seq,
        ).toBe(1);
      });

      it.each([
        ['smaller', 5, 'LEDGER_CHECKPOINT_ROLLBACK'],
        ['of the same size', 8, 'LEDGER_CHECKPOINT_NOT_NEWER'],
      ])('refuses a checkpoint %s than the last one, and stores nothing', (_what, size, code) => {
        under.store.add(cp(8), prove(8));
        expect(codeOf(() => under.store.add(cp(size), prove(size)))).toBe(code);
        expect(under.store.all().map((c) => c.treeSize)).toEqual([8]);
      });

      it('refuses a larger checkpoint of a forked tree (its consistency proof does not verify), and stores nothing', () => {
        under.store.add(cp(8), prove(8));
        expect(codeOf(() => under.store.add(cp(12, fork), prove(12, fork)))).toBe('LEDGER_CHECKPOINT_INCONSISTENT');
        // Nor can the caller talk it round with the proof of the honest tree: the proof must lead to the new root.
        expect(codeOf(() => under.store.add(cp(12, fork), prove(12)))).toBe('LEDGER_CHECKPOINT_INCONSISTENT');
        expect(codeOf(() => under.store.add(cp(12), () => []))).toBe('LEDGER_CHECKPOINT_INCONSISTENT');
        expect(under.store.all().map((c) => c.treeSize)).toEqual([8]);
        expect(under.store.add(cp(12), prove(12)).seq).toBe(1);
      });

      it('refuses with the error the proof function throws, and stores nothing', () => {
        under.store.add(cp(3), prove(3));
        expect(codeOf(() => under.store.add(cp(9), () => [main.node(9, 0)]))).toBe('MERKLE_NODE_MISSING');
        expect(under.store.all().map((c) => c.treeSize)).toEqual([3]);
      });
    });
  });
}
