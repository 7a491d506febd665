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
    let top = { size: 1, hash: leafHash };
    while (this.stack.length > 0 && (this.stack[this.stack.length - 1] as { size: number }).size === top.size) {
      const left = this.stack.pop() as { size: number; hash: Uint8Array };
      top = { size: left.size * 2, hash: node(left.hash, top.hash) };
    }
    this.stack.push(top);
    this.n += 1;
  }

  /** Root of all leaves pushed so far (SHA-256 of the empty string for none). */
  root(): Buffer {
    if (this.stack.length === 0) return emptyRoot();
    let acc: Buffer = Buffer.from((this.stack[this.stack.length - 1] as { hash: Uint8Array }).hash);
    for (let i = this.stack.length - 2; i >= 0; i--) acc = node((this.stack[i] as { hash: Uint8Array }).hash, acc);
    return acc;
  }
}
