/** In-memory CheckpointStore, for unit tests only; same contract suite as the SQLite one. */
import type { CheckpointStore, NewCheckpoint, ProveConsistencyFrom, StoredCheckpoint } from '../../ports/checkpoint-store.port';
import { checkCheckpointOrder, validateCheckpoint } from './checkpoint-rules';

export class MemoryCheckpointStore implements CheckpointStore {
  private readonly items: StoredCheckpoint[] = [];

  add(cp: NewCheckpoint, proveFrom: ProveConsistencyFrom): StoredCheckpoint {
    validateCheckpoint(cp);
    checkCheckpointOrder(this.latest(), cp, proveFrom);
    const stored: StoredCheckpoint = { seq: this.items.length, treeSize: cp.treeSize, rootHash: cp.rootHash, note: cp.note };
    this.items.push(stored);
    return { ...stored };
  }

  latest(): StoredCheckpoint | null {
    const last = this.items[this.items.length - 1];
    return last ? { ...last } : null;
  }

  all(): StoredCheckpoint[] {
    return this.items.map((c) => ({ ...c }));
  }

  /** For MemoryLedgerLock: a function that puts the store back as it is now. */
  savepoint(): () => void {
    const n = this.items.length;
    return () => {
      this.items.length = n;
    };
  }
}
