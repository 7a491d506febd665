/**
 * Verifies a whole ledger, top down, as a series of named steps:
 *
 *   storage      the database passes its own integrity check (SQLite: PRAGMA integrity_check) and, when the store
 *                offers one, its structural check (`storageCheck`: the schema and schema_version rows)
 *   envelopes    every stored event parses, is canonical, sits at the position, stream, revision, id and type it is
 *                stored under (each stored value of its declared storage class), its stored hash is the SHA-256 of
 *                its bytes, positions are dense from 0, and no id is used twice (checked here, not by an index)
 *   schemas      every event type is in the catalogue and its data follows the type's schema
 *   signatures   every Ed25519 signature verifies with the signer's registered key (strict RFC 8032)
 *   roles        the signer was registered and not revoked at that position, with a role allowed for the type
 *   chains       every stream's revisions are dense from 0 and each `prev` is the hash of the event before
 *   merkle       the RFC 9162 root recomputed from the stored bytes; the log is not shorter than any checkpoint;
 *                the stored Merkle nodes (`merkleNodes`), when given, are exactly the tree's: level 0 the leaf hashes
 *                recomputed here, every higher node the hash of its two children
 *   checkpoints  every stored (and every supplied) checkpoint, and the home's witness file, is signed by a controller
 *                key of this ledger that was registered and not revoked at its size, carries no bad signature line
 *                by any registered key, names this ledger's origin, matches the recomputed root at its size, and
 *                (stored rows) has index columns equal to its note; two signed checkpoints that cannot both be true
 *                are reported as equivocation (see verifyCheckpoints)
 *   claims       the claims follow from the events: every event of CLAIM_EVENT_TYPES, in order, folded with the
 *                rules handed in (`claims`: the run's own rules, from @assay/run); a best score, count or budget
 *                the recorded rounds do not produce fails here, however well it is signed. Its first problem is
 *                reported after the cryptographic steps, which it relies on.
 *
 * The verdict names the first failing step, its code and the first bad item (event position or checkpoint).
 * Signature checks run on worker threads; everything that depends on order runs here, in one pass.
 */
import { AssayError, silentProgress, type Progress } from '@assay/core';
import { KeyRegistry, type VerifierKeyDecoder } from '../../domain/key-registry';
import { RootAccumulator } from '../../domain/root-accumulator';
import { ZERO_HASH } from '../../domain/envelope';

const ZERO_HASH_BYTES = Buffer.from(ZERO_HASH, 'hex');
import { parseCheckpointBody } from '../../domain/checkpoint';
import { ed25519NoteVerifier, parseNote, SIG_TYPE_COSIGNATURE_ED25519, SIG_TYPE_ED25519, type ParsedNote } from '../../domain/note';
import { cosignatureVerifier } from '../../domain/cosignature';
import type { KeyRecord } from '../../domain/key-registry';
import { IdSet, uuidText } from './id-set';
import type { EventStore, ParallelReadSpec, RecordedEvent } from '../../ports/event-store.port';
import type { StoredCheckpoint } from '../../ports/checkpoint-store.port';
import type { StoredMerkleNodes } from '../../ports/merkle-node-store.port';
import {
  DIGEST_STRIDE,
  checkChunk,
  checkRange,
  jsKernels,
  packChunk,
  type ChunkMeta,
  type ChunkOutput,
  type RowReader,
  type StepName,
  type VerifyKernels,
} from './check-chunk';
import { inlineChecker, workerChecker, type ChunkChecker } from './worker-pool';
import type { ClaimProblem, ClaimRules } from '../../domain/claims';
import { CLAIM_EVENT_TYPES } from '../../domain/catalogue';

const CLAIM_TYPES: ReadonlySet<string> = new Set(CLAIM_EVENT_TYPES);

export const STEPS: readonly StepName[] = ['storage', 'envelopes', 'schemas', 'signatures', 'roles', 'chains', 'merkle', 'checkpoints', 'claims'];

export interface VerifyFailure {
  step: StepName;
  code: string;
  message: string;
  position?: number;
  checkpoint?: { seq: number | null; treeSize: number; note?: string };
  /** For equivocation: the two checkpoints that cannot both be true. */
  evidence?: string[];
  /** For the claims step: the stream the broken rule was folded over, and the rule's name. */
  stream?: string;
  rule?: string;
}

export interface VerificationReport {
  ok: boolean;
  events: number;
  streams: number;
  keys: number;
  checkpoints: number;
  treeSize: number;
  /** Base64 root recomputed from the stored events. */
  root: string;
  /**
   * Every step, in order. `status`: `ok` (run and passed), `failed` (the step of `failure`), `skipped` (not run: after
   * the failed step, or `claims` without rules). `ok` is false for the failed step only (a skipped step did not fail;
   * read `status` to tell it from a passed one).
   */
  steps: Array<{ name: StepName; status: 'ok' | 'failed' | 'skipped'; ok: boolean; checked: number }>;
  /**
   * Whether the genesis key was checked against a trusted root key (`trustedRoot`: given by the caller, or the one
   * ledger.json pins in an ASSAY_HOME). False: any ledger that is consistent in itself passes, whoever made it.
   */
  rootPinned: boolean;
  failure: VerifyFailure | null;
  durationMs: number;
  /**
   * How the per-event checks ran: worker threads started (0: none), who read the stored events, and whether the
   * calling thread checked chunks too.
   */
  checks: { workers: number; readBy: 'workers' | 'main'; mainChecks: boolean };
  /** The rule set the claims step used; null when it was not run. */
  claims: string | null;
}

export interface VerifyOptions {
  store: EventStore;
  checkpoints: StoredCheckpoint[];
  /** Checkpoints from elsewhere (published, received from a witness) to check against this ledger too. */
  externalCheckpoints?: string[];
  /** Expected origin; when absent the origin of the first checkpoint is used. */
  origin?: string;
  /** Storage-level integrity check; returns problems (empty when fine). */
  integrityCheck?: () => string[];
  decodeKey: VerifierKeyDecoder;
  /**
   * How this thread hashes and parses envelopes and hashes Merkle subtrees (default: node:crypto and parseEnvelope).
   * Workers choose their own: the ledger kernels addon when it is built and agrees with node:crypto, else the same
   * defaults; the results are the same either way.
   */
  kernels?: VerifyKernels;
  /**
   * Threads that check events; 0 checks on the calling thread only. Default: the number of cores. When the store
   * can be read in parallel and `openRowReader` is given, the calling thread is one of them (it reads and checks
   * chunks itself whenever the workers have enough queued, between its ordered pass) and `workers - 1` worker
   * threads are started; otherwise `workers` worker threads.
   */
  workers?: number;
  /** Opens the store's own row reader on this thread (composition roots pass the SQLite one). */
  openRowReader?: (spec: ParallelReadSpec) => RowReader;
  chunkSize?: number;
  progress?: Progress;
  /** Public key text the genesis (position 0) key must equal, when the auditor pins it. */
  trustedRoot?: string;
  /**
   * The home's witness file (`checkpoint.last`) as read: its path and text, or null text when there is no such file.
   * Absent: no witness is checked (a database file verified on its own).
   */
  witness?: { path: string; text: string | null };
  /** The stored Merkle nodes (SQLite `merkle_nodes`), checked against the recomputed tree; absent: not checked. */
  merkleNodes?: StoredMerkleNodes;
  /** The store's structural checks (schema, schema_version): the first problem, or null. Part of the storage step. */
  storageCheck?: () => { code: string; message: string } | null;
  /**
   * The rules claims are checked with (the run's, from @assay/run). null: the claims step is not run, and the
   * report says so (`claims: null`); only for callers that check claims elsewhere.
   */
  claims: ClaimRules | null;
}

/** A checked chunk, however it was read: the checker's output and what the ordered pass needs of each event. */
interface CheckedChunk {
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

function storageCorrupt(problems: string[]): VerifyFailure {
  return { step: 'storage', code: 'VERIFY_STORAGE_CORRUPT', message: `storage integrity check failed: ${problems.slice(0, 5).join('; ')}` };
}

class Failed extends Error {
  constructor(readonly failure: VerifyFailure) {
    super(failure.message);
  }
}

export async function verifyLedger(o: VerifyOptions): Promise<VerificationReport> {
  const started = Date.now();
  const progress = o.progress ?? silentProgress;
  const kernels = o.kernels ?? jsKernels;
  const counts = Object.fromEntries(STEPS.map((s) => [s, 0])) as Record<StepName, number>;
  const bump = (s: StepName, n = 1): void => void (counts[s] += n);
  const registry = new KeyRegistry(o.decodeKey);
  const streams = new Map<string, { revision: number; hash: Buffer }>();
  const acc = new RootAccumulator();
  const total = await o.store.size();
  // The sizes the checkpoints step needs roots at: what the notes say (the stored tree_size column is only an index).
  const witness = o.witness ? readWitnessFile(o.witness) : null;
  const cpSizes = new Set<number>();
  for (const note of [...o.checkpoints.map((c) => c.note as unknown), ...(o.externalCheckpoints ?? []), witness?.note ?? null]) {
    const size = noteTreeSize(note);
    if (size !== null) cpSizes.add(size);
  }
  const ids = new IdSet(Math.min(total, 1 << 20));
  // merkle_nodes: how many leaves it holds (level 0 rows), checked against the recomputed leaves chunk by chunk; those
  // leaves are kept (32 bytes each) for the check of the levels above, which then reads each stored row only once.
  let storedLeaves = 0;
  let leafHashes = new Uint8Array(0);
  const rootsAt = new Map<number, Buffer>();
  if (cpSizes.has(0)) rootsAt.set(0, acc.root());
  let failure: VerifyFailure | null = null;
  let checker: ChunkChecker | null = null;
  let checks: VerificationReport['checks'] = { workers: 0, readBy: 'main', mainChecks: true };
  let local: { reader: RowReader; keyCache: Map<string, Uint8Array> } | null = null;
  let storagePending: Promise<string[]> | null = null;
  const claims = o.claims?.start() ?? null;
  let claimProblem: ClaimProblem | null = null;
  const claimFailure = (p: ClaimProblem): Failed =>
    new Failed({
      step: 'claims',
      code: p.code,
      message: `${p.stream}: ${p.message} (rule ${p.rule})`,
      ...(p.position !== null ? { position: p.position } : {}),
      stream: p.stream,
      rule: p.rule,
    });
  const report = (): VerificationReport => {
    const failedIdx = failure ? STEPS.indexOf(failure.step) : STEPS.length;
    return {
      ok: failure === null,
      events: acc.size,
      streams: streams.size,
      keys: registry.all().length,
      checkpoints: o.checkpoints.length,
      treeSize: acc.size,
      root: acc.root().toString('base64'),
      steps: STEPS.map((name, i) => {
        const status = i === failedIdx ? 'failed' : i > failedIdx || (name === 'claims' && !o.claims) ? 'skipped' : 'ok';
        return { name, status, ok: status !== 'failed', checked: counts[name] };
      }),
      rootPinned: o.trustedRoot !== undefined && o.trustedRoot !== '',
      failure,
      durationMs: Date.now() - started,
      checks,
      claims: o.claims?.name ?? null,
    };
  };

  try {
    const workers = o.workers ?? Math.max(1, (await import('node:os')).availableParallelism());
    const chunkSize = o.chunkSize ?? 512;
    const parallel = workers > 0 && total > 4 * chunkSize;
    const spec = parallel ? (o.store.parallelReadSpec?.() ?? null) : null;
    // With two or more threads and a reader for this thread, this thread is one of the checkers.
    if (spec && workers >= 2 && o.openRowReader) local = { reader: o.openRowReader(spec), keyCache: new Map() };
    const workerThreads = local ? workers - 1 : workers;
    const pool = parallel ? workerChecker(workerThreads) : null;
    checker = pool ?? inlineChecker(kernels);
    if (pool) checks = { workers: workerThreads, readBy: spec ? 'workers' : 'main', mainChecks: local !== null };

    // storage: when workers read the file themselves, one of them runs the check while the others start on the
    // events; its verdict still comes first (below, and in the catch), as the first step's.
    const storageFailure = (problems: string[]): Failed => new Failed(storageCorrupt(problems));
    const structural = o.storageCheck?.() ?? null;
    if (structural) throw new Failed({ step: 'storage', code: structural.code, message: structural.message });
    if (o.merkleNodes) {
      storedLeaves = merkleShape(o.merkleNodes);
      leafHashes = new Uint8Array(32 * Math.min(storedLeaves, total));
    }
    if (o.integrityCheck && pool && spec) {
      storagePending = pool.integrityProblems(spec).catch((e: unknown) => [(e as Error).message]);
    } else if (o.integrityCheck) {
      const problems = o.integrityCheck();
      if (problems.length > 0) throw storageFailure(problems);
      bump('storage');
    }
    const storageVerdict = async (): Promise<void> => {
      if (!storagePending) return;
      const problems = await storagePending;
      storagePending = null;
      if (problems.length > 0) throw storageFailure(problems);
      bump('storage');
    };

    // one pass over all events: envelopes, schemas, signatures (parallel), roles, chains, merkle (in order)
    progress.start('verifying events', total);
    const inFlight: Array<Promise<CheckedChunk>> = [];
    const maxInFlight = Math.max(4, workers * 4);
    let expectedPosition = 0;

    // Keys the signature checks use: a hint, the first registration of each key id (a key id is registered once);
    // the ordered pass below checks that the key a signature was checked with is the one registered for its signer.
    const knownKeys = new Map<string, Uint8Array>();
    const hintKey = (bytes: Uint8Array): void => {
      try {
        const data = JSON.parse(Buffer.from(bytes).toString('utf8')).data as { keyId?: unknown; publicKey?: unknown };
        if (typeof data.publicKey === 'string' && typeof data.keyId === 'string' && !knownKeys.has(data.keyId))
          knownKeys.set(data.keyId, o.decodeKey(data.publicKey).publicKey);
      } catch {
        // a malformed key event is reported by the ordered checks
      }
    };
    const storeRead = async (position: number): Promise<{ id: string; bytes: Uint8Array; hash: Uint8Array }> => {
      for await (const batch of o.store.readAll({ fromPosition: position, toPosition: position + 1 })) for (const e of batch) return e;
      throw new Failed({ step: 'envelopes', code: 'VERIFY_POSITION_GAP', message: `position ${position} disappeared during verification`, position });
    };

    const consume = async (): Promise<void> => {
      const c = await (inFlight.shift() as Promise<CheckedChunk>);
      const { out } = c;
      const problems = new Map(out.problems.map((p) => [p.i, p]));
      const unknown = new Set(out.unknownSigner);
      const folded = new Map(out.dataEvents.map((k) => [k.i, k.data]));
      // Per signer: does the key the checker used equal the registered one? (Decided once per chunk.)
      const sameKey = new Map<string, boolean>();
      const d = out.digests;
      // merkle: a whole aligned chunk of 2^k events with no checkpoint inside it joins the tree as one perfect
      // subtree, hashed in one call once every event of it passed; otherwise (and up to a failing event) leaf by leaf.
      const firstLeaf = acc.size;
      const whole = c.n > 0 && (c.n & (c.n - 1)) === 0 && firstLeaf % c.n === 0 && ![...cpSizes].some((s) => s > firstLeaf && s < firstLeaf + c.n);
      const pushLeaves = (upTo: number): void => {
        for (let j = acc.size - firstLeaf; j < upTo; j++) {
          acc.push(d.subarray(DIGEST_STRIDE * j + 64, DIGEST_STRIDE * j + 96));
          if (cpSizes.has(acc.size)) rootsAt.set(acc.size, acc.root());
        }
      };
      let i = 0;
      try {
        for (; i < c.n; i++) {
          const position = c.position(i);
          const at = (step: StepName, code: string, message: string): never => {
            throw new Failed({ step, code, message, position });
          };
          if (position !== expectedPosition)
            at('envelopes', 'VERIFY_POSITION_GAP', `expected position ${expectedPosition}, found ${position}: events are missing or out of order`);
          expectedPosition++;
          const problem = problems.get(i);
          if (problem) at(problem.step, problem.code, problem.message);
          const firstUse = ids.add(out.idWords, 4 * i, position);
          if (firstUse >= 0)
            at(
              'envelopes',
              'VERIFY_DUPLICATE_ID',
              `id ${uuidText(out.idWords, 4 * i)} is already the id of the event at position ${firstUse}: ids are unique in the whole log`,
            );
          bump('envelopes');
          bump('schemas');
          // Past the checker, the stored columns equal the signed envelope's fields.
          const type = c.type(i);
          const stream = c.stream(i);
          const revision = c.revision(i);
          const signer = out.signers[out.signerIndex[i] as number] as string;
          const data = folded.get(i) ?? {};
          // roles (and the signature of an event whose key the checker did not have)
          const authority = registry.authorize({ type, data, signer, position });
          if (authority) at('roles', authority.code, authority.message);
          if (position === 0 && o.trustedRoot && data.publicKey !== o.trustedRoot)
            at('roles', 'VERIFY_UNTRUSTED_ROOT', `the ledger's root key ${String(data.publicKey)} is not the trusted root key ${o.trustedRoot}`);
          registry.apply({ type, data, position });
          let recheckWith: Uint8Array | null | undefined;
          if (unknown.has(i)) recheckWith = position === 0 ? o.decodeKey(String(data.publicKey)).publicKey : (registry.get(signer)?.publicKey ?? null);
          else {
            let same = sameKey.get(signer);
            if (same === undefined) {
              const used = c.keys.get(signer);
              const registered = registry.get(signer)?.publicKey;
              same = used !== undefined && registered !== undefined && Buffer.from(used).equals(Buffer.from(registered));
              sameKey.set(signer, same);
            }
            if (!same) recheckWith = registry.get(signer)?.publicKey ?? null;
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
          bump('signatures');
          bump('roles');
          // chains
          const last = streams.get(stream);
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
          streams.set(stream, { revision, hash: Buffer.from(d.subarray(DIGEST_STRIDE * i + 32, DIGEST_STRIDE * i + 64)) });
          bump('chains');
          // claims: folded now, reported after the checkpoints (a problem here stops the folding, not the pass)
          if (claims && claimProblem === null && CLAIM_TYPES.has(type)) {
            claimProblem = claims.event({ position, stream, revision, type, signer, data: folded.get(i) ?? {} });
            if (claimProblem === null) bump('claims');
          }
          if (!whole) pushLeaves(i + 1);
          bump('merkle');
        }
      } catch (e) {
        pushLeaves(i);
        throw e;
      }
      if (o.merkleNodes && firstLeaf < storedLeaves) checkStoredLeaves(o.merkleNodes, firstLeaf, Math.min(storedLeaves, firstLeaf + c.n), d, leafHashes);
      if (whole) {
        acc.pushSubtree(c.n, kernels.subtreeRoot(d, DIGEST_STRIDE, 64, c.n));
        if (cpSizes.has(acc.size)) rootsAt.set(acc.size, acc.root());
      }
      progress.tick(acc.size, total);
    };

    if (pool && spec) {
      // The workers read the rows themselves; this thread runs the ordered pass and, with a row reader, checks too.
      const readFailed = (e: unknown): never => {
        throw new Failed({ step: 'storage', code: 'VERIFY_STORAGE_READ', message: `reading the stored events failed: ${(e as Error).message}` });
      };
      // The key hints: read here when this thread has a reader (the first worker is busy starting and running the
      // storage check meanwhile), else by a worker.
      const reader = local?.reader;
      const registrations = await (reader ? Promise.resolve().then(() => reader.keyRegistrations()) : pool.keyRegistrations(spec)).catch(readFailed);
      for (const k of registrations) hintKey(k.bytes);
      const keys = [...knownKeys.entries()];
      const keyMap = new Map(keys);
      const checkedChunk = (checked: Promise<{ out: ChunkOutput; meta: ChunkMeta }>): Promise<CheckedChunk> =>
        checked.then(
          ({ out, meta }) => ({
            n: meta.positions.length,
            out,
            keys: keyMap,
            position: (i) => meta.positions[i] as number,
            revision: (i) => meta.revisions[i] as number,
            stream: (i) => meta.streams[meta.streamIndex[i] as number] as string,
            type: (i) => meta.types[meta.typeIndex[i] as number] as string,
            event: (i) => storeRead(meta.positions[i] as number),
          }),
          readFailed,
        );
      const settled = new WeakSet<Promise<CheckedChunk>>();
      const track = (p: Promise<CheckedChunk>): void => {
        const mark = (): void => void settled.add(p);
        p.then(mark, mark);
        inFlight.push(p);
      };
      let from = 0;
      const nextRange = (): [number, number] => {
        const f = from;
        from = Math.min(total, from + chunkSize);
        return [f, from];
      };
      // Keep every worker two chunks ahead; take the oldest chunk in order as soon as it is checked; otherwise, when
      // this thread is a checker, check the next chunk here instead of waiting.
      while (from < total || inFlight.length > 0) {
        while (from < total && inFlight.length < maxInFlight && pool.leastPending() < 2) track(checkedChunk(pool.checkRange(spec, ...nextRange(), keys)));
        const head = inFlight[0];
        if (head && settled.has(head)) await consume();
        else if (local && from < total && inFlight.length < maxInFlight) {
          const [a, b] = nextRange();
          const { reader, keyCache } = local;
          // Checked now, synchronously; a read failure becomes a rejection like a worker's.
          track(checkedChunk(new Promise((resolve) => resolve(checkRange(reader, a, b, keys, keyCache, kernels)))));
          // Let the workers' replies in (they arrive as events) before deciding again.
          await new Promise((resolve) => setImmediate(resolve));
        } else if (head) await consume();
      }
    } else {
      for await (const batch of o.store.readAll({ batchSize: chunkSize })) {
        for (const e of batch) if (e.type === 'KeyRegistered') hintKey(e.bytes);
        const input = packChunk(batch, [...knownKeys.entries()]);
        const keys = new Map(knownKeys);
        inFlight.push(
          checker.check(input).then((out) => ({
            n: batch.length,
            out,
            keys,
            position: (i) => (batch[i] as RecordedEvent).position,
            revision: (i) => (batch[i] as RecordedEvent).revision,
            stream: (i) => (batch[i] as RecordedEvent).stream,
            type: (i) => (batch[i] as RecordedEvent).type,
            event: async (i) => batch[i] as RecordedEvent,
          })),
        );
        if (inFlight.length >= maxInFlight) await consume();
      }
    }
    while (inFlight.length > 0) await consume();
    await storageVerdict();
    progress.end(`${acc.size} events`);

    // merkle: the stored nodes above the leaves (the leaves were compared in the pass)
    if (o.merkleNodes && storedLeaves <= acc.size) checkStoredInteriorNodes(o.merkleNodes, storedLeaves, kernels, leafHashes);

    // checkpoints (and the merkle step's last rule: the log is not shorter than any validly signed checkpoint)
    verifyCheckpoints(o, registry, rootsAt, acc, bump, witness);
    // merkle_nodes indexing more leaves than there are events: events were removed (reported after the checkpoints,
    // whose VERIFY_TRUNCATED says it better when a signed checkpoint covered them)
    if (storedLeaves > acc.size) throw merkleFailure(`it holds ${storedLeaves} leaves, but the log has ${acc.size} events: events were removed`, acc.size);

    // claims
    if (claims) {
      claimProblem ??= claims.end();
      if (claimProblem) throw claimFailure(claimProblem);
    }
  } catch (e) {
    if (e instanceof Failed) failure = e.failure;
    else if (e instanceof AssayError) failure = { step: 'storage', code: e.code, message: e.message };
    else throw e;
    // A damaged file explains whatever else failed: the storage step's verdict comes first.
    const pending = storagePending as Promise<string[]> | null;
    if (pending) {
      const problems = await pending;
      if (problems.length > 0) failure = storageCorrupt(problems);
      else bump('storage');
    }
  } finally {
    await checker?.close();
    local?.reader.close();
  }
  return report();
}

const merkleFailure = (message: string, position?: number): Failed =>
  new Failed({ step: 'merkle', code: 'VERIFY_MERKLE_NODES', message: `merkle_nodes: ${message}`, ...(position !== undefined ? { position } : {}) });

/**
 * Checks the shape of the stored Merkle nodes and returns how many leaves they hold (m, the level 0 rows): every
 * level is an integer from 0 to 63; level 0 holds idx 0..m-1; each level L >= 1 holds exactly idx 0..floor(m / 2^L) - 1
 * (the perfect subtrees of the first m leaves); no other level has rows. (Rows are read back later, each checked to
 * be the idx expected there, as an INTEGER, with a 32-byte BLOB hash: nodeRange.)
 */
function merkleShape(nodes: StoredMerkleNodes): number {
  const at = new Map<number, { count: number; minIdx: unknown; maxIdx: unknown }>();
  for (const l of nodes.shape()) {
    if (typeof l.level !== 'number' || !Number.isSafeInteger(l.level) || l.level < 0 || l.level > 63) throw merkleFailure(`a row has level ${String(l.level)}`);
    at.set(l.level, l);
  }
  const m = at.get(0)?.count ?? 0;
  for (const [level, l] of at) {
    const want = Math.floor(m / 2 ** level);
    if (l.count !== want || (want > 0 && (l.minIdx !== 0 || l.maxIdx !== want - 1)))
      throw merkleFailure(
        `level ${level} holds ${l.count} rows (idx ${String(l.minIdx)}..${String(l.maxIdx)}), but a tree of ${m} indexed leaves has exactly ${want} (idx 0..${want - 1})`,
      );
  }
  for (let level = 0; Math.floor(m / 2 ** level) > 0; level++)
    if (!at.has(level)) throw merkleFailure(`level ${level} has no rows, but a tree of ${m} indexed leaves has ${Math.floor(m / 2 ** level)}`);
  return m;
}

/** The hashes of rows [from, to) of a level, 32 bytes each, after checking that exactly those rows are there. */
function nodeRange(nodes: StoredMerkleNodes, level: number, from: number, to: number): Uint8Array {
  const k = to - from;
  const r = nodes.range(level, from, to);
  if (r.count !== k || r.wellFormed !== k || (k > 0 && (r.minIdx !== from || r.maxIdx !== to - 1)) || r.hashes.byteLength !== 32 * k)
    throw merkleFailure(
      `level ${level}, idx ${from}..${to - 1}: ${r.count} rows where ${k} were expected, ${r.wellFormed} of them with an INTEGER idx and a 32-byte BLOB hash`,
      from * 2 ** level,
    );
  return r.hashes;
}

/**
 * The stored leaf hashes of positions [from, to) equal the recomputed ones (digests of the chunk starting at from),
 * which are kept in `keep` (32 bytes each, at 32 * position).
 */
function checkStoredLeaves(nodes: StoredMerkleNodes, from: number, to: number, digests: Uint8Array, keep: Uint8Array): void {
  const stored = nodeRange(nodes, 0, from, to);
  const s = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  for (let j = 0; j < to - from; j++) {
    const leaf = digests.subarray(DIGEST_STRIDE * j + 64, DIGEST_STRIDE * j + 96);
    if (s.compare(leaf, 0, 32, 32 * j, 32 * j + 32) !== 0)
      throw merkleFailure(
        `the leaf row (level 0, idx ${from + j}) is not the leaf hash of the event at position ${from + j}: proofs from it would not verify`,
        from + j,
      );
    keep.set(leaf, 32 * (from + j));
  }
}

/**
 * Every stored node above level 0 is the RFC 9162 hash of its two children: at level 1 the leaf hashes the pass
 * recomputed (`leafHashes`, 32 bytes each), above it the stored level below, which was checked just before (so, by
 * induction, every stored node is the hash of its subtree's leaves). Each stored row is read once. Hashed in batches
 * through the kernels' digestAll: the SHA-256 of 0x01 || left || right is a node hash (its second digest, of a 0x00
 * prefix, is not used).
 */
function checkStoredInteriorNodes(nodes: StoredMerkleNodes, leaves: number, kernels: VerifyKernels, leafHashes: Uint8Array): void {
  const BATCH = 4096;
  const bytes = new Uint8Array(65 * BATCH);
  const offsets = new Uint32Array(BATCH + 1);
  const out = new Uint8Array(64 * BATCH);
  let below = leafHashes;
  for (let level = 1; Math.floor(leaves / 2 ** level) > 0; level++) {
    const count = Math.floor(leaves / 2 ** level);
    const here = new Uint8Array(32 * count);
    for (let from = 0; from < count; from += BATCH) {
      const to = Math.min(count, from + BATCH);
      const k = to - from;
      const parents = nodeRange(nodes, level, from, to);
      const p = Buffer.from(parents.buffer, parents.byteOffset, parents.byteLength);
      for (let j = 0; j < k; j++) {
        bytes[65 * j] = 0x01;
        bytes.set(below.subarray(64 * (from + j), 64 * (from + j) + 64), 65 * j + 1);
        offsets[j + 1] = 65 * (j + 1);
      }
      kernels.digestAll(bytes.subarray(0, 65 * k), offsets.subarray(0, k + 1), out, 64, 0);
      for (let j = 0; j < k; j++) {
        if (p.compare(out, 64 * j, 64 * j + 32, 32 * j, 32 * j + 32) !== 0)
          throw merkleFailure(
            `(level ${level}, idx ${from + j}) is not the hash of its two children: proofs through it would not verify`,
            (from + j) * 2 ** level,
          );
      }
      here.set(parents, 32 * from);
    }
    below = here;
  }
}

interface CheckedCheckpoint {
  seq: number | null;
  source: CheckpointSource;
  treeSize: number;
  root: Buffer;
  note: string;
  matches: boolean | null;
}

/** Where a checkpoint came from: a row of the database, supplied by the caller, or the home's witness file. */
type CheckpointSource = 'stored' | 'supplied' | 'witness';

const sourceName = (source: CheckpointSource, seq: number | null): string =>
  source === 'stored' ? `checkpoint #${String(seq)}` : source === 'witness' ? 'checkpoint.last' : 'a supplied checkpoint';

/** The tree size a note states, or null when it does not parse (the checkpoints step reports that). */
function noteTreeSize(note: unknown): number | null {
  try {
    return typeof note === 'string' ? parseCheckpointBody(parseNote(note).body).treeSize : null;
  } catch {
    return null;
  }
}

/** The witness file, read and checked against the note it holds (its signature and contents are checked later). */
export interface WitnessFile {
  path: string;
  /** null: the file does not exist. */
  note: string | null;
  problem: { code: string; message: string } | null;
}

const WITNESS_MEMBERS = ['note', 'rootHash', 'treeSize'];

/**
 * Reads `checkpoint.last`: a JSON object with exactly the members `treeSize` (an integer >= 0), `rootHash` (a
 * string) and `note` (a string, a signed checkpoint), where `treeSize` and `rootHash` equal the tree size and the
 * base64 root the note's body states.
 */
export function readWitnessFile(w: { path: string; text: string | null }): WitnessFile {
  const bad = (code: string, message: string): WitnessFile => ({ path: w.path, note: null, problem: { code, message: `${w.path}: ${message}` } });
  if (w.text === null) return { path: w.path, note: null, problem: null };
  let v: unknown;
  try {
    v = JSON.parse(w.text);
  } catch (e) {
    return bad('VERIFY_WITNESS_MALFORMED', `not valid JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('VERIFY_WITNESS_MALFORMED', 'not a JSON object');
  const rec = v as Record<string, unknown>;
  const members = Object.keys(rec).sort();
  if (members.join() !== WITNESS_MEMBERS.join())
    return bad('VERIFY_WITNESS_MALFORMED', `must have exactly the members ${WITNESS_MEMBERS.join(', ')}; it has ${members.join(', ') || 'none'}`);
  const { treeSize, rootHash, note } = rec;
  if (typeof treeSize !== 'number' || !Number.isSafeInteger(treeSize) || treeSize < 0)
    return bad('VERIFY_WITNESS_MALFORMED', 'treeSize must be an integer >= 0');
  if (typeof rootHash !== 'string') return bad('VERIFY_WITNESS_MALFORMED', 'rootHash must be a string');
  if (typeof note !== 'string') return bad('VERIFY_WITNESS_MALFORMED', 'note must be a string');
  let body;
  try {
    body = parseCheckpointBody(parseNote(note).body);
  } catch (e) {
    return bad('VERIFY_WITNESS_MALFORMED', `the note is not a signed checkpoint: ${(e as Error).message}`);
  }
  const noteRoot = Buffer.from(body.rootHash).toString('base64');
  if (body.treeSize !== treeSize || noteRoot !== rootHash)
    return bad(
      'VERIFY_WITNESS_MISMATCH',
      `records size ${treeSize} and root ${rootHash}, but the note it holds says size ${body.treeSize} and root ${noteRoot}: the file was edited`,
    );
  return { path: w.path, note, problem: null };
}

/** A registered key as a signer of checkpoint lines: by its note key id (type 0x01) and its cosigner key id (0x04). */
interface LineKey {
  record: KeyRecord;
  type: typeof SIG_TYPE_ED25519 | typeof SIG_TYPE_COSIGNATURE_ED25519;
  verify(body: Uint8Array, signature: Uint8Array): boolean;
}

function lineKeys(registry: KeyRegistry): Map<string, LineKey> {
  const out = new Map<string, LineKey>();
  for (const record of registry.all()) {
    const name = record.keyId.slice(0, record.keyId.lastIndexOf('+'));
    try {
      const note = ed25519NoteVerifier(name, record.publicKey);
      out.set(`${name}+${Buffer.from(note.keyId).toString('hex')}`, { record, type: SIG_TYPE_ED25519, verify: (b, sig) => note.verify(b, sig) });
      const co = cosignatureVerifier({ name, publicKey: record.publicKey });
      out.set(`${name}+${Buffer.from(co.keyId).toString('hex')}`, { record, type: SIG_TYPE_COSIGNATURE_ED25519, verify: (b, sig) => co.verify(b, sig) });
    } catch {
      // a key the registry accepted always decodes; one that does not cannot have signed anything
    }
  }
  return out;
}

/**
 * The checkpoints step. Every checkpoint (each stored row in `seq` order, each supplied one, the witness file's) is
 * checked in turn, and the first problem fails the step:
 *   - the note parses as a C2SP signed note whose body is a tlog-checkpoint (`*_MALFORMED`);
 *   - a stored row: `seq` is its index in issue order (0, 1, 2, ...), its `note` is TEXT, and its `tree_size` and
 *     `root_hash` are exactly the note body's size and base64 root (VERIFY_CHECKPOINT_COLUMN_MISMATCH);
 *   - signature lines: a line whose key name and key id are those of a key registered in the ledger, as a note key
 *     (type 0x01) or a cosigner key (type 0x04), must verify (`*_SIGNATURE`), and its key must not have been revoked
 *     at a position before the tree size n (`*_REVOKED_SIGNER`); a type 0x01 line by a controller key must come from a
 *     key registered at a position before n (`*_UNREGISTERED_SIGNER`); lines by keys the ledger never registered are
 *     ignored, as signed-note prescribes; at least one type 0x01 line by a controller key must be there (`*_SIGNATURE`);
 *   - the origin is the ledger's (`*_ORIGIN`); stored checkpoints never shrink in issue order (_ROLLBACK);
 *   - the root at its size, recomputed from the stored events, equals the signed one, and the log holds at least its
 *     size (`*_ROOT_MISMATCH`, VERIFY_TRUNCATED / VERIFY_WITNESS_TRUNCATED); two that cannot both be true:
 *     VERIFY_EQUIVOCATION.
 * (`*` is VERIFY_CHECKPOINT for stored and supplied checkpoints and VERIFY_WITNESS for the witness file.)
 */
function verifyCheckpoints(
  o: VerifyOptions,
  registry: KeyRegistry,
  rootsAt: Map<number, Buffer>,
  acc: RootAccumulator,
  bump: (s: StepName) => void,
  witness: WitnessFile | null,
): void {
  const keys = lineKeys(registry);
  const notes: Array<{ seq: number | null; source: CheckpointSource; note: unknown; row?: StoredCheckpoint; index?: number }> = [
    ...o.checkpoints.map((row, index) => ({ seq: row.seq, source: 'stored' as const, note: row.note as unknown, row, index })),
    ...(o.externalCheckpoints ?? []).map((note) => ({ seq: null, source: 'supplied' as const, note: note as unknown })),
    ...(witness ? [{ seq: null, source: 'witness' as const, note: witness.note as unknown }] : []),
  ];
  let origin = o.origin;
  const checked: CheckedCheckpoint[] = [];
  let lastStored: CheckedCheckpoint | null = null;
  let columnProblem: Failed | null = null;
  for (const { seq, source, note: rawNote, row, index } of notes) {
    if (source === 'witness' && witness) {
      if (witness.problem)
        throw new Failed({ step: 'checkpoints', code: witness.problem.code, message: witness.problem.message, checkpoint: { seq: null, treeSize: 0 } });
      if (witness.note === null) {
        if (o.checkpoints.length === 0) continue; // nothing signed yet
        throw new Failed({
          step: 'checkpoints',
          code: 'VERIFY_WITNESS_MISSING',
          message: `${witness.path} is missing, but the database holds ${o.checkpoints.length} signed checkpoints: the file that remembers the last signed checkpoint outside the database was deleted (restore it, or write the latest checkpoint's {treeSize, rootHash, note} into it)`,
          checkpoint: { seq: null, treeSize: 0 },
        });
      }
    }
    const label = sourceName(source, seq);
    const prefix = source === 'witness' ? 'VERIFY_WITNESS_' : 'VERIFY_CHECKPOINT_';
    const noteText = typeof rawNote === 'string' ? rawNote : '';
    const fail = (what: string, message: string, treeSize = 0): never => {
      throw new Failed({ step: 'checkpoints', code: `${prefix}${what}`, message: `${label}: ${message}`, checkpoint: { seq, treeSize, note: noteText } });
    };
    if (typeof rawNote !== 'string')
      fail(
        source === 'stored' ? 'COLUMN_MISMATCH' : 'MALFORMED',
        `the note is ${rawNote === null ? 'NULL' : rawNote instanceof Uint8Array ? 'a BLOB' : typeof rawNote}, not text`,
      );
    let parsed: ParsedNote;
    let body;
    try {
      parsed = parseNote(noteText);
      body = parseCheckpointBody(parsed.body);
    } catch (e) {
      return fail('MALFORMED', (e as Error).message);
    }
    const n = body.treeSize;
    const root = Buffer.from(body.rootHash);
    if (row && !columnProblem) {
      // The row's other columns are an index of its note: each must say exactly what the note says. Reported after
      // the equivocation check, which, with both notes as evidence, says more about a planted row.
      const r = row as unknown as Record<'seq' | 'treeSize' | 'rootHash', unknown>;
      try {
        if (r.seq !== index)
          fail(
            'COLUMN_MISMATCH',
            `seq is ${String(r.seq)} where ${String(index)} was expected: rows are numbered 0, 1, 2, ... in issue order, and one is missing or was renumbered`,
            n,
          );
        if (r.treeSize !== n) fail('COLUMN_MISMATCH', `tree_size is ${JSON.stringify(r.treeSize) ?? String(r.treeSize)}, but the signed note says ${n}`, n);
        if (r.rootHash !== root.toString('base64'))
          fail('COLUMN_MISMATCH', `root_hash is ${JSON.stringify(r.rootHash) ?? String(r.rootHash)}, but the signed note says ${root.toString('base64')}`, n);
      } catch (e) {
        columnProblem = e as Failed;
      }
    }
    // Lines of known keys: every one must verify, then none may be outside its key's window; unknown keys are ignored.
    const known = parsed.signatures.flatMap((line) => {
      const k = keys.get(`${line.name}+${line.keyIdHex}`);
      return k
        ? [{ line, k, who: `${k.record.keyId} (a registered ${k.record.role} key, ${k.type === SIG_TYPE_ED25519 ? 'signature' : 'cosignature'} line)` }]
        : [];
    });
    for (const { line, k, who } of known) {
      let ok = false;
      try {
        ok = k.verify(parsed.bodyBytes, line.signature);
      } catch {
        ok = false;
      }
      if (!ok) fail('SIGNATURE', `the line by ${who} does not verify`, n);
    }
    let byController = false;
    for (const { k, who } of known) {
      if (k.record.revokedAt !== null && k.record.revokedAt < n)
        fail(
          'REVOKED_SIGNER',
          `${who} was revoked at position ${k.record.revokedAt}, inside the tree of ${n} events it signs: a revoked key signs nothing after its revocation`,
          n,
        );
      if (k.type === SIG_TYPE_ED25519 && k.record.role === 'controller') {
        if (k.record.registeredAt >= n)
          fail('UNREGISTERED_SIGNER', `${who} was registered at position ${k.record.registeredAt}, outside the tree of ${n} events it signs`, n);
        byController = true;
      }
    }
    if (!byController) fail('SIGNATURE', 'not signed by any controller key of this ledger', n);
    origin ??= body.origin;
    if (body.origin !== origin) fail('ORIGIN', `origin "${body.origin}" is not this ledger's "${origin}"`, n);
    const actual = n <= acc.size ? (rootsAt.get(n) ?? null) : null;
    const c: CheckedCheckpoint = { seq, source, treeSize: n, root, note: noteText, matches: actual === null ? null : actual.equals(root) };
    if (source === 'stored' && lastStored && c.treeSize < lastStored.treeSize)
      fail('ROLLBACK', `size ${c.treeSize} is smaller than the size ${lastStored.treeSize} of the checkpoint before it`, c.treeSize);
    if (source === 'stored') lastStored = c;
    checked.push(c);
    if (source !== 'witness') bump('checkpoints'); // the witness repeats a checkpoint; it is not counted twice
  }
  // merkle: the log must not be shorter than what was signed
  const largest = checked.filter((c) => c.source === 'stored').reduce((m, c) => Math.max(m, c.treeSize), 0);
  if (largest > acc.size)
    throw new Failed({
      step: 'merkle',
      code: 'VERIFY_TRUNCATED',
      message: `a signed checkpoint covers ${largest} events but only ${acc.size} are stored: events from position ${acc.size} on were removed`,
      position: acc.size,
    });
  // Equivocation: two validly signed checkpoints that cannot both be true.
  for (const a of checked) {
    for (const b of checked) {
      if (a === b) continue;
      const sameSizeFork = a.treeSize === b.treeSize && !a.root.equals(b.root);
      const forkAgainstLog = a.matches === false && b.matches === true && b.treeSize >= a.treeSize;
      if (sameSizeFork || forkAgainstLog) {
        throw new Failed({
          step: 'checkpoints',
          code: 'VERIFY_EQUIVOCATION',
          message: `${sourceName(a.source, a.seq)} (size ${a.treeSize}) and ${sourceName(b.source, b.seq)} (size ${b.treeSize}) are both validly signed but cannot both be true: the ledger signed two different histories`,
          checkpoint: { seq: a.seq, treeSize: a.treeSize, note: a.note },
          evidence: [a.note, b.note],
        });
      }
    }
  }
  if (columnProblem) throw columnProblem;
  for (const c of checked) {
    const prefix = c.source === 'witness' ? 'VERIFY_WITNESS_' : 'VERIFY_CHECKPOINT_';
    if (c.matches === false)
      throw new Failed({
        step: 'checkpoints',
        code: `${prefix}ROOT_MISMATCH`,
        message: `${sourceName(c.source, c.seq)} signs root ${c.root.toString('base64')} for size ${c.treeSize}, but the stored events give ${rootsAt.get(c.treeSize)?.toString('base64')}`,
        checkpoint: { seq: c.seq, treeSize: c.treeSize, note: c.note },
      });
    if (c.matches === null && c.source !== 'stored')
      throw new Failed({
        step: 'checkpoints',
        code: c.source === 'witness' ? 'VERIFY_WITNESS_TRUNCATED' : 'VERIFY_TRUNCATED',
        message:
          c.source === 'witness'
            ? `${witness?.path ?? 'checkpoint.last'} records a signed checkpoint of ${c.treeSize} events, but the database holds ${acc.size}: events a signed checkpoint covered are missing (an older database restored, or a deleted or damaged WAL)`
            : `a supplied checkpoint covers ${c.treeSize} events but only ${acc.size} are stored`,
        position: acc.size,
        checkpoint: { seq: null, treeSize: c.treeSize, note: c.note },
      });
  }
}
