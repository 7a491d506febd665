/**
 * The ordered pass of the verification: everything that depends on event order, over checked chunks taken in
 * position order (envelopes' positions and ids, roles and the key registry, the signature re-check of an event whose
 * key the checker did not have, chains, the claims' fold, and the Merkle leaves). The per-event checks that do not
 * depend on order (parsing, hashes, signatures) ran before, on the checker threads (check-chunk.ts).
 */
import { KeyRegistry, type VerifierKeyDecoder } from '../../domain/key-registry';
import { RootAccumulator } from '../../domain/root-accumulator';
import { ZERO_HASH } from '../../domain/envelope';
import { CLAIM_EVENT_TYPES } from '../../domain/catalogue';
import type { ClaimChecker, ClaimProblem } from '../../domain/claims';
import type { StoredMerkleNodes } from '../../ports/merkle-node-store.port';
import { DIGEST_STRIDE, checkChunk, packChunk, type ChunkOutput, type StepName, type VerifyKernels } from './check-chunk';
import { IdSet, uuidText } from './id-set';
import { checkStoredLeaves } from './merkle-nodes';
import { Failed } from './verify-failure';

const ZERO_HASH_BYTES = Buffer.from(ZERO_HASH, 'hex');
const CLAIM_TYPES: ReadonlySet<string> = new Set(CLAIM_EVENT_TYPES);

/** A checked chunk, however it was read: the checker's output and what the ordered pass needs of each event. */
export interface CheckedChunk {
  n: number;
  out: ChunkOutput;
  /** The keys the checker verified signatures with. */
  keys: ReadonlyMap<string, Uint8Array>;
  position(i: number): number;
  revision(i: number): number;
  stream(i: number): string;
  type(i: number): string;
  /** The stored event, for the rare re-check on this thread. */
  event(i: number): Promise<{ id: string; bytes: Uint8Array; hash: Uint8Array }>;
}

export interface OrderedPassOptions {
  decodeKey: VerifierKeyDecoder;
  /** Public key text the genesis (position 0) key must equal, when the auditor pins it. */
  trustedRoot?: string;
  kernels: VerifyKernels;
  /** The tree sizes the checkpoints step needs roots at (`rootsAt`). */
  cpSizes: ReadonlySet<number>;
  /** The claims' fold (null: the claims step is not run). */
  claims: ClaimChecker | null;
  /** The stored Merkle nodes, and how many leaves they hold, whose leaf rows are compared chunk by chunk. */
  merkleNodes?: StoredMerkleNodes;
  storedLeaves: number;
  /** The recomputed leaf hashes of the stored leaves (32 bytes each), kept for the check of the levels above. */
  leafHashes: Uint8Array;
  /** Events expected (sizes the duplicate-id set). */
  expectedEvents: number;
  bump: (s: StepName, n?: number) => void;
}

export class OrderedPass {
  readonly registry: KeyRegistry;
  readonly streams = new Map<string, { revision: number; hash: Buffer }>();
  readonly acc = new RootAccumulator();
  /** The recomputed root at each size of `cpSizes` reached so far. */
  readonly rootsAt = new Map<number, Buffer>();
  /** The claims' first problem: folding stops there; it is reported after the checkpoints step. */
  claimProblem: ClaimProblem | null = null;
  private readonly ids: IdSet;
  private expectedPosition = 0;

  constructor(private readonly o: OrderedPassOptions) {
    this.registry = new KeyRegistry(o.decodeKey);
    this.ids = new IdSet(Math.min(o.expectedEvents, 1 << 20));
    if (o.cpSizes.has(0)) this.rootsAt.set(0, this.acc.root());
  }

  /** The claims' fold (null: the claims step is not run). */
  get claims(): ClaimChecker | null {
    return this.o.claims;
  }

  /** Takes the next chunk in position order; throws Failed at the first problem (the leaves before it are in). */
  async consume(c: CheckedChunk): Promise<void> {
    const { out } = c;
    const problems = new Map(out.problems.map((p) => [p.i, p]));
    const unknown = new Set(out.unknownSigner);
    const folded = new Map(out.dataEvents.map((k) => [k.i, k.data]));
    // Per signer: does the key the checker used equal the registered one? (Decided once per chunk.)
    const sameKey = new Map<string, boolean>();
    const d = out.digests;
    // merkle: a whole aligned chunk of 2^k events with no checkpoint inside it joins the tree as one perfect
    // subtree, hashed in one call once every event of it passed; otherwise (and up to a failing event) leaf by leaf.
    const firstLeaf = this.acc.size;
    const whole = c.n > 0 && (c.n & (c.n - 1)) === 0 && firstLeaf % c.n === 0 && ![...this.o.cpSizes].some((s) => s > firstLeaf && s < firstLeaf + c.n);
    const pushLeaves = (upTo: number): void => {
      for (let j = this.acc.size - firstLeaf; j < upTo; j++) {
        this.acc.push(d.subarray(DIGEST_STRIDE * j + 64, DIGEST_STRIDE * j + 96));
        if (this.o.cpSizes.has(this.acc.size)) this.rootsAt.set(this.acc.size, this.acc.root());
      }
    };
    let i = 0;
    try {
      for (; i < c.n; i++) {
        const position = c.position(i);
        const at = (step: StepName, code: string, message: string): never => {
          throw new Failed({ step, code, message, position });
        };
        if (position !== this.expectedPosition)
          at('envelopes', 'VERIFY_POSITION_GAP', `expected position ${this.expectedPosition}, found ${position}: events are missing or out of order`);
        this.expectedPosition++;
        const problem = problems.get(i);
        if (problem) at(problem.step, problem.code, problem.message);
        const firstUse = this.ids.add(out.idWords, 4 * i, position);
        if (firstUse >= 0)
          at(
            'envelopes',
            'VERIFY_DUPLICATE_ID',
            `id ${uuidText(out.idWords, 4 * i)} is already the id of the event at position ${firstUse}: ids are unique in the whole log`,
          );
        this.o.bump('envelopes');
        this.o.bump('schemas');
        // Past the checker, the stored columns equal the signed envelope's fields.
        const type = c.type(i);
        const stream = c.stream(i);
        const revision = c.revision(i);
        const signer = out.signers[out.signerIndex[i] as number] as string;
        const data = folded.get(i) ?? {};
        // roles (and the signature of an event whose key the checker did not have)
        const authority = this.registry.authorize({ type, data, signer, position });
        if (authority) at('roles', authority.code, authority.message);
        if (position === 0 && this.o.trustedRoot && data.publicKey !== this.o.trustedRoot)
          at('roles', 'VERIFY_UNTRUSTED_ROOT', `the ledger's root key ${String(data.publicKey)} is not the trusted root key ${this.o.trustedRoot}`);
        this.registry.apply({ type, data, position });
        let recheckWith: Uint8Array | null | undefined;
        if (unknown.has(i)) recheckWith = position === 0 ? this.o.decodeKey(String(data.publicKey)).publicKey : (this.registry.get(signer)?.publicKey ?? null);
        else {
          let same = sameKey.get(signer);
          if (same === undefined) {
            const used = c.keys.get(signer);
            const registered = this.registry.get(signer)?.publicKey;
            same = used !== undefined && registered !== undefined && Buffer.from(used).equals(Buffer.from(registered));
            sameKey.set(signer, same);
          }
          if (!same) recheckWith = this.registry.get(signer)?.publicKey ?? null;
        }
        if (recheckWith !== undefined) {
          const e = await c.event(i);
          const again = checkChunk(
            packChunk([{ position, stream, revision, id: e.id, type, bytes: e.bytes, hash: e.hash }], recheckWith ? [[signer, recheckWith]] : []),
            new Map(),
          );
          const p = again.problems[0];
          if (p) at(p.step, p.code, p.message);
          if (again.unknownSigner.length > 0) at('signatures', 'VERIFY_UNKNOWN_SIGNER', `no key for ${signer}`);
        }
        this.o.bump('signatures');
        this.o.bump('roles');
        // chains
        const last = this.streams.get(stream);
        const wantRevision = last ? last.revision + 1 : 0;
        if (revision !== wantRevision) at('chains', 'VERIFY_CHAIN_BROKEN', `${stream} revision ${revision} where ${wantRevision} was expected`);
        const prev = d.subarray(DIGEST_STRIDE * i, DIGEST_STRIDE * i + 32);
        const wantPrev = last ? last.hash : ZERO_HASH_BYTES;
        if (!wantPrev.equals(prev))
          at(
            'chains',
            'VERIFY_CHAIN_BROKEN',
            `prev of ${stream}@${revision} is ${Buffer.from(prev).toString('hex').slice(0, 16)}…, but the hash of the event before is ${wantPrev.toString('hex').slice(0, 16)}…`,
          );
        this.streams.set(stream, { revision, hash: Buffer.from(d.subarray(DIGEST_STRIDE * i + 32, DIGEST_STRIDE * i + 64)) });
        this.o.bump('chains');
        // claims: folded now, reported after the checkpoints (a problem here stops the folding, not the pass)
        if (this.o.claims && this.claimProblem === null && CLAIM_TYPES.has(type)) {
          this.claimProblem = this.o.claims.event({ position, stream, revision, type, signer, data: folded.get(i) ?? {} });
          if (this.claimProblem === null) this.o.bump('claims');
        }
        if (!whole) pushLeaves(i + 1);
        this.o.bump('merkle');
      }
    } catch (e) {
      pushLeaves(i);
      throw e;
    }
    if (this.o.merkleNodes && firstLeaf < this.o.storedLeaves)
      checkStoredLeaves(this.o.merkleNodes, firstLeaf, Math.min(this.o.storedLeaves, firstLeaf + c.n), d, this.o.leafHashes);
    if (whole) {
      this.acc.pushSubtree(c.n, this.o.kernels.subtreeRoot(d, DIGEST_STRIDE, 64, c.n));
      if (this.o.cpSizes.has(this.acc.size)) this.rootsAt.set(this.acc.size, this.acc.root());
    }
  }
}
