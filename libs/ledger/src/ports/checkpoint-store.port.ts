/** Signed checkpoints the ledger has issued, in issue order. */
export interface StoredCheckpoint {
  /** Issue order, from 0. */
  seq: number;
  treeSize: number;
  /** Standard base64 of the 32-byte root, as in the note. */
  rootHash: string;
  /** The complete C2SP signed note text (checkpoint body, blank line, signature lines). */
  note: string;
}

export interface NewCheckpoint {
  treeSize: number;
  rootHash: string;
  note: string;
}

/**
 * The RFC 9162 consistency proof (section 2.1.4.1) from the tree of `oldSize` leaves to the tree of the new
 * checkpoint, computed from the caller's stored tree. The store asks for it only when it already holds a
 * checkpoint, and verifies it against that checkpoint's root and the new one's.
 */
export type ProveConsistencyFrom = (oldSize: number) => Uint8Array[];

export interface CheckpointStore {
  /**
   * Stores a checkpoint after the last one, atomically with the checks (a write transaction of its own, or the
   * ledger's write lock when held). Refuses, storing nothing:
   * - a malformed one, or one whose note body does not state this tree size and root: LEDGER_INVALID_CHECKPOINT;
   * - one smaller than the last stored one: LEDGER_CHECKPOINT_ROLLBACK;
   * - one of the same size as the last stored one: LEDGER_CHECKPOINT_NOT_NEWER;
   * - one whose tree does not extend the last one's (the proof from `proveFrom` does not verify against the two
   *   roots, RFC 9162 2.1.4.2): LEDGER_CHECKPOINT_INCONSISTENT.
   * So the stored checkpoints, in issue order, always have growing sizes and are consistent with each other.
   */
  add(cp: NewCheckpoint, proveFrom: ProveConsistencyFrom): StoredCheckpoint;
  latest(): StoredCheckpoint | null;
  all(): StoredCheckpoint[];
}
