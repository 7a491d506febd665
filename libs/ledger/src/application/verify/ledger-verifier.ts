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
 *
 * The code is laid out by those concerns: this file schedules the steps and builds the report; ordered-pass.ts holds
 * everything that depends on event order; chunk-feed.ts decides which thread reads and checks which chunk;
 * check-chunk.ts is the per-event work the checker threads do; merkle-nodes.ts and checkpoints-step.ts are the merkle
 * step's stored-node checks and the checkpoints step.
 */
import { AssayError, silentProgress, type Progress } from '@assay/core';
import type { VerifierKeyDecoder } from '../../domain/key-registry';
import { RootAccumulator } from '../../domain/root-accumulator';
import type { EventStore, ParallelReadSpec } from '../../ports/event-store.port';
import type { StoredCheckpoint } from '../../ports/checkpoint-store.port';
import type { StoredMerkleNodes } from '../../ports/merkle-node-store.port';
import type { ClaimProblem, ClaimRules } from '../../domain/claims';
import { jsKernels, type RowReader, type StepName, type VerifyKernels } from './check-chunk';
import { inlineChecker, workerChecker, type ChunkChecker } from './worker-pool';
import { Failed, storageCorrupt, type VerifyFailure } from './verify-failure';
import { OrderedPass } from './ordered-pass';
import { feedCheckedChunks } from './chunk-feed';
import { checkStoredInteriorNodes, merkleFailure, merkleShape } from './merkle-nodes';
import { noteTreeSize, readWitnessFile, verifyCheckpoints } from './checkpoints-step';

export type { VerifyFailure } from './verify-failure';
export { readWitnessFile, type WitnessFile } from './checkpoints-step';

export const STEPS: readonly StepName[] = ['storage', 'envelopes', 'schemas', 'signatures', 'roles', 'chains', 'merkle', 'checkpoints', 'claims'];

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

export async function verifyLedger(o: VerifyOptions): Promise<VerificationReport> {
  const started = Date.now();
  const progress = o.progress ?? silentProgress;
  const kernels = o.kernels ?? jsKernels;
  const counts = Object.fromEntries(STEPS.map((s) => [s, 0])) as Record<StepName, number>;
  const bump = (s: StepName, n = 1): void => void (counts[s] += n);
  const total = await o.store.size();
  // The sizes the checkpoints step needs roots at: what the notes say (the stored tree_size column is only an index).
  const witness = o.witness ? readWitnessFile(o.witness) : null;
  const cpSizes = new Set<number>();
  for (const note of [...o.checkpoints.map((c) => c.note as unknown), ...(o.externalCheckpoints ?? []), witness?.note ?? null]) {
    const size = noteTreeSize(note);
    if (size !== null) cpSizes.add(size);
  }
  let pass: OrderedPass | null = null;
  let failure: VerifyFailure | null = null;
  let checker: ChunkChecker | null = null;
  let checks: VerificationReport['checks'] = { workers: 0, readBy: 'main', mainChecks: true };
  let local: { reader: RowReader; keyCache: Map<string, Uint8Array> } | null = null;
  let storagePending: Promise<string[]> | null = null;
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
    // Before the pass starts (a storage failure), nothing is counted: an empty tree.
    const acc = pass?.acc ?? new RootAccumulator();
    return {
      ok: failure === null,
      events: acc.size,
      streams: pass?.streams.size ?? 0,
      keys: pass?.registry.all().length ?? 0,
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
    // Thread scheduling: worker threads, and whether this thread reads and checks chunks too.
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
    // merkle_nodes: how many leaves it holds (level 0 rows), checked against the recomputed leaves chunk by chunk;
    // those leaves are kept (32 bytes each) for the check of the levels above, which then reads each stored row once.
    const storedLeaves = o.merkleNodes ? merkleShape(o.merkleNodes) : 0;
    const leafHashes = new Uint8Array(o.merkleNodes ? 32 * Math.min(storedLeaves, total) : 0);
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

    // envelopes, schemas, signatures (on the checkers), then roles, chains, claims' fold and merkle (in order)
    const p = new OrderedPass({
      decodeKey: o.decodeKey,
      ...(o.trustedRoot !== undefined ? { trustedRoot: o.trustedRoot } : {}),
      kernels,
      cpSizes,
      claims: o.claims?.start() ?? null,
      ...(o.merkleNodes ? { merkleNodes: o.merkleNodes } : {}),
      storedLeaves,
      leafHashes,
      expectedEvents: total,
      bump,
    });
    pass = p;
    progress.start('verifying events', total);
    await feedCheckedChunks({
      store: o.store,
      decodeKey: o.decodeKey,
      kernels,
      total,
      chunkSize,
      maxInFlight: Math.max(4, workers * 4),
      pool,
      spec,
      checker,
      local,
      take: async (c) => {
        await p.consume(c);
        progress.tick(p.acc.size, total);
      },
    });
    await storageVerdict();
    progress.end(`${p.acc.size} events`);

    // merkle: the stored nodes above the leaves (the leaves were compared in the pass)
    if (o.merkleNodes && storedLeaves <= p.acc.size) checkStoredInteriorNodes(o.merkleNodes, storedLeaves, kernels, leafHashes);

    // checkpoints (and the merkle step's last rule: the log is not shorter than any validly signed checkpoint)
    verifyCheckpoints(o, p.registry, p.rootsAt, p.acc, bump, witness);
    // merkle_nodes indexing more leaves than there are events: events were removed (reported after the checkpoints,
    // whose VERIFY_TRUNCATED says it better when a signed checkpoint covered them)
    if (storedLeaves > p.acc.size)
      throw merkleFailure(`it holds ${storedLeaves} leaves, but the log has ${p.acc.size} events: events were removed`, p.acc.size);

    // claims
    const claims = p.claims;
    if (claims) {
      p.claimProblem ??= claims.end();
      if (p.claimProblem) throw claimFailure(p.claimProblem);
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
