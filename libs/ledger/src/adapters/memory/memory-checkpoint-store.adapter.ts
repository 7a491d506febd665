/** In-memory CheckpointStore, for unit tests only; same contract suite as the SQLite one. */
import type { CheckpointStore, StoredCheckpoint } from '../../ports/checkpoint-store.port';
import { validateCheckpoint } from './checkpoint-rules';

export class MemoryCheckpointStore implements CheckpointStore {
  private readonly items: StoredCheckpoint[] = [];

  add(cp: { treeSize: number; rootHash: string; note: string }): StoredCheckpoint {
    validateCheckpoint(cp);
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
}
