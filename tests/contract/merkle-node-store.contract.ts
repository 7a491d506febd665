/** The MerkleNodeStore contract, run against every adapter (memory, SQLite). */
import { createHash } from 'node:crypto';
import type { MerkleNodeStore } from '../../libs/ledger/src/ports/merkle-node-store.port';
import { codeOf } from '../support/failure';

export interface MerkleNodeStoreUnderTest {
  store: MerkleNodeStore;
  /** For persistent adapters: close and open again on the same storage. */
  reopen?: () => Promise<MerkleNodeStore>;
  cleanup(): Promise<void>;
}

const leaf = (i: number): Buffer =>
  createHash('sha256')
    .update(Buffer.from([0x00]))
    .update(`leaf ${i}`)
    .digest();

/** RFC 9162 MTH of leaf hashes, straight from the definition (for subtrees whose size is a power of two). */
function mth(leaves: Buffer[]): Buffer {
  if (leaves.length === 1) return leaves[0]!;
  const k = leaves.length / 2;
  return createHash('sha256')
    .update(Buffer.from([0x01]))
    .update(mth(leaves.slice(0, k)))
    .update(mth(leaves.slice(k)))
    .digest();
}

function expectedNode(leaves: Buffer[], level: number, index: number): Buffer {
  const width = 2 ** level;
  return mth(leaves.slice(index * width, (index + 1) * width));
}

function checkAllNodes(store: MerkleNodeStore, leaves: Buffer[]): void {
  const n = leaves.length;
  for (let level = 0; 2 ** level <= n; level++) {
    const complete = Math.floor(n / 2 ** level);
    for (let index = 0; index < complete; index++)
      expect(Buffer.from(store.node(level, index)).toString('hex')).toBe(expectedNode(leaves, level, index).toString('hex'));
    expect(codeOf(() => store.node(level, complete))).toBe('MERKLE_NODE_MISSING');
  }
}

export function merkleNodeStoreContract(name: string, make: () => Promise<MerkleNodeStoreUnderTest>): void {
  describe(`MerkleNodeStore contract: ${name}`, () => {
    let under: MerkleNodeStoreUnderTest;
    beforeEach(async () => {
      under = await make();
    });
    afterEach(async () => {
      await under.cleanup();
    });

    it('starts empty: no leaves, no nodes', () => {
      expect(under.store.leafCount()).toBe(0);
      expect(codeOf(() => under.store.node(0, 0))).toBe('MERKLE_NODE_MISSING');
    });

    it('stores every perfect subtree, whatever the batch sizes', () => {
      const leaves = Array.from({ length: 37 }, (_, i) => leaf(i));
      let at = 0;
      for (const size of [1, 1, 2, 5, 8, 3, 17]) {
        under.store.appendLeaves(leaves.slice(at, at + size));
        at += size;
        expect(under.store.leafCount()).toBe(at);
        checkAllNodes(under.store, leaves.slice(0, at));
      }
    });

    it('one big batch and one leaf at a time give the same nodes', () => {
      const leaves = Array.from({ length: 64 }, (_, i) => leaf(i));
      under.store.appendLeaves(leaves);
      const big = Buffer.from(under.store.node(6, 0)).toString('hex');
      under.store.reset();
      for (const l of leaves) under.store.appendLeaves([l]);
      expect(Buffer.from(under.store.node(6, 0)).toString('hex')).toBe(big);
      expect(big).toBe(mth(leaves).toString('hex'));
    });

    it('an empty append changes nothing', () => {
      under.store.appendLeaves([leaf(0)]);
      under.store.appendLeaves([]);
      expect(under.store.leafCount()).toBe(1);
    });

    it('refuses a batch with a bad hash and keeps none of it', () => {
      under.store.appendLeaves([leaf(0)]);
      expect(() => under.store.appendLeaves([leaf(1), Buffer.alloc(31)])).toThrow();
      expect(under.store.leafCount()).toBe(1);
      expect(codeOf(() => under.store.node(0, 1))).toBe('MERKLE_NODE_MISSING');
      under.store.appendLeaves([leaf(1)]);
      checkAllNodes(under.store, [leaf(0), leaf(1)]);
    });

    it('reset drops everything, and the tree can be rebuilt from leaf 0', () => {
      under.store.appendLeaves([leaf(0), leaf(1), leaf(2)]);
      under.store.reset();
      expect(under.store.leafCount()).toBe(0);
      expect(codeOf(() => under.store.node(0, 0))).toBe('MERKLE_NODE_MISSING');
      under.store.appendLeaves([leaf(5), leaf(6)]);
      checkAllNodes(under.store, [leaf(5), leaf(6)]);
    });

    it('returned hashes are copies', () => {
      under.store.appendLeaves([leaf(0), leaf(1)]);
      under.store.node(1, 0).fill(0);
      checkAllNodes(under.store, [leaf(0), leaf(1)]);
    });

    it('keeps its nodes across a reopen (persistent adapters)', async () => {
      if (!under.reopen) return; // an in-memory adapter has nothing to keep
      const leaves = Array.from({ length: 11 }, (_, i) => leaf(i));
      under.store.appendLeaves(leaves.slice(0, 6));
      const again = await under.reopen();
      expect(again.leafCount()).toBe(6);
      again.appendLeaves(leaves.slice(6));
      checkAllNodes(again, leaves);
    });
  });
}
