/**
 * The mutation drill: more than a thousand mutations of a genuine ledger home, each on a fresh copy, each with the
 * verdict it must get from `assay ledger verify`, and none may crash it (exit 70).
 *
 * The homes (tests/support/ledger-drill.ts) are real: SQLite files in WAL mode, runs written by the real run
 * controller, signed checkpoints, checkpoint.last, and a copy taken while a writer still had committed data in the
 * -wal file. Mutations are generated from a seeded PRNG per class (ASSAY_DRILL_SEED replays another seed;
 * ASSAY_DRILL_ONLY=<class>[,<class>] runs only those classes). A mutation declares one of:
 *
 *   reject   the ledger must not verify: exit 5 (or the listed clean exits), reported in one of the listed steps
 *            when it names a step (a thrown integrity error with the same exit is fine unless the step is strict)
 *   accept   a genuine state (a no-op rewrite, a WAL checkpoint, VACUUM, an older but complete home, an uncovered
 *            tail lost, ...): exit 0
 *   any      no verdict is asserted, only that verify neither crashes nor writes (states the docs leave open)
 *
 * Where the verdict depends on what SQLite itself recovers from damaged files (the WAL class), it is computed from a
 * scratch copy opened with plain SQLite: an oracle that does not use Assay's verifier.
 *
 * Verdicts come from the CLI's own entry in this process (runCli: the Nest query, the handler, LedgerHome, the
 * claims rules the CLI passes, and its mapping of errors to exit codes), with `--workers 0`; a sample of 20 also runs
 * `assay ledger verify` in a child process with its default worker threads: the built CLI (`node bin/assay.js`), or
 * the same program from its sources when dist/ is older than them (see cliCommand). ASSAY_DRILL_VERBOSE=1 prints every
 * case's outcome. About two minutes on two idle cores.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  LedgerHome,
  ZERO_HASH,
  canonicalJson,
  envelopeText,
  formatCheckpointBody,
  generateKeyPair,
  homePaths,
  loadKeys,
  signNote,
  toSigningKey,
  type JsonObject,
  type SigningKey,
} from '@assay/ledger';
import { EMPTY_OUTPUT_DIGEST } from '@assay/run';
import { makeTmpDir } from '../support/ledger-fixtures';
import { prng } from '../support/prng';
import {
  DRILL_ORIGIN,
  buildDrillHomes,
  cliCommand,
  continueRun,
  copyHome,
  drillDeps,
  fileBytes,
  seededBytes,
  sqliteFacts,
  startAndComplete,
  verifyInChild,
  verifyInProcess,
  type DrillHomes,
  type Outcome,
} from '../support/ledger-drill';

jest.setTimeout(600_000);

const SEED = Number(process.env.ASSAY_DRILL_SEED ?? 20261211);
const ONLY = (process.env.ASSAY_DRILL_ONLY ?? '').split(',').filter((s) => s !== '');

// ---- verdicts --------------------------------------------------------------------------------------------------------

type Verdict = { kind: 'accept' } | { kind: 'any' } | { kind: 'reject'; exits: number[]; steps?: string[]; notSteps?: string[]; strictStep?: boolean };

const ACCEPT: Verdict = { kind: 'accept' };
const ANY: Verdict = { kind: 'any' };
const reject = (o: { steps?: string[]; notSteps?: string[]; exits?: number[]; strictStep?: boolean } = {}): Verdict => ({
  kind: 'reject',
  exits: o.exits ?? [5],
  ...o,
});

/** Step families. */
const ROW = { steps: ['storage', 'envelopes', 'chains'] };
const MERKLE = { steps: ['storage', 'merkle', 'checkpoints'] };
const CPS = { steps: ['merkle', 'checkpoints'] };
const CLAIMS = { steps: ['claims'], strictStep: true };
const NOT_CRYPTO = { notSteps: ['schemas', 'signatures', 'roles'] };
/** A database verify must not use: any clean refusal (no crash, never accepted). */
const CLEAN_REFUSAL = { exits: [2, 3, 5, 6, 7] };

const KNOWN_EXITS = new Set([0, 2, 3, 4, 5, 6, 7]);
const crashed = (o: Outcome): boolean => !KNOWN_EXITS.has(o.exit);

function describeVerdict(v: Verdict): string {
  if (v.kind !== 'reject') return v.kind;
  return `reject (exit ${v.exits.join('/')}${v.steps ? `, step ${v.steps.join('|')}` : ''})`;
}

function describeOutcome(o: Outcome): string {
  return `exit ${o.exit}${o.step ? ` step ${o.step}` : ''}${o.code ? ` ${o.code}` : ''}${o.message ? `: ${o.message.slice(0, 160)}` : ''}`;
}

/** null when the outcome is what the verdict demands, else what is wrong. */
function mismatch(v: Verdict, o: Outcome): string | null {
  if (crashed(o)) return 'CRASHED';
  if (v.kind === 'any') return null;
  if (v.kind === 'accept') return o.exit === 0 ? null : 'REJECTED a genuine state';
  if (o.exit === 0) return 'ACCEPTED';
  if (!v.exits.includes(o.exit)) return `rejected with exit ${o.exit}, expected ${v.exits.join('/')}`;
  if (o.step !== undefined) {
    if (v.steps && !v.steps.includes(o.step)) return `rejected in step ${o.step}, expected ${v.steps.join('|')}`;
    if (v.notSteps?.includes(o.step)) return `rejected in step ${o.step}, which a valid signed event passes (the mutation was built wrong?)`;
  } else if (v.strictStep) return `rejected without a report, expected step ${v.steps?.join('|')}`;
  return null;
}

// ---- mutations -------------------------------------------------------------------------------------------------------

interface Mutation {
  cls: string;
  what: string;
  base: 'home' | 'wal';
  /** Applies the mutation to a fresh copy; may return the verdict when it depends on the result. */
  apply(home: string): Promise<Verdict | void> | Verdict | void;
  verdict?: Verdict;
  /** Also check that verification left the database's content as it found it. */
  noWrite?: boolean;
}

interface Result {
  m: Mutation;
  n: number;
  verdict: Verdict;
  outcome: Outcome;
  problem: string | null;
}

function seedOf(cls: string): number {
  let h = SEED >>> 0;
  for (const c of cls) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h;
}
const int = (r: () => number, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo)); // [lo, hi)
const pick = <T>(r: () => number, xs: readonly T[]): T => xs[int(r, 0, xs.length)] as T;

// ---- the genuine homes and what the mutations need of them ---------------------------------------------------------

interface EventRow {
  position: number;
  stream: string;
  revision: number;
  id: string;
  type: string;
  bytes: Buffer;
  hash: Buffer;
  data: Record<string, unknown>;
}
interface CpRow {
  seq: number;
  tree_size: number;
  root_hash: string;
  note: string;
}
interface Witness {
  treeSize: number;
  rootHash: string;
  note: string;
}

interface Genuine {
  f: DrillHomes;
  events: EventRow[];
  walEvents: EventRow[];
  leaves: Buffer[];
  walLeaves: Buffer[];
  merkle: Array<{ level: number; idx: number; hash: Buffer }>;
  cps: CpRow[];
  walCps: CpRow[];
  witness: Witness;
  walWitness: Witness;
  witnessText: string;
  controller: SigningKey;
  runtime: SigningKey;
  judge: SigningKey;
  stranger: SigningKey;
  wal: { pageSize: number; frameSize: number; frames: number; bytes: number };
}

const sha256 = (b: Uint8Array | string): Buffer => createHash('sha256').update(b).digest();
const leafHash = (b: Uint8Array): Buffer => sha256(Buffer.concat([Buffer.from([0]), b]));
const nodeHash = (l: Buffer, r: Buffer): Buffer => sha256(Buffer.concat([Buffer.from([1]), l, r]));

/** RFC 9162 MTH over leaves[lo, hi) (an implementation of its own, not the ledger's). */
function mth(leaves: Buffer[], lo: number, hi: number, memo: Map<string, Buffer>): Buffer {
  const n = hi - lo;
  if (n === 0) return sha256(Buffer.alloc(0));
  if (n === 1) return leaves[lo] as Buffer;
  const key = `${lo}:${hi}`;
  const hit = memo.get(key);
  if (hit) return hit;
  let k = 1;
  while (k * 2 < n) k *= 2;
  const h = nodeHash(mth(leaves, lo, lo + k, memo), mth(leaves, lo + k, hi, memo));
  memo.set(key, h);
  return h;
}

function readRows(dbFile: string): { events: EventRow[]; merkle: Genuine['merkle']; cps: CpRow[] } {
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  try {
    const events = (db.prepare('SELECT * FROM events ORDER BY position').all() as Array<Omit<EventRow, 'data'>>).map((e) => ({
      ...e,
      data: (JSON.parse(e.bytes.toString('utf8')) as { data: Record<string, unknown> }).data,
    }));
    const merkle = db.prepare('SELECT level, idx, hash FROM merkle_nodes ORDER BY level, idx').all() as Genuine['merkle'];
    const cps = db.prepare('SELECT * FROM checkpoints ORDER BY seq').all() as CpRow[];
    return { events, merkle, cps };
  } finally {
    db.close();
  }
}

/** Reads a home's rows from a scratch copy (the home itself is never opened). */
function rowsOf(home: string, scratch: string): ReturnType<typeof readRows> {
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const p = homePaths(home);
  copyFileSync(p.db, join(scratch, 'ledger.db'));
  if (existsSync(`${p.db}-wal`)) copyFileSync(`${p.db}-wal`, join(scratch, 'ledger.db-wal'));
  // Merge the WAL in the scratch copy, then read it read-only.
  new Database(join(scratch, 'ledger.db')).close();
  try {
    return readRows(join(scratch, 'ledger.db'));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

let G: Genuine;
/** What the oracle saw of a mutated home before verification (reused as the no-write baseline). */
const oracleFacts = new Map<string, ReturnType<typeof sqliteFacts>>();
let tmp: { dir: string; cleanup(): void };
let caseN = 0;
let scratchN = 0;
/** A scratch directory of its own for each look with the oracle (the CLI sample runs two cases at once). */
const scratch = (): string => join(tmp.dir, `scratch-${++scratchN}`);

const memo = new Map<string, Buffer>();
const walMemo = new Map<string, Buffer>();
const rootAt = (n: number): Buffer => mth(G.leaves, 0, n, memo);
const walRootAt = (n: number): Buffer => mth(G.walLeaves, 0, n, walMemo);
const b64 = (b: Buffer): string => b.toString('base64');

function noteSigner(k: SigningKey) {
  return { name: k.name, keyId: k.keyId, sign: (m: Uint8Array) => k.sign(m) };
}
function signedNote(k: SigningKey, size: number, root: Buffer, origin = DRILL_ORIGIN): string {
  return signNote(formatCheckpointBody({ origin, treeSize: size, rootHash: root }), [noteSigner(k)]);
}
const witnessJson = (w: Witness): string => `${JSON.stringify(w, null, 2)}\n`;
const writeWitness = (home: string, text: string | Buffer): void => writeFileSync(homePaths(home).witness, text);

/** Runs SQL on a home's database in place, as someone with file access would. */
function sql<T = void>(home: string, fn: (db: Database.Database) => T): T {
  const db = new Database(homePaths(home).db);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** A signed event built by hand (the writer's key, the real encoding), for rows inserted behind the ledger's back. */
function craftEvent(
  key: SigningKey,
  o: { stream: string; revision: number; position: number; id: string; prev: string; type: string; data: JsonObject; time?: string },
): { bytes: Buffer; hash: Buffer } {
  const dataJson = canonicalJson(o.data);
  const u = {
    type: o.type,
    stream: o.stream,
    revision: o.revision,
    position: o.position,
    id: o.id,
    time: o.time ?? '2026-12-06T10:00:00.000Z',
    prev: o.prev,
    signer: key.signer,
  };
  const sig = Buffer.from(key.sign(Buffer.from(envelopeText(u, dataJson), 'utf8'))).toString('base64');
  const bytes = Buffer.from(envelopeText(u, dataJson, sig), 'utf8');
  return { bytes, hash: sha256(bytes) };
}

/** Appends hand-built Notes to a stream at the end of the log (signed by the controller), inside `db`. */
function appendCrafted(db: Database.Database, stream: string, items: Array<{ id: string; text: string }>): void {
  const ins = db.prepare('INSERT INTO events (position, stream, revision, id, type, bytes, hash) VALUES (?, ?, ?, ?, ?, ?, ?)');
  for (const it of items) {
    const pos = (db.prepare('SELECT coalesce(max(position) + 1, 0) FROM events').pluck().get() as number) ?? 0;
    const last = db.prepare('SELECT revision, bytes FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1').get(stream) as
      { revision: number; bytes: Buffer } | undefined;
    const revision = last ? last.revision + 1 : 0;
    const prev = last ? sha256(last.bytes).toString('hex') : ZERO_HASH;
    const e = craftEvent(G.controller, { stream, revision, position: pos, id: it.id, prev, type: 'Note', data: { text: it.text } });
    ins.run(pos, stream, revision, it.id, 'Note', e.bytes, e.hash);
  }
}

let uuidN = 0;
const freshUuid = (): string => {
  uuidN += 1;
  return `dddddddd-0000-4000-8000-${uuidN.toString(16).padStart(12, '0')}`;
};

/** Recreates `events` with other constraints (e.g. no UNIQUE on id, bytes nullable), keeping every row. */
function rebuildEvents(db: Database.Database, o: { uniqueId?: boolean; bytesNull?: boolean; hashNull?: boolean }): void {
  db.exec(`BEGIN;
    CREATE TABLE events_new (
      position INTEGER PRIMARY KEY CHECK (position >= 0),
      stream   TEXT    NOT NULL,
      revision INTEGER NOT NULL CHECK (revision >= 0),
      id       TEXT    NOT NULL ${o.uniqueId === false ? '' : 'UNIQUE'},
      type     TEXT    NOT NULL,
      bytes    BLOB    ${o.bytesNull ? '' : 'NOT NULL'},
      hash     BLOB    ${o.hashNull ? '' : 'NOT NULL'} CHECK (hash IS NULL OR length(hash) = 32),
      UNIQUE (stream, revision));
    INSERT INTO events_new SELECT position, stream, revision, id, type, bytes, hash FROM events;
    DROP TABLE events;
    ALTER TABLE events_new RENAME TO events;
    COMMIT;`);
}

/** The merkle_nodes rows of a log of n leaves (every perfect subtree), as level:idx -> hash. */
function prefixRows(n: number): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (let l = 0; 2 ** l <= n; l++) for (let i = 0; (i + 1) * 2 ** l <= n; i++) out.set(`${l}:${i}`, mth(G.leaves, i * 2 ** l, (i + 1) * 2 ** l, memo));
  return out;
}

/** Verdict of a merkle_nodes table: a genuine state of the derived table (all perfect subtrees of a prefix), or not. */
function merkleVerdict(db: Database.Database): Verdict {
  const rows = db.prepare('SELECT level, idx, hash FROM merkle_nodes').all() as Array<{ level: unknown; idx: unknown; hash: unknown }>;
  const leaves = rows.filter((r) => r.level === 0);
  const n = leaves.length === 0 ? 0 : Math.max(...leaves.map((r) => Number(r.idx))) + 1;
  if (n > G.events.length) return reject(MERKLE);
  const want = prefixRows(n);
  if (rows.length !== want.size) return reject(MERKLE);
  for (const r of rows) {
    const h = want.get(`${String(r.level)}:${String(r.idx)}`);
    if (typeof r.level !== 'number' || typeof r.idx !== 'number' || !Buffer.isBuffer(r.hash) || !h || !h.equals(r.hash)) return reject(MERKLE);
  }
  return ACCEPT;
}

function setMerkleToPrefix(db: Database.Database, n: number): void {
  const want = prefixRows(n);
  db.prepare('DELETE FROM merkle_nodes').run();
  const ins = db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (?, ?, ?)');
  for (const [k, h] of want) {
    const [l, i] = k.split(':').map(Number) as [number, number];
    ins.run(l, i, h);
  }
}

// ---- the classes -----------------------------------------------------------------------------------------------------

type Gen = () => Mutation[];

/** checkpoint.last: edited, deleted, truncated, replaced (fields inconsistent with its note, bad notes, sizes). */
const witnessClass: Gen = () => {
  const cls = 'checkpoint.last';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const W = G.witness;
  const add = (what: string, apply: Mutation['apply'], verdict?: Verdict, base: Mutation['base'] = 'home') =>
    out.push({ cls, what, base, apply, ...(verdict ? { verdict } : {}) });
  const N = G.events.length;
  const older = G.cps.slice(0, -1);

  for (let i = 0; i < 18; i++) {
    let n: number;
    do n = int(r, 0, N + 60);
    while (n === W.treeSize);
    add(`treeSize ${W.treeSize} -> ${n}, note and rootHash kept`, (h) => writeWitness(h, witnessJson({ ...W, treeSize: n })), reject());
  }
  for (let i = 0; i < 15; i++) {
    const kind = i % 3;
    const root =
      kind === 0
        ? seededBytes(seedOf(`${cls}${i}`))(32)
        : kind === 1
          ? rootAt(int(r, 1, N + 1))
          : Buffer.from(Buffer.from(W.rootHash, 'base64').map((b, j) => (j === i ? b ^ 0x10 : b)));
    if (b64(root) === W.rootHash) continue;
    add(
      `rootHash replaced (${['random', 'root at another size', 'one bit flipped'][kind]}), treeSize and note kept`,
      (h) => writeWitness(h, witnessJson({ ...W, rootHash: b64(root) })),
      reject(),
    );
  }
  for (const cp of older)
    add(`note replaced by the genuine note of size ${cp.tree_size}, fields kept`, (h) => writeWitness(h, witnessJson({ ...W, note: cp.note })), reject());
  for (const cp of older)
    add(
      `consistent older genuine witness (size ${cp.tree_size}, as after a crash before the witness was written)`,
      (h) => writeWitness(h, witnessJson({ treeSize: cp.tree_size, rootHash: cp.root_hash, note: cp.note })),
      ACCEPT,
    );
  for (const cp of G.walCps.slice(0, -1))
    add(
      `WAL home: consistent older genuine witness (size ${cp.tree_size})`,
      (h) => writeWitness(h, witnessJson({ treeSize: cp.tree_size, rootHash: cp.root_hash, note: cp.note })),
      ACCEPT,
      'wal',
    );
  for (const cp of G.walCps.slice(0, -1))
    add(
      `WAL home: note replaced by the genuine note of size ${cp.tree_size}, fields kept`,
      (h) => writeWitness(h, witnessJson({ ...G.walWitness, note: cp.note })),
      reject(),
      'wal',
    );

  // The signature: a base64 character of the signature line changed (another valid base64 character).
  const sigStart = W.note.lastIndexOf(' ') + 1;
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  for (let i = 0; i < 10; i++) {
    const at = int(r, sigStart + 6, W.note.length - 3); // past the key id, before the padding
    const ch = W.note[at] as string;
    const rep = B64[(B64.indexOf(ch) + 1 + int(r, 0, 62)) % 64] as string;
    const noteText = W.note.slice(0, at) + rep + W.note.slice(at + 1);
    add(`note signature: character ${at} ${ch} -> ${rep}`, (h) => writeWitness(h, witnessJson({ ...W, note: noteText })), reject());
  }
  // The body edited (size or root line) with the fields following the new body; the signature no longer matches.
  for (let i = 0; i < 10; i++) {
    const n = i % 2 === 0 ? int(r, 1, N + 40) : W.treeSize;
    const root = i % 2 === 0 ? (n <= N ? rootAt(n) : seededBytes(n)(32)) : rootAt(int(r, 1, W.treeSize));
    if (n === W.treeSize && b64(root) === W.rootHash) continue;
    const body = formatCheckpointBody({ origin: DRILL_ORIGIN, treeSize: n, rootHash: root });
    const noteText = body + W.note.slice(W.note.indexOf('\n\n') + 1);
    add(
      `note body edited to size ${n}, root ${b64(root).slice(0, 8)}..., fields follow it, old signature`,
      (h) => writeWitness(h, witnessJson({ treeSize: n, rootHash: b64(root), note: noteText })),
      reject(),
    );
  }
  for (const n of [W.treeSize, ...older.map((c) => c.tree_size).slice(1, 3)]) {
    const noteText = signedNote(G.stranger, n, rootAt(n));
    add(
      `true checkpoint of size ${n} signed only by a key this ledger never registered`,
      (h) => writeWitness(h, witnessJson({ treeSize: n, rootHash: b64(rootAt(n)), note: noteText })),
      reject(),
    );
  }
  for (const [k, who] of [
    [G.runtime, 'runtime'],
    [G.judge, 'judge'],
  ] as const) {
    for (const n of [W.treeSize, N]) {
      const noteText = signedNote(k, n, rootAt(n));
      add(
        `true checkpoint of size ${n} signed by the registered ${who} key (not a controller key)`,
        (h) => writeWitness(h, witnessJson({ treeSize: n, rootHash: b64(rootAt(n)), note: noteText })),
        reject(),
      );
    }
  }
  for (const origin of ['assay.test/other-ledger', `${DRILL_ORIGIN}/x`, 'example.com/log', DRILL_ORIGIN.toUpperCase()]) {
    const noteText = signedNote(G.controller, W.treeSize, rootAt(W.treeSize), origin);
    add(`controller-signed true checkpoint naming origin ${origin}`, (h) => writeWitness(h, witnessJson({ ...W, note: noteText })), reject());
  }
  for (let i = 0; i < 10; i++) {
    const n = N + int(r, 1, 80);
    const root = seededBytes(seedOf(`big${i}`))(32);
    const noteText = signedNote(G.controller, n, root);
    add(
      `controller-signed checkpoint of size ${n} > ${N} stored events (events it covers are gone)`,
      (h) => writeWitness(h, witnessJson({ treeSize: n, rootHash: b64(root), note: noteText })),
      reject(),
    );
  }
  for (let i = 0; i < 10; i++) {
    const n = int(r, 1, N + 1);
    let root = rootAt(int(r, 1, N + 1));
    if (root.equals(rootAt(n))) root = seededBytes(seedOf(`fork${i}`))(32);
    const noteText = signedNote(G.controller, n, root);
    add(
      `controller-signed checkpoint of size ${n} with a root the stored log does not have (a fork)`,
      (h) => writeWitness(h, witnessJson({ treeSize: n, rootHash: b64(root), note: noteText })),
      reject(),
    );
  }
  // True checkpoints the database never stored: nothing false, but not a state the ledger produces (left open).
  for (const n of [int(r, 4, 47), int(r, 48, 111), int(r, W.treeSize + 1, N + 1)]) {
    const noteText = signedNote(G.controller, n, rootAt(n));
    add(
      `controller-signed true checkpoint of size ${n} that the database never stored`,
      (h) => writeWitness(h, witnessJson({ treeSize: n, rootHash: b64(rootAt(n)), note: noteText })),
      ANY,
    );
  }

  // JSON damage
  const text = G.witnessText;
  for (let i = 0; i < 10; i++) {
    const at = int(r, 0, text.length - 2);
    add(`truncated to ${at} of ${text.length} bytes`, (h) => writeWitness(h, text.slice(0, at)), reject());
  }
  const damaged: Array<[string, string]> = [
    ['empty file', ''],
    ['not JSON', 'checkpoint\n'],
    ['JSON null', 'null\n'],
    ['JSON array', '[]\n'],
    ['the note alone (not JSON)', W.note],
    ['treeSize missing', JSON.stringify({ rootHash: W.rootHash, note: W.note })],
    ['rootHash missing', JSON.stringify({ treeSize: W.treeSize, note: W.note })],
    ['note missing', JSON.stringify({ treeSize: W.treeSize, rootHash: W.rootHash })],
    ['treeSize as a string', JSON.stringify({ ...W, treeSize: String(W.treeSize) })],
    ['treeSize negative', JSON.stringify({ ...W, treeSize: -W.treeSize })],
    ['treeSize fractional', JSON.stringify({ ...W, treeSize: W.treeSize + 0.5 })],
    ['treeSize 1e300', JSON.stringify({ ...W, treeSize: 1e300 })],
    ['rootHash as a number', JSON.stringify({ ...W, rootHash: 7 })],
    ['rootHash in hex', JSON.stringify({ ...W, rootHash: Buffer.from(W.rootHash, 'base64').toString('hex') })],
    ['note null', JSON.stringify({ ...W, note: null })],
    ['note without its signature line', JSON.stringify({ ...W, note: W.note.slice(0, W.note.indexOf('\n\n') + 2) })],
    ['note body only', JSON.stringify({ ...W, note: W.note.slice(0, W.note.indexOf('\n\n') + 1) })],
    ['note with a second copy of its signature line', JSON.stringify({ ...W, note: W.note + W.note.slice(W.note.indexOf('\n\n') + 2) })],
    [
      'invalid UTF-8 inside the note',
      Buffer.concat([Buffer.from(text.slice(0, text.indexOf('—'))), Buffer.from([0xff, 0xfe]), Buffer.from(text.slice(text.indexOf('—') + 1))]).toString(
        'latin1',
      ),
    ],
  ];
  for (const [what, t] of damaged) add(what, (h) => writeWitness(h, what.startsWith('invalid UTF-8') ? Buffer.from(t, 'latin1') : t), reject());
  add('an extra unknown member', (h) => writeWitness(h, JSON.stringify({ ...W, extra: 1 })), ANY);

  // Single bytes changed anywhere: the verdict follows from what the file then says.
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < 40; i++) {
    const at = int(r, 0, bytes.length);
    const mask = 1 << int(r, 0, 7);
    const b = Buffer.from(bytes);
    b[at] = (b[at] as number) ^ mask;
    let v: Verdict = reject();
    try {
      const o = JSON.parse(b.toString('utf8')) as Record<string, unknown>;
      const same = Object.keys(o).length === 3 && o.treeSize === W.treeSize && o.rootHash === W.rootHash && o.note === W.note;
      if (same) v = ACCEPT;
      else if (
        typeof o.rootHash === 'string' &&
        o.rootHash !== W.rootHash &&
        Buffer.from(o.rootHash, 'base64').equals(Buffer.from(W.rootHash, 'base64')) &&
        o.treeSize === W.treeSize &&
        o.note === W.note
      )
        v = ANY;
    } catch {
      v = reject();
    }
    add(`byte ${at} xor 0x${mask.toString(16)}`, (h) => writeWitness(h, b), v);
  }
  // Formatting only
  const formats: Array<[string, string]> = [
    ['compact JSON', JSON.stringify(W)],
    ['members in another order', JSON.stringify({ note: W.note, rootHash: W.rootHash, treeSize: W.treeSize }, null, 2)],
    ['4-space indentation', JSON.stringify(W, null, 4)],
    ['CRLF line ends', JSON.stringify(W, null, 2).replace(/\n/g, '\r\n')],
    ['no final newline', JSON.stringify(W, null, 2)],
    ['tabs', JSON.stringify(W, null, '\t') + '\n\n'],
  ];
  for (const [what, t] of formats) add(`rewritten: ${what}`, (h) => writeWitness(h, t), ACCEPT);
  add('deleted (the database is intact)', (h) => unlinkSync(homePaths(h).witness), ANY);
  add('WAL home: deleted (the database is intact)', (h) => unlinkSync(homePaths(h).witness), ANY, 'wal');
  add(
    'replaced by a directory',
    (h) => {
      unlinkSync(homePaths(h).witness);
      mkdirSync(homePaths(h).witness);
    },
    reject({ exits: [5, 7] }),
  );
  add("the WAL home's witness (size 268, same keys) over this database of 230 events", (h) => writeWitness(h, witnessJson(G.walWitness)), reject());
  for (let i = 0; i < 6; i++) {
    const n = int(r, 1, G.walWitness.treeSize);
    add(`WAL home: treeSize ${G.walWitness.treeSize} -> ${n}`, (h) => writeWitness(h, witnessJson({ ...G.walWitness, treeSize: n })), reject(), 'wal');
  }
  return out;
};

/** Older databases restored under a newer checkpoint.last, and forks grown from them. */
const restoreClass: Gen = () => {
  const cls = 'restore';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const add = (what: string, apply: Mutation['apply'], verdict?: Verdict, base: Mutation['base'] = 'home') =>
    out.push({ cls, what, base, apply, ...(verdict ? { verdict } : {}) });
  const st = G.f.stages;
  const restore = (h: string, db: string, keepWal = false) => {
    const p = homePaths(h);
    for (const f of ['-wal', '-shm']) if (!(keepWal && f === '-wal')) rmSync(`${p.db}${f}`, { force: true });
    copyFileSync(db, p.db);
  };
  const s3 = st[3] as (typeof st)[number];
  for (const s of st.slice(0, 3))
    add(`database of stage ${s.name} (${s.events} events) under checkpoint.last of ${G.witness.treeSize}`, (h) => restore(h, s.db), reject());
  add(`database of stage s3 (${s3.events} events: the uncovered tail lost) under checkpoint.last of ${G.witness.treeSize}`, (h) => restore(h, s3.db), ACCEPT);
  for (const s of st)
    add(
      `a complete older home: database and checkpoint.last of stage ${s.name}`,
      (h) => (restore(h, s.db), copyFileSync(s.witness, homePaths(h).witness)),
      ACCEPT,
    );
  for (let i = 0; i < st.length; i++)
    for (let j = i + 1; j < st.length; j++) {
      const a = st[i] as (typeof st)[number];
      const b = st[j] as (typeof st)[number];
      add(
        `database of stage ${a.name} (${a.events}) under checkpoint.last of stage ${b.name} (${b.witnessSize})`,
        (h) => (restore(h, a.db), copyFileSync(b.witness, homePaths(h).witness)),
        reject(),
      );
    }
  for (const s of st) add(`WAL home: database of stage ${s.name} without the WAL`, (h) => restore(h, s.db), reject(), 'wal');
  for (const s of st)
    add(
      `WAL home: database of stage ${s.name} restored, the newer -wal left beside it`,
      (h) => {
        restore(h, s.db, true);
        const f = sqliteFacts(h, scratch(), { integrity: true });
        return !f || f.integrity !== 'ok' || f.events < G.walWitness.treeSize ? reject() : ANY;
      },
      undefined,
      'wal',
    );
  // Forks: an older database grown again with other events, to, past or short of the signed size.
  for (const s of st.slice(0, 3))
    for (const mode of ['exact', 'more', 'fewer'] as const)
      for (let rep = 0; rep < 4; rep++) {
        const target = mode === 'exact' ? G.witness.treeSize : mode === 'more' ? G.witness.treeSize + int(r, 1, 30) : int(r, s.events + 1, G.witness.treeSize);
        const stream = pick(r, ['note-ops', 'note-fork', 'note-audit']);
        add(
          `fork: stage ${s.name} database + ${target - s.events} other events (to ${target}; ${mode}) under checkpoint.last of ${G.witness.treeSize}`,
          (h) => {
            restore(h, s.db);
            sql(h, (db) =>
              appendCrafted(
                db,
                stream,
                Array.from({ length: target - s.events }, (_, i) => ({ id: freshUuid(), text: `fork ${rep} ${i}` })),
              ),
            );
          },
          reject(),
        );
      }
  for (let rep = 0; rep < 5; rep++) {
    const k = int(r, 1, 9);
    add(
      `stage s3 database + ${k} other tail events (the tail was never signed)`,
      (h) => {
        restore(h, s3.db);
        sql(h, (db) =>
          appendCrafted(
            db,
            'note-tail',
            Array.from({ length: k }, (_, i) => ({ id: freshUuid(), text: `another tail ${rep}.${i}` })),
          ),
        );
      },
      ACCEPT,
    );
  }
  for (let rep = 0; rep < 4; rep++) {
    const k = G.walWitness.treeSize - G.events.length + int(r, -5, 6);
    add(
      `WAL home: WAL deleted, ${k} other events appended (to ${G.events.length + k}) under checkpoint.last of ${G.walWitness.treeSize}`,
      (h) => {
        restore(h, homePaths(G.f.home).db);
        sql(h, (db) =>
          appendCrafted(
            db,
            'note-fork',
            Array.from({ length: k }, (_, i) => ({ id: freshUuid(), text: `wal fork ${rep}.${i}` })),
          ),
        );
      },
      reject(),
      'wal',
    );
  }
  return out;
};

/** The -wal file of a home copied while committed transactions were still only in it. */
const walClass: Gen = () => {
  const cls = 'wal';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const walFile = (h: string) => `${homePaths(h).db}-wal`;
  const { frameSize, frames, bytes } = G.wal;
  const byOracle = (h: string): Verdict => {
    const f = sqliteFacts(h, scratch());
    oracleFacts.set(h, f);
    if (!f) return reject();
    if (f.events < G.walWitness.treeSize) return reject();
    if (f.maxCheckpointSize === G.walWitness.treeSize) return ACCEPT;
    return ANY; // the events a signed checkpoint covers survived, its row in `checkpoints` did not
  };
  const add = (what: string, edit: (h: string) => void) =>
    out.push({
      cls,
      what,
      base: 'wal',
      noWrite: true,
      apply: (h) => {
        edit(h);
        return byOracle(h);
      },
    });
  const rewrite = (h: string, fn: (b: Buffer) => Buffer) => writeFileSync(walFile(h), fn(readFileSync(walFile(h))));
  add('-wal deleted', (h) => unlinkSync(walFile(h)));
  add('-wal emptied', (h) => writeFileSync(walFile(h), ''));
  add('-wal cut to its header', (h) => rewrite(h, (b) => b.subarray(0, 32)));
  for (let i = 0; i < 22; i++) {
    const k = int(r, 1, frames);
    add(`-wal cut after frame ${k} of ${frames}`, (h) => rewrite(h, (b) => b.subarray(0, 32 + k * frameSize)));
  }
  for (let i = 0; i < 22; i++) {
    const at = int(r, 33, bytes);
    add(`-wal cut at byte ${at} of ${bytes}`, (h) => rewrite(h, (b) => b.subarray(0, at)));
  }
  for (let i = 0; i < 40; i++) {
    const frame = int(r, 0, frames);
    const off = int(r, 0, frameSize);
    const mask = 1 << int(r, 0, 8);
    add(`-wal frame ${frame} byte ${off} xor 0x${mask.toString(16)}${off < 24 ? ' (frame header)' : ''}`, (h) =>
      rewrite(h, (b) => {
        const c = Buffer.from(b);
        const at = 32 + frame * frameSize + off;
        c[at] = (c[at] as number) ^ mask;
        return c;
      }),
    );
  }
  for (let i = 0; i < 8; i++) {
    const at = int(r, 0, 32);
    add(`-wal header byte ${at} xor 0x01`, (h) =>
      rewrite(h, (b) => {
        const c = Buffer.from(b);
        c[at] = (c[at] as number) ^ 1;
        return c;
      }),
    );
  }
  for (let i = 0; i < 10; i++) {
    const frame = int(r, 0, frames);
    add(`-wal frame ${frame} zeroed`, (h) =>
      rewrite(h, (b) => Buffer.concat([b.subarray(0, 32 + frame * frameSize), Buffer.alloc(frameSize), b.subarray(32 + (frame + 1) * frameSize)])),
    );
  }
  for (let i = 0; i < 8; i++) {
    const a = int(r, 0, frames - 1);
    const c = int(r, a + 1, frames);
    add(`-wal frames ${a} and ${c} swapped`, (h) =>
      rewrite(h, (b) => {
        const x = Buffer.from(b);
        b.copy(x, 32 + a * frameSize, 32 + c * frameSize, 32 + (c + 1) * frameSize);
        b.copy(x, 32 + c * frameSize, 32 + a * frameSize, 32 + (a + 1) * frameSize);
        return x;
      }),
    );
  }
  for (let i = 0; i < 6; i++) {
    const n = int(r, 1, 3 * frameSize);
    add(`-wal with ${n} bytes of garbage appended`, (h) => rewrite(h, (b) => Buffer.concat([b, seededBytes(seedOf(`g${i}`))(n)])));
  }
  add('-wal with its first frame appended again', (h) => rewrite(h, (b) => Buffer.concat([b, b.subarray(32, 32 + frameSize)])));
  add('-wal with its last frame appended again', (h) =>
    rewrite(h, (b) => Buffer.concat([b, b.subarray(32 + (frames - 1) * frameSize, 32 + frames * frameSize)])),
  );
  out.push({
    cls,
    what: 'WAL checkpointed into ledger.db (PRAGMA wal_checkpoint(TRUNCATE))',
    base: 'wal',
    noWrite: true,
    apply: (h) => sql(h, (db) => void db.pragma('wal_checkpoint(TRUNCATE)')),
    verdict: ACCEPT,
  });
  out.push({
    cls,
    what: 'WAL checkpointed (PASSIVE) and the connection closed',
    base: 'wal',
    noWrite: true,
    apply: (h) => sql(h, (db) => void db.pragma('wal_checkpoint(PASSIVE)')),
    verdict: ACCEPT,
  });
  for (let i = 0; i < 3; i++)
    out.push({
      cls,
      what: `a garbage -shm file (${[32768, 100, 65536][i]} bytes) beside the WAL`,
      base: 'wal',
      apply: (h) => writeFileSync(`${homePaths(h).db}-shm`, seededBytes(seedOf(`shm${i}`))([32768, 100, 65536][i] as number)),
      verdict: ANY,
    });
  return out;
};

/** merkle_nodes: hashes flipped, rows deleted, added, moved. */
const merkleClass: Gen = () => {
  const cls = 'merkle_nodes';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const rows = G.merkle;
  const add = (what: string, fn: (db: Database.Database) => Verdict | void, verdict?: Verdict) =>
    out.push({ cls, what, base: 'home', apply: (h) => sql(h, (db) => fn(db) ?? merkleVerdict(db)), ...(verdict ? { verdict } : {}) });
  const pickRow = () =>
    r() < 0.4
      ? pick(
          r,
          rows.filter((x) => x.level > 0),
        )
      : pick(r, rows);
  for (let i = 0; i < 30; i++) {
    const row = pickRow();
    const at = int(r, 0, 32);
    const mask = 1 << int(r, 0, 8);
    add(`hash of node (${row.level}, ${row.idx}) byte ${at} xor 0x${mask.toString(16)}`, (db) => {
      const hsh = Buffer.from(row.hash);
      hsh[at] = (hsh[at] as number) ^ mask;
      db.prepare('UPDATE merkle_nodes SET hash = ? WHERE level = ? AND idx = ?').run(hsh, row.level, row.idx);
    });
  }
  for (let i = 0; i < 24; i++) {
    const k = int(r, 1, 4);
    const del = Array.from({ length: k }, pickRow);
    add(`${k} row(s) deleted: ${del.map((x) => `(${x.level}, ${x.idx})`).join(' ')}`, (db) => {
      for (const x of del) db.prepare('DELETE FROM merkle_nodes WHERE level = ? AND idx = ?').run(x.level, x.idx);
    });
  }
  const leafCount = rows.filter((x) => x.level === 0).length;
  for (let i = 0; i < 10; i++) {
    const n = int(r, 0, leafCount);
    add(`cut back to the nodes of the first ${n} leaves (as if not yet synced)`, (db) => void setMerkleToPrefix(db, n), ACCEPT);
  }
  add('every row deleted (derived state, rebuilt when missing)', (db) => void db.prepare('DELETE FROM merkle_nodes').run(), ACCEPT);
  for (let n = leafCount + 1; n <= G.events.length; n++)
    add(`synced further, to ${n} leaves, with the right hashes`, (db) => void setMerkleToPrefix(db, n), ACCEPT);
  for (let i = 0; i < 8; i++) {
    const idx = leafCount + int(r, 0, G.events.length - leafCount);
    add(
      `leaf row (0, ${idx}) added with a wrong hash`,
      (db) => void db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (0, ?, ?)').run(idx, seededBytes(seedOf(`leaf${i}`))(32)),
    );
  }
  for (let i = 0; i < 8; i++) {
    const level = int(r, 1, 12);
    const idx = int(r, 0, 8) + Math.floor(G.events.length / 2 ** level) + 1;
    add(
      `row (${level}, ${idx}) added beyond the log`,
      (db) => void db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (?, ?, ?)').run(level, idx, seededBytes(seedOf(`beyond${i}`))(32)),
    );
  }
  for (let i = 0; i < 4; i++) {
    const idx = G.events.length + int(r, 0, 50);
    add(
      `leaf row (0, ${idx}) for a position the log does not have, hash of a real event`,
      (db) => void db.prepare('INSERT INTO merkle_nodes (level, idx, hash) VALUES (0, ?, ?)').run(idx, pick(r, G.leaves)),
    );
  }
  for (let i = 0; i < 4; i++) {
    const n = leafCount + int(r, 1, G.events.length - leafCount + 1);
    add(`leaf rows up to ${n} added with the right hashes but their parents missing`, (db) => {
      const ins = db.prepare('INSERT OR IGNORE INTO merkle_nodes (level, idx, hash) VALUES (0, ?, ?)');
      for (let j = leafCount; j < n; j++) ins.run(j, G.leaves[j]);
    });
  }
  for (let i = 0; i < 14; i++) {
    const row = pickRow();
    const free = (lvl: number, idx: number) => !rows.some((x) => x.level === lvl && x.idx === idx);
    let idx = row.idx + int(r, 1, 40);
    while (!free(row.level, idx)) idx += 1;
    add(
      `node (${row.level}, ${row.idx}) moved to idx ${idx}`,
      (db) => void db.prepare('UPDATE merkle_nodes SET idx = ? WHERE level = ? AND idx = ?').run(idx, row.level, row.idx),
    );
  }
  for (let i = 0; i < 8; i++) {
    const row = pickRow();
    let level = row.level + int(r, 1, 5);
    while (rows.some((x) => x.level === level && x.idx === row.idx)) level += 1;
    add(
      `node (${row.level}, ${row.idx}) moved to level ${level}`,
      (db) => void db.prepare('UPDATE merkle_nodes SET level = ? WHERE level = ? AND idx = ?').run(level, row.level, row.idx),
    );
  }
  for (let i = 0; i < 10; i++) {
    const a = pickRow();
    let b = pickRow();
    while (b.hash.equals(a.hash)) b = pickRow();
    add(`hashes of nodes (${a.level}, ${a.idx}) and (${b.level}, ${b.idx}) swapped`, (db) => {
      db.prepare('UPDATE merkle_nodes SET hash = ? WHERE level = ? AND idx = ?').run(b.hash, a.level, a.idx);
      db.prepare('UPDATE merkle_nodes SET hash = ? WHERE level = ? AND idx = ?').run(a.hash, b.level, b.idx);
    });
  }
  for (const [what, value] of [
    ['hash stored as TEXT (hex)', (h: Buffer) => h.toString('hex')],
    ['hash stored as TEXT (32 characters)', (h: Buffer) => h.toString('hex').slice(0, 32)],
    ['hash of 31 bytes', (h: Buffer) => h.subarray(0, 31)],
    ['hash of 33 bytes', (h: Buffer) => Buffer.concat([h, Buffer.from([0])])],
    ['hash as an integer', () => 7],
    ['hash as a real', () => 0.5],
  ] as const) {
    const row = pickRow();
    add(
      `node (${row.level}, ${row.idx}): ${what}`,
      (db) => {
        db.pragma('ignore_check_constraints = ON');
        db.prepare('UPDATE merkle_nodes SET hash = ? WHERE level = ? AND idx = ?').run(value(row.hash), row.level, row.idx);
      },
      reject(MERKLE),
    );
  }
  for (const [what, v] of [
    ['level stored as TEXT', "'x'"],
    ['idx stored as TEXT', "'x'"],
    ['idx negative', '-1'],
  ] as const) {
    const row = pickRow();
    const col = what.startsWith('level') ? 'level' : 'idx';
    add(
      `node (${row.level}, ${row.idx}): ${what}`,
      (db) => {
        db.pragma('ignore_check_constraints = ON');
        db.prepare(`UPDATE merkle_nodes SET ${col} = ${v} WHERE level = ? AND idx = ?`).run(row.level, row.idx);
      },
      reject(MERKLE),
    );
  }
  return out;
};

/** The checkpoints table's tree_size, root_hash and note columns. */
const checkpointsClass: Gen = () => {
  const cls = 'checkpoints';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const add = (what: string, fn: (db: Database.Database) => void, verdict: Verdict) => out.push({ cls, what, base: 'home', verdict, apply: (h) => sql(h, fn) });
  const cps = G.cps;
  const N = G.events.length;
  for (let i = 0; i < 26; i++) {
    const cp = pick(r, cps);
    let n: number;
    do n = i % 4 === 3 ? N + int(r, 1, 100) : Math.max(0, cp.tree_size + int(r, -30, 31));
    while (n === cp.tree_size);
    add(
      `row seq ${cp.seq}: tree_size ${cp.tree_size} -> ${n}`,
      (db) => void db.prepare('UPDATE checkpoints SET tree_size = ? WHERE seq = ?').run(n, cp.seq),
      reject(CPS),
    );
  }
  for (const cp of cps)
    add(
      `row seq ${cp.seq}: tree_size negative`,
      (db) => (db.pragma('ignore_check_constraints = ON'), void db.prepare('UPDATE checkpoints SET tree_size = -1 WHERE seq = ?').run(cp.seq)),
      reject(CPS),
    );
  for (const cp of cps.slice(0, 3))
    add(
      `row seq ${cp.seq}: tree_size stored as TEXT`,
      (db) => void db.prepare("UPDATE checkpoints SET tree_size = 'x' || tree_size WHERE seq = ?").run(cp.seq),
      reject(CPS),
    );
  for (let i = 0; i < 20; i++) {
    const cp = pick(r, cps);
    const kind = i % 5;
    const root = Buffer.from(cp.root_hash, 'base64');
    const value =
      kind === 0
        ? b64(seededBytes(seedOf(`cproot${i}`))(32))
        : kind === 1
          ? (cps.find((c) => c.root_hash !== cp.root_hash) as CpRow).root_hash
          : kind === 2
            ? b64(Buffer.from(root.map((b, j) => (j === i ? b ^ 0x80 : b))))
            : kind === 3
              ? root.toString('hex')
              : '';
    add(
      `row seq ${cp.seq}: root_hash -> ${['random', "another row's", 'one bit flipped', 'hex', 'empty'][kind]}`,
      (db) => void db.prepare('UPDATE checkpoints SET root_hash = ? WHERE seq = ?').run(value, cp.seq),
      reject(CPS),
    );
  }
  for (const cp of cps.slice(1, 3))
    add(
      `row seq ${cp.seq}: root_hash without its padding (same bytes, other text)`,
      (db) => void db.prepare("UPDATE checkpoints SET root_hash = rtrim(root_hash, '=') WHERE seq = ?").run(cp.seq),
      reject(CPS),
    );
  for (let i = 0; i < 14; i++) {
    const cp = pick(r, cps);
    const at = int(r, 0, cp.note.length);
    const ch = cp.note[at] as string;
    if (ch === '—') continue;
    const rep = ch === 'A' ? 'B' : ch === '\n' ? ' ' : 'A';
    const note = cp.note.slice(0, at) + rep + cp.note.slice(at + 1);
    add(
      `row seq ${cp.seq}: note character ${at} ${JSON.stringify(ch)} -> ${rep}`,
      (db) => void db.prepare('UPDATE checkpoints SET note = ? WHERE seq = ?').run(note, cp.seq),
      reject(CPS),
    );
  }
  for (let i = 0; i < 6; i++) {
    const a = pick(r, cps);
    const b = pick(
      r,
      cps.filter((c) => c.seq !== a.seq),
    );
    add(
      `row seq ${a.seq}: note replaced by row ${b.seq}'s, columns kept`,
      (db) => void db.prepare('UPDATE checkpoints SET note = ? WHERE seq = ?').run(b.note, a.seq),
      reject(CPS),
    );
  }
  for (let i = 0; i < 5; i++) {
    const a = pick(r, cps);
    const b = pick(
      r,
      cps.filter((c) => c.seq !== a.seq),
    );
    add(
      `rows seq ${a.seq} and ${b.seq} swapped whole (issue order broken)`,
      (db) => {
        db.prepare('UPDATE checkpoints SET tree_size = ?, root_hash = ?, note = ? WHERE seq = ?').run(b.tree_size, b.root_hash, b.note, a.seq);
        db.prepare('UPDATE checkpoints SET tree_size = ?, root_hash = ?, note = ? WHERE seq = ?').run(a.tree_size, a.root_hash, a.note, b.seq);
      },
      reject(CPS),
    );
  }
  for (const cp of cps.slice(1)) {
    const note = signedNote(G.stranger, cp.tree_size, Buffer.from(cp.root_hash, 'base64'));
    add(
      `row seq ${cp.seq}: note re-signed by an unregistered key only`,
      (db) => void db.prepare('UPDATE checkpoints SET note = ? WHERE seq = ?').run(note, cp.seq),
      reject(CPS),
    );
  }
  for (const cp of cps.slice(1)) {
    const extra = signedNote(G.stranger, cp.tree_size, Buffer.from(cp.root_hash, 'base64'));
    const note = cp.note + extra.slice(extra.indexOf('\n\n') + 2);
    add(
      `row seq ${cp.seq}: a second signature by an unregistered key added (ignored, as signed-note says)`,
      (db) => void db.prepare('UPDATE checkpoints SET note = ? WHERE seq = ?').run(note, cp.seq),
      ACCEPT,
    );
  }
  for (const cp of cps.slice(1, 4)) {
    const line = cp.note.slice(cp.note.indexOf('\n\n') + 2);
    const sig = Buffer.from(line.trim().split(' ')[2] as string, 'base64');
    sig[10] = (sig[10] as number) ^ 1;
    const note = `${cp.note}— ${G.controller.name}x ${sig.toString('base64')}\n`;
    const bad = `${cp.note.slice(0, cp.note.indexOf('\n\n') + 2)}${line.split(' ').slice(0, 2).join(' ')} ${sig.toString('base64')}\n`;
    add(
      `row seq ${cp.seq}: signature bytes of the controller changed`,
      (db) => void db.prepare('UPDATE checkpoints SET note = ? WHERE seq = ?').run(bad, cp.seq),
      reject(CPS),
    );
    add(
      `row seq ${cp.seq}: an extra signature line under an unknown key name`,
      (db) => void db.prepare('UPDATE checkpoints SET note = ? WHERE seq = ?').run(note, cp.seq),
      ACCEPT,
    );
  }
  for (const cp of cps.slice(1)) {
    const fork = seededBytes(seedOf(`cpfork${cp.seq}`))(32);
    const note = signedNote(G.controller, cp.tree_size, fork);
    add(
      `row seq ${cp.seq}: replaced whole by a controller-signed checkpoint of the same size and another root (equivocation)`,
      (db) => void db.prepare('UPDATE checkpoints SET root_hash = ?, note = ? WHERE seq = ?').run(b64(fork), note, cp.seq),
      reject(CPS),
    );
  }
  for (const cp of cps.slice(1, 4)) {
    const prev = cps[cp.seq - 1] as CpRow;
    const n = int(r, prev.tree_size + 1, cp.tree_size);
    const note = signedNote(G.controller, n, rootAt(n));
    add(
      `row seq ${cp.seq}: replaced whole by a true controller-signed checkpoint of size ${n} (still in order)`,
      (db) => void db.prepare('UPDATE checkpoints SET tree_size = ?, root_hash = ?, note = ? WHERE seq = ?').run(n, b64(rootAt(n)), note, cp.seq),
      ACCEPT,
    );
  }
  for (const cp of cps.slice(1, 4))
    add(
      `row seq ${cp.seq}: note stored as a BLOB (same bytes)`,
      (db) => void db.prepare('UPDATE checkpoints SET note = CAST(note AS BLOB) WHERE seq = ?').run(cp.seq),
      reject(CPS),
    );
  for (const cp of cps.slice(1, 3))
    add(
      `row seq ${cp.seq}: no-op rewrite`,
      (db) => void db.prepare('UPDATE checkpoints SET tree_size = tree_size, root_hash = root_hash, note = note WHERE seq = ?').run(cp.seq),
      ACCEPT,
    );
  return out;
};

/** Duplicate event ids, signed with the real keys, once the UNIQUE index on id is gone. */
const duplicateIdClass: Gen = () => {
  const cls = 'duplicate-ids';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const add = (what: string, fn: (db: Database.Database) => void, verdict: Verdict) => out.push({ cls, what, base: 'home', verdict, apply: (h) => sql(h, fn) });
  const ev = G.events;
  for (let i = 0; i < 30; i++) {
    const victim = i === 0 ? (ev[0] as EventRow) : pick(r, ev);
    const stream = pick(r, ['note-dup', 'note-ops', victim.stream.startsWith('note-') ? victim.stream : 'note-audit']);
    add(
      `UNIQUE(id) dropped; a signed Note in ${stream} reusing the id of position ${victim.position} (${victim.type})`,
      (db) => {
        rebuildEvents(db, { uniqueId: false });
        appendCrafted(db, stream, [{ id: victim.id, text: `dup ${i}` }]);
      },
      reject(NOT_CRYPTO),
    );
  }
  for (let i = 0; i < 8; i++) {
    const stream = pick(r, ['note-dup', 'note-ops']);
    add(
      `UNIQUE(id) dropped; two new signed Notes sharing one new id (${stream})`,
      (db) => {
        rebuildEvents(db, { uniqueId: false });
        const id = freshUuid();
        appendCrafted(db, stream, [
          { id, text: `first ${i}` },
          { id, text: `second ${i}` },
        ]);
      },
      reject(NOT_CRYPTO),
    );
  }
  for (let i = 0; i < 4; i++) {
    const k = int(r, 2, 6);
    add(
      `UNIQUE(id) dropped; ${k} signed Notes reusing ids of ${k} random events`,
      (db) => {
        rebuildEvents(db, { uniqueId: false });
        appendCrafted(
          db,
          'note-dup',
          Array.from({ length: k }, (_, j) => ({ id: pick(r, ev).id, text: `many ${i}.${j}` })),
        );
      },
      reject(NOT_CRYPTO),
    );
  }
  // The same, with the schema then forged back to the original text: the UNIQUE index on id is an index made by
  // hand (CREATE INDEX, not unique) renamed into the autoindex's place through writable_schema.
  for (let i = 0; i < 6; i++) {
    const victim = pick(r, ev);
    add(
      `UNIQUE(id) dropped, a signed Note reusing the id of position ${victim.position}, the schema forged back to the original text`,
      (db) => {
        const original = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").pluck().get() as string;
        rebuildEvents(db, { uniqueId: false });
        appendCrafted(db, pick(r, ['note-dup', 'note-ops']), [{ id: victim.id, text: `hidden dup ${i}` }]);
        db.exec('CREATE INDEX drill_ids ON events(id)');
        db.unsafeMode(true);
        db.pragma('writable_schema = ON');
        db.prepare("UPDATE sqlite_master SET name = 'sqlite_autoindex_events_2' WHERE name = 'sqlite_autoindex_events_1'").run();
        db.prepare("UPDATE sqlite_master SET name = 'sqlite_autoindex_events_1', sql = NULL WHERE name = 'drill_ids'").run();
        db.prepare("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'events'").run(original);
        db.pragma('writable_schema = OFF');
      },
      reject(NOT_CRYPTO),
    );
  }
  // Controls: the same hand-built events with fresh ids (and the index kept) are genuine.
  for (let i = 0; i < 6; i++) {
    const stream = pick(r, ['note-dup', 'note-ops', 'note-audit']);
    add(`control: a hand-built signed Note in ${stream} with a fresh id`, (db) => appendCrafted(db, stream, [{ id: freshUuid(), text: `fresh ${i}` }]), ACCEPT);
  }
  add('UNIQUE(id) dropped, no duplicate (schema differs from the migrations)', (db) => rebuildEvents(db, { uniqueId: false }), ANY);
  return out;
};

/** events.bytes: flipped, cut, padded, re-encoded, stored as another SQLite type. */
const bytesClass: Gen = () => {
  const cls = 'bytes';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const add = (what: string, fn: (db: Database.Database) => void, verdict: Verdict, noWrite = false) =>
    out.push({ cls, what, base: 'home', verdict, noWrite, apply: (h) => sql(h, fn) });
  const ev = G.events;
  const set = (db: Database.Database, pos: number, v: unknown) => db.prepare('UPDATE events SET bytes = ? WHERE position = ?').run(v, pos);
  for (let i = 0; i < 30; i++) {
    const e = pick(r, ev);
    const at = int(r, 0, e.bytes.length);
    const mask = 1 << int(r, 0, 8);
    add(
      `position ${e.position}: byte ${at} xor 0x${mask.toString(16)}`,
      (db) => {
        const b = Buffer.from(e.bytes);
        b[at] = (b[at] as number) ^ mask;
        set(db, e.position, b);
      },
      reject(ROW),
    );
  }
  for (let i = 0; i < 8; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: stored as TEXT (same characters)`,
      (db) => void db.prepare('UPDATE events SET bytes = CAST(bytes AS TEXT) WHERE position = ?').run(e.position),
      reject(ROW),
      true,
    );
  }
  add('every event stored as TEXT (same characters)', (db) => void db.prepare('UPDATE events SET bytes = CAST(bytes AS TEXT)').run(), reject(ROW), true);
  add(
    'position 0 stored as TEXT (same characters)',
    (db) => void db.prepare('UPDATE events SET bytes = CAST(bytes AS TEXT) WHERE position = 0').run(),
    reject(ROW),
    true,
  );
  for (let i = 0; i < 4; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: NULL (NOT NULL dropped)`,
      (db) => {
        rebuildEvents(db, { bytesNull: true });
        set(db, e.position, null);
      },
      reject(ROW),
      true,
    );
  }
  for (const [what, v] of [
    ['an empty BLOB', Buffer.alloc(0)],
    ['the integer 42', 42],
    ['the real 1.5', 1.5],
    ['an empty string', ''],
    ['the text {}', '{}'],
    ['a 2 MiB BLOB', Buffer.alloc(2 * 1024 * 1024, 0x20)],
  ] as const) {
    const e = pick(r, ev);
    add(`position ${e.position}: ${what}`, (db) => void set(db, e.position, v), reject(ROW), true);
  }
  for (let i = 0; i < 10; i++) {
    const e = pick(r, ev);
    const k = int(r, 1, 40);
    add(`position ${e.position}: last ${k} bytes cut`, (db) => void set(db, e.position, e.bytes.subarray(0, e.bytes.length - k)), reject(ROW));
  }
  for (let i = 0; i < 8; i++) {
    const e = pick(r, ev);
    const tail = pick(r, [' ', '\n', '\u0000', '\t', ' {}']);
    add(
      `position ${e.position}: ${JSON.stringify(tail)} appended (hash updated)`,
      (db) => {
        const b = Buffer.concat([e.bytes, Buffer.from(tail)]);
        db.prepare('UPDATE events SET bytes = ?, hash = ? WHERE position = ?').run(b, sha256(b), e.position);
      },
      reject(ROW),
    );
  }
  for (let i = 0; i < 6; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: re-encoded as indented JSON (hash updated)`,
      (db) => {
        const b = Buffer.from(JSON.stringify(JSON.parse(e.bytes.toString('utf8')), null, i % 2 === 0 ? 2 : 1));
        db.prepare('UPDATE events SET bytes = ?, hash = ? WHERE position = ?').run(b, sha256(b), e.position);
      },
      reject(ROW),
    );
  }
  for (let i = 0; i < 8; i++) {
    const a = pick(r, ev);
    const b = pick(
      r,
      ev.filter((x) => x.position !== a.position),
    );
    add(
      `position ${a.position}: bytes and hash of position ${b.position}`,
      (db) => void db.prepare('UPDATE events SET bytes = ?, hash = ? WHERE position = ?').run(b.bytes, b.hash, a.position),
      reject(ROW),
    );
  }
  add('every row: bytes = bytes (no-op rewrite)', (db) => void db.prepare('UPDATE events SET bytes = bytes').run(), ACCEPT, true);
  for (let i = 0; i < 3; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: CAST(CAST(bytes AS TEXT) AS BLOB) (the same BLOB)`,
      (db) => void db.prepare('UPDATE events SET bytes = CAST(CAST(bytes AS TEXT) AS BLOB) WHERE position = ?').run(e.position),
      ACCEPT,
      true,
    );
  }
  for (let i = 0; i < 3; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: a byte flipped and flipped back`,
      (db) => {
        const b = Buffer.from(e.bytes);
        b[5] = (b[5] as number) ^ 1;
        set(db, e.position, b);
        set(db, e.position, e.bytes);
      },
      ACCEPT,
    );
  }
  return out;
};

/** events.hash */
const hashClass: Gen = () => {
  const cls = 'hash';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const add = (what: string, fn: (db: Database.Database) => void, verdict: Verdict, noWrite = false) =>
    out.push({ cls, what, base: 'home', verdict, noWrite, apply: (h) => sql(h, fn) });
  const ev = G.events;
  const set = (db: Database.Database, pos: number, v: unknown) => {
    db.pragma('ignore_check_constraints = ON');
    db.prepare('UPDATE events SET hash = ? WHERE position = ?').run(v, pos);
  };
  for (let i = 0; i < 20; i++) {
    const e = pick(r, ev);
    const at = int(r, 0, 32);
    const mask = 1 << int(r, 0, 8);
    add(
      `position ${e.position}: hash byte ${at} xor 0x${mask.toString(16)}`,
      (db) => set(db, e.position, Buffer.from(e.hash.map((b, j) => (j === at ? b ^ mask : b)))),
      reject(ROW),
    );
  }
  for (let i = 0; i < 6; i++) {
    const a = pick(r, ev);
    const b = pick(
      r,
      ev.filter((x) => x.position !== a.position),
    );
    add(`position ${a.position}: hash of position ${b.position}`, (db) => set(db, a.position, b.hash), reject(ROW));
  }
  for (const [what, v] of [
    ['zeroblob(32)', Buffer.alloc(32)],
    ['TEXT of 32 characters', 'x'.repeat(32)],
    ['the right hash in hex (TEXT)', null],
    ['31 bytes', 'cut'],
    ['33 bytes', 'long'],
    ['an integer', 5],
    ['a real', 2.5],
  ] as const) {
    for (let i = 0; i < 2; i++) {
      const e = pick(r, ev);
      const value = v === null ? e.hash.toString('hex') : v === 'cut' ? e.hash.subarray(0, 31) : v === 'long' ? Buffer.concat([e.hash, Buffer.from([1])]) : v;
      add(`position ${e.position}: hash ${what}`, (db) => set(db, e.position, value), reject(ROW), true);
    }
  }
  for (let i = 0; i < 2; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: hash NULL (NOT NULL dropped)`,
      (db) => {
        rebuildEvents(db, { hashNull: true });
        set(db, e.position, null);
      },
      reject(ROW),
      true,
    );
  }
  add('every row: hash = hash (no-op rewrite)', (db) => void db.prepare('UPDATE events SET hash = hash').run(), ACCEPT, true);
  for (let i = 0; i < 3; i++) {
    const e = pick(r, ev);
    add(`position ${e.position}: hash recomputed and written back (same value)`, (db) => set(db, e.position, sha256(e.bytes)), ACCEPT);
  }
  return out;
};

/** positions, revisions, streams, types and ids of rows. */
const columnsClass: Gen = () => {
  const cls = 'columns';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const add = (what: string, fn: (db: Database.Database) => void, verdict: Verdict, noWrite = false) =>
    out.push({ cls, what, base: 'home', verdict, noWrite, apply: (h) => sql(h, fn) });
  const ev = G.events;
  const N = ev.length;
  const used = new Set(ev.map((e) => `${e.stream}@${e.revision}`));
  for (let i = 0; i < 12; i++) {
    const e = pick(r, ev);
    const to = i % 2 === 0 ? N + int(r, 0, 1000) : e.position + 1000 + int(r, 0, 100);
    add(`position ${e.position} -> ${to}`, (db) => void db.prepare('UPDATE events SET position = ? WHERE position = ?').run(to, e.position), reject(ROW));
  }
  for (let i = 0; i < 15; i++) {
    const e = pick(r, ev);
    let rev = Math.max(0, e.revision + pick(r, [-1, 1, 2, 50]));
    while (used.has(`${e.stream}@${rev}`)) rev += 1;
    add(
      `position ${e.position}: revision ${e.revision} -> ${rev}`,
      (db) => void db.prepare('UPDATE events SET revision = ? WHERE position = ?').run(rev, e.position),
      reject(ROW),
    );
  }
  const streams = [...new Set(ev.map((e) => e.stream))];
  for (let i = 0; i < 15; i++) {
    const e = pick(r, ev);
    let s = i % 3 === 0 ? `note-moved${i}` : pick(r, streams);
    if (s === e.stream || used.has(`${s}@${e.revision}`)) s = `note-moved${i}`;
    add(
      `position ${e.position}: stream ${e.stream} -> ${s}`,
      (db) => void db.prepare('UPDATE events SET stream = ? WHERE position = ?').run(s, e.position),
      reject(ROW),
    );
  }
  const types = [...new Set(ev.map((e) => e.type))];
  for (let i = 0; i < 15; i++) {
    const e = pick(r, ev);
    const t = pick(
      r,
      types.filter((x) => x !== e.type),
    );
    add(
      `position ${e.position}: type ${e.type} -> ${t}`,
      (db) => void db.prepare('UPDATE events SET type = ? WHERE position = ?').run(t, e.position),
      reject(ROW),
    );
  }
  for (let i = 0; i < 12; i++) {
    const e = pick(r, ev);
    const id = i % 3 === 0 && /[a-f]/.test(e.id) ? e.id.toUpperCase() : freshUuid();
    add(`position ${e.position}: id -> ${id}`, (db) => void db.prepare('UPDATE events SET id = ? WHERE position = ?').run(id, e.position), reject(ROW));
  }
  for (const [col, expr] of [
    ['revision', "'r' || revision"],
    ['revision', 'revision + 0.5'],
    ['stream', 'CAST(stream AS BLOB)'],
    ['type', 'CAST(type AS BLOB)'],
    ['id', 'CAST(id AS BLOB)'],
    ['stream', '7'],
    ['type', 'NULL'],
    ['id', "x'00'"],
  ] as const) {
    for (let i = 0; i < 2; i++) {
      const e = pick(r, ev);
      add(
        `position ${e.position}: ${col} = ${expr}`,
        (db) => {
          if (expr === 'NULL') rebuildEventsNullableType(db); // NOT NULL dropped first
          db.prepare(`UPDATE events SET ${col} = ${expr} WHERE position = ?`).run(e.position);
        },
        reject(ROW),
        true,
      );
    }
  }
  add(
    "every row: revision = '' || revision (TEXT that INTEGER affinity turns back into the same integer)",
    (db) => void db.prepare("UPDATE events SET revision = '' || revision").run(),
    ACCEPT,
    true,
  );
  add(
    'every row: every column rewritten with itself',
    (db) => void db.prepare('UPDATE events SET position = position, stream = stream, revision = revision, id = id, type = type').run(),
    ACCEPT,
    true,
  );
  for (let i = 0; i < 3; i++) {
    const e = pick(r, ev);
    add(
      `position ${e.position}: stream renamed and renamed back`,
      (db) => {
        db.prepare("UPDATE events SET stream = 'note-tmp' WHERE position = ?").run(e.position);
        db.prepare('UPDATE events SET stream = ? WHERE position = ?').run(e.stream, e.position);
      },
      ACCEPT,
    );
  }
  return out;
};

function rebuildEventsNullableType(db: Database.Database): void {
  db.exec(`BEGIN;
    CREATE TABLE events_new (position INTEGER PRIMARY KEY CHECK (position >= 0), stream TEXT NOT NULL, revision INTEGER NOT NULL CHECK (revision >= 0),
      id TEXT NOT NULL UNIQUE, type TEXT, bytes BLOB NOT NULL, hash BLOB NOT NULL CHECK (length(hash) = 32), UNIQUE (stream, revision));
    INSERT INTO events_new SELECT position, stream, revision, id, type, bytes, hash FROM events;
    DROP TABLE events; ALTER TABLE events_new RENAME TO events; COMMIT;`);
}

/** schema_version rows deleted or changed: verify must neither migrate nor crash. */
const schemaClass: Gen = () => {
  const cls = 'schema_version';
  const out: Mutation[] = [];
  const cases: Array<[string, string, Verdict]> = [
    ['every row deleted', 'DELETE FROM schema_version', reject(CLEAN_REFUSAL)],
    ['row of version 1 deleted', 'DELETE FROM schema_version WHERE version = 1', reject(CLEAN_REFUSAL)],
    ['version 1 -> 0', 'UPDATE schema_version SET version = 0', reject(CLEAN_REFUSAL)],
    ['version 1 -> 2 (newer than this build)', 'UPDATE schema_version SET version = 2', reject(CLEAN_REFUSAL)],
    ['version 1 -> 999', 'UPDATE schema_version SET version = 999', reject(CLEAN_REFUSAL)],
    ['table dropped', 'DROP TABLE schema_version', reject(CLEAN_REFUSAL)],
    ['version 1 -> -1', 'UPDATE schema_version SET version = -1', reject(CLEAN_REFUSAL)],
    ['sha256 of the script changed', "UPDATE schema_version SET sha256 = 'x'", ANY],
    ['name changed', "UPDATE schema_version SET name = 'other'", ANY],
  ];
  for (const base of ['home', 'wal'] as const)
    for (const [what, stmt, verdict] of cases)
      out.push({ cls, what: `${base === 'wal' ? 'WAL home: ' : ''}${what}`, base, verdict, noWrite: true, apply: (h) => sql(h, (db) => void db.exec(stmt)) });
  return out;
};

/** Events deleted at the end: under a signed checkpoint (reject) or only the uncovered tail (accept). */
const truncationClass: Gen = () => {
  const cls = 'truncation';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const W = G.witness.treeSize;
  const N = G.events.length;
  const leafCount = G.merkle.filter((x) => x.level === 0).length;
  const add = (what: string, fn: (db: Database.Database) => void, verdict: Verdict, base: Mutation['base'] = 'home', after?: (h: string) => void) =>
    out.push({ cls, what, base, verdict, apply: (h) => (sql(h, fn), after?.(h)) });
  add('every event deleted', (db) => void db.prepare('DELETE FROM events').run(), reject());
  for (let i = 0; i < 34; i++) {
    const k = int(r, 1, W);
    add(
      `events from position ${k} on deleted (${N - k} of ${N}; checkpoint.last covers ${W})`,
      (db) => void db.prepare('DELETE FROM events WHERE position >= ?').run(k),
      reject(),
    );
  }
  for (let i = 0; i < 24; i++) {
    const k = int(r, 1, W);
    add(
      `events from ${k} on deleted, and their merkle_nodes and the checkpoints above ${k} (checkpoint.last covers ${W})`,
      (db) => {
        db.prepare('DELETE FROM events WHERE position >= ?').run(k);
        setMerkleToPrefix(db, Math.min(k, leafCount));
        db.prepare('DELETE FROM checkpoints WHERE tree_size > ?').run(k);
      },
      reject(),
    );
  }
  for (let i = 0; i < 16; i++) {
    const k = int(r, 3, W);
    const last = [...G.cps].reverse().find((c) => c.tree_size <= k) as CpRow;
    add(
      `cut back to a consistent older home: events from ${k} on, their nodes, the checkpoints above it gone, checkpoint.last = checkpoint of ${last.tree_size}`,
      (db) => {
        db.prepare('DELETE FROM events WHERE position >= ?').run(k);
        setMerkleToPrefix(db, Math.min(k, leafCount));
        db.prepare('DELETE FROM checkpoints WHERE tree_size > ?').run(k);
      },
      ACCEPT,
      'home',
      (h) => writeWitness(h, witnessJson({ treeSize: last.tree_size, rootHash: last.root_hash, note: last.note })),
    );
  }
  for (let k = W; k < N; k++)
    add(`events from ${k} on deleted (only the uncovered tail)`, (db) => void db.prepare('DELETE FROM events WHERE position >= ?').run(k), ACCEPT);
  for (let i = 0; i < 10; i++) {
    const k = int(r, 1, G.walWitness.treeSize);
    add(
      `WAL home: events from ${k} on deleted (checkpoint.last covers ${G.walWitness.treeSize})`,
      (db) => void db.prepare('DELETE FROM events WHERE position >= ?').run(k),
      reject(),
      'wal',
    );
  }
  for (let k = G.walWitness.treeSize; k < G.walEvents.length; k++)
    add(
      `WAL home: events from ${k} on deleted (only the uncovered tail)`,
      (db) => void db.prepare('DELETE FROM events WHERE position >= ?').run(k),
      ACCEPT,
      'wal',
    );
  return out;
};

/** Events moved to other positions. */
const reorderClass: Gen = () => {
  const cls = 'reorder';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const ev = G.events;
  const N = ev.length;
  /** Puts the event of old position perm[i] at position i, for the positions in `at`. */
  const permute = (db: Database.Database, at: number[], from: number[]) => {
    db.transaction(() => {
      for (const p of at) db.prepare('DELETE FROM events WHERE position = ?').run(p);
      const ins = db.prepare('INSERT INTO events (position, stream, revision, id, type, bytes, hash) VALUES (?, ?, ?, ?, ?, ?, ?)');
      at.forEach((p, i) => {
        const e = ev[from[i] as number] as EventRow;
        ins.run(p, e.stream, e.revision, e.id, e.type, e.bytes, e.hash);
      });
    })();
  };
  const add = (what: string, at: number[], from: number[], verdict: Verdict) =>
    out.push({ cls, what, base: 'home', verdict, apply: (h) => sql(h, (db) => permute(db, at, from)) });
  for (let i = 0; i < 24; i++) {
    const a = int(r, 0, N - 1);
    const b = i % 3 === 0 ? a + 1 : int(r, a + 1, N);
    add(`events at ${a} and ${b} swapped`, [a, b], [b, a], reject(ROW));
  }
  for (let i = 0; i < 14; i++) {
    const a = int(r, 0, N - 2);
    const len = int(r, 2, Math.min(12, N - a));
    const at = Array.from({ length: len }, (_, j) => a + j);
    add(
      `events ${a}..${a + len - 1} rotated by one`,
      at,
      at.map((p) => (p === a + len - 1 ? a : p + 1)),
      reject(ROW),
    );
  }
  for (let i = 0; i < 10; i++) {
    const a = int(r, 0, N - 2);
    const len = int(r, 2, Math.min(20, N - a));
    const at = Array.from({ length: len }, (_, j) => a + j);
    add(`events ${a}..${a + len - 1} reversed`, at, [...at].reverse(), reject(ROW));
  }
  for (let i = 0; i < 5; i++) {
    const a = int(r, G.witness.treeSize, N - 1);
    const b = int(r, a + 1, N);
    add(`events at ${a} and ${b} of the uncovered tail swapped`, [a, b], [b, a], reject(ROW));
  }
  for (let i = 0; i < 2; i++) {
    const a = int(r, 0, N);
    add(`event at ${a} deleted and put back`, [a], [a], ACCEPT);
  }
  return out;
};

/** Claims that do not follow from the events, signed with the ledger's real keys through the Ledger API. */
const claimsClass: Gen = () => {
  const cls = 'forged-claims';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const { a, b, c } = G.f.runs;
  const startedData = (run: string) => G.events.find((e) => e.type === 'RunStarted' && e.stream === `run-${run}`)?.data as JsonObject;
  const withLedger = async (home: string, fn: (h: LedgerHome) => Promise<unknown>) => {
    const h = new LedgerHome(home, drillDeps('2026-12-07T10:00:00.000Z'));
    try {
      await fn(h);
    } finally {
      await h.close();
    }
  };
  const add = (what: string, fn: (h: LedgerHome) => Promise<unknown>, verdict: Verdict) =>
    out.push({ cls, what, base: 'home', verdict, apply: (home) => withLedger(home, fn) });
  const forge = (h: LedgerHome, stream: string, events: Array<{ type: string; data: JsonObject }>) => h.ledger.append(stream, events);
  const completed = (
    run: string,
    bestRound: number | null,
    bestScore: number | null,
    bestSnapshot: string | null,
    status = 'completed',
  ): { type: string; data: JsonObject } => ({
    type: 'RunCompleted',
    data: { run, status, bestRound, bestScore, bestSnapshot },
  });
  const snapOf = (f: typeof a, round: number) => f.rounds.find((x) => x.round === round)?.snapshot ?? null;
  let judgeN = 0;
  const judgeEvents = (
    run: string,
    round: number,
    snapshot: string,
    score: number,
    o: { launched?: boolean; completedStatus?: string; reward?: boolean } = {},
  ) => {
    judgeN += 1;
    const judge = `forged-${judgeN}`;
    const evs: Array<{ type: string; data: JsonObject }> = [];
    if (o.launched !== false)
      evs.push({
        type: 'JudgeLaunched',
        data: { run, round, judge, image: `sha256:${'1'.repeat(64)}`, snapshot, testsDigest: `sha256:${'2'.repeat(64)}`, limits: {}, network: 'none' },
      });
    if (o.completedStatus !== undefined)
      evs.push({
        type: 'JudgeCompleted',
        data: { run, round, judge, status: o.completedStatus, exitCode: 0, durationMs: 5, outputDigest: EMPTY_OUTPUT_DIGEST, outputBytes: 0 },
      });
    if (o.reward !== false)
      evs.push({ type: 'RewardRecorded', data: { run, round, judge, rewards: { reward: score }, primaryMetric: 'reward', primaryScore: score } });
    return { stream: `judge-${judge}`, evs };
  };

  for (let i = 0; i < 8; i++) {
    const run = `fake${i}`;
    const score = pick(r, [1e-7, 0.99, 1, 42]);
    add(
      `RunCompleted in a new stream run-${run} (no RunStarted, no rounds), bestScore ${score}`,
      (h) => forge(h, `run-${run}`, [completed(run, 1, score, `bafy${i}fake`)]),
      reject(CLAIMS),
    );
  }
  for (let i = 0; i < 8; i++) {
    const f = i % 2 === 0 ? a : b;
    const better = f.direction === 'maximize' ? (f.bestScore as number) + 0.01 + r() : (f.bestScore as number) * r();
    const round = pick(
      r,
      f.rounds.filter((x) => x.snapshot !== null),
    ).round;
    add(
      `a second RunCompleted on completed run ${f.run}: round ${round}, bestScore ${better.toFixed(4)}`,
      (h) => forge(h, f.stream, [completed(f.run, round, better, snapOf(f, round))]),
      reject(CLAIMS),
    );
  }
  for (const f of [a, b])
    add(
      `a second, identical RunCompleted on run ${f.run}`,
      (h) => forge(h, f.stream, [completed(f.run, f.bestRound, f.bestScore, f.bestSnapshot)]),
      reject(CLAIMS),
    );
  const cBest = { round: 3, score: 0.9 };
  for (let i = 0; i < 10; i++) {
    const score = cBest.score + 0.001 + r() * 5;
    const round = pick(r, [1, 3, 4]);
    add(
      `RunCompleted on running run ${c.run}: round ${round} with bestScore ${score.toFixed(4)} (better than any recorded)`,
      (h) => forge(h, c.stream, [completed(c.run, round, score, snapOf(c, round))]),
      reject(CLAIMS),
    );
  }
  for (const [round, score] of [
    [1, 0.4],
    [4, 0.65],
    [2, 0.95],
    [2, null],
  ] as Array<[number, number | null]>)
    add(
      `RunCompleted on ${c.run}: round ${round} (${round === 2 ? 'broke a rule' : 'not the best'}) with score ${score}`,
      (h) => forge(h, c.stream, [completed(c.run, round, score, snapOf(c, round))]),
      reject(CLAIMS),
    );
  add(
    `RunCompleted on ${c.run}: the best round and score with another round's snapshot`,
    (h) => forge(h, c.stream, [completed(c.run, 3, 0.9, snapOf(c, 1))]),
    reject(CLAIMS),
  );
  add(
    `RunCompleted on ${c.run}: the best round and score with a snapshot never taken`,
    (h) => forge(h, c.stream, [completed(c.run, 3, 0.9, 'bafyneverseen')]),
    reject(CLAIMS),
  );
  add(
    `RunCompleted on ${c.run}: no_valid_submission although rounds qualified`,
    (h) => forge(h, c.stream, [completed(c.run, null, null, null, 'no_valid_submission')]),
    reject(CLAIMS),
  );
  add(`RunCompleted on ${c.run}: completed with no best`, (h) => forge(h, c.stream, [completed(c.run, null, null, null)]), reject(CLAIMS));
  for (let i = 0; i < 3; i++)
    add(
      `control: the controller completes ${c.run} (resumed after a restart)`,
      (h) => continueRun(h, { run: c.run, judgePrefix: `c-done${i}`, script: [], edits: [], complete: true }),
      ACCEPT,
    );
  for (let i = 0; i < 4; i++) {
    const k = 1 + (i % 3);
    add(
      `control: ${k} more honest round(s) on ${c.run}${i === 3 ? ' and RunCompleted' : ''}`,
      (h) =>
        continueRun(h, {
          run: c.run,
          judgePrefix: `c-more${i}`,
          script: Array.from({ length: k }, (_, j) => ({ status: 'completed' as const, rewards: { reward: 0.1 + 0.3 * j + 0.05 * i } })),
          edits: Array.from({ length: k }, (_, j) => ({ 'solve.py': `print(${10 + 10 * i + j})\n` })),
          complete: i === 3,
        }),
      ACCEPT,
    );
  }
  for (let i = 0; i < 10; i++) {
    const f = pick(r, [a, c, b]);
    const round = pick(r, f.rounds).round;
    const score = f.direction === 'maximize' ? 1.5 + r() : 0.01 * r();
    const metric = f === b ? 'val_loss' : 'reward';
    add(
      `a hand-written RewardRecorded (${metric} ${score.toFixed(3)}) for ${f.run} round ${round} in a new judge stream`,
      (h) => {
        judgeN += 1;
        const judge = `handmade-${judgeN}`;
        return forge(h, `judge-${judge}`, [
          { type: 'RewardRecorded', data: { run: f.run, round, judge, rewards: { [metric]: score }, primaryMetric: metric, primaryScore: score } },
        ]);
      },
      reject(CLAIMS),
    );
  }
  for (const round of [3, 6]) {
    const stream = G.events.find((e) => e.type === 'JudgeCompleted' && e.data.run === a.run && e.data.round === round)?.stream as string;
    const judge = stream.slice('judge-'.length);
    for (const score of [0.95, 2])
      add(
        `RewardRecorded ${score} appended to ${stream} (its Judge ended ${round === 3 ? 'submission_error' : 'verifier_error'})`,
        (h) =>
          forge(h, stream, [
            { type: 'RewardRecorded', data: { run: a.run, round, judge, rewards: { reward: score }, primaryMetric: 'reward', primaryScore: score } },
          ]),
        reject(CLAIMS),
      );
  }
  for (let i = 0; i < 4; i++) {
    const round = pick(r, [1, 3, 4]);
    add(
      `JudgeCompleted + RewardRecorded for ${c.run} round ${round} with no JudgeLaunched`,
      (h) => {
        const j = judgeEvents(c.run, round, snapOf(c, round) as string, 3, { launched: false, completedStatus: 'completed' });
        return forge(h, j.stream, j.evs);
      },
      reject(CLAIMS),
    );
  }
  for (let i = 0; i < 4; i++) {
    add(
      `a whole hand-made round 5 on ${c.run} judged by a Judge launched for another snapshot${i % 2 ? ', then RunCompleted picking it' : ''}`,
      async (h) => {
        const root = `fhandmade${i}`;
        await forge(h, c.stream, [{ type: 'SubmissionReceived', data: { run: c.run, round: 5 } }]);
        await h.ledger.append(c.stream, [
          { type: 'SnapshotTaken', data: { run: c.run, round: 5, root, files: 2, bytes: 20, durationMs: 1, policyDigest: `sha256:${'0'.repeat(64)}` } },
        ]);
        const j = judgeEvents(c.run, 5, snapOf(c, 3) as string, 0.99, { completedStatus: 'completed' });
        await forge(h, j.stream, j.evs);
        await forge(h, c.stream, [
          {
            type: 'BudgetConsumed',
            data: { run: c.run, budget: 'submissions', amount: 1, remaining: (c.budgets.submissions as number) - c.consumed.submissions - 1, round: 5 },
          },
        ]);
        if (i % 2) await forge(h, c.stream, [completed(c.run, 5, 0.99, root)]);
      },
      reject(CLAIMS),
    );
  }
  for (let i = 0; i < 4; i++) {
    const round = c.rounds.length + 2 + i;
    add(
      `SubmissionReceived for round ${round} on ${c.run} (round ${c.rounds.length + 1} skipped)`,
      (h) => forge(h, c.stream, [{ type: 'SubmissionReceived', data: { run: c.run, round } }]),
      reject(CLAIMS),
    );
  }
  for (let i = 0; i < 4; i++) {
    const f = i % 2 ? a : b;
    add(
      `SubmissionReceived on ${f.run} after its RunCompleted`,
      (h) => forge(h, f.stream, [{ type: 'SubmissionReceived', data: { run: f.run, round: f.rounds.length + 1 } }]),
      reject(CLAIMS),
    );
  }
  const agentLimit = c.budgets.agent_time as number;
  for (let i = 0; i < 6; i++) {
    const amount = Math.round((agentLimit - c.consumed.agent_time + 1 + r() * 400) * 10) / 10;
    add(
      `BudgetConsumed agent_time ${amount} on ${c.run} (over its ${agentLimit} s) with no RuleViolation`,
      (h) =>
        forge(h, c.stream, [
          { type: 'BudgetConsumed', data: { run: c.run, budget: 'agent_time', amount, remaining: agentLimit - c.consumed.agent_time - amount } },
        ]),
      reject(CLAIMS),
    );
  }
  for (let i = 0; i < 3; i++) {
    const amount = Math.round((agentLimit - c.consumed.agent_time + 1 + r() * 400) * 10) / 10;
    add(
      `control: the controller records agent_time ${amount} on ${c.run} (over budget, with its RuleViolation)`,
      (h) => continueRun(h, { run: c.run, judgePrefix: `c-budget${i}`, script: [], edits: [], consume: { budget: 'agent_time', amount }, complete: false }),
      ACCEPT,
    );
  }
  for (const f of [a, c]) add(`a second RunStarted on ${f.run}`, (h) => forge(h, f.stream, [{ type: 'RunStarted', data: startedData(f.run) }]), reject(CLAIMS));
  for (let i = 0; i < 3; i++) {
    const run = `fresh${i}`;
    add(
      `RunStarted for ${run} then RunCompleted claiming round 1 (${0.5 + i}) with no round played`,
      (h) => forge(h, `run-${run}`, [{ type: 'RunStarted', data: { ...startedData(c.run), run } }, completed(run, 1, 0.5 + i, 'bafyclaimed')]),
      reject(CLAIMS),
    );
  }
  for (let i = 0; i < 2; i++)
    add(`control: a new run started and completed by the controller with no submission`, (h) => startAndComplete(h, `empty${i}`), ACCEPT);
  return out;
};

/** Must-accept rewrites: what a careful operator, SQLite or the ledger itself may do to a genuine home. */
const benignClass: Gen = () => {
  const cls = 'benign';
  const r = prng(seedOf(cls));
  const out: Mutation[] = [];
  const ops: Array<[string, (h: string) => Promise<unknown> | unknown]> = [
    ['untouched copy', () => undefined],
    ['VACUUM', (h) => sql(h, (db) => db.exec('VACUUM'))],
    ['REINDEX', (h) => sql(h, (db) => db.exec('REINDEX'))],
    ['ANALYZE', (h) => sql(h, (db) => db.exec('ANALYZE'))],
    ['PRAGMA optimize', (h) => sql(h, (db) => db.pragma('optimize'))],
    ['journal_mode DELETE', (h) => sql(h, (db) => db.pragma('journal_mode = DELETE'))],
    ['journal_mode DELETE and back to WAL', (h) => sql(h, (db) => (db.pragma('journal_mode = DELETE'), db.pragma('journal_mode = WAL')))],
    [
      'page size 8192 (VACUUM)',
      (h) => sql(h, (db) => (db.pragma('journal_mode = DELETE'), db.pragma('page_size = 8192'), db.exec('VACUUM'), db.pragma('journal_mode = WAL'))),
    ],
    ['auto_vacuum FULL (VACUUM)', (h) => sql(h, (db) => (db.pragma('auto_vacuum = FULL'), db.exec('VACUUM')))],
    ['PRAGMA user_version = 7', (h) => sql(h, (db) => db.pragma('user_version = 7'))],
    ['wal_checkpoint(TRUNCATE)', (h) => sql(h, (db) => db.pragma('wal_checkpoint(TRUNCATE)'))],
    [
      'replaced by an online backup (db.backup)',
      async (h) => {
        const p = homePaths(h);
        const copy = `${p.db}.bak`;
        const db = new Database(p.db);
        try {
          await db.backup(copy);
        } finally {
          db.close();
        }
        for (const f of ['', '-wal', '-shm']) rmSync(`${p.db}${f}`, { force: true });
        copyFileSync(copy, p.db);
        rmSync(copy);
      },
    ],
    ['every events row rewritten with itself', (h) => sql(h, (db) => db.prepare('UPDATE events SET bytes = bytes, hash = hash, id = id').run())],
    [
      'the Merkle index synced to the whole log by the ledger',
      async (h) => {
        const l = new LedgerHome(h, drillDeps('2026-12-08T10:00:00.000Z'));
        try {
          await l.ledger.root();
        } finally {
          await l.close();
        }
      },
    ],
  ];
  for (const base of ['home', 'wal'] as const)
    for (const [what, fn] of ops)
      out.push({ cls, what: `${base === 'wal' ? 'WAL home: ' : ''}${what}`, base, verdict: ACCEPT, noWrite: true, apply: async (h) => void (await fn(h)) });
  for (let i = 0; i < 8; i++) {
    const k = int(r, 1, 12);
    const base = i % 2 ? 'wal' : 'home';
    out.push({
      cls,
      what: `${base === 'wal' ? 'WAL home: ' : ''}${k} honest appends${i % 4 < 2 ? ' and a checkpoint' : ''}`,
      base,
      verdict: ACCEPT,
      apply: async (h) => {
        const l = new LedgerHome(h, drillDeps('2026-12-08T10:00:00.000Z'));
        try {
          for (let j = 0; j < k; j++) await l.ledger.append(pick(r, ['note-ops', 'note-later']), [{ type: 'Note', data: { text: `later ${i}.${j}` } }]);
          if (i % 4 < 2) await l.ledger.checkpoint();
        } finally {
          await l.close();
        }
      },
    });
  }
  return out;
};

const CLASSES: Array<[string, Gen]> = [
  ['checkpoint.last', witnessClass],
  ['restore', restoreClass],
  ['wal', walClass],
  ['merkle_nodes', merkleClass],
  ['checkpoints', checkpointsClass],
  ['duplicate-ids', duplicateIdClass],
  ['bytes', bytesClass],
  ['hash', hashClass],
  ['columns', columnsClass],
  ['schema_version', schemaClass],
  ['truncation', truncationClass],
  ['reorder', reorderClass],
  ['forged-claims', claimsClass],
  ['benign', benignClass],
];

// ---- running -------------------------------------------------------------------------------------------------------

async function runMutation(m: Mutation, verify: (home: string) => Promise<Outcome> = verifyInProcess): Promise<Result> {
  const n = ++caseN;
  const home = join(tmp.dir, `case-${n}`);
  let verdict = m.verdict ?? ANY;
  const failed = (what: string, e: unknown): Result => ({
    m,
    n,
    verdict,
    outcome: { exit: -1, message: `${what}: ${(e as Error).message}` },
    problem: `${what.toUpperCase()} (${(e as Error).message.slice(0, 200)})`,
  });
  try {
    copyHome(m.base === 'home' ? G.f.home : G.f.walHome, home);
    try {
      const v = await m.apply(home);
      if (v) verdict = v;
    } catch (e) {
      return failed('setup failed', e);
    }
    const p = homePaths(home);
    const witnessBefore = fileBytes(p.witness);
    const before = m.noWrite ? (oracleFacts.get(home) ?? sqliteFacts(home, scratch())) : null;
    const outcome = await verify(home);
    let problem = mismatch(verdict, outcome);
    const witnessAfter = fileBytes(p.witness);
    if (!problem && !(witnessBefore === null ? witnessAfter === null : witnessAfter !== null && witnessBefore.equals(witnessAfter)))
      problem = 'WROTE checkpoint.last';
    if (!problem && before) {
      const after = sqliteFacts(home, scratch());
      if (after && after.digest !== before.digest) problem = 'WROTE to the database (its content changed)';
    }
    return { m, n, verdict, outcome, problem };
  } catch (e) {
    return failed('drill error', e);
  } finally {
    oracleFacts.delete(home);
    rmSync(home, { recursive: true, force: true });
  }
}

interface ClassSummary {
  cls: string;
  count: number;
  mustReject: number;
  mustAccept: number;
  open: number;
  openAccepted: number;
  rejected: number;
  accepted: number;
  crashed: number;
  failures: Result[];
  ms: number;
}
const summaries: ClassSummary[] = [];

function summarize(cls: string, results: Result[], ms: number): ClassSummary {
  const s: ClassSummary = {
    cls,
    count: results.length,
    mustReject: results.filter((x) => x.verdict.kind === 'reject').length,
    mustAccept: results.filter((x) => x.verdict.kind === 'accept').length,
    open: results.filter((x) => x.verdict.kind === 'any').length,
    openAccepted: results.filter((x) => x.verdict.kind === 'any' && x.outcome.exit === 0).length,
    rejected: results.filter((x) => x.outcome.exit > 0 && !crashed(x.outcome)).length,
    accepted: results.filter((x) => x.outcome.exit === 0).length,
    crashed: results.filter((x) => x.outcome.exit !== -1 && crashed(x.outcome)).length,
    failures: results.filter((x) => x.problem !== null),
    ms,
  };
  return s;
}

const line = (s: ClassSummary): string =>
  `${s.cls.padEnd(16)} ${String(s.count).padStart(4)} mutations (${s.mustReject} must-reject, ${s.mustAccept} must-accept, ${s.open} open): ` +
  `rejected ${s.rejected}, accepted ${s.accepted}, crashed ${s.crashed}; failures ${s.failures.length}` +
  (s.open ? ` [open ones: ${s.openAccepted} accepted, ${s.open - s.openAccepted} rejected]` : '');

/** How the rejections of a class were reported: step/code and how often. */
function codes(results: Result[]): string {
  const count = new Map<string, number>();
  for (const x of results) {
    if (x.outcome.exit <= 0) continue;
    const k = `${x.outcome.step ? `${x.outcome.step}/` : ''}${x.outcome.code ?? `exit ${x.outcome.exit}`}`;
    count.set(k, (count.get(k) ?? 0) + 1);
  }
  return (
    [...count.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none'
  );
}

const failureLine = (x: Result): string =>
  `  [${x.m.cls} #${x.n}] ${x.m.what}\n      expected ${describeVerdict(x.verdict)}; got ${describeOutcome(x.outcome)} => ${x.problem}`;

// ---- the tests -----------------------------------------------------------------------------------------------------

describe(`ledger mutation drill (seed ${SEED})`, () => {
  beforeAll(async () => {
    tmp = makeTmpDir('assay-drill-');
    const f = await buildDrillHomes(join(tmp.dir, 'genuine'));
    const home = rowsOf(f.home, scratch());
    const wal = rowsOf(f.walHome, scratch());
    const keys = loadKeys(homePaths(f.home).keys);
    const walBuf = readFileSync(`${homePaths(f.walHome).db}-wal`);
    const pageSize = walBuf.readUInt32BE(8);
    const witnessText = readFileSync(homePaths(f.home).witness, 'utf8');
    G = {
      f,
      events: home.events,
      walEvents: wal.events,
      leaves: home.events.map((e) => leafHash(e.bytes)),
      walLeaves: wal.events.map((e) => leafHash(e.bytes)),
      merkle: home.merkle,
      cps: home.cps,
      walCps: wal.cps,
      witness: JSON.parse(witnessText) as Witness,
      walWitness: JSON.parse(readFileSync(homePaths(f.walHome).witness, 'utf8')) as Witness,
      witnessText,
      controller: keys.find((k) => k.role === 'controller') as SigningKey,
      runtime: keys.find((k) => k.role === 'runtime') as SigningKey,
      judge: keys.find((k) => k.role === 'judge') as SigningKey,
      stranger: toSigningKey(generateKeyPair('controller', 'assay-controller-stranger', seededBytes(SEED + 1))),
      wal: { pageSize, frameSize: 24 + pageSize, frames: Math.floor((walBuf.length - 32) / (24 + pageSize)), bytes: walBuf.length },
    };
  });
  afterAll(() => {
    if (summaries.length) console.log(`mutation drill, seed ${SEED}:\n${summaries.map(line).join('\n')}`);
    tmp?.cleanup();
  });

  it('starts from genuine homes: both verify, the claims step runs, and the fixtures are what the drill assumes', async () => {
    expect(G.events.length).toBe(G.f.events);
    expect(G.witness.treeSize).toBe(G.f.witnessSize);
    expect(G.f.events - G.f.witnessSize).toBe(5); // the uncovered tail
    expect(G.cps.map((c) => c.tree_size)).toEqual(G.f.checkpointSizes);
    // merkle_nodes lags behind the log (the ledger syncs it when it signs a checkpoint): the drill has both states.
    expect(G.merkle.filter((x) => x.level === 0).length).toBeLessThan(G.f.events);
    expect(rootAt(G.witness.treeSize).toString('base64')).toBe(G.witness.rootHash);
    expect(G.walEvents.length).toBe(G.f.walEvents);
    expect(walRootAt(G.walWitness.treeSize).toString('base64')).toBe(G.walWitness.rootHash);
    // The WAL home: ledger.db alone still holds the older home, the -wal holds the rest.
    const dbOnly = join(tmp.dir, 'db-only');
    mkdirSync(join(dbOnly, 'ledger'), { recursive: true });
    copyFileSync(homePaths(G.f.walHome).db, join(dbOnly, 'ledger', 'ledger.db'));
    expect(sqliteFacts(dbOnly, scratch())?.events).toBe(G.f.events);
    expect(sqliteFacts(G.f.walHome, scratch(), { integrity: true })).toMatchObject({
      events: G.f.walEvents,
      maxCheckpointSize: G.f.walWitnessSize,
      integrity: 'ok',
    });
    expect(G.f.runs.a).toMatchObject({ completed: true, bestRound: 2, bestScore: 0.72 });
    expect(G.f.runs.b).toMatchObject({ completed: true, bestRound: 2, bestScore: 1.25 });
    expect(G.f.runs.c).toMatchObject({ completed: false });
    expect(G.f.runs.c.rounds.map((x) => [x.round, x.outcome, x.score, x.violation])).toEqual([
      [1, 'counted', 0.4, false],
      [2, 'counted', null, true],
      [3, 'counted', 0.9, false],
      [4, 'counted', 0.65, false],
    ]);
    expect(G.f.runs.a.rounds.map((x) => x.outcome)).toContain('refunded');
    const types = new Set(G.events.map((e) => e.type));
    for (const t of [
      'RunStarted',
      'WorkStarted',
      'SubmissionReceived',
      'SubmissionRejected',
      'SnapshotTaken',
      'WorkspaceEdited',
      'JudgeLaunched',
      'JudgeCompleted',
      'RewardRecorded',
      'BudgetConsumed',
      'RuleViolation',
      'RunCompleted',
    ])
      expect({ t, present: types.has(t) }).toEqual({ t, present: true });

    for (const base of [G.f.home, G.f.walHome]) {
      const home = join(tmp.dir, `baseline-${++caseN}`);
      copyHome(base, home);
      const o = await verifyInProcess(home);
      expect({ base, ...o }).toMatchObject({ base, exit: 0 });
      expect(o.claims).toEqual(expect.any(String)); // the claims step ran, with the run's rules
      rmSync(home, { recursive: true, force: true });
    }
  });

  for (const [cls, gen] of CLASSES) {
    const run = ONLY.length === 0 || ONLY.includes(cls) ? it : it.skip;
    run(`class ${cls}: every must-reject mutation is rejected, every must-accept one accepted, none crashes or writes`, async () => {
      const started = Date.now();
      const mutations = gen();
      const results: Result[] = [];
      for (const m of mutations) results.push(await runMutation(m));
      const s = summarize(cls, results, Date.now() - started);
      summaries.push(s);
      console.log(`${line(s)} (${s.ms} ms)\n  rejected by: ${codes(results)}${s.failures.length ? `\n${s.failures.map(failureLine).join('\n')}` : ''}`);
      if (process.env.ASSAY_DRILL_VERBOSE)
        console.log(results.map((x) => `  #${x.n} ${x.m.what}: expected ${describeVerdict(x.verdict)}; got ${describeOutcome(x.outcome)}`).join('\n'));
      expect(s.failures.map(failureLine)).toEqual([]);
    });
  }

  it('ran at least 1,000 mutations, each on a fresh copy', () => {
    if (ONLY.length) return;
    const total = summaries.reduce((n, s) => n + s.count, 0);
    const failed = summaries.reduce((n, s) => n + s.failures.length, 0);
    console.log(`mutation drill total: ${total} mutations, ${failed} failures`);
    expect(total).toBeGreaterThanOrEqual(1000);
  });

  (ONLY.length === 0 || ONLY.includes('cli') ? it : it.skip)(
    'the CLI in a child process (node bin/assay.js, default workers) exits as required on a sample of 20 mutations',
    async () => {
      const cli = cliCommand();
      const viaChild = (home: string, extra: string[] = []) => verifyInChild(home, extra, cli.argv);
      const sample: Mutation[] = [];
      for (const [cls, gen] of CLASSES) {
        if (cls === 'benign') continue;
        const ms = gen();
        const rej = ms.find((m) => m.verdict?.kind === 'reject' || (m.verdict === undefined && cls === 'wal'));
        if (rej) sample.push(rej);
      }
      const benign = benignClass();
      sample.push(...benign.filter((m) => /VACUUM$|untouched copy|wal_checkpoint/.test(m.what)).slice(0, 3));
      const claims = claimsClass();
      sample.push(...claims.filter((m) => m.verdict?.kind === 'accept').slice(0, 1));
      sample.push(...claims.filter((m) => /a second RunCompleted on completed/.test(m.what)).slice(0, 1));
      const runs: Array<[Mutation, (home: string) => Promise<Outcome>]> = sample.slice(0, 18).map((m) => [m, (home: string) => viaChild(home)]);
      // Auditor mode: a copy of the database file alone, read-only, with the pinned root key and origin.
      const auditor = (m: Mutation): Mutation => ({ ...m, what: `--db: ${m.what}` });
      const dbOnly = async (home: string) => {
        const cfg = JSON.parse(readFileSync(homePaths(home).config, 'utf8')) as { rootKey: string; origin: string };
        return viaChild(join(tmp.dir, 'no-home'), ['--db', homePaths(home).db, '--trusted-root', cfg.rootKey, '--origin', cfg.origin]);
      };
      const flip = bytesClass().find((m) => m.verdict?.kind === 'reject') as Mutation;
      runs.push([auditor(flip), dbOnly], [auditor(benign[0] as Mutation), dbOnly]);
      // Two child processes at a time.
      const results: Result[] = [];
      let next = 0;
      await Promise.all(
        [0, 1].map(async () => {
          while (next < runs.length) {
            const [m, v] = runs[next++] as [Mutation, (home: string) => Promise<Outcome>];
            results.push(await runMutation(m, v));
          }
        }),
      );
      const s = summarize('CLI sample', results, 0);
      summaries.push(s);
      console.log(`${line(s)}, through ${cli.how}${s.failures.length ? `\n${s.failures.map(failureLine).join('\n')}` : ''}`);
      expect(results).toHaveLength(20);
      expect(s.failures.map(failureLine)).toEqual([]);
    },
  );
});
