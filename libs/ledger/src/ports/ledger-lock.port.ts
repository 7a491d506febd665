/**
 * The ledger's write lock: one writer at a time where order matters (Merkle integration and checkpoint signing).
 *
 * The lock is the one the stores themselves write under, so while it is held no append, no Merkle integration and
 * no checkpoint can be committed by anyone else, in this process or another: the event log, the Merkle node store
 * and the checkpoint store hold still, and what the holder reads (the log's size, the leaf count, the last
 * checkpoint) stays true until it lets go. The work is synchronous on purpose: nothing else of this process can run
 * in the middle of it either.
 *
 * Adapters: SQLite (`BEGIN IMMEDIATE` on the connection the event store, the Merkle node store and the checkpoint
 * store share) and memory (one process; the work runs alone by construction). One contract suite
 * (tests/contract/ledger-lock.contract.ts) runs against both.
 */

/** An event as the lock holder reads it: enough to index it and to look at its type. */
export interface LockedEvent {
  position: number;
  type: string;
  /** The exact wire bytes. */
  bytes: Uint8Array;
}

/** The event log as seen while the lock is held: it does not change until the lock is let go. */
export interface LockedLog {
  /** Number of events (= the next position). */
  size(): number;
  /** Calls `f` with the events of positions [from, to), in order, a batch at a time. */
  forEach(from: number, to: number, f: (batch: LockedEvent[]) => void): void;
  /** Like forEach, only the events of one type (the store may skip the others without reading their bytes). */
  forEachOfType(type: string, from: number, to: number, f: (batch: LockedEvent[]) => void): void;
}

export interface LedgerLock {
  /**
   * Runs `work` holding the write lock and returns what it returns. If `work` throws, everything it wrote through
   * the stores under the lock (Merkle nodes, checkpoints) is undone and the error is rethrown. Waits for another
   * holder (up to the store's busy timeout: then LEDGER_DB_UNAVAILABLE). Not reentrant: calling it from inside
   * `work` fails with LEDGER_LOCK_REENTERED.
   */
  exclusive<T>(work: (log: LockedLog) => T): T;
}
