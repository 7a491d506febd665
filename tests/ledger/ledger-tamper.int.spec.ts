/**
 * Tamper evidence on a real SQLite ledger file: every kind of tampering an attacker with write access to the
 * database can do is reported by verification, with the step and the first bad position.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ledger, LedgerHome, generateKeyPair, homePaths, toSigningKey, type SigningKey } from '@assay/ledger';
import { copyHome, deps, sampleHomes, tamper, verifyHome } from '../support/ledger-home-fixtures';

// Inline, and with worker threads that read the SQLite file themselves (chunks of 4, so every test spans many
// chunks and crosses chunk boundaries): both must report the same step and first bad position.
const MODES: Array<[string, { workers: number; chunkSize?: number; mainThread?: boolean }]> = [
  ['checked on the main thread', { workers: 0 }],
  ['checked by the main thread and a worker, each reading the file itself', { workers: 2, chunkSize: 4 }],
  ['checked by 2 workers reading the file themselves', { workers: 2, chunkSize: 4, mainThread: false }],
];

// Each verification with workers starts two threads (from TypeScript sources under jest: a few hundred ms each).
jest.setTimeout(120_000);

describe.each(MODES)('ledger tamper evidence (SQLite), %s', (_name, mode) => {
  const homes = sampleHomes('assay-tamper-');
  const fresh = (): string => homes.fresh();

  it('verifies the untouched ledger, every step passing', async () => {
    const r = await verifyHome(homes.pristine, mode);
    expect(r.failure).toBeNull();
    expect(r.ok).toBe(true);
    expect(r.events).toBe(homes.total);
    expect(homes.total).toBeGreaterThan(40);
    expect(r.steps.every((s) => s.ok)).toBe(true);
    expect(r.steps.find((s) => s.name === 'signatures')?.checked).toBe(homes.total);
    expect(r.checks).toEqual(
      mode.workers === 0
        ? { workers: 0, readBy: 'main', mainChecks: true }
        : mode.mainThread === false
          ? { workers: 2, readBy: 'workers', mainChecks: false }
          : { workers: 1, readBy: 'workers', mainChecks: true },
    );
  });

  it('reports one flipped byte in any stored event with its position', async () => {
    const home = fresh();
    const original = new Map<number, Buffer>();
    tamper(home, (db) => {
      for (const row of db.prepare('SELECT position, bytes FROM events').all() as Array<{ position: number; bytes: Buffer }>)
        original.set(row.position, row.bytes);
    });
    // Every position inline; with workers (each verification starts two threads) every position of the first chunks
    // and every third one after.
    for (let pos = 0; pos < homes.total; pos += mode.workers > 0 && pos >= 12 ? 3 : 1) {
      const bytes = Buffer.from(original.get(pos) as Buffer);
      const at = (pos * 7919) % bytes.length; // a different offset for each event, across the whole envelope
      bytes[at] = (bytes[at] as number) ^ 0x01;
      tamper(home, (db) => db.prepare('UPDATE events SET bytes = ? WHERE position = ?').run(bytes, pos));
      const r = await verifyHome(home, mode);
      expect({ pos, ok: r.ok, position: r.failure?.position }).toEqual({ pos, ok: false, position: pos });
      tamper(home, (db) => db.prepare('UPDATE events SET bytes = ? WHERE position = ?').run(original.get(pos), pos));
    }
    expect((await verifyHome(home, mode)).ok).toBe(true);
  });

  it('reports a damaged database page as the storage step, ahead of anything else', async () => {
    const home = fresh();
    let page = 0;
    let size = 0;
    tamper(home, (db) => {
      db.pragma('wal_checkpoint(TRUNCATE)');
      page = db.prepare("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' ORDER BY rootpage LIMIT 1").pluck().get() as number;
      size = db.pragma('page_size', { simple: true }) as number;
    });
    // Garbage in the second half of an index page: the events themselves still read, the file is not sound.
    const file = homePaths(home).db;
    const bytes = readFileSync(file);
    for (let i = (page - 1) * size + size / 2; i < page * size; i++) bytes[i] = (i * 131) & 0xff;
    writeFileSync(file, bytes);
    const r = await verifyHome(home, mode);
    expect(r.ok).toBe(false);
    expect(r.failure).toMatchObject({ step: 'storage', code: 'VERIFY_STORAGE_CORRUPT' });
    expect(r.steps.find((x) => x.name === 'storage')?.ok).toBe(false);
  });

  it('reports a flipped bit in a stored hash or column', async () => {
    const home = fresh();
    tamper(home, (db) => db.prepare('UPDATE events SET hash = zeroblob(32) WHERE position = 5').run());
    let r = await verifyHome(home, mode);
    expect(r.failure).toMatchObject({ step: 'envelopes', code: 'VERIFY_HASH_MISMATCH', position: 5 });
    const home2 = fresh();
    tamper(home2, (db) => db.prepare("UPDATE events SET type = 'Note' WHERE position = 7").run());
    r = await verifyHome(home2, mode);
    expect(r.failure).toMatchObject({ step: 'envelopes', code: 'VERIFY_COLUMN_MISMATCH', position: 7 });
  });

  it('reports events deleted after a checkpoint', async () => {
    const home = fresh();
    tamper(home, (db) => db.prepare('DELETE FROM events WHERE position >= ?').run(homes.total - 3));
    const r = await verifyHome(home, mode);
    expect(r.failure).toMatchObject({ step: 'merkle', code: 'VERIFY_TRUNCATED', position: homes.total - 3 });
    expect(r.failure?.message).toContain(`covers ${homes.total} events but only ${homes.total - 3} are stored`);
  });

  it('reports an event deleted from the middle', async () => {
    const home = fresh();
    tamper(home, (db) => db.prepare('DELETE FROM events WHERE position = 20').run());
    const r = await verifyHome(home, mode);
    expect(r.failure).toMatchObject({ step: 'envelopes', code: 'VERIFY_POSITION_GAP', position: 21 });
  });

  it('reports two swapped events', async () => {
    const home = fresh();
    tamper(home, (db) => {
      const a = db.prepare('SELECT * FROM events WHERE position = 10').get() as Record<string, unknown>;
      const b = db.prepare('SELECT * FROM events WHERE position = 11').get() as Record<string, unknown>;
      const put = db.prepare('UPDATE events SET stream = ?, revision = ?, id = ?, type = ?, bytes = ?, hash = ? WHERE position = ?');
      db.transaction(() => {
        db.prepare("UPDATE events SET id = id || 'x', revision = revision + 100000 WHERE position IN (10, 11)").run();
        put.run(b.stream, b.revision, b.id, b.type, b.bytes, b.hash, 10);
        put.run(a.stream, a.revision, a.id, a.type, a.bytes, a.hash, 11);
      })();
    });
    const r = await verifyHome(home, mode);
    expect(r.ok).toBe(false);
    expect(r.failure?.position).toBe(10);
    expect(r.failure?.step).toBe('envelopes');
  });

  it('reports an event signed by a key without the right role', async () => {
    const home = fresh();
    const h = new LedgerHome(home, deps());
    try {
      const runtime = h.keys.find((k) => k.role === 'runtime') as SigningKey;
      // A forged writer that presents the runtime key as a controller key.
      const forged = new Ledger({
        store: h.db.events,
        merkle: h.db.merkleNodes,
        checkpoints: h.db.checkpoints,
        keys: [{ ...runtime, role: 'controller' }],
        clock: deps().clock,
        ids: deps().ids,
        origin: h.config.origin,
      });
      await forged.append('run-forged', [
        { type: 'RunCompleted', data: { run: 'forged', status: 'completed', bestRound: 1, bestScore: 1, bestSnapshot: null } },
      ]);
    } finally {
      await h.close();
    }
    const r = await verifyHome(home, mode);
    expect(r.failure).toMatchObject({ step: 'roles', code: 'VERIFY_WRONG_ROLE', position: homes.total });
    expect(r.failure?.message).toMatch(/RunCompleted must be signed by a key with role controller; .* has role runtime/);
  });

  it('reports an event signed by a revoked key, and by a key that was never registered', async () => {
    const home = fresh();
    const h = new LedgerHome(home, deps());
    let revokedAt = 0;
    try {
      const runtime = h.keys.find((k) => k.role === 'runtime') as SigningKey;
      const r = await h.ledger.append(
        Ledger.keyStream(runtime.name),
        [{ type: 'KeyRevoked', data: { keyId: runtime.signer, reason: 'laptop lost' } }],
        'stream_exists',
      );
      revokedAt = r.lastPosition;
      // The holder of the revoked key keeps writing.
      await h.ledger.append('image-late', [{ type: 'ImageBuilt', data: { image: 'x', digest: 'sha256:00', purpose: 'judge', durationMs: 1 } }]);
    } finally {
      await h.close();
    }
    let r = await verifyHome(home, mode);
    expect(r.failure).toMatchObject({ step: 'roles', code: 'VERIFY_REVOKED_SIGNER', position: revokedAt + 1 });

    const home2 = fresh();
    const h2 = new LedgerHome(home2, deps());
    try {
      const stranger = toSigningKey(generateKeyPair('controller', 'stranger'));
      const forged = new Ledger({
        store: h2.db.events,
        merkle: h2.db.merkleNodes,
        checkpoints: h2.db.checkpoints,
        keys: [stranger],
        clock: deps().clock,
        ids: deps().ids,
        origin: h2.config.origin,
      });
      await forged.append('note-stranger', [{ type: 'Note', data: { text: 'not from this ledger' } }]);
    } finally {
      await h2.close();
    }
    r = await verifyHome(home2, mode);
    expect(r.failure).toMatchObject({ step: 'roles', code: 'VERIFY_UNKNOWN_SIGNER', position: homes.total });
  });

  it('reports a second, forked checkpoint as equivocation', async () => {
    const a = fresh();
    const b = fresh();
    for (const [home, text] of [
      [a, 'history A'],
      [b, 'history B'],
    ] as const) {
      const h = new LedgerHome(home, deps());
      try {
        await h.ledger.append('note-fork', [{ type: 'Note', data: { text } }]);
        await h.ledger.checkpoint();
      } finally {
        await h.close();
      }
    }
    const forkNote = await (async () => {
      const h = new LedgerHome(b, deps());
      try {
        return h.db.checkpoints.latest()?.note as string;
      } finally {
        await h.close();
      }
    })();
    // Supplied from elsewhere (e.g. what a witness was shown) ...
    let r = await verifyHome(a, { ...mode, externalCheckpoints: [forkNote] });
    expect(r.failure).toMatchObject({ step: 'checkpoints', code: 'VERIFY_EQUIVOCATION' });
    expect(r.failure?.evidence).toHaveLength(2);
    // ... or planted in the database itself.
    tamper(a, (db) => db.prepare('INSERT INTO checkpoints (seq, tree_size, root_hash, note) VALUES (99, ?, ?, ?)').run(homes.total + 1, 'x', forkNote));
    r = await verifyHome(a, mode);
    expect(r.failure).toMatchObject({ step: 'checkpoints', code: 'VERIFY_EQUIVOCATION' });
  });

  it('refuses to sign a checkpoint smaller than, or inconsistent with, the last one, also after a restart and a restored old database', async () => {
    const home = fresh();
    const old = join(homes.dir, 'old-db');
    copyHome(home, old);
    let h = new LedgerHome(home, deps());
    await h.ledger.append('note-x', [{ type: 'Note', data: { text: 'one more' } }]);
    const cp = await h.ledger.checkpoint();
    expect(cp.treeSize).toBe(homes.total + 1);
    await h.close();
    // Restore the database from before the last append, keep the home's checkpoint record.
    for (const f of ['ledger.db', 'ledger.db-wal', 'ledger.db-shm']) {
      rmSync(join(homePaths(home).ledgerDir, f), { force: true });
      try {
        copyHome(join(homePaths(old).ledgerDir, f), join(homePaths(home).ledgerDir, f));
      } catch {
        // -wal / -shm may not exist
      }
    }
    h = new LedgerHome(home, deps());
    try {
      await expect(h.ledger.checkpoint()).rejects.toMatchObject({ code: 'LEDGER_CHECKPOINT_ROLLBACK' });
      // A different event at the same size is inconsistent with what was signed.
      await h.ledger.append('note-x', [{ type: 'Note', data: { text: 'a different history' } }]);
      await expect(h.ledger.checkpoint()).rejects.toMatchObject({ code: 'LEDGER_CHECKPOINT_INCONSISTENT' });
    } finally {
      await h.close();
    }
  });
});
