/**
 * Verifies a whole ledger, top down, as a series of named steps:
 *
 *   storage      the database passes its own integrity check (SQLite: PRAGMA integrity_check)
 *   envelopes    every stored event parses, is canonical, sits at the position, stream, revision, id and type it is
 *                stored under, its stored hash is the SHA-256 of its bytes, and positions are dense from 0
 *   schemas      every event type is in the catalogue and its data follows the type's schema
 *   signatures   every Ed25519 signature verifies with the signer's registered key (strict RFC 8032)
 *   roles        the signer was registered and not revoked at that position, with a role allowed for the type
 *   chains       every stream's revisions are dense from 0 and each `prev` is the hash of the event before
 *   merkle       the RFC 9162 root recomputed from the stored bytes; the log is not shorter than any checkpoint
 *   checkpoints  every stored (and every supplied) checkpoint is signed by a controller key of this ledger,
 *                names this ledger's origin, and matches the recomputed root at its size; two signed checkpoints
 *                that cannot both be true are reported as equivocation
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
import { parseNote, verifyNote } from '../../domain/note';
import type { EventStore, ParallelReadSpec, RecordedEvent } from '../../ports/event-store.port';
import type { StoredCheckpoint } from '../../ports/checkpoint-store.port';
import { DIGEST_STRIDE, checkChunk, checkRange, jsKernels, packChunk, type ChunkMeta, type ChunkOutput, type RowReader, type StepName, type VerifyKernels } from './check-chunk';
import { inlineChecker, workerChecker, type ChunkChecker } from './worker-pool';
import { nodeEd25519 } from '../../crypto/ed25519';

export const STEPS: readonly StepName[] = ['storage', 'envelopes', 'schemas', 'signatures', 'roles', 'chains', 'merkle', 'checkpoints'];

export interface VerifyFailure {
  step: StepName;
  code: string;
  message: string;
  position?: number;
  checkpoint?: { seq: number | null; treeSize: number; note?: string };
  /** For equivocation: the two checkpoints that cannot both be true. */
  evidence?: string[];
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
  steps: Array<{ name: StepName; ok: boolean; checked: number }>;
  failure: VerifyFailure | null;
  durationMs: number;
  /**
   * How the per-event checks ran: worker threads started (0: none), who read the stored events, and whether the
   * calling thread checked chunks too.
   */
  checks: { workers: number; readBy: 'workers' | 'main'; mainChecks: boolean };
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
  const cpSizes = new Set<number>(o.checkpoints.map((c) => c.treeSize));
  for (const note of o.externalCheckpoints ?? []) {
    try {
      cpSizes.add(parseCheckpointBody(parseNote(note).body).treeSize);
    } catch {
      // reported by the checkpoints step
    }
  }
  const rootsAt = new Map<number, Buffer>();
  if (cpSizes.has(0)) rootsAt.set(0, acc.root());
  let failure: VerifyFailure | null = null;
  let checker: ChunkChecker | null = null;
  let checks: VerificationReport['checks'] = { workers: 0, readBy: 'main', mainChecks: true };
  let local: { reader: RowReader; keyCache: Map<string, Uint8Array> } | null = null;
  let storagePending: Promise<string[]> | null = null;
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
      steps: STEPS.map((name, i) => ({ name, ok: i < failedIdx, checked: counts[name] })),
      failure,
      durationMs: Date.now() - started,
      checks,
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
      const keyData = new Map(out.keyEvents.map((k) => [k.i, k.data]));
      // Per signer: does the key the checker used equal the registered one? (Decided once per chunk.)
      const sameKey = new Map<string, boolean>();
      const d = out.digests;
      // merkle: a whole aligned chunk of 2^k events with no checkpoint inside it joins the tree as one perfect
      // subtree, hashed in one call once every event of it passed; otherwise (and up to a failing event) leaf by leaf.
      const firstLeaf = acc.size;
      const whole =
        c.n > 0 && (c.n & (c.n - 1)) === 0 && firstLeaf % c.n === 0 && ![...cpSizes].some((s) => s > firstLeaf && s < firstLeaf + c.n);
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
          bump('envelopes');
          bump('schemas');
          // Past the checker, the stored columns equal the signed envelope's fields.
          const type = c.type(i);
          const stream = c.stream(i);
          const revision = c.revision(i);
          const signer = out.signers[out.signerIndex[i] as number] as string;
          const data = keyData.get(i) ?? {};
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
            at('chains', 'VERIFY_CHAIN_BROKEN', `prev of ${stream}@${revision} is ${Buffer.from(prev).toString('hex').slice(0, 16)}…, but the hash of the event before is ${wantPrev.toString('hex').slice(0, 16)}…`);
          streams.set(stream, { revision, hash: Buffer.from(d.subarray(DIGEST_STRIDE * i + 32, DIGEST_STRIDE * i + 64)) });
          bump('chains');
          if (!whole) pushLeaves(i + 1);
          bump('merkle');
        }
      } catch (e) {
        pushLeaves(i);
        throw e;
      }
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

    // merkle: the log must not be shorter than what was signed
    const all = o.checkpoints;
    const largest = all.reduce((m, c) => Math.max(m, c.treeSize), 0);
    if (largest > acc.size)
      throw new Failed({
        step: 'merkle',
        code: 'VERIFY_TRUNCATED',
        message: `a signed checkpoint covers ${largest} events but only ${acc.size} are stored: events from position ${acc.size} on were removed`,
        position: acc.size,
      });

    // checkpoints
    verifyCheckpoints(o, registry, rootsAt, acc, bump);
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

interface CheckedCheckpoint {
  seq: number | null;
  treeSize: number;
  root: Buffer;
  note: string;
  matches: boolean | null;
}

function verifyCheckpoints(
  o: VerifyOptions,
  registry: KeyRegistry,
  rootsAt: Map<number, Buffer>,
  acc: RootAccumulator,
  bump: (s: StepName) => void,
): void {
  const controllers = registry.all().filter((k) => k.role === 'controller');
  const notes: Array<{ seq: number | null; note: string }> = [
    ...o.checkpoints.map((c) => ({ seq: c.seq, note: c.note })),
    ...(o.externalCheckpoints ?? []).map((note) => ({ seq: null, note })),
  ];
  let origin = o.origin;
  const checked: CheckedCheckpoint[] = [];
  let lastStored: CheckedCheckpoint | null = null;
  for (const { seq, note } of notes) {
    const label = seq === null ? 'a supplied checkpoint' : `checkpoint #${seq}`;
    const fail = (code: string, message: string, treeSize = 0): never => {
      throw new Failed({ step: 'checkpoints', code, message: `${label}: ${message}`, checkpoint: { seq, treeSize, note } });
    };
    let parsed;
    try {
      parsed = parseNote(note);
    } catch (e) {
      return fail('VERIFY_CHECKPOINT_MALFORMED', (e as Error).message);
    }
    let body;
    try {
      body = parseCheckpointBody(parsed.body);
    } catch (e) {
      return fail('VERIFY_CHECKPOINT_MALFORMED', (e as Error).message);
    }
    let signedBy: unknown[] = [];
    try {
      signedBy = verifyNote(
        parsed,
        controllers.map((k) => {
          const plus = k.keyId.lastIndexOf('+');
          return { name: k.keyId.slice(0, plus), keyId: Buffer.from(k.keyId.slice(plus + 1), 'hex'), verify: (m: Uint8Array, s: Uint8Array) => nodeEd25519.verify(k.publicKey, m, s) };
        }),
      );
    } catch (e) {
      fail('VERIFY_CHECKPOINT_SIGNATURE', (e as Error).message);
    }
    if (signedBy.length === 0) fail('VERIFY_CHECKPOINT_SIGNATURE', 'not signed by any controller key of this ledger', body.treeSize);
    origin ??= body.origin;
    if (body.origin !== origin) fail('VERIFY_CHECKPOINT_ORIGIN', `origin "${body.origin}" is not this ledger's "${origin}"`, body.treeSize);
    const root = Buffer.from(body.rootHash);
    const actual = body.treeSize <= acc.size ? (rootsAt.get(body.treeSize) ?? null) : null;
    const c: CheckedCheckpoint = { seq, treeSize: body.treeSize, root, note, matches: actual === null ? null : actual.equals(root) };
    if (seq !== null && lastStored && c.treeSize < lastStored.treeSize)
      fail('VERIFY_CHECKPOINT_ROLLBACK', `size ${c.treeSize} is smaller than the size ${lastStored.treeSize} of the checkpoint before it`, c.treeSize);
    if (seq !== null) lastStored = c;
    checked.push(c);
    bump('checkpoints');
  }
  // Equivocation: two validly signed checkpoints that cannot both be true.
  for (const a of checked) {
    for (const b of checked) {
      if (a === b) continue;
      const sameSizeFork = a.treeSize === b.treeSize && !a.root.equals(b.root);
      const forkAgainstLog = a.matches === false && b.matches === true && b.treeSize >= a.treeSize;
      if (sameSizeFork || forkAgainstLog) {
        const name = (c: CheckedCheckpoint): string => (c.seq === null ? 'a supplied checkpoint' : `checkpoint #${c.seq}`);
        throw new Failed({
          step: 'checkpoints',
          code: 'VERIFY_EQUIVOCATION',
          message: `${name(a)} (size ${a.treeSize}) and ${name(b)} (size ${b.treeSize}) are both validly signed but cannot both be true: the ledger signed two different histories`,
          checkpoint: { seq: a.seq, treeSize: a.treeSize, note: a.note },
          evidence: [a.note, b.note],
        });
      }
    }
  }
  for (const c of checked) {
    if (c.matches === false)
      throw new Failed({
        step: 'checkpoints',
        code: 'VERIFY_CHECKPOINT_ROOT_MISMATCH',
        message: `${c.seq === null ? 'a supplied checkpoint' : `checkpoint #${c.seq}`} signs root ${c.root.toString('base64')} for size ${c.treeSize}, but the stored events give ${rootsAt.get(c.treeSize)?.toString('base64')}`,
        checkpoint: { seq: c.seq, treeSize: c.treeSize, note: c.note },
      });
    if (c.matches === null && c.seq === null)
      throw new Failed({
        step: 'checkpoints',
        code: 'VERIFY_TRUNCATED',
        message: `a supplied checkpoint covers ${c.treeSize} events but only ${acc.size} are stored`,
        position: acc.size,
        checkpoint: { seq: null, treeSize: c.treeSize, note: c.note },
      });
  }
}
