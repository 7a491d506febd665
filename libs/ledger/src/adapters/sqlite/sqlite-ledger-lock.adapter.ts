/**
 * LedgerLock over the ledger database: `BEGIN IMMEDIATE` on the one connection the event store, the Merkle node
 * store and the checkpoint store share, so the lock is SQLite's own write lock. Appends of other connections (other
 * processes) wait for it like for any writer (busy timeout), and within this process nothing else can run while
 * the synchronous work holds it. The stores' own transactions become savepoints of this one, so a failure undoes
 * everything written under the lock. Reads under it see the newest committed state (a write lock in WAL mode
 * implies the latest snapshot).
 */
import type Database from 'better-sqlite3';
import type { LedgerLock, LockedEvent, LockedLog } from '../../ports/ledger-lock.port';
import { lockReentered } from '../../ports/event-store.errors';
import { translateDbError } from './sqlite.errors';

const BATCH = 2000;

export class SqliteLedgerLock implements LedgerLock {
  private readonly size: Database.Statement;
  private readonly range: Database.Statement;
  private readonly rangeOfType: Database.Statement;
  private readonly tx: Database.Transaction<(work: (log: LockedLog) => unknown, log: LockedLog) => unknown>;
  private held = false;

  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
  ) {
    this.size = db.prepare('SELECT coalesce(max(position) + 1, 0) FROM events').pluck();
    this.range = db.prepare('SELECT position, type, bytes FROM events WHERE position >= ? AND position < ? ORDER BY position ASC LIMIT ?');
    this.rangeOfType = db.prepare('SELECT position, type, bytes FROM events WHERE type = ? AND position >= ? AND position < ? ORDER BY position ASC LIMIT ?');
    this.tx = db.transaction((work: (log: LockedLog) => unknown, log: LockedLog) => work(log));
  }

  exclusive<T>(work: (log: LockedLog) => T): T {
    if (this.held || this.db.inTransaction) throw lockReentered();
    const live = () => {
      if (!this.held) throw lockReentered();
    };
    const log: LockedLog = {
      size: () => {
        live();
        return this.size.get() as number;
      },
      forEach: (from: number, to: number, f: (batch: LockedEvent[]) => void) => {
        live();
        for (let at = from; at < to;) {
          const rows = this.range.all(at, to, BATCH) as LockedEvent[];
          if (rows.length === 0) return;
          f(rows);
          at = rows[rows.length - 1]!.position + 1;
        }
      },
      forEachOfType: (type: string, from: number, to: number, f: (batch: LockedEvent[]) => void) => {
        live();
        for (let at = from; at < to;) {
          const rows = this.rangeOfType.all(type, at, to, BATCH) as LockedEvent[];
          if (rows.length === 0) return;
          f(rows);
          at = rows[rows.length - 1]!.position + 1;
        }
      },
    };
    this.held = true;
    try {
      return this.tx.immediate(work, log) as T;
    } catch (e) {
      throw translateDbError(this.path, e);
    } finally {
      this.held = false;
    }
  }
}
