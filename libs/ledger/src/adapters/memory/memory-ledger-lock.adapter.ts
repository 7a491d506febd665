/**
 * In-memory LedgerLock, for unit tests only; same contract suite as the SQLite one. One process and synchronous
 * work: nothing else can run while the work does, so the lock is a reentrancy check plus undo (the stores it is
 * given are put back as they were when the work throws, as a SQLite rollback would).
 */
import type { LedgerLock, LockedLog } from '../../ports/ledger-lock.port';
import { lockReentered } from '../../ports/event-store.errors';
import type { MemoryEventStore } from './memory-event-store.adapter';

/** A store that can put itself back as it was (MemoryMerkleNodeStore, MemoryCheckpointStore). */
export interface MemorySavepoint {
  savepoint(): () => void;
}

export class MemoryLedgerLock implements LedgerLock {
  private held = false;

  constructor(
    private readonly events: MemoryEventStore,
    private readonly stores: MemorySavepoint[] = [],
  ) {}

  exclusive<T>(work: (log: LockedLog) => T): T {
    if (this.held) throw lockReentered();
    const live = () => {
      if (!this.held) throw lockReentered();
    };
    const log: LockedLog = {
      size: () => {
        live();
        return this.events.sizeNow();
      },
      forEach: (from, to, f) => {
        live();
        for (let at = from; at < to; at += 2000) {
          const batch = this.events.readRange(at, Math.min(to, at + 2000));
          if (batch.length === 0) return;
          f(batch);
        }
      },
      forEachOfType: (type, from, to, f) => {
        live();
        const batch = this.events.readRange(from, to).filter((e) => e.type === type);
        for (let at = 0; at < batch.length; at += 2000) f(batch.slice(at, at + 2000));
      },
    };
    const undo = this.stores.map((s) => s.savepoint());
    this.held = true;
    try {
      return work(log);
    } catch (e) {
      for (const u of undo.reverse()) u();
      throw e;
    } finally {
      this.held = false;
    }
  }
}
