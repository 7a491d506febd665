/**
 * Persisted hashes of the perfect (complete, aligned) subtrees of the RFC 9162 log over all envelopes.
 * Node (level, index) covers leaves [index * 2^level, (index + 1) * 2^level); level 0 holds leaf hashes.
 * It is derived state: it can always be rebuilt from the event log.
 * Synchronous on purpose: it is always local (SQLite or memory), also beside a clustered event store.
 */
export interface MerkleNodeStore {
  /** Number of leaves indexed so far. */
  leafCount(): number;
  /**
   * Adds the next leaves (their RFC 9162 leaf hashes, in order, starting at index leafCount()) and every perfect
   * subtree they complete, atomically.
   */
  appendLeaves(leafHashes: Uint8Array[]): void;
  /** The hash of node (level, index); throws if that subtree is not complete yet. */
  node(level: number, index: number): Uint8Array;
  /** Drops everything (rebuild after corruption). */
  reset(): void;
}

/**
 * The stored nodes read as stored, for verification, which trusts none of it: it checks the shape, then every leaf
 * against the leaf hashes it recomputes from the events, then every higher node against its two children.
 */
export interface StoredMerkleNodes {
  /** Per level present (as stored, in level order): its row count and smallest and largest idx. */
  shape(): Array<{ level: unknown; count: number; minIdx: unknown; maxIdx: unknown }>;
  /**
   * The rows of `level` with idx in [from, to), as stored: how many there are, how many of them have an integer idx
   * and a 32-byte hash, their smallest and largest idx, and all their hashes concatenated in idx order.
   */
  range(level: number, from: number, to: number): { count: number; wellFormed: number; minIdx: unknown; maxIdx: unknown; hashes: Uint8Array };
}
