/**
 * `assay ledger verify` checks everything it relies on (docs/formats.md, "Ledger database", "Checkpoints",
 * "Cosignatures"; docs/operations.md, "Verifying"):
 *   - the home's witness file `checkpoint.last` against the log (a restored older database, a deleted or damaged
 *     WAL, a witness that was edited, deleted or replaced);
 *   - every stored checkpoint row's columns against its signed note; the Merkle nodes table against the recomputed
 *     tree (and `consistency`/`prove` refuse proofs from a damaged table); event ids unique by the verifier's own
 *     check, not the database's index;
 *   - nothing in the database makes it crash or write: values of the wrong storage class, an emptied or edited
 *     schema_version, a changed schema; copies in directories it must not write to;
 *   - checkpoint signatures: a revoked (or not yet registered) controller key, a bad line by any registered key.
 * Each case runs on a fresh copy of one sample home.
 */
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Ledger,
  LedgerHome,
  SqliteLedgerDatabase,
  cosign,
  ed25519Cosigner,
  envelopeText,
  formatCheckpointBody,
  formatSignatureLine,
  generateKeyPair,
  homePaths,
  parseVerifierKey,
  signNote,
  toSigningKey,
  verifyLedger,
  verifyLedgerFile,
  verifyLedgerHome,
  type KeyPair,
  type SigningKey,
  type VerificationReport,
  initLedgerHome,
} from '@assay/ledger';
import { copyHome, deps, sampleHomes, tamper } from '../support/ledger-home-fixtures';

jest.setTimeout(120_000);

type Mode = { workers: number; chunkSize?: number };
const INLINE: Mode = { workers: 0 };
const WORKERS: Mode = { workers: 2, chunkSize: 4 };

/** What `assay ledger verify` runs in a home: read-only, pinned origin and root key, the witness file. */
const verify = (home: string, extra: Partial<Parameters<typeof verifyLedgerHome>[1]> = INLINE): Promise<VerificationReport> =>
  verifyLedgerHome(home, { claims: null, workers: 0, ...extra });

const sha = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');
const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

async function withHome<T>(home: string, fn: (h: LedgerHome) => Promise<T>): Promise<T> {
  const h = new LedgerHome(home, deps());
  try {
    return await fn(h);
  } finally {
    await h.close();
  }
}

/** A ledger over the home's stores that signs with exactly these keys. */
function ledgerWith(h: LedgerHome, keys: SigningKey[]): Ledger {
  const d = deps();
  return new Ledger({
    store: h.db.events,
    merkle: h.db.merkleNodes,
    checkpoints: h.db.checkpoints,
    lock: h.db.lock,
    keys,
    clock: d.clock,
    ids: d.ids,
    origin: h.config.origin,
  });
}

function signCheckpoint(key: SigningKey, origin: string, treeSize: number, root: Uint8Array): string {
  return signNote(formatCheckpointBody({ origin, treeSize, rootHash: root }), [{ name: key.name, keyId: key.keyId, sign: (m) => key.sign(m) }]);
}

const bodyOf = (note: string): string => note.slice(0, note.indexOf('\n\n') + 1);

/** A signature line with its last signature byte flipped (still canonical base64). */
function damaged(line: string): string {
  const [dash, name, sig] = line.trimEnd().split(' ') as [string, string, string];
  const raw = Buffer.from(sig, 'base64');
  raw[raw.length - 1] = (raw[raw.length - 1] as number) ^ 0x01;
  return `${dash} ${name} ${raw.toString('base64')}\n`;
}

describe('ledger verify: everything it relies on', () => {
  const homes = sampleHomes('assay-verify-all-');
  const fresh = (): string => homes.fresh();
  let n = 0;
  const witnessOf = (home: string): { treeSize: number; rootHash: string; note: string } => JSON.parse(readFileSync(homePaths(home).witness, 'utf8'));
  const writeWitness = (home: string, v: unknown): void =>
    writeFileSync(homePaths(home).witness, typeof v === 'string' ? v : `${JSON.stringify(v, null, 2)}\n`);

  it('verifies the untouched home, the witness included, inline and with workers', async () => {
    for (const mode of [INLINE, WORKERS]) {
      const r = await verify(homes.pristine, mode);
      expect(r.failure).toBeNull();
      expect(r.events).toBe(homes.total);
    }
    expect(witnessOf(homes.pristine).treeSize).toBe(homes.total);
  });

  describe('checkpoint.last (item 3)', () => {
    it('reports a restored older database: the witness covers events the log no longer has', async () => {
      const home = fresh();
      const old = join(homes.dir, `old-${n++}`);
      copyHome(home, old);
      await withHome(home, async (h) => {
        await h.ledger.append('note-late', [{ type: 'Note', data: { text: 'after the backup' } }]);
        await h.ledger.checkpoint();
      });
      for (const f of ['ledger.db', 'ledger.db-wal', 'ledger.db-shm']) {
        rmSync(join(homePaths(home).ledgerDir, f), { force: true });
        if (existsSync(join(homePaths(old).ledgerDir, f))) copyFileSync(join(homePaths(old).ledgerDir, f), join(homePaths(home).ledgerDir, f));
      }
      const r = await verify(home);
      expect(r.failure).toMatchObject({ step: 'checkpoints', code: 'VERIFY_WITNESS_TRUNCATED', position: homes.total });
      expect(r.failure?.message).toMatch(/checkpoint\.last records a signed checkpoint of \d+ events, but the database holds \d+/);
    });

    it('reports a deleted WAL and a damaged one that lose checkpointed events', async () => {
      const live = fresh();
      const copies = [join(homes.dir, `wal-intact-${n}`), join(homes.dir, `wal-deleted-${n}`), join(homes.dir, `wal-damaged-${n++}`)];
      await withHome(live, async (h) => {
        for (let i = 0; i < 3; i++) await h.ledger.append('note-wal', [{ type: 'Note', data: { text: `in the WAL ${i}` } }]);
        await h.ledger.checkpoint();
        // Copied while the writer is open: the new events and the checkpoint are only in ledger.db-wal.
        for (const c of copies) copyHome(live, c);
      });
      expect(existsSync(join(homePaths(copies[0] as string).ledgerDir, 'ledger.db-wal'))).toBe(true);
      expect((await verify(copies[0] as string)).failure).toBeNull();
      const deleted = homePaths(copies[1] as string).ledgerDir;
      rmSync(join(deleted, 'ledger.db-wal'));
      rmSync(join(deleted, 'ledger.db-shm'), { force: true });
      expect((await verify(copies[1] as string)).failure).toMatchObject({ code: 'VERIFY_WITNESS_TRUNCATED' });
      // A flipped byte in the first frame: SQLite stops reading the WAL at the first frame whose checksum fails.
      const wal = join(homePaths(copies[2] as string).ledgerDir, 'ledger.db-wal');
      const bytes = readFileSync(wal);
      bytes[32 + 24 + 100] = (bytes[32 + 24 + 100] as number) ^ 0xff;
      writeFileSync(wal, bytes);
      rmSync(join(homePaths(copies[2] as string).ledgerDir, 'ledger.db-shm'), { force: true });
      expect((await verify(copies[2] as string)).failure).toMatchObject({ code: 'VERIFY_WITNESS_TRUNCATED' });
    });

    it('reports a witness file that was edited, damaged, deleted or replaced', async () => {
      const w = witnessOf(homes.pristine);
      const cases: Array<[string, unknown, string]> = [
        ['its treeSize', { ...w, treeSize: w.treeSize - 1 }, 'VERIFY_WITNESS_MISMATCH'],
        ['its rootHash', { ...w, rootHash: b64(Buffer.alloc(32, 1)) }, 'VERIFY_WITNESS_MISMATCH'],
        ['a byte of the signature', { ...w, note: bodyOf(w.note) + '\n' + damaged(w.note.slice(w.note.indexOf('\n\n') + 2)) }, 'VERIFY_WITNESS_SIGNATURE'],
        ['not JSON', '{"treeSize": 3,', 'VERIFY_WITNESS_MALFORMED'],
        ['an extra member', { ...w, extra: 1 }, 'VERIFY_WITNESS_MALFORMED'],
        ['a note that is not a checkpoint', { ...w, note: 'hello\n' }, 'VERIFY_WITNESS_MALFORMED'],
      ];
      for (const [what, value, code] of cases) {
        const home = fresh();
        writeWitness(home, value);
        const r = await verify(home);
        expect({ what, failure: r.failure?.code }).toEqual({ what, failure: code });
      }
      const gone = fresh();
      rmSync(homePaths(gone).witness);
      expect((await verify(gone)).failure).toMatchObject({ step: 'checkpoints', code: 'VERIFY_WITNESS_MISSING' });
      // A validly signed checkpoint of another ledger: signed by a key this ledger never registered.
      const other = join(homes.dir, `other-${n++}`);
      await initLedgerHome(other, { ...deps(), origin: 'assay.test/ledger' });
      const foreign = fresh();
      writeWitness(foreign, witnessOf(other));
      expect((await verify(foreign)).failure).toMatchObject({ code: 'VERIFY_WITNESS_SIGNATURE' });
    });

    it('accepts a witness that is an older checkpoint of this ledger, or one ahead of the database rows', async () => {
      const home = fresh();
      const first = witnessOf(home);
      await withHome(home, async (h) => {
        await h.ledger.append('note-more', [{ type: 'Note', data: { text: 'more' } }]);
        await h.ledger.checkpoint();
      });
      writeWitness(home, first);
      expect((await verify(home)).failure).toBeNull();
      const ahead = fresh();
      await withHome(ahead, async (h) => {
        await h.ledger.append('note-more', [{ type: 'Note', data: { text: 'more' } }]);
        await h.ledger.checkpoint();
      });
      tamper(ahead, (db) => db.prepare('DELETE FROM checkpoints WHERE seq = (SELECT max(seq) FROM checkpoints)').run());
      expect((await verify(ahead)).failure).toBeNull();
    });
  });

  describe('stored checkpoints, Merkle nodes and ids (item 3)', () => {
    it('reports checkpoint rows whose tree_size, root_hash or seq differ from their signed note', async () => {
      const edits: Array<[string, string]> = [
        ['tree_size', 'UPDATE checkpoints SET tree_size = tree_size - 1 WHERE seq = (SELECT max(seq) FROM checkpoints)'],
        ['root_hash', `UPDATE checkpoints SET root_hash = '${b64(Buffer.alloc(32, 7))}' WHERE seq = 0`],
        ['seq', 'UPDATE checkpoints SET seq = seq + 5 WHERE seq = (SELECT max(seq) FROM checkpoints)'],
      ];
      for (const [column, sql] of edits) {
        const home = fresh();
        tamper(home, (db) => db.prepare(sql).run());
        for (const mode of [INLINE, WORKERS]) {
          const r = await verify(home, mode);
          expect({ column, failure: r.failure?.code, message: r.failure?.message }).toEqual({
            column,
            failure: 'VERIFY_CHECKPOINT_COLUMN_MISMATCH',
            message: expect.stringContaining(column),
          });
        }
      }
    });

    it('reports every kind of merkle_nodes edit, and consistency and prove refuse to hand out proofs from them', async () => {
      let top = 1;
      while (top * 2 <= homes.total) top *= 2;
      const level = Math.log2(top);
      const edits: Array<[string, string]> = [
        ['a leaf', 'UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 0 AND idx = 5'],
        ['an interior node', 'UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 2 AND idx = 1'],
        ['the largest subtree', `UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = ${level} AND idx = 0`],
        ['a deleted row', 'DELETE FROM merkle_nodes WHERE level = 1 AND idx = 3'],
        ['an added row', `INSERT INTO merkle_nodes (level, idx, hash) VALUES (3, 1000, zeroblob(32))`],
        [
          'two swapped leaves',
          `UPDATE merkle_nodes SET idx = 1000000 WHERE level = 0 AND idx = 2; UPDATE merkle_nodes SET idx = 2 WHERE level = 0 AND idx = 3;
           UPDATE merkle_nodes SET idx = 3 WHERE level = 0 AND idx = 1000000;`,
        ],
      ];
      for (const [what, sql] of edits) {
        const home = fresh();
        tamper(home, (db) => db.exec(sql));
        for (const mode of [INLINE, WORKERS]) {
          const r = await verify(home, mode);
          expect({ what, step: r.failure?.step, code: r.failure?.code }).toEqual({ what, step: 'merkle', code: 'VERIFY_MERKLE_NODES' });
        }
      }
      // The largest perfect subtree damaged: every root of a larger tree computed from the table is wrong.
      const home = fresh();
      tamper(home, (db) => db.prepare(`UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = ${level} AND idx = 0`).run());
      let h = new LedgerHome(home, { ...deps(), readOnly: true });
      try {
        await expect(h.ledger.consistencyProof(3)).rejects.toMatchObject({ code: 'LEDGER_PROOF_MISMATCH', kind: 'integrity' });
        await expect(h.ledger.consistencyProof(3, top + 1)).rejects.toMatchObject({ code: 'LEDGER_PROOF_MISMATCH' });
        await expect(h.ledger.consistencyProof(top, homes.total)).rejects.toMatchObject({ code: 'LEDGER_PROOF_MISMATCH' });
      } finally {
        await h.close();
      }
      // Leaf 0 damaged: the proofs through it are refused, those that do not read it are handed out.
      const leaf = fresh();
      tamper(leaf, (db) => db.prepare('UPDATE merkle_nodes SET hash = zeroblob(32) WHERE level = 0 AND idx = 0').run());
      h = new LedgerHome(leaf, { ...deps(), readOnly: true });
      try {
        await expect(h.ledger.inclusionProof(1)).rejects.toMatchObject({ code: 'LEDGER_PROOF_MISMATCH' });
        await expect(h.ledger.consistencyProof(1, 2)).rejects.toMatchObject({ code: 'LEDGER_PROOF_MISMATCH' });
        expect((await h.ledger.inclusionProof(homes.total - 1)).treeSize).toBe(homes.total);
        expect((await h.ledger.consistencyProof(top, homes.total)).size2).toBe(homes.total);
      } finally {
        await h.close();
      }
    });

    it('consistency proofs from an intact table verify, also past the latest checkpoint', async () => {
      const home = fresh();
      await withHome(home, async (h) => {
        for (let i = 0; i < 5; i++) await h.ledger.append('note-after', [{ type: 'Note', data: { text: `unsigned ${i}` } }]);
        for (const [a, b] of [
          [1, homes.total],
          [3, homes.total + 5],
          [homes.total, homes.total + 5],
          [homes.total + 2, homes.total + 5],
        ] as Array<[number, number]>) {
          const p = await h.ledger.consistencyProof(a, b);
          expect(p.size2).toBe(b);
        }
      });
    });

    it('reports a duplicate event id by its own check, even with the UNIQUE index gone', async () => {
      const home = fresh();
      let controller: SigningKey | undefined;
      await withHome(home, async (h) => {
        controller = h.keys.find((k) => k.role === 'controller');
      });
      const key = controller as SigningKey;
      tamper(home, (db) => {
        // The events table rebuilt without UNIQUE (id), as an attacker with file access can.
        db.exec(`CREATE TABLE events2 (position INTEGER PRIMARY KEY, stream TEXT NOT NULL, revision INTEGER NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, bytes BLOB NOT NULL, hash BLOB NOT NULL, UNIQUE (stream, revision));
                 INSERT INTO events2 SELECT * FROM events; DROP TABLE events; ALTER TABLE events2 RENAME TO events;`);
        const id = db.prepare('SELECT id FROM events WHERE position = 5').pluck().get() as string;
        const unsigned = {
          type: 'Note',
          stream: 'note-dup',
          revision: 0,
          position: homes.total,
          id,
          time: '2026-12-02T10:00:00.000Z',
          prev: '0'.repeat(64),
          signer: key.signer,
        };
        const dataJson = '{"text":"the same id again"}';
        const sig = b64(key.sign(Buffer.from(envelopeText(unsigned, dataJson), 'utf8')));
        const wire = Buffer.from(envelopeText(unsigned, dataJson, sig), 'utf8');
        db.prepare('INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)').run(
          homes.total,
          'note-dup',
          0,
          id,
          'Note',
          wire,
          createHash('sha256').update(wire).digest(),
        );
      });
      // Through the home: the changed schema is reported first ...
      expect((await verify(home)).failure).toMatchObject({ step: 'storage', code: 'VERIFY_SCHEMA_MISMATCH' });
      // ... and the verifier's own pass finds the duplicate without any schema check, inline and with workers.
      const db = new SqliteLedgerDatabase(homePaths(home).db, { readOnly: true });
      try {
        for (const mode of [INLINE, WORKERS]) {
          const decodeKey = (t: string): { keyId: string; publicKey: Uint8Array } => {
            const k = parseVerifierKey(t);
            return { keyId: k.signer, publicKey: k.publicKey };
          };
          const r = await verifyLedger({ store: db.events, checkpoints: db.checkpoints.all(), decodeKey, claims: null, ...mode });
          expect(r.failure).toMatchObject({ step: 'envelopes', code: 'VERIFY_DUPLICATE_ID', position: homes.total });
          expect(r.failure?.message).toContain('position 5');
        }
      } finally {
        await db.close();
      }
    });
  });

  describe('nothing in the database makes verify crash or write (item 4)', () => {
    const cases: Array<[string, string, Record<string, unknown>]> = [
      [
        'bytes stored as TEXT',
        'UPDATE events SET bytes = CAST(bytes AS TEXT) WHERE position = 7',
        { step: 'envelopes', code: 'VERIFY_COLUMN_TYPE', position: 7 },
      ],
      ['hash stored as TEXT', 'UPDATE events SET hash = hex(hash) WHERE position = 8', { step: 'envelopes', code: 'VERIFY_COLUMN_TYPE', position: 8 }],
      ['a REAL revision', 'UPDATE events SET revision = 0.5 WHERE position = 9', { step: 'envelopes', code: 'VERIFY_COLUMN_TYPE', position: 9 }],
      [
        'stream stored as a BLOB',
        'UPDATE events SET stream = CAST(stream AS BLOB) WHERE position = 10',
        { step: 'envelopes', code: 'VERIFY_COLUMN_TYPE', position: 10 },
      ],
      ['id stored as a BLOB', 'UPDATE events SET id = CAST(id AS BLOB) WHERE position = 11', { step: 'envelopes', code: 'VERIFY_COLUMN_TYPE', position: 11 }],
      ['an empty bytes BLOB', "UPDATE events SET bytes = x'' WHERE position = 12", { step: 'envelopes', position: 12 }],
      ['a Merkle hash stored as TEXT', 'UPDATE merkle_nodes SET hash = hex(hash) WHERE level = 0 AND idx = 3', { step: 'merkle', code: 'VERIFY_MERKLE_NODES' }],
      ['a REAL Merkle level', 'UPDATE merkle_nodes SET level = 1.5 WHERE level = 1 AND idx = 0', { step: 'merkle', code: 'VERIFY_MERKLE_NODES' }],
      ['a TEXT tree_size', "UPDATE checkpoints SET tree_size = 'many' WHERE seq = 0", { step: 'checkpoints', code: 'VERIFY_CHECKPOINT_COLUMN_MISMATCH' }],
      [
        'a note stored as a BLOB',
        'UPDATE checkpoints SET note = CAST(note AS BLOB) WHERE seq = 0',
        { step: 'checkpoints', code: 'VERIFY_CHECKPOINT_COLUMN_MISMATCH' },
      ],
      [
        'a root_hash stored as a BLOB',
        'UPDATE checkpoints SET root_hash = CAST(root_hash AS BLOB) WHERE seq = 0',
        { step: 'checkpoints', code: 'VERIFY_CHECKPOINT_COLUMN_MISMATCH' },
      ],
      ['an edited migration hash', "UPDATE schema_version SET sha256 = 'x'", { step: 'storage', code: 'VERIFY_SCHEMA_VERSION' }],
      ['applied_at stored as a BLOB', 'UPDATE schema_version SET applied_at = CAST(applied_at AS BLOB)', { step: 'storage', code: 'VERIFY_SCHEMA_VERSION' }],
      ['an added trigger', 'CREATE TRIGGER t AFTER INSERT ON events BEGIN SELECT 1; END', { step: 'storage', code: 'VERIFY_SCHEMA_MISMATCH' }],
      ['an added index', 'CREATE INDEX events_type ON events (type)', { step: 'storage', code: 'VERIFY_SCHEMA_MISMATCH' }],
    ];
    it.each(cases)('%s: an integrity failure naming it, inline and with workers, the file unchanged', async (_what, sql, expected) => {
      const home = fresh();
      tamper(home, (db) => {
        db.pragma('ignore_check_constraints = ON');
        db.exec(sql);
        db.pragma('wal_checkpoint(TRUNCATE)');
      });
      const before = sha(homePaths(home).db);
      for (const mode of [INLINE, WORKERS]) {
        const r = await verify(home, mode);
        expect(r.ok).toBe(false);
        expect(r.failure).toMatchObject(expected);
      }
      expect(sha(homePaths(home).db)).toBe(before);
    });

    it('refuses an emptied schema_version without running migrations on it, and a schema too new, cleanly', async () => {
      const home = fresh();
      tamper(home, (db) => {
        db.exec('DELETE FROM schema_version');
        db.pragma('wal_checkpoint(TRUNCATE)');
      });
      const before = sha(homePaths(home).db);
      await expect(verify(home)).rejects.toMatchObject({ code: 'LEDGER_SCHEMA_VERSION_INVALID', kind: 'integrity' });
      await expect(verifyLedgerFile(homePaths(home).db, { claims: null })).rejects.toMatchObject({ code: 'LEDGER_SCHEMA_VERSION_INVALID' });
      // A writer refuses it too, instead of re-running the migrations over the existing tables.
      expect(() => new LedgerHome(home, deps())).toThrow(expect.objectContaining({ code: 'LEDGER_SCHEMA_VERSION_INVALID' }));
      expect(sha(homePaths(home).db)).toBe(before);

      const newer = fresh();
      tamper(newer, (db) => db.prepare("INSERT INTO schema_version VALUES (99, 'future', 'x', '2030-01-01T00:00:00.000Z')").run());
      await expect(verify(newer)).rejects.toMatchObject({ code: 'LEDGER_SCHEMA_TOO_NEW', kind: 'refused' });
    });

    it('verifies a copy of the database file alone without writing anything beside it', async () => {
      const dir = join(homes.dir, `copy-${n++}`);
      mkdirSync(dir);
      copyFileSync(homePaths(homes.pristine).db, join(dir, 'ledger.db'));
      const unprivileged = typeof process.getuid === 'function' && process.getuid() !== 0;
      if (unprivileged) chmodSync(dir, 0o555); // as root, permissions do not stop writes: the listing below still does
      try {
        for (const mode of [INLINE, WORKERS]) {
          const r = await verifyLedgerFile(join(dir, 'ledger.db'), { claims: null, ...mode });
          expect(r.failure).toBeNull();
          expect(r.events).toBe(homes.total);
          expect(readdirSync(dir)).toEqual(['ledger.db']);
        }
      } finally {
        chmodSync(dir, 0o755);
      }
    });

    it('verifies a copy with its WAL (and no -shm) including what only the WAL holds, writing nothing beside it', async () => {
      const live = fresh();
      const dir = join(homes.dir, `copy-wal-${n++}`);
      mkdirSync(dir);
      await withHome(live, async (h) => {
        for (let i = 0; i < 4; i++) await h.ledger.append('note-wal', [{ type: 'Note', data: { text: `only in the WAL ${i}` } }]);
        copyFileSync(homePaths(live).db, join(dir, 'ledger.db'));
        copyFileSync(`${homePaths(live).db}-wal`, join(dir, 'ledger.db-wal'));
      });
      const r = await verifyLedgerFile(join(dir, 'ledger.db'), { claims: null });
      expect(r.failure).toBeNull();
      expect(r.events).toBe(homes.total + 4);
      expect(readdirSync(dir).sort()).toEqual(['ledger.db', 'ledger.db-wal']);
    });
  });

  describe('checkpoint signatures (item 5)', () => {
    /** A home where a second controller key was registered and the first one then revoked (signed by the second). */
    async function rotated(): Promise<{ home: string; first: SigningKey; second: SigningKey; registeredAt: number; revokedAt: number }> {
      const home = fresh();
      const second = toSigningKey(generateKeyPair('controller', 'controller-two'));
      return withHome(home, async (h) => {
        const first = h.keys.find((k) => k.role === 'controller') as SigningKey;
        const registeredAt = (await h.ledger.registerKey(second)).lastPosition;
        const next = ledgerWith(h, [second]);
        const revokedAt = (
          await next.append(Ledger.keyStream(first.name), [{ type: 'KeyRevoked', data: { keyId: first.signer, reason: 'rotated' } }], 'stream_exists')
        ).lastPosition;
        await next.append('note-after', [{ type: 'Note', data: { text: 'after the rotation' } }]);
        await next.checkpoint();
        return { home, first, second, registeredAt, revokedAt };
      });
    }

    it('keeps the checkpoints a controller key signed before its revocation valid', async () => {
      const { home } = await rotated();
      const r = await verify(home);
      expect(r.failure).toBeNull();
      expect(r.checkpoints).toBeGreaterThanOrEqual(2);
    });

    it('reports a checkpoint a revoked controller key signed after its revocation, supplied or stored', async () => {
      const { home, first, revokedAt } = await rotated();
      const ok = await verify(home);
      const size = ok.treeSize;
      const forged = signCheckpoint(first, 'assay.test/ledger', size, Buffer.from(ok.root, 'base64'));
      let r = await verify(home, { externalCheckpoints: [forged] });
      expect(r.failure).toMatchObject({ step: 'checkpoints', code: 'VERIFY_CHECKPOINT_REVOKED_SIGNER' });
      expect(r.failure?.message).toContain(`revoked at position ${revokedAt}`);
      // The tree that ends with the revocation itself covers it too.
      const atRevocation = await withHome(home, async (h) => b64(await h.ledger.root(revokedAt + 1)));
      r = await verify(home, { externalCheckpoints: [signCheckpoint(first, 'assay.test/ledger', revokedAt + 1, Buffer.from(atRevocation, 'base64'))] });
      expect(r.failure).toMatchObject({ code: 'VERIFY_CHECKPOINT_REVOKED_SIGNER' });
      // ... but one of the tree just before it is fine.
      const before = await withHome(home, async (h) => b64(await h.ledger.root(revokedAt)));
      r = await verify(home, { externalCheckpoints: [signCheckpoint(first, 'assay.test/ledger', revokedAt, Buffer.from(before, 'base64'))] });
      expect(r.failure).toBeNull();
      // Planted as a stored row.
      tamper(home, (db) =>
        db.prepare('INSERT INTO checkpoints (seq, tree_size, root_hash, note) SELECT max(seq) + 1, ?, ?, ? FROM checkpoints').run(size, ok.root, forged),
      );
      r = await verify(home);
      expect(r.failure).toMatchObject({ code: 'VERIFY_CHECKPOINT_REVOKED_SIGNER' });
    });

    it('reports a checkpoint signed by a controller key whose registration the tree does not hold', async () => {
      const { home, second, registeredAt } = await rotated();
      const root = await withHome(home, async (h) => h.ledger.root(registeredAt));
      const r = await verify(home, { externalCheckpoints: [signCheckpoint(second, 'assay.test/ledger', registeredAt, root)] });
      expect(r.failure).toMatchObject({ code: 'VERIFY_CHECKPOINT_UNREGISTERED_SIGNER' });
    });

    it('reports a bad signature or cosignature line by any registered key, ignores lines by unknown keys', async () => {
      const home = fresh();
      const auditor: KeyPair = generateKeyPair('auditor', 'auditor-one');
      const { note, runtime } = await withHome(home, async (h) => {
        await h.ledger.registerKey(toSigningKey(auditor));
        const cp = await h.ledger.checkpoint();
        return { note: cp.note, runtime: h.keys.find((k) => k.role === 'runtime') as SigningKey };
      });
      const line = cosign(bodyOf(note), ed25519Cosigner(auditor.name, auditor.seed), 1_780_000_000);
      const cases: Array<[string, string, string | null]> = [
        ['a valid cosignature by the registered auditor', note + line, null],
        ['a damaged cosignature by the registered auditor', note + damaged(line), 'VERIFY_CHECKPOINT_SIGNATURE'],
        [
          'a bad note signature by the registered runtime key',
          note + formatSignatureLine(runtime.name, runtime.keyId, Buffer.alloc(64, 9)),
          'VERIFY_CHECKPOINT_SIGNATURE',
        ],
        ['a bad line by a key the ledger never registered', note + formatSignatureLine('stranger', Buffer.from('01020304', 'hex'), Buffer.alloc(64, 9)), null],
      ];
      for (const [what, text, code] of cases) {
        const r = await verify(home, { externalCheckpoints: [text] });
        expect({ what, code: r.failure?.code ?? null }).toEqual({ what, code });
      }
      // The same damaged line on the witness and on a stored row.
      const wHome = join(homes.dir, `cosigned-witness-${n++}`);
      copyHome(home, wHome);
      const witness = witnessOf(wHome);
      writeWitness(wHome, { ...witness, note: witness.note + damaged(line) });
      // The witness's note is the latest checkpoint's: the auditor line was made for that body.
      expect((await verify(wHome)).failure).toMatchObject({ code: 'VERIFY_WITNESS_SIGNATURE' });
      tamper(home, (db) => db.prepare('UPDATE checkpoints SET note = ? WHERE seq = (SELECT max(seq) FROM checkpoints)').run(note + damaged(line)));
      expect((await verify(home)).failure).toMatchObject({ code: 'VERIFY_CHECKPOINT_SIGNATURE' });
    });

    it('reports a cosignature by an auditor key on a checkpoint whose tree holds its revocation', async () => {
      const home = fresh();
      const auditor: KeyPair = generateKeyPair('auditor', 'auditor-two');
      const note = await withHome(home, async (h) => {
        await h.ledger.registerKey(toSigningKey(auditor));
        await h.ledger.append(Ledger.keyStream(auditor.name), [{ type: 'KeyRevoked', data: { keyId: auditor.signer, reason: 'left' } }], 'stream_exists');
        return (await h.ledger.checkpoint()).note;
      });
      const r = await verify(home, { externalCheckpoints: [note + cosign(bodyOf(note), ed25519Cosigner(auditor.name, auditor.seed), 1_780_000_000)] });
      expect(r.failure).toMatchObject({ code: 'VERIFY_CHECKPOINT_REVOKED_SIGNER' });
    });
  });
});
