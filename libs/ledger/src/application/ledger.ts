/**
 * The ledger: validated, signed appends over an EventStore, the RFC 9162 log over every envelope, signed
 * checkpoints that never roll back, and proofs. Application layer: it orchestrates ports and pure domain code and
 * holds no framework code (the NestJS module and the CLI wrap it).
 */
import { AssayError, type Clock, type IdGenerator } from '@assay/core';
import { eventDataProblem, CATALOGUE } from '../domain/catalogue';
import { MAX_ENVELOPE_BYTES, envelopeText, STREAM_RE, UUID_RE } from '../domain/envelope';
import { canonicalJson } from '../domain/jcs';
import type { JsonObject } from '../domain/json';
import { leafHash, rootAt, inclusionProof, consistencyProof, verifyConsistency } from '../domain/merkle';
import { formatCheckpointBody, parseCheckpointBody } from '../domain/checkpoint';
import { signNote } from '../domain/note';
import type { Role } from '../domain/roles';
import type { AppendResult, EventStore, ExpectedRevision, ProposedEvent, SealInput } from '../ports/event-store.port';
import type { MerkleNodeStore } from '../ports/merkle-node-store.port';
import type { CheckpointStore, StoredCheckpoint } from '../ports/checkpoint-store.port';
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
}

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

function refuse(code: string, message: string, details?: Record<string, unknown>): AssayError {
  return new AssayError(code, 'refused', message, details ? { details } : {});
}

export class Ledger {
  private readonly byRole = new Map<Role, SigningKey>();

  constructor(private readonly o: LedgerOptions) {
    for (const k of o.keys) if (!this.byRole.has(k.role)) this.byRole.set(k.role, k);
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
    if (!STREAM_RE.test(stream))
      throw new AssayError('LEDGER_BAD_STREAM', 'invalid_input', `stream "${stream}" must be <category>-<id> (category: lowercase letters and digits, no dash)`);
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
      if (!key)
        throw refuse('LEDGER_NO_KEY_FOR_ROLE', `${where}: needs a key with role ${spec?.roles.join(' or ')}, and none is loaded`);
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
    return this.o.store.append({ stream, expected, events: proposed, seal });
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
    return this.append(
      Ledger.keyStream(k.name),
      [{ type: 'KeyRegistered', data: { keyId: k.signer, publicKey: k.publicKeyText, role: k.role } }],
      'no_stream',
    );
  }

  /** Indexes every stored envelope into the Merkle node store; returns the tree size. */
  async syncMerkle(): Promise<number> {
    const from = this.o.merkle.leafCount();
    for await (const batch of this.o.store.readAll({ fromPosition: from, batchSize: 2000 })) {
      this.o.merkle.appendLeaves(batch.map((e) => leafHash(e.bytes)));
    }
    return this.o.merkle.leafCount();
  }

  private node = (level: number, index: number): Uint8Array => this.o.merkle.node(level, index);

  async root(size?: number): Promise<Uint8Array> {
    const n = await this.syncMerkle();
    return rootAt(size ?? n, this.node);
  }

  /** The latest signed checkpoint, from the database or the witness, whichever is larger. */
  lastSigned(): WitnessedCheckpoint | null {
    const db: StoredCheckpoint | null = this.o.checkpoints.latest();
    const w = this.o.witness?.load() ?? null;
    if (db && w) return w.treeSize > db.treeSize ? w : db;
    return db ?? w;
  }

  /**
   * Signs a checkpoint of the whole log. Refuses one smaller than, or inconsistent with, the last one signed
   * (looked up in the database and in the witness file, so a restored older database is caught).
   */
  async checkpoint(): Promise<SignedCheckpoint> {
    const key = this.byRole.get('controller');
    if (!key) throw refuse('LEDGER_NO_KEY_FOR_ROLE', 'signing a checkpoint needs the controller key');
    const size = await this.syncMerkle();
    const root = rootAt(size, this.node);
    const last = this.lastSigned();
    if (last) {
      const lastRoot = Buffer.from(last.rootHash, 'base64');
      if (size < last.treeSize)
        throw refuse('LEDGER_CHECKPOINT_ROLLBACK', `the log has ${size} events but a checkpoint of size ${last.treeSize} was already signed; refusing to sign a smaller one (events were removed, or an older database was restored)`, { size, signed: last.treeSize });
      if (size === last.treeSize) {
        if (!lastRoot.equals(Buffer.from(root)))
          throw refuse('LEDGER_CHECKPOINT_INCONSISTENT', `the root at size ${size} differs from the signed checkpoint of the same size; the stored log was changed`, { size });
        return { treeSize: size, rootHash: last.rootHash, note: last.note, fresh: false };
      }
      const proof = consistencyProof(last.treeSize, size, this.node);
      if (!verifyConsistency(last.treeSize, size, proof, lastRoot, root))
        throw refuse('LEDGER_CHECKPOINT_INCONSISTENT', `the log of size ${size} does not extend the signed checkpoint of size ${last.treeSize}; the stored log was changed`, { size, signed: last.treeSize });
    }
    const body = formatCheckpointBody({ origin: this.o.origin, treeSize: size, rootHash: root });
    const note = signNote(body, [{ name: key.name, keyId: key.keyId, sign: (m: Uint8Array) => key.sign(m) }]);
    const rootHash = b64(root);
    this.o.checkpoints.add({ treeSize: size, rootHash, note });
    this.o.witness?.save({ treeSize: size, rootHash, note });
    return { treeSize: size, rootHash, note, fresh: true };
  }

  /** An inclusion proof for the event at `position` against the latest checkpoint (signed now if it does not cover it). */
  async inclusionProof(position: number): Promise<InclusionProofResult> {
    const size = await this.syncMerkle();
    if (!Number.isSafeInteger(position) || position < 0 || position >= size)
      throw new AssayError('LEDGER_POSITION_OUT_OF_RANGE', 'not_found', `position ${position} is not in the log (size ${size})`);
    let cp: WitnessedCheckpoint | null = this.lastSigned();
    if (!cp || cp.treeSize <= position) cp = await this.checkpoint();
    const proof = inclusionProof(position, cp.treeSize, this.node);
    return { position, treeSize: cp.treeSize, leafHash: b64(this.node(0, position)), proof: proof.map(b64), checkpoint: cp.note };
  }

  async consistencyProof(size1: number, size2?: number): Promise<ConsistencyProofResult> {
    const size = await this.syncMerkle();
    const n = size2 ?? size;
    if (!Number.isSafeInteger(size1) || !Number.isSafeInteger(n) || size1 < 1 || n > size || size1 > n)
      throw new AssayError('LEDGER_POSITION_OUT_OF_RANGE', 'invalid_input', `need 1 <= old <= new <= ${size} (a tree of size 0 has no consistency proof); got old ${size1}, new ${n}`);
    const proof = consistencyProof(size1, n, this.node);
    return { size1, size2: n, root1: b64(rootAt(size1, this.node)), root2: b64(rootAt(n, this.node)), proof: proof.map(b64) };
  }
}

/** The checkpoint body fields of a note, for callers that only hold the text. */
export function checkpointFields(note: string): { origin: string; treeSize: number; rootHash: Uint8Array } {
  const body = note.slice(0, note.indexOf('\n\n') + 1);
  return parseCheckpointBody(body);
}
