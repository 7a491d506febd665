/**
 * In-memory MerkleNodeStore for unit tests: the same port the SQLite adapter implements, one array of hashes per
 * level. appendLeaves computes every new node first (domain/merkle.ts newNodesForAppend) and only then stores them,
 * so a rejected batch leaves the store untouched.
 */
import { AssayError } from '@assay/core';
import { newNodesForAppend } from '../../domain/merkle';
import type { MerkleNodeStore } from '../../ports/merkle-node-store.port';

export class MemoryMerkleNodeStore implements MerkleNodeStore {
  private levels: Uint8Array[][] = [];
  private count = 0;

  leafCount(): number {
    return this.count;
  }

  appendLeaves(leafHashes: Uint8Array[]): void {
    const nodes = newNodesForAppend(this.count, leafHashes, (level, index) => this.stored(level, index));
    // Check the whole batch lines up with what is stored before touching anything.
    const next = this.levels.map((row) => row.length);
    for (const n of nodes) {
      const expected = next[n.level] ?? 0;
      if (n.index !== expected)
        throw new AssayError('MERKLE_BAD_NODE', 'internal', `node (${n.level}, ${n.index}) arrived out of order`, {
          details: { level: n.level, index: n.index },
        });
      next[n.level] = expected + 1;
    }
    for (const n of nodes) (this.levels[n.level] ??= []).push(n.hash);
    this.count += leafHashes.length;
  }

  node(level: number, index: number): Uint8Array {
    return Buffer.from(this.stored(level, index));
  }

  reset(): void {
    this.levels = [];
    this.count = 0;
  }

  /** For MemoryLedgerLock: a function that puts the store back as it is now. */
  savepoint(): () => void {
    const lengths = this.levels.map((row) => row.length);
    const count = this.count;
    const levels = this.levels;
    return () => {
      if (this.levels !== levels) this.levels = levels; // a reset() under the lock: take the old rows back
      this.levels.length = lengths.length;
      lengths.forEach((n, level) => (this.levels[level]!.length = n));
      this.count = count;
    };
  }

  private stored(level: number, index: number): Uint8Array {
    const h = Number.isSafeInteger(level) && Number.isSafeInteger(index) ? this.levels[level]?.[index] : undefined;
    if (!h)
      throw new AssayError(
        'MERKLE_NODE_MISSING',
        'not_found',
        `Merkle node (level ${level}, index ${index}) is not complete in a tree of ${this.count} leaves`,
        { details: { level, index, leafCount: this.count } },
      );
    return h;
  }
}
