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
