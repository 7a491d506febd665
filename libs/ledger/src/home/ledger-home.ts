/**
 * ASSAY_HOME: where one installation keeps its state, so tests and users can keep several apart.
 *
 *   <home>/keys/<name>.key          private keys (0600, refused when others can read them)
 *   <home>/keys/<name>.pub          verifier keys (C2SP signed-note text)
 *   <home>/ledger/ledger.db         the embedded SQLite ledger (WAL: ledger.db-wal, ledger.db-shm)
 *   <home>/ledger/ledger.json       origin and root key of this ledger
 *   <home>/ledger/checkpoint.last   the last signed checkpoint, kept outside the database (rollback guard)
 *
 * This is a composition root: it wires the SQLite adapters, the keys and the Ledger together.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { AssayError, writeFileAtomic, type Clock, type IdGenerator, type Progress } from '@assay/core';
import { SqliteLedgerDatabase } from '../adapters/sqlite/sqlite-ledger-database';
import { openForVerification } from '../adapters/sqlite/sqlite-verification-open';
import { bestKernels } from '../adapters/native-kernels';
import { openRangeReader } from '../adapters/sqlite/sqlite-range-reader';
import { Ledger, type CheckpointWitness, type SignedCheckpoint, type WitnessedCheckpoint } from '../application/ledger';
import type { SigningKey } from '../domain/signing-key';
import { verifyLedger, type VerificationReport } from '../application/verify/ledger-verifier';
import type { VerifyKernels } from '../domain/verify-kernels';
import { generateKeyPair, readPrivateKey, writeKeyPair, parseVerifierKey, toSigningKey } from '../crypto/keys';
import { ROLES, type Role } from '../domain/roles';
import { KeyRegistry } from '../domain/key-registry';
import { parseEnvelope, type Envelope } from '../domain/envelope';
import type { RecordedEvent } from '../ports/event-store.port';
import type { StoredCheckpoint } from '../ports/checkpoint-store.port';
import type { ClaimRules } from '../domain/claims';

export interface HomePaths {
  home: string;
  keys: string;
  ledgerDir: string;
  db: string;
  config: string;
  witness: string;
}

export interface LedgerConfig {
  format: 1;
  origin: string;
  /** Verifier key text of the controller key registered at position 0. */
  rootKey: string;
  createdAt: string;
}

export interface InitResult {
  home: string;
  origin: string;
  keys: Array<{ role: Role; signer: string; publicKey: string; created: boolean }>;
  checkpoint: SignedCheckpoint;
}

/** A ledger's size and its latest committed checkpoint (LedgerHome.head). */
export interface LedgerHead {
  readonly events: number;
  /** The latest committed checkpoint: its tree size and root (standard base64, as in the note); null before the first. */
  readonly checkpoint: { readonly treeSize: number; readonly rootHash: string } | null;
}

export function homePaths(home: string): HomePaths {
  const h = resolve(home);
  const ledgerDir = join(h, 'ledger');
  return {
    home: h,
    keys: join(h, 'keys'),
    ledgerDir,
    db: join(ledgerDir, 'ledger.db'),
    config: join(ledgerDir, 'ledger.json'),
    witness: join(ledgerDir, 'checkpoint.last'),
  };
}

/**
 * The last signed checkpoint, in a file beside the database. The Ledger saves it under the database's write lock,
 * after the checkpoint row is written and before the transaction commits: saves are serialised with the database's
 * checkpoints, and a crash between the two leaves this file one checkpoint ahead of the database, never behind.
 */
export class FileCheckpointWitness implements CheckpointWitness {
  constructor(private readonly path: string) {}
  load(): WitnessedCheckpoint | null {
    if (!existsSync(this.path)) return null;
    let v: unknown;
    try {
      v = JSON.parse(readFileSync(this.path, 'utf8'));
    } catch (e) {
      throw new AssayError(
        'LEDGER_WITNESS_CORRUPT',
        'integrity',
        `${this.path} is not valid JSON (${(e as Error).message}); it records the last signed checkpoint and must not be edited`,
      );
    }
    const w = v as Partial<WitnessedCheckpoint>;
    if (typeof w.treeSize !== 'number' || typeof w.rootHash !== 'string' || typeof w.note !== 'string')
      throw new AssayError('LEDGER_WITNESS_CORRUPT', 'integrity', `${this.path} must hold {treeSize, rootHash, note}`);
    return { treeSize: w.treeSize, rootHash: w.rootHash, note: w.note };
  }
  save(cp: WitnessedCheckpoint): void {
    writeFileAtomic(this.path, `${JSON.stringify(cp, null, 2)}\n`);
  }
}

function readConfig(p: HomePaths): LedgerConfig {
  if (!existsSync(p.config))
    throw new AssayError(
      'LEDGER_NOT_INITIALIZED',
      'not_found',
      `no ledger in ${p.home} (missing ${p.config}); run \`assay ledger init\` (ASSAY_HOME selects the directory)`,
    );
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(p.config, 'utf8'));
  } catch (e) {
    throw new AssayError('LEDGER_CONFIG_INVALID', 'invalid_input', `${p.config} is not valid JSON: ${(e as Error).message}`);
  }
  const c = v as Partial<LedgerConfig>;
  if (c.format !== 1 || typeof c.origin !== 'string' || typeof c.rootKey !== 'string' || typeof c.createdAt !== 'string')
    throw new AssayError('LEDGER_CONFIG_INVALID', 'invalid_input', `${p.config} must hold {format: 1, origin, rootKey, createdAt}`);
  return c as LedgerConfig;
}

/** Loads every private key in <home>/keys. Unsafe permissions are refused by readPrivateKey. */
export function loadKeys(dir: string): SigningKey[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.key'))
    .sort()
    .map((f) => toSigningKey(readPrivateKey(join(dir, f))));
}

function decodeVerifierKey(text: string): { keyId: string; publicKey: Uint8Array } {
  const k = parseVerifierKey(text);
  return { keyId: k.signer, publicKey: k.publicKey };
}

export interface VerifyDatabaseOptions {
  /** The rules the claims step folds run streams with (`runClaimRules()` from @assay/run); null skips that step. */
  claims: ClaimRules | null;
  externalCheckpoints?: string[];
  /** Verifier key text of the controller key position 0 must register. */
  trustedRoot?: string;
  /** The origin every checkpoint must name (default: the first checkpoint's). */
  origin?: string;
  workers?: number;
  /** Events per chunk handed to a worker (default 512). */
  chunkSize?: number;
  progress?: Progress;
  /** How this thread hashes and parses (default: the ledger kernels addon when usable, else node:crypto; same results). */
  kernels?: VerifyKernels;
  /**
   * Whether this thread checks chunks of events too, between its ordered pass (default true: one thread fewer to
   * start, and the fastest). A server that must stay responsive passes false: only worker threads check.
   */
  mainThread?: boolean;
}

/** The witness file's text for verification: null when there is none. */
function readWitnessText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new AssayError('LEDGER_WITNESS_UNREADABLE', 'unavailable', `cannot read ${path}: ${(e as Error).message}`, { cause: e });
  }
}

/** `witness`: the home's checkpoint.last, checked too (absent for a database file verified on its own). */
function verifyDatabase(db: SqliteLedgerDatabase, opts: VerifyDatabaseOptions, witness?: string): Promise<VerificationReport> {
  return verifyLedger({
    claims: opts.claims,
    store: db.events,
    checkpoints: db.checkpoints.all(),
    integrityCheck: () => db.integrityCheck().filter((l) => l !== 'ok'),
    storageCheck: () => db.storageProblem(),
    merkleNodes: db.merkleNodes.stored(),
    ...(witness !== undefined ? { witness: { path: witness, text: readWitnessText(witness) } } : {}),
    decodeKey: decodeVerifierKey,
    kernels: opts.kernels ?? bestKernels(),
    ...(opts.mainThread === false ? {} : { openRowReader: openRangeReader }),
    ...(opts.origin !== undefined ? { origin: opts.origin } : {}),
    ...(opts.trustedRoot !== undefined ? { trustedRoot: opts.trustedRoot } : {}),
    ...(opts.externalCheckpoints ? { externalCheckpoints: opts.externalCheckpoints } : {}),
    ...(opts.workers !== undefined ? { workers: opts.workers } : {}),
    ...(opts.chunkSize !== undefined ? { chunkSize: opts.chunkSize } : {}),
    ...(opts.progress ? { progress: opts.progress } : {}),
  });
}

/**
 * Verifies a ledger database file on its own, read-only, with no keys and no ASSAY_HOME: what an auditor holding a
 * copy of the file (and, ideally, the operator's root key) runs. Nothing is written beside the file (see
 * openForVerification: a WAL-mode file without its -wal and -shm is verified through a private temporary copy).
 */
export async function verifyLedgerFile(path: string, opts: VerifyDatabaseOptions): Promise<VerificationReport> {
  const opened = openForVerification(path, 'copy');
  try {
    return await verifyDatabase(opened.db, opts);
  } finally {
    await opened.close();
  }
}

/**
 * Verifies the ledger of an ASSAY_HOME (`assay ledger verify`): its database opened read-only (never migrated, no key
 * loaded), the origin and root key pinned by ledger.json, and `checkpoint.last` checked against the log.
 */
export async function verifyLedgerHome(home: string, opts: VerifyDatabaseOptions): Promise<VerificationReport> {
  const p = homePaths(home);
  const config = readConfig(p);
  if (!existsSync(p.db))
    throw new AssayError('LEDGER_DB_MISSING', 'not_found', `the ledger database ${p.db} is missing, but ${p.config} says a ledger was created here`);
  const opened = openForVerification(p.db, 'home');
  try {
    return await verifyDatabase(opened.db, { origin: config.origin, trustedRoot: config.rootKey, ...opts }, p.witness);
  } finally {
    await opened.close();
  }
}

export interface OpenOptions {
  clock: Clock;
  ids: IdGenerator;
  /**
   * For readers (queries, the HTTP API's GETs): open the database read-only (nothing written, no migration, no
   * journal change; the schema must be the newest this build knows) and load no private keys. Anything that would
   * write fails with LEDGER_DB_UNAVAILABLE or LEDGER_NO_KEY_FOR_ROLE.
   */
  readOnly?: boolean;
}

/** A stored event as `readEvents` returns it; `bytes` (the exact stored envelope, base64) when asked for. */
export interface ReadEvent {
  position: number;
  /** Hex SHA-256 of the stored envelope bytes. */
  hash: string;
  envelope: Envelope;
  bytes?: string;
}

/** The one way a Ledger is built over a home's database: its checkpoint witness file always included. */
function ledgerOver(p: HomePaths, db: SqliteLedgerDatabase, keys: SigningKey[], o: OpenOptions, origin: string): Ledger {
  return new Ledger({
    store: db.events,
    merkle: db.merkleNodes,
    checkpoints: db.checkpoints,
    lock: db.lock,
    witness: new FileCheckpointWitness(p.witness),
    keys,
    clock: o.clock,
    ids: o.ids,
    origin,
  });
}

/**
 * Initialises a ledger in `home`: the three role keys (kept where present), genesis, the runtime and judge keys
 * registered, config.json, and the first checkpoint. Refuses a home that has a ledger (LEDGER_ALREADY_INITIALIZED).
 */
export async function initLedgerHome(home: string, o: OpenOptions & { origin?: string | undefined }): Promise<InitResult> {
  const p = homePaths(home);
  if (existsSync(p.config) || existsSync(p.db))
    throw new AssayError('LEDGER_ALREADY_INITIALIZED', 'conflict', `a ledger already exists in ${p.home}; use another ASSAY_HOME, or keep using this one`);
  if (o.origin !== undefined && !/^[\x21-\x7e]{1,200}$/.test(o.origin))
    throw new AssayError('LEDGER_BAD_ORIGIN', 'invalid_input', '--origin must be 1-200 printable ASCII characters without spaces');
  mkdirSync(p.keys, { recursive: true, mode: 0o700 });
  chmodSync(p.keys, 0o700);
  mkdirSync(p.ledgerDir, { recursive: true });
  const existing = loadKeys(p.keys);
  const created = new Set<string>();
  for (const role of ['controller', 'runtime', 'judge'] as Role[]) {
    if (existing.some((k) => k.role === role)) continue;
    const pair = generateKeyPair(role);
    writeKeyPair(p.keys, pair);
    const key = toSigningKey(pair);
    existing.push(key);
    created.add(key.signer);
  }
  const keys = existing.sort((a, b) => ROLES.indexOf(a.role) - ROLES.indexOf(b.role));
  const controller = keys.find((k) => k.role === 'controller') as SigningKey;
  const origin = o.origin ?? `assay.ledger/${randomBytes(8).toString('hex')}`;
  const db = new SqliteLedgerDatabase(p.db, { clock: o.clock });
  try {
    const ledger = ledgerOver(p, db, keys, o, origin);
    await ledger.genesis();
    for (const k of keys) if (k !== controller) await ledger.registerKey(k);
    const config: LedgerConfig = { format: 1, origin, rootKey: controller.publicKeyText, createdAt: o.clock.now().toISOString() };
    writeFileAtomic(p.config, `${JSON.stringify(config, null, 2)}\n`);
    const checkpoint = await ledger.checkpoint();
    return {
      home: p.home,
      origin,
      keys: keys.map((k) => ({ role: k.role, signer: k.signer, publicKey: k.publicKeyText, created: created.has(k.signer) })),
      checkpoint,
    };
  } finally {
    await db.close();
  }
}

export class LedgerHome {
  readonly paths: HomePaths;
  readonly config: LedgerConfig;
  readonly db: SqliteLedgerDatabase;
  readonly ledger: Ledger;
  readonly keys: SigningKey[];
  private readonly deps: OpenOptions;

  /**
   * Opens the ledger of an initialised home: its config, its database (migrated, unless `readOnly`), its private keys
   * (none when `readOnly`) and the checkpoint witness file. This is the one place a home's Ledger is composed.
   * Refuses a home without a ledger (LEDGER_NOT_INITIALIZED) or without its database (LEDGER_DB_MISSING).
   */
  constructor(home: string, o: OpenOptions) {
    const p = homePaths(home);
    const config = readConfig(p);
    if (!existsSync(p.db))
      throw new AssayError('LEDGER_DB_MISSING', 'not_found', `the ledger database ${p.db} is missing, but ${p.config} says a ledger was created here`);
    const keys = o.readOnly ? [] : loadKeys(p.keys);
    const db = new SqliteLedgerDatabase(p.db, { clock: o.clock, ...(o.readOnly ? { readOnly: true } : {}) });
    this.paths = p;
    this.config = config;
    this.db = db;
    this.ledger = ledgerOver(p, db, keys, o, config.origin);
    this.keys = keys;
    this.deps = o;
  }

  /**
   * The same ledger (database, checkpoint witness, clock, ids, origin) signing with the keys of `roles` only: the
   * Judge's recorder signs with the runtime and judge keys and never holds the controller's.
   */
  ledgerSigningAs(roles: readonly Role[]): Ledger {
    return ledgerOver(
      this.paths,
      this.db,
      this.keys.filter((k) => roles.includes(k.role)),
      this.deps,
      this.config.origin,
    );
  }

  /**
   * The latest signed checkpoint the database has committed, together with its Merkle nodes: the one a reader (the
   * API's GET /ledger/checkpoints/latest, /live, /health and its cosignature check) names, so all of them name the
   * same one. Not `ledger.lastSigned()`, which also reads checkpoint.last: a signer in another process writes that
   * file inside its transaction, before COMMIT, so for that moment (or after a crash there) it names a checkpoint no
   * proof can yet be built against.
   */
  committedCheckpoint(): StoredCheckpoint | null {
    return this.db.checkpoints.latest();
  }

  /**
   * How far the ledger has got: its number of events and the latest committed checkpoint's tree size and root (what
   * /health, /ledger/live and the metrics report, and what a run's live checkpoints compare). The checkpoint is read
   * first, so `checkpoint.treeSize <= events` even while another process appends and signs.
   */
  async head(): Promise<LedgerHead> {
    const cp = this.committedCheckpoint();
    return { events: await this.db.events.size(), checkpoint: cp ? { treeSize: cp.treeSize, rootHash: cp.rootHash } : null };
  }

  verify(opts: VerifyDatabaseOptions): Promise<VerificationReport> {
    return verifyDatabase(this.db, { origin: this.config.origin, trustedRoot: this.config.rootKey, ...opts }, this.paths.witness);
  }

  private keyCache: { registry: KeyRegistry; next: number } | null = null;
  private keyCatchUp: Promise<unknown> = Promise.resolve();
  /** Events read by keyRegistry() since this home was opened: a warm call reads only the events appended since. */
  keyRegistryEventsRead = 0;

  /**
   * The keys registered in the ledger, folded from its key events (signatures are checked by `verify`). Kept between
   * calls and caught up from the last position seen, so a call reads only the events appended since the previous one
   * (the first reads the log once, yielding to the event loop between batches). Callers must not modify it.
   */
  async keyRegistry(): Promise<KeyRegistry> {
    const catchUp = async (): Promise<KeyRegistry> => {
      const size = await this.db.events.size();
      // A smaller log than seen means another database (a restore): start again.
      if (!this.keyCache || size < this.keyCache.next) this.keyCache = { registry: new KeyRegistry(decodeVerifierKey), next: 0 };
      const cache = this.keyCache;
      for await (const batch of this.db.events.readAll({ fromPosition: cache.next, toPosition: size, batchSize: 2000 })) {
        for (const e of batch) {
          if (e.type === 'KeyRegistered' || e.type === 'KeyRevoked') {
            const env = parseEnvelope(e.bytes, { position: e.position }).envelope;
            if (!cache.registry.authorize(env)) cache.registry.apply(env);
          }
          cache.next = e.position + 1;
        }
        this.keyRegistryEventsRead += batch.length;
        if (batch.length > 0) await new Promise<void>((r) => setImmediate(r));
      }
      cache.next = Math.max(cache.next, size);
      return cache.registry;
    };
    // One catch-up at a time: two at once would apply the same events twice.
    const run = this.keyCatchUp.then(catchUp, catchUp);
    this.keyCatchUp = run.catch(() => undefined);
    return run;
  }

  /** Events of one stream, or of the whole log (`bytes`: with the stored envelope bytes, base64), parsed from their stored bytes (unverified: use `verify`). */
  async readEvents(o: { stream?: string; from?: number; limit?: number; bytes?: boolean }): Promise<ReadEvent[]> {
    const limit = o.limit ?? 100;
    const out: ReadEvent[] = [];
    const take = (e: RecordedEvent): boolean => {
      const hash = Buffer.from(e.hash).toString('hex');
      const envelope = parseEnvelope(e.bytes, { position: e.position }).envelope;
      out.push(o.bytes ? { position: e.position, hash, envelope, bytes: Buffer.from(e.bytes).toString('base64') } : { position: e.position, hash, envelope });
      return out.length < limit;
    };
    if (o.stream !== undefined) {
      for await (const e of this.db.events.readStream(o.stream, { fromRevision: o.from ?? 0, maxCount: limit })) if (!take(e)) break;
    } else {
      outer: for await (const batch of this.db.events.readAll({
        fromPosition: o.from ?? 0,
        toPosition: (o.from ?? 0) + limit,
        batchSize: Math.min(limit, 1000),
      }))
        for (const e of batch) if (!take(e)) break outer;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
