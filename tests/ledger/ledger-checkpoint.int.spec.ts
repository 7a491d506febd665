/**
 * Checkpoint signing over a real ASSAY_HOME (SQLite, checkpoint.last): what a crash between the witness file and the
 * commit leaves, and records the signer must not rely on.
 */
import { createHash } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { FileCheckpointWitness, Ledger, LedgerHome, homePaths, type WitnessedCheckpoint, initLedgerHome } from '@assay/ledger';
import { deps, tamper, verifyHome } from '../support/ledger-home-fixtures';
import { scratchDirs } from '../support/scratch';

const dirs = scratchDirs('assay-checkpoint-');

async function home(): Promise<string> {
  const h = dirs.fresh('home');
  await initLedgerHome(h, { ...deps(), origin: 'assay.test/checkpoint' });
  return h;
}

/** The same ledger, with a witness that writes the file and then "crashes" before the transaction commits. */
function crashingAfterWitness(h: LedgerHome): Ledger {
  class Crash extends FileCheckpointWitness {
    override save(cp: WitnessedCheckpoint): void {
      super.save(cp);
      throw new Error('power lost after checkpoint.last was written');
    }
  }
  return new Ledger({
    store: h.db.events,
    merkle: h.db.merkleNodes,
    checkpoints: h.db.checkpoints,
    lock: h.db.lock,
    witness: new Crash(h.paths.witness),
    keys: h.keys,
    ...deps(),
    origin: h.config.origin,
  });
}

describe('checkpoint signing on a real home', () => {
  it('a crash between checkpoint.last and the commit leaves the file ahead; the next checkpoint stores that one', async () => {
    const dir = await home();
    const h = new LedgerHome(dir, deps());
    try {
      await h.ledger.append('note-c', [{ type: 'Note', data: { text: 'x' } }]);
      await expect(crashingAfterWitness(h).checkpoint()).rejects.toThrow(/power lost/);
      // Rolled back in the database, written in the file: the file is ahead, never behind.
      expect(h.db.checkpoints.latest()?.treeSize).toBe(3);
      const witness = JSON.parse(readFileSync(homePaths(dir).witness, 'utf8')) as WitnessedCheckpoint;
      expect(witness.treeSize).toBe(4);
      const next = await h.ledger.checkpoint();
      expect(next).toMatchObject({ treeSize: 4, fresh: false, note: witness.note });
      expect(h.db.checkpoints.all().map((c) => c.treeSize)).toEqual([3, 4]);
      expect(h.db.checkpoints.latest()?.note).toBe(witness.note);
    } finally {
      await h.close();
    }
    expect((await verifyHome(dir)).ok).toBe(true);
  });

  it('refuses to sign after the last stored checkpoint row was edited, or when merkle_nodes indexes more leaves than there are events', async () => {
    const dir = await home();
    tamper(dir, (db) => db.prepare('UPDATE checkpoints SET tree_size = 2 WHERE seq = 0').run());
    let h = new LedgerHome(dir, deps());
    try {
      await h.ledger.append('note-c', [{ type: 'Note', data: { text: 'x' } }]);
      await expect(h.ledger.checkpoint()).rejects.toMatchObject({ code: 'LEDGER_CHECKPOINT_TAMPERED', kind: 'integrity' });
      expect(h.db.checkpoints.all()).toHaveLength(1);
    } finally {
      await h.close();
    }
    const dir2 = await home();
    tamper(dir2, (db) => db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (0, 3, ?)').run(Buffer.alloc(32)));
    h = new LedgerHome(dir2, deps());
    try {
      await expect(h.ledger.checkpoint()).rejects.toMatchObject({ code: 'LEDGER_MERKLE_AHEAD', kind: 'integrity' });
      expect(h.db.checkpoints.all()).toHaveLength(1);
    } finally {
      await h.close();
    }
  });

  it('refuses to sign a root built from Merkle nodes edited past the last signed size (the consistency proof does not cover them)', async () => {
    const dir = await home(); // 3 events, checkpoint of size 3
    const h0 = new LedgerHome(dir, deps());
    try {
      await h0.ledger.append('note-c', [{ type: 'Note', data: { text: 'x' } }]);
    } finally {
      await h0.close();
    }
    // A forger indexes event 3 with a leaf of their choosing, and the interior nodes that follow from it.
    const node = (a: Buffer, b: Buffer): Buffer =>
      createHash('sha256')
        .update(Buffer.concat([Buffer.from([1]), a, b]))
        .digest();
    tamper(dir, (db) => {
      const get = (level: number, idx: number): Buffer =>
        db.prepare('SELECT hash FROM merkle_nodes WHERE level = ? AND idx = ?').pluck().get(level, idx) as Buffer;
      const forged = Buffer.alloc(32, 7);
      const l1 = node(get(0, 2), forged);
      db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (0, 3, ?), (1, 1, ?), (2, 0, ?)').run(forged, l1, node(get(1, 0), l1));
    });
    const h = new LedgerHome(dir, deps());
    try {
      await expect(h.ledger.checkpoint()).rejects.toMatchObject({ code: 'LEDGER_PROOF_MISMATCH', kind: 'integrity' });
      expect(h.db.checkpoints.all().map((c) => c.treeSize)).toEqual([3]);
    } finally {
      await h.close();
    }
  });

  it('writes checkpoint.last again when it is missing or behind the database, without signing anew', async () => {
    const dir = await home();
    const { witness } = homePaths(dir);
    const before = readFileSync(witness, 'utf8');
    unlinkSync(witness);
    const h = new LedgerHome(dir, deps());
    try {
      expect(await h.ledger.checkpoint()).toMatchObject({ treeSize: 3, fresh: false });
    } finally {
      await h.close();
    }
    expect(readFileSync(witness, 'utf8')).toBe(before);
    expect((await verifyHome(dir)).ok).toBe(true);
  });
});
