/**
 * CheckpointStore over the `checkpoints` table. The last checkpoint is read, the order guard applied and the new
 * row inserted in one write transaction (`BEGIN IMMEDIATE`, or a savepoint of the ledger's write lock when that is
 * held), so two processes can never both store a checkpoint after the same last one.
 */
import type Database from 'better-sqlite3';
import type { CheckpointStore, NewCheckpoint, ProveConsistencyFrom, StoredCheckpoint } from '../../ports/checkpoint-store.port';
import { checkCheckpointOrder, validateCheckpoint } from '../memory/checkpoint-rules';
import { translateDbError } from './sqlite.errors';

interface Row {
  seq: number;
  tree_size: number;
  root_hash: string;
  note: string;
}

const toStored = (r: Row): StoredCheckpoint => ({ seq: r.seq, treeSize: r.tree_size, rootHash: r.root_hash, note: r.note });

export class SqliteCheckpointStore implements CheckpointStore {
  private readonly insert: Database.Statement;
  private readonly last: Database.Statement;
  private readonly every: Database.Statement;
  private readonly addTx: Database.Transaction<(cp: NewCheckpoint, proveFrom: ProveConsistencyFrom) => StoredCheckpoint>;

  constructor(
    db: Database.Database,
    private readonly path: string,
  ) {
    this.insert = db.prepare(
      `INSERT INTO checkpoints (seq, tree_size, root_hash, note)
       SELECT coalesce(max(seq) + 1, 0), ?, ?, ? FROM checkpoints
       RETURNING seq, tree_size, root_hash, note`,
    );
    this.last = db.prepare('SELECT seq, tree_size, root_hash, note FROM checkpoints ORDER BY seq DESC LIMIT 1');
    this.every = db.prepare('SELECT seq, tree_size, root_hash, note FROM checkpoints ORDER BY seq ASC');
    this.addTx = db.transaction((cp: NewCheckpoint, proveFrom: ProveConsistencyFrom) => {
      const last = this.last.get() as Row | undefined;
      checkCheckpointOrder(last ? toStored(last) : null, cp, proveFrom);
      return toStored(this.insert.get(cp.treeSize, cp.rootHash, cp.note) as Row);
    });
  }

  private run<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      throw translateDbError(this.path, e);
    }
  }

  add(cp: NewCheckpoint, proveFrom: ProveConsistencyFrom): StoredCheckpoint {
    validateCheckpoint(cp);
    // Inside the ledger's write lock this is a savepoint; on its own, a BEGIN IMMEDIATE transaction.
    return this.run(() => this.addTx.immediate(cp, proveFrom));
  }

  latest(): StoredCheckpoint | null {
    const r = this.run(() => this.last.get() as Row | undefined);
    return r ? toStored(r) : null;
  }

  all(): StoredCheckpoint[] {
    return this.run(() => (this.every.all() as Row[]).map(toStored));
  }
}
