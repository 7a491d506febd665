/**
 * The ledger: validated, signed appends over an EventStore, the RFC 9162 log over every envelope, signed
 * checkpoints that never roll back, and proofs. Application layer: it orchestrates ports and pure domain code and
 * holds no framework code (the NestJS module and the CLI wrap it).
 */
import { AssayError, type Clock, type IdGenerator } from '@assay/core';
import { eventDataProblem, genericAppendProblem, genericStreamProblem, CATALOGUE } from '../domain/catalogue';
import { MAX_ENVELOPE_BYTES, envelopeText, STREAM_RE, UUID_RE } from '../domain/envelope';
import { canonicalJson } from '../domain/jcs';
import type { JsonObject } from '../domain/json';
import {
  leafHash,
  rootAt,
  inclusionProof,
  consistencyProof,
  newNodesForAppend,
  verifyConsistency,
  verifyInclusion,
  NodeHashMemo,
  type NodeSource,
} from '../domain/merkle';
import { formatCheckpointBody, parseCheckpointBody } from '../domain/checkpoint';
import { anchoredRoot } from '../domain/anchored-root';
import { signNote } from '../domain/note';
import type { Role } from '../domain/roles';
import type { AppendRequest, AppendResult, EventStore, ExpectedRevision, ProposedEvent, SealInput } from '../ports/event-store.port';
import type { MerkleNodeStore } from '../ports/merkle-node-store.port';
import type { CheckpointStore, StoredCheckpoint } from '../ports/checkpoint-store.port';
import type { LedgerLock, LockedEvent, LockedLog } from '../ports/ledger-lock.port';
import type { SigningKey } from '../domain/signing-key';

export interface NewEvent {
  type: string;
  data: JsonObject;
  /** UUID; the idempotency key. Generated when absent. */
  id?: string;
}

/** The last checkpoint this ledger signed, kept outside the database too, so a restored old database is noticed. */
export interface WitnessedCheckpoint {
  treeSize: number;
  rootHash: string;
  note: string;
}

export interface CheckpointWitness {
  load(): WitnessedCheckpoint | null;
  save(cp: WitnessedCheckpoint): void;
}

export interface SignedCheckpoint {
  treeSize: number;
  /** Standard base64 of the root hash. */
  rootHash: string;
  note: string;
  /** False when the latest checkpoint already covered the whole log and was returned as is. */
  fresh: boolean;
}

export interface InclusionProofResult {
  position: number;
  treeSize: number;
  leafHash: string;
  proof: string[];
  checkpoint: string;
}

export interface ConsistencyProofResult {
  size1: number;
  size2: number;
  root1: string;
  root2: string;
  proof: string[];
}

export interface LedgerOptions {
  store: EventStore;
  merkle: MerkleNodeStore;
  checkpoints: CheckpointStore;
  witness?: CheckpointWitness;
  keys: SigningKey[];
  clock: Clock;
  ids: IdGenerator;
  /** The checkpoint origin line, unique to this ledger. */
  origin: string;
  /**
   * The write lock the three stores share (SqliteLedgerDatabase.lock, MemoryLedgerLock). Give it whenever the
   * stores offer one: without it, checkpoints are serialised only within this Ledger object.
   */
  lock?: LedgerLock;
}

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

function refuse(code: string, message: string, details?: Record<string, unknown>): AssayError {
  return new AssayError(code, 'refused', message, details ? { details } : {});
}

export class Ledger {
  private readonly byRole = new Map<Role, SigningKey>();
  /** Every held controller key, in load order: checkpoints are signed by the first one not revoked. */
  private readonly controllers: SigningKey[];
  /** KeyRevoked events seen so far (key id -> position), and the first position not looked at yet. */
  private readonly revocations = { upTo: 0, at: new Map<string, number>() };

  constructor(private readonly o: LedgerOptions) {
    for (const k of o.keys) if (!this.byRole.has(k.role)) this.byRole.set(k.role, k);
    this.controllers = o.keys.filter((k) => k.role === 'controller');
  }

  get origin(): string {
    return this.o.origin;
  }

  get store(): EventStore {
    return this.o.store;
  }

  key(role: Role): SigningKey | undefined {
    return this.byRole.get(role);
  }

  /** Stream that holds a key's registration and revocation. */
  static keyStream(name: string): string {
    return `key-${name}`;
  }

  /**
   * Validates, signs and appends events to one stream atomically. Each event is signed by the held key whose role
   * the catalogue allows for its type. Bad input is refused before anything is written.
   */
  async append(stream: string, events: NewEvent[], expected: ExpectedRevision = 'any'): Promise<AppendResult> {
    return this.o.store.append(this.request(stream, events, expected));
  }

  /** Validates and prepares one append: the store request, whose seal signs each new event. Throws on bad input. */
  private request(stream: string, events: NewEvent[], expected: ExpectedRevision): AppendRequest {
    if (!STREAM_RE.test(stream))
      throw new AssayError(
        'LEDGER_BAD_STREAM',
        'invalid_input',
        `stream "${stream}" must be <category>-<id> (category: lowercase letters and digits, no dash)`,
      );
    if (events.length === 0) throw new AssayError('LEDGER_EMPTY_APPEND', 'invalid_input', 'an append needs at least one event');
    const time = this.o.clock.now().toISOString();
    const signers: SigningKey[] = [];
    const dataJsons: string[] = [];
    const proposed: ProposedEvent[] = events.map((e, i) => {
      const where = `event ${i} (${String(e.type)})`;
      if (typeof e.type !== 'string') throw new AssayError('LEDGER_EVENT_INVALID', 'invalid_input', `${where}: type must be a string`);
      let dataJson: string;
      try {
        dataJson = canonicalJson(e.data);
      } catch (err) {
        throw new AssayError('LEDGER_EVENT_INVALID', 'invalid_input', `${where}: ${(err as Error).message}`, { details: { index: i } });
      }
      dataJsons.push(dataJson);
      const problem = eventDataProblem(e.type, e.data, Buffer.byteLength(dataJson));
      if (problem) throw new AssayError(problem.code, 'invalid_input', `${where}: ${problem.message}`, { details: { index: i } });
      const id = e.id ?? this.o.ids.next();
      if (!UUID_RE.test(id)) throw new AssayError('LEDGER_EVENT_INVALID', 'invalid_input', `${where}: id must be a lowercase UUID`);
      const spec = CATALOGUE.get(e.type);
      const key = spec?.roles.map((r) => this.byRole.get(r)).find((k) => k !== undefined);
      if (!key) throw refuse('LEDGER_NO_KEY_FOR_ROLE', `${where}: needs a key with role ${spec?.roles.join(' or ')}, and none is loaded`);
      signers.push(key);
      return { id, type: e.type, data: e.data, time };
    });
    // The store calls seal once per *new* event (an idempotent retry calls it for none); look the signer up by id.
    const byId = new Map(proposed.map((p, i) => [p.id, { key: signers[i] as SigningKey, dataJson: dataJsons[i] as string }]));
    const seal = (input: SealInput): Uint8Array => {
      const { key, dataJson } = byId.get(input.id) as { key: SigningKey; dataJson: string };
      const unsigned = { ...input, signer: key.signer };
      const sig = b64(key.sign(Buffer.from(envelopeText(unsigned, dataJson), 'utf8')));
      const wire = Buffer.from(envelopeText(unsigned, dataJson, sig), 'utf8');
      if (wire.byteLength > MAX_ENVELOPE_BYTES)
        throw new AssayError('LEDGER_EVENT_TOO_LARGE', 'invalid_input', `envelope of ${input.type} is ${wire.byteLength} bytes, above ${MAX_ENVELOPE_BYTES}`);
      return wire;
    };
    return { stream, expected, events: proposed, seal };
  }

  /**
   * Many generic appends (`assay ledger append --file`), each checked as `appendGeneric` checks one, every one before
   * anything is written; then written all or none, in one write transaction of the store (EventStore.appendMany), in
   * order. Each append is decided as it would be alone: an identical retry is idempotent, an id re-sent with other
   * content is LEDGER_EVENT_ID_CONFLICT. An error names the append's `where` (e.g. `events.jsonl:12`) when given.
   */
  async appendGenericMany(
    items: ReadonlyArray<{ stream: string; events: NewEvent[]; expected?: ExpectedRevision; where?: string }>,
    onProgress?: (done: number) => void,
  ): Promise<AppendResult[]> {
    if (items.length === 0) throw new AssayError('LEDGER_EMPTY_APPEND', 'invalid_input', 'an append needs at least one event');
    const reqs = items.map((it, i) => {
      try {
        this.genericChecks(it.stream, it.events);
        return this.request(it.stream, it.events, it.expected ?? 'any');
      } catch (e) {
        throw located(e, it.where ?? `append ${i}`);
      }
    });
    const store = this.o.store;
    try {
      if (store.appendMany) return await store.appendMany(reqs, onProgress);
      const out: AppendResult[] = [];
      for (const r of reqs) out.push(await store.append(r));
      return out;
    } catch (e) {
      const index = e instanceof AssayError ? e.details['index'] : undefined;
      if (typeof index === 'number' && index >= 0 && index < items.length) throw located(e, items[index]?.where ?? `append ${index}`);
      throw e;
    }
  }

  /**
   * The generic append (`assay ledger append`, `POST /ledger/events`): like `append`, but refuses, before anything is
   * written, every type the catalogue reserves for its own writer (the run controller, the runtime, the Judge, the
   * key commands): LEDGER_TYPE_RESERVED; and any event into a `run-`, `judge-` or `key-` stream (LEDGER_STREAM_RESERVED),
   * whose revisions belong to those writers. Those components call `append` themselves.
   */
  async appendGeneric(stream: string, events: NewEvent[], expected: ExpectedRevision = 'any'): Promise<AppendResult> {
    this.genericChecks(stream, events);
    return this.append(stream, events, expected);
  }

  private genericChecks(stream: string, events: NewEvent[]): void {
    events.forEach((e, i) => {
      const problem = genericAppendProblem(String(e.type));
      if (problem) throw new AssayError(problem.code, 'refused', `event ${i} (${String(e.type)}): ${problem.message}`, { details: { index: i, type: e.type } });
    });
    // An unknown type is reported as such by append (invalid input), before the stream is looked at.
    const reserved = events.every((e) => CATALOGUE.has(String(e.type))) ? genericStreamProblem(stream) : null;
    if (reserved) throw refuse(reserved.code, reserved.message, { stream });
  }

  /** Registers the controller key at position 0, signed by itself. Only on an empty ledger. */
  async genesis(): Promise<AppendResult> {
    const c = this.byRole.get('controller');
    if (!c) throw refuse('LEDGER_NO_KEY_FOR_ROLE', 'creating a ledger needs a controller key');
    if ((await this.o.store.size()) !== 0) throw refuse('LEDGER_NOT_EMPTY', 'the ledger already has events');
    return this.registerKey(c);
  }

  /** Records a key and its role (signed by the controller key). */
  async registerKey(k: Pick<SigningKey, 'name' | 'signer' | 'publicKeyText' | 'role'>): Promise<AppendResult> {
    return this.append(Ledger.keyStream(k.name), [{ type: 'KeyRegistered', data: { keyId: k.signer, publicKey: k.publicKeyText, role: k.role } }], 'no_stream');
  }

  /**
   * Indexes every stored envelope into the Merkle node store, under the write lock; returns the tree size. Only
   * writers call it (checkpoint signing does it itself): proofs and roots read without writing.
   */
  async syncMerkle(): Promise<number> {
    const lock = await this.lockFor();
    return lock.exclusive((log) => this.integrate(log));
  }

  private node = (level: number, index: number): Uint8Array => this.o.merkle.node(level, index);

  /** The RFC 9162 root of the first `size` events (default: all). Reads only. */
  async root(size?: number): Promise<Uint8Array> {
    const n = size ?? (await this.o.store.size());
    return rootAt(n, await this.readNodes(n));
  }

  /** The latest signed checkpoint, from the database or the witness, whichever is larger. */
  lastSigned(): WitnessedCheckpoint | null {
    const db: StoredCheckpoint | null = this.o.checkpoints.latest();
    const w = this.o.witness?.load() ?? null;
    if (db) sameAsNote(db, `the database's last checkpoint (seq ${db.seq})`);
    if (w) sameAsNote(w, 'checkpoint.last');
    if (db && w) return w.treeSize > db.treeSize ? w : db;
    return db ?? w;
  }

  /**
   * The latest signed checkpoint whose Merkle nodes are committed: what the read-only proofs use. The witness file is
   * written inside the signing transaction, before COMMIT (see checkpoint()), so another process can find it ahead
   * of the committed nodes for a moment, or for longer after a crash between the two writes. The database's own
   * checkpoint is committed together with its nodes, so then it is the newest one a proof can be built against.
   */
  private readableSigned(): WitnessedCheckpoint | null {
    const cp = this.lastSigned();
    if (!cp || cp.treeSize <= this.o.merkle.leafCount()) return cp;
    return this.o.checkpoints.latest();
  }

  /**
   * Signs a checkpoint of the whole log. Refuses one smaller than, or inconsistent with, the last one signed
   * (looked up in the database and in the witness file, so a restored older database is caught), and refuses to
   * sign with a controller key the ledger has revoked (LEDGER_KEY_REVOKED).
   *
   * One writer where order matters: the Merkle integration, the reads of the log size, the leaf count and the last
   * checkpoint, the signature, the new row and the witness file all happen under the ledger's write lock (the
   * stores' own SQLite write transaction), so concurrent signers in several processes line up one after the other
   * and each signs exactly the log it sees. The witness file is written before the transaction commits: a crash in
   * between leaves `checkpoint.last` one checkpoint ahead of the database (a true checkpoint of stored events),
   * never behind it.
   */
  async checkpoint(): Promise<SignedCheckpoint> {
    if (this.controllers.length === 0) throw refuse('LEDGER_NO_KEY_FOR_ROLE', 'signing a checkpoint needs the controller key');
    const lock = await this.lockFor();
    return lock.exclusive((log) => this.checkpointLocked(log));
  }

  private checkpointLocked(log: LockedLog): SignedCheckpoint {
    const size = this.integrate(log);
    const root = rootAt(size, this.node);
    const last = this.lastSigned();
    if (last) {
      const lastRoot = Buffer.from(last.rootHash, 'base64');
      if (size < last.treeSize)
        throw refuse(
          'LEDGER_CHECKPOINT_ROLLBACK',
          `the log has ${size} events but a checkpoint of size ${last.treeSize} was already signed; refusing to sign a smaller one (events were removed, or an older database was restored)`,
          { size, signed: last.treeSize },
        );
      if (size === last.treeSize) {
        if (!lastRoot.equals(Buffer.from(root)))
          throw refuse(
            'LEDGER_CHECKPOINT_INCONSISTENT',
            `the root at size ${size} differs from the signed checkpoint of the same size; the stored log was changed`,
            { size },
          );
        // The witness is ahead of the database (a crash between the two writes): give the database its checkpoint.
        const inDb = this.o.checkpoints.latest();
        if (!inDb || inDb.treeSize < last.treeSize)
          this.o.checkpoints.add({ treeSize: last.treeSize, rootHash: last.rootHash, note: last.note }, (old) => consistencyProof(old, size, this.node));
        // The witness is missing or behind the database (deleted, or restored from an older backup): write it again,
        // so `ledger verify` finds the newest signed checkpoint outside the database once more.
        const w = this.o.witness?.load() ?? null;
        if (this.o.witness && (!w || w.treeSize < last.treeSize)) this.o.witness.save({ treeSize: last.treeSize, rootHash: last.rootHash, note: last.note });
        return { treeSize: size, rootHash: last.rootHash, note: last.note, fresh: false };
      }
      const proof = consistencyProof(last.treeSize, size, this.node);
      if (!verifyConsistency(last.treeSize, size, proof, lastRoot, root))
        throw refuse(
          'LEDGER_CHECKPOINT_INCONSISTENT',
          `the log of size ${size} does not extend the signed checkpoint of size ${last.treeSize}; the stored log was changed`,
          { size, signed: last.treeSize },
        );
    }
    // The consistency proof vouches for the stored nodes up to the last signed size only; the root to sign must also
    // agree with the leaves after it, hashed from the stored events (an edited node there would otherwise be signed).
    const anchored = anchoredRoot(last ? { treeSize: last.treeSize, rootHash: Buffer.from(last.rootHash, 'base64') } : null, size, this.node, (from, to) => {
      const leaves: Uint8Array[] = [];
      log.forEach(from, to, (batch) => batch.forEach((e) => leaves.push(leafHash(e.bytes))));
      return leaves;
    });
    if (!anchored || !Buffer.from(anchored).equals(Buffer.from(root)))
      throw new AssayError(
        'LEDGER_PROOF_MISMATCH',
        'integrity',
        `the stored Merkle nodes give a root at size ${size} that the stored events do not: the Merkle node store was changed; refusing to sign (run \`assay ledger verify\`)`,
        { details: { size } },
      );
    const key = this.signingController();
    const body = formatCheckpointBody({ origin: this.o.origin, treeSize: size, rootHash: root });
    const note = signNote(body, [{ name: key.name, keyId: key.keyId, sign: (m: Uint8Array) => key.sign(m) }]);
    const rootHash = b64(root);
    // The store checks again, against its own last row: larger, and consistent (RFC 9162) with it.
    this.o.checkpoints.add({ treeSize: size, rootHash, note }, (old) => consistencyProof(old, size, this.node));
    this.o.witness?.save({ treeSize: size, rootHash, note });
    return { treeSize: size, rootHash, note, fresh: true };
  }

  /**
   * Under the lock: appends the leaf hashes of the events the Merkle node store has not indexed yet, notes the
   * revocations among the events this Ledger has not looked at yet, and returns the log size.
   */
  private integrate(log: LockedLog): number {
    const size = log.size();
    const indexed = this.o.merkle.leafCount();
    if (indexed > size)
      throw new AssayError(
        'LEDGER_MERKLE_AHEAD',
        'integrity',
        `the Merkle node store indexes ${indexed} leaves but the log has ${size} events: events were removed or the index was changed; run \`assay ledger verify\``,
        { details: { indexed, size } },
      );
    // Indexed by someone else before this Ledger looked: only the revocations there matter (one filtered scan, once).
    if (this.revocations.upTo < indexed) {
      log.forEachOfType('KeyRevoked', this.revocations.upTo, indexed, (batch) => batch.forEach((e) => this.noteRevocation(e)));
      this.revocations.upTo = indexed;
    }
    log.forEach(indexed, size, (batch) => {
      this.o.merkle.appendLeaves(batch.map((e) => leafHash(e.bytes)));
      for (const e of batch) if (e.position >= this.revocations.upTo) this.noteRevocation(e);
    });
    this.revocations.upTo = Math.max(this.revocations.upTo, size);
    return size;
  }

  /**
   * Hashes of the tree of the first `size` events, without writing anything: the stored Merkle nodes, and for the
   * leaves not indexed yet, nodes computed in memory from the stored events.
   */
  private async readNodes(size: number): Promise<NodeSource> {
    const indexed = this.o.merkle.leafCount();
    if (size <= indexed) return this.node;
    const extra = new Map<string, Uint8Array>();
    const get: NodeSource = (level, index) => extra.get(`${level}/${index}`) ?? this.o.merkle.node(level, index);
    let n = indexed;
    for await (const batch of this.o.store.readAll({ fromPosition: indexed, toPosition: size, batchSize: 2000 })) {
      for (const x of newNodesForAppend(
        n,
        batch.map((e) => leafHash(e.bytes)),
        get,
      ))
        extra.set(`${x.level}/${x.index}`, x.hash);
      n += batch.length;
    }
    if (n !== size)
      throw new AssayError('LEDGER_POSITION_OUT_OF_RANGE', 'not_found', `the log has ${n} events, fewer than ${size}`, { details: { size, events: n } });
    return get;
  }

  private noteRevocation(e: LockedEvent): void {
    if (e.type !== 'KeyRevoked') return;
    let keyId: unknown;
    try {
      keyId = (JSON.parse(Buffer.from(e.bytes).toString('utf8')) as { data?: { keyId?: unknown } }).data?.keyId;
    } catch {
      return; // not an envelope: verification reports it
    }
    if (typeof keyId === 'string' && !this.revocations.at.has(keyId)) this.revocations.at.set(keyId, e.position);
  }

  /** The first held controller key the ledger has not revoked. */
  private signingController(): SigningKey {
    const key = this.controllers.find((k) => !this.revocations.at.has(k.signer));
    if (key) return key;
    const k = this.controllers[0] as SigningKey;
    const at = this.revocations.at.get(k.signer) as number;
    throw refuse(
      'LEDGER_KEY_REVOKED',
      `the controller key ${k.signer} was revoked at position ${at}; a revoked key signs nothing after its revocation. Register a new controller key and load it instead (docs/operations.md, Keys)`,
      { signer: k.signer, revokedAt: at },
    );
  }

  /**
   * The write lock the stores share; without one (stores that offer none), a stand-in that reads what is missing
   * first: correct for one Ledger in one process, and the checkpoint store's own order guard still holds.
   */
  private async lockFor(): Promise<LedgerLock> {
    if (this.o.lock) return this.o.lock;
    const from = Math.min(this.o.merkle.leafCount(), this.revocations.upTo);
    const size = await this.o.store.size();
    const events: LockedEvent[] = [];
    for await (const batch of this.o.store.readAll({ fromPosition: from, toPosition: size, batchSize: 2000 })) events.push(...batch);
    return {
      exclusive: <T>(work: (log: LockedLog) => T): T =>
        work({
          size: () => size,
          forEach: (a, b, f) => {
            const part = events.filter((e) => e.position >= a && e.position < b);
            if (part.length > 0) f(part);
          },
          forEachOfType: (type, a, b, f) => {
            const part = events.filter((e) => e.type === type && e.position >= a && e.position < b);
            if (part.length > 0) f(part);
          },
        }),
    };
  }

  /**
   * An inclusion proof for the event at `position` against the latest signed checkpoint. When that does not cover
   * the position: with `signIfNeeded` (the CLI's `prove`) a checkpoint is signed first; otherwise (the HTTP API,
   * whose GETs never write) LEDGER_NOT_CHECKPOINTED. Nothing else is written: the proof is computed from the stored
   * nodes and events, and checked against the checkpoint's signed root before it is returned.
   */
  async inclusionProof(position: number, opts: { signIfNeeded?: boolean } = {}): Promise<InclusionProofResult> {
    const size = await this.o.store.size();
    if (!Number.isSafeInteger(position) || position < 0 || position >= size)
      throw new AssayError('LEDGER_POSITION_OUT_OF_RANGE', 'not_found', `position ${position} is not in the log (size ${size})`);
    let cp: WitnessedCheckpoint | null = this.readableSigned();
    if (!cp || cp.treeSize <= position) {
      if (!opts.signIfNeeded)
        throw new AssayError(
          'LEDGER_NOT_CHECKPOINTED',
          'conflict',
          `no signed checkpoint covers position ${position} yet (the latest signed checkpoint has size ${cp?.treeSize ?? 0}); sign one first (POST /ledger/checkpoints, or \`assay ledger checkpoint\`), then ask again`,
          { details: { position, checkpointSize: cp?.treeSize ?? 0 } },
        );
      cp = await this.checkpoint();
    }
    const node = await this.readNodes(cp.treeSize);
    const proof = inclusionProof(position, cp.treeSize, node);
    // Never hand out a proof that does not verify: the leaf from the stored bytes, the root from the signed note.
    let leaf: Uint8Array | null = null;
    for await (const batch of this.o.store.readAll({ fromPosition: position, toPosition: position + 1, batchSize: 1 }))
      leaf = batch[0] ? leafHash(batch[0].bytes) : null;
    const signedRoot = checkpointFields(cp.note).rootHash;
    if (!leaf || !verifyInclusion(position, cp.treeSize, leaf, proof, signedRoot))
      throw new AssayError(
        'LEDGER_PROOF_MISMATCH',
        'integrity',
        `the inclusion proof of position ${position} computed from the stored Merkle nodes does not verify against the signed checkpoint of size ${cp.treeSize}: the stored data was changed; run \`assay ledger verify\``,
        { details: { position, treeSize: cp.treeSize } },
      );
    return { position, treeSize: cp.treeSize, leafHash: b64(leaf), proof: proof.map(b64), checkpoint: cp.note };
  }

  /**
   * Inclusion proofs of many events against one tree of `treeSize` events whose root the caller holds from a signed
   * checkpoint note (a result bundle's). The stored nodes are read once; the root they give for that size must be
   * `root`, and every proof is checked from the event's own bytes to `root` before it is returned.
   */
  async inclusionProofsAt(treeSize: number, root: Uint8Array, events: ReadonlyArray<{ position: number; bytes: Uint8Array }>): Promise<Uint8Array[][]> {
    const size = await this.o.store.size();
    if (!Number.isSafeInteger(treeSize) || treeSize < 1 || treeSize > size)
      throw new AssayError('LEDGER_POSITION_OUT_OF_RANGE', 'not_found', `a tree of size ${treeSize} is not in this log (size ${size})`, {
        details: { treeSize, size },
      });
    const node = await this.readNodes(treeSize);
    if (!Buffer.from(rootAt(treeSize, node)).equals(Buffer.from(root)))
      throw new AssayError(
        'LEDGER_PROOF_MISMATCH',
        'integrity',
        `the root of this log's first ${treeSize} events is not the checkpoint's: the checkpoint is of another log, or the stored data was changed`,
        { details: { treeSize } },
      );
    const memo = new NodeHashMemo();
    return events.map((e) => {
      if (e.position >= treeSize)
        throw new AssayError('LEDGER_POSITION_OUT_OF_RANGE', 'not_found', `position ${e.position} is not in the tree of size ${treeSize}`, {
          details: { position: e.position, treeSize },
        });
      const proof = inclusionProof(e.position, treeSize, node);
      if (!verifyInclusion(e.position, treeSize, leafHash(e.bytes), proof, root, memo))
        throw new AssayError(
          'LEDGER_PROOF_MISMATCH',
          'integrity',
          `the inclusion proof of position ${e.position} does not lead from its bytes to the root of size ${treeSize}: the stored data was changed; run \`assay ledger verify\``,
          { details: { position: e.position, treeSize } },
        );
      return proof;
    });
  }

  /**
   * An RFC 9162 consistency proof between two sizes of the log (default new size: the whole log). Reads only. The
   * stored Merkle nodes are trusted no further than the latest signed checkpoint vouches for them (anchoredRoot):
   * the new root is checked against it (and the events after it), and the proof against both roots, before anything
   * is returned; a mismatch is LEDGER_PROOF_MISMATCH (integrity).
   */
  async consistencyProof(size1: number, size2?: number): Promise<ConsistencyProofResult> {
    const size = await this.o.store.size();
    const n = size2 ?? size;
    // A size past the end of the log is not there (not found, like `inclusionProof` of a position past the end);
    // sizes in the wrong order, or 0, are no question at all (invalid input).
    const bad = !Number.isSafeInteger(size1) || !Number.isSafeInteger(n) || size1 < 1;
    if (!bad && (n > size || size1 > size))
      throw new AssayError(
        'LEDGER_POSITION_OUT_OF_RANGE',
        'not_found',
        `the log has ${size} events; a tree of size ${Math.max(size1, n)} is not in it (need 1 <= old <= new <= ${size})`,
        { details: { size1, size2: n, size } },
      );
    if (bad || size1 > n)
      throw new AssayError(
        'LEDGER_BAD_TREE_SIZES',
        'invalid_input',
        `need 1 <= old <= new <= ${size} (a tree of size 0 has no consistency proof); got old ${size1}, new ${n}`,
        { details: { size1, size2: n, size } },
      );
    const node = await this.readNodes(n);
    const proof = consistencyProof(size1, n, node);
    const root1 = rootAt(size1, node);
    const root2 = rootAt(n, node);
    const last = this.readableSigned();
    const signed = last && last.treeSize <= size ? checkpointFields(last.note) : null;
    const leaves: Uint8Array[] = [];
    if (signed && n > signed.treeSize)
      for await (const batch of this.o.store.readAll({ fromPosition: signed.treeSize, toPosition: n, batchSize: 2000 }))
        for (const e of batch) leaves.push(leafHash(e.bytes));
    else if (!signed) for await (const batch of this.o.store.readAll({ toPosition: n, batchSize: 2000 })) for (const e of batch) leaves.push(leafHash(e.bytes));
    const authentic = anchoredRoot(signed, n, node, () => leaves);
    if (!authentic || !Buffer.from(authentic).equals(root2) || !verifyConsistency(size1, n, proof, root1, authentic))
      throw new AssayError(
        'LEDGER_PROOF_MISMATCH',
        'integrity',
        `the consistency proof from ${size1} to ${n} computed from the stored Merkle nodes does not agree with the latest signed checkpoint${signed ? ` (size ${signed.treeSize})` : ''} and the stored events: the stored data was changed; run \`assay ledger verify\``,
        { details: { size1, size2: n } },
      );
    return { size1, size2: n, root1: b64(root1), root2: b64(root2), proof: proof.map(b64) };
  }
}

/** The same error, its message led by where the input came from (`events.jsonl:12: ...`). */
function located(e: unknown, where: string): unknown {
  if (!(e instanceof AssayError)) return e;
  return new AssayError(e.code, e.kind, `${where}: ${e.message}`, { details: { ...e.details, where }, cause: e });
}

/** A checkpoint record's size and root are an index of its signed note: refuses to rely on one that disagrees. */
function sameAsNote(cp: WitnessedCheckpoint, what: string): void {
  let f: { treeSize: number; rootHash: Uint8Array } | null = null;
  try {
    f = checkpointFields(cp.note);
  } catch {
    f = null;
  }
  if (!f || f.treeSize !== cp.treeSize || b64(f.rootHash) !== cp.rootHash)
    throw new AssayError(
      'LEDGER_CHECKPOINT_TAMPERED',
      'integrity',
      `${what} records size ${cp.treeSize} and root ${cp.rootHash}, but its signed note ${f ? `says size ${f.treeSize} and root ${b64(f.rootHash)}` : 'does not parse'}: the record was edited; run \`assay ledger verify\``,
      { details: { what, treeSize: cp.treeSize } },
    );
}

/** The checkpoint body fields of a note, for callers that only hold the text. */
export function checkpointFields(note: string): { origin: string; treeSize: number; rootHash: Uint8Array } {
  const body = note.slice(0, note.indexOf('\n\n') + 1);
  return parseCheckpointBody(body);
}
