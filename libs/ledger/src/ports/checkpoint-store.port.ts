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

export interface CheckpointStore {
  add(cp: { treeSize: number; rootHash: string; note: string }): StoredCheckpoint;
  latest(): StoredCheckpoint | null;
  all(): StoredCheckpoint[];
}
