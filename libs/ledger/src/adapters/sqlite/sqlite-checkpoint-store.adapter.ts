/** CheckpointStore over the `checkpoints` table; `seq` is allocated inside the insert itself, so it is atomic. */
import type Database from 'better-sqlite3';
import type { CheckpointStore, StoredCheckpoint } from '../../ports/checkpoint-store.port';
import { validateCheckpoint } from '../memory/checkpoint-rules';
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
  }

  private run<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      throw translateDbError(this.path, e);
    }
  }

  add(cp: { treeSize: number; rootHash: string; note: string }): StoredCheckpoint {
    validateCheckpoint(cp);
    return this.run(() => toStored(this.insert.get(cp.treeSize, cp.rootHash, cp.note) as Row));
  }

  latest(): StoredCheckpoint | null {
    const r = this.run(() => this.last.get() as Row | undefined);
    return r ? toStored(r) : null;
  }

  all(): StoredCheckpoint[] {
    return this.run(() => (this.every.all() as Row[]).map(toStored));
  }
}
