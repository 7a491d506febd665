/** MerkleNodeStore over the `merkle_nodes` table (WITHOUT ROWID, keyed by (level, idx)). */
import type Database from 'better-sqlite3';
import type { MerkleNodeStore, StoredMerkleNodes } from '../../ports/merkle-node-store.port';
import { merkleNodeMissing } from '../../ports/event-store.errors';
import { newNodesForAppend } from '../../domain/merkle';
import { translateDbError } from './sqlite.errors';

export class SqliteMerkleNodeStore implements MerkleNodeStore {
  private readonly count: Database.Statement;
  private readonly get: Database.Statement;
  private readonly insert: Database.Statement;
  private readonly clear: Database.Statement;
  private readonly appendTx: Database.Transaction<(leaves: Uint8Array[]) => void>;

  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
  ) {
    // max(idx) on the primary key is one index probe, unlike count(*).
    this.count = db.prepare('SELECT coalesce(max(idx) + 1, 0) FROM merkle_nodes WHERE level = 0').pluck();
    this.get = db.prepare('SELECT hash FROM merkle_nodes WHERE level = ? AND idx = ?').pluck();
    this.insert = db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (?, ?, ?)');
    this.clear = db.prepare('DELETE FROM merkle_nodes');
    this.appendTx = db.transaction((leaves: Uint8Array[]) => {
      const n = this.count.get() as number;
      const nodes = newNodesForAppend(n, leaves, (level, index) => this.node(level, index));
      for (const x of nodes) this.insert.run(x.level, x.index, Buffer.from(x.hash.buffer, x.hash.byteOffset, x.hash.byteLength));
    });
  }

  private run<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      throw translateDbError(this.path, e);
    }
  }

  leafCount(): number {
    return this.run(() => this.count.get() as number);
  }

  appendLeaves(leafHashes: Uint8Array[]): void {
    if (Array.isArray(leafHashes) && leafHashes.length === 0) return;
    this.run(() => this.appendTx.immediate(leafHashes));
  }

  node(level: number, index: number): Uint8Array {
    const h = this.run(() => this.get.get(level, index) as Buffer | undefined);
    if (h === undefined) throw merkleNodeMissing(level, index, this.leafCount());
    return h;
  }

  reset(): void {
    this.run(() => this.clear.run());
  }

  /** The table as stored, for verification (see StoredMerkleNodes): values exactly as SQLite holds them. */
  stored(): StoredMerkleNodes {
    const shape = this.db.prepare('SELECT level, count(*) AS count, min(idx) AS minIdx, max(idx) AS maxIdx FROM merkle_nodes GROUP BY level ORDER BY level');
    // One row per range, the hashes as one BLOB: materializing a Buffer per row costs several times SQLite's own scan.
    const range = this.db
      .prepare(
        `SELECT count(*), coalesce(sum(typeof(idx) = 'integer' AND typeof(hash) = 'blob' AND length(hash) = 32), 0), min(idx), max(idx),
                CAST(coalesce(group_concat(hash, '' ORDER BY idx), '') AS BLOB)
         FROM merkle_nodes WHERE level = ? AND idx >= ? AND idx < ?`,
      )
      .raw(true);
    return {
      shape: () => this.run(() => shape.all() as Array<{ level: unknown; count: number; minIdx: unknown; maxIdx: unknown }>),
      range: (level, from, to) =>
        this.run(() => {
          const [count, wellFormed, minIdx, maxIdx, hashes] = range.get(level, from, to) as [number, number, unknown, unknown, Buffer];
          return { count, wellFormed, minIdx, maxIdx, hashes };
        }),
    };
  }
}
