/**
 * Streaming RFC 9162 root computation: O(log n) memory, one pass over leaf hashes in order.
 * Keeps the perfect subtrees of the right edge (a "compact range"); the root of the first n leaves is those
 * subtrees combined from the right, which is exactly MTH's split at the largest power of two below n.
 */
import { emptyRoot, nodeHash as node } from './merkle';

export class RootAccumulator {
  /** (size, hash) of perfect subtrees, sizes strictly decreasing. */
  private readonly stack: Array<{ size: number; hash: Uint8Array }> = [];
  private n = 0;

  get size(): number {
    return this.n;
  }

  push(leafHash: Uint8Array): void {
    this.pushSubtree(1, leafHash);
  }

  /**
   * Appends `size` leaves at once, given the hash of the perfect subtree over them (merkle.ts, "perfect subtrees"):
   * `size` must be a power of two and the leaves so far a multiple of it, so that the subtree is one of the tree's.
   */
  pushSubtree(size: number, hash: Uint8Array): void {
    if (!Number.isSafeInteger(size) || size < 1 || (size & (size - 1)) !== 0 || this.n % size !== 0)
      throw new RangeError(`a perfect subtree of ${size} leaves cannot follow ${this.n} leaves`);
    let top = { size, hash };
    while (this.stack.length > 0 && (this.stack[this.stack.length - 1] as { size: number }).size === top.size) {
      const left = this.stack.pop() as { size: number; hash: Uint8Array };
      top = { size: left.size * 2, hash: node(left.hash, top.hash) };
    }
    this.stack.push(top);
    this.n += size;
  }

  /** Root of all leaves pushed so far (SHA-256 of the empty string for none). */
  root(): Buffer {
    if (this.stack.length === 0) return emptyRoot();
    let acc: Buffer = Buffer.from((this.stack[this.stack.length - 1] as { hash: Uint8Array }).hash);
    for (let i = this.stack.length - 2; i >= 0; i--) acc = node((this.stack[i] as { hash: Uint8Array }).hash, acc);
    return acc;
  }
}
