/**
 * `assay verify FILE --trusted-key KEY`: checks a result bundle with nothing but the file and the public key(s) the
 * auditor trusts: no ledger, no ASSAY_HOME, no Docker, no network. Named steps, in order (docs/bundle-format.md,
 * "Verifying"); the first failure stops the walk and is the verdict, naming the step and the first bad item:
 *
 *   format      the archive holds exactly the four entries in order, within bounds; manifest and lines parse
 *   trust       position 0 registers a controller key that is one of the trusted keys
 *   signatures  every envelope parses, its data fits the catalogue, its signer held a role allowed for its type at
 *               its position (not revoked before it), and the Ed25519 signature verifies
 *   chains      every carried stream is dense from revision 0 and each `prev` is the SHA-256 of the event before
 *   checkpoint  the checkpoint note is signed by a controller key of the bundle, its origin and size are the manifest's
 *   proofs      every event's inclusion proof leads from its leaf hash to the checkpoint's root
 *   claims      the run's events obey the run's rules (the ledger verifier's claims step) and end in RunCompleted
 *   snapshots   the carried snapshots are the ones the events name for the manifest's mode; every block of the CAR
 *               matches its CID (checked as it streamed past), every root's DAG is complete, nothing unreachable,
 *               and every size recorded in the manifests adds up
 *   statement   the DSSE envelope is signed by a controller or publisher key of the bundle; its Statement's content subject is
 *               the digest of the entries before it, and its predicate is exactly the claim the events support
 *
 * Two kinds of "no": `invalid` (a step failed: exit 5) and `cannot_check` (no trusted key given, the root key is not
 * one of them, an unsupported format version: exit 6). Neither is an error of the verifier.
 */
import {
  CLAIM_EVENT_TYPES,
  canonicalJson,
  ed25519NoteVerifier,
  envelopeHash,
  eventDataProblem,
  KeyRegistry,
  leafHash,
  nodeEd25519,
  NodeHashMemo,
  openCheckpoint,
  parseEnvelope,
  parseVerifierKey,
  SignatureChecks,
  checkWitnessPolicy,
  type WitnessPolicy,
  type WitnessPolicyResult,
  verifyInclusion,
  type ClaimRules,
  type Envelope,
  type JsonObject,
} from '@assay/ledger';
import { TAR_BLOCK, TAR_END, tarHeader, tarPadding } from '@assay/containers';
import type { RunEventRecord } from '@assay/run';
import { CarCheck, carMalformed, carTruncated, MAX_CAR_HEADER_BYTES, MAX_CAR_SECTION_BYTES, parseCid, verifySnapshot } from '@assay/snapshots';
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import {
  BUNDLE_FORMAT,
  CONTENT_SUBJECT,
  contentDigest,
  contentLine,
  DSSE_PAYLOAD_TYPE,
  contentLineOf,
  ENTRY,
  entryOrder,
  snapshotRootsFor,
  SNAPSHOT_MODES,
  LIMITS,
  LOG_MODES,
  pae,
  PREDICATE_TYPE,
  BUNDLE_FORMAT_V1,
  TASK_MODES,
  WITHHELD_TASK_ENTRIES,
  type TaskMode,
  REJUDGE_BUNDLE_FORMAT,
  REJUDGE_PREDICATE_TYPE,
  REJUDGED_BUNDLE_SUBJECT,
  STATEMENT_TYPE,
  type BundleManifest,
  type LogMode,
  type SnapshotMode,
  supportedClaim,
  baselineJudgesOf,
  type StartedData,
} from '../domain/bundle-format';
import { REDACTION_RULES } from '../domain/log-redaction';
import { REJUDGE_EVENT, REJUDGE_STREAM_PREFIX, rejudgeReportProblem } from '../domain/rejudge-report';

export const BUNDLE_STEPS = ['format', 'trust', 'signatures', 'chains', 'checkpoint', 'proofs', 'claims', 'snapshots', 'task', 'logs', 'statement'] as const;
export type BundleStep = (typeof BUNDLE_STEPS)[number];

/** What a bundle carries: a run's result claim (`assay-bundle/v1`) or a re-judge report (`assay-rejudge-bundle/v1`). */
export type BundleKind = 'run' | 'rejudge';

export interface BundleVerdict {
  readonly verdict: 'valid' | 'invalid' | 'cannot_check';
  /** Which kind the manifest declared (null when the manifest could not be read). */
  readonly kind: BundleKind | null;
  readonly steps: ReadonlyArray<{ readonly name: BundleStep; readonly status: 'ok' | 'failed' | 'skipped'; readonly checked: number }>;
  readonly failure: { readonly step: BundleStep; readonly code: string; readonly message: string; readonly position: number | null } | null;
  /** With a witness policy: which of its witnesses cosigned the checkpoint (checked at the checkpoint step). */
  readonly witnesses: WitnessPolicyResult | null;
  /** What the bundle claims (a run's ResultClaim, or a report's RejudgeCompleted data), once the statement verified; null otherwise. */
  readonly claim: JsonObject | null;
  /** The run the claim is about (for a report: the re-judged run, once known). */
  readonly run: string | null;
  /** A report bundle's re-judging id; null for a run's bundle. */
  readonly rejudge: string | null;
  /**
   * A valid run bundle's run times, from its signed events: the envelope time of RunStarted and of the run stream's
   * RunCompleted. Null otherwise (a report's bundle, or a bundle that did not verify).
   */
  readonly times: { readonly startedAt: string; readonly completedAt: string } | null;
  readonly events: number;
}

export interface VerifyBundleOptions {
  /** Verifier key texts (`name+hex+base64`) the auditor trusts as the ledger's root (controller) key. */
  readonly trustedKeys: readonly string[];
  /** The run's claim rules (`runClaimRules()` from @assay/run). */
  readonly claims: ClaimRules;
  readonly progress?: (done: number, total: number) => void;
  /**
   * Worker threads for the Ed25519 arithmetic of the signatures step (0: all on this thread). Default: one per core
   * but one (at least 1, at most 4; this thread meanwhile reads the file and checks the CAR, chains and proofs) for bundles of PARALLEL_SIGNATURES_FROM events or more, else 0.
   */
  readonly signatureWorkers?: number;
  /**
   * The witnesses the auditor trusts and how many must have cosigned the bundle's checkpoint (`--witness-policy`):
   * without the quorum the checkpoint step fails (BUNDLE_WITNESS_QUORUM). Without a policy, cosignature lines are
   * ignored.
   */
  readonly witnessPolicy?: WitnessPolicy;
}

/** "is cosigned by 1 of the 2 ... needed" with who did, who did not and whose line did not verify or did not count. */
export function witnessSummary(w: WitnessPolicyResult): string {
  const parts = [`is cosigned by ${w.cosigned.length} of the policy's witnesses, ${w.quorum} needed`];
  if (w.cosigned.length > 0) parts.push(`cosigned: ${w.cosigned.map((c) => c.signer).join(', ')}`);
  if (w.missing.length > 0) parts.push(`no cosignature: ${w.missing.join(', ')}`);
  if (w.invalid.length > 0) parts.push(`not verifying: ${w.invalid.map((c) => c.signer).join(', ')}`);
  if (w.outside.length > 0) parts.push(`outside the policy (not counted): ${w.outside.join(', ')}`);
  return parts.join('; ');
}

/** Below this many events the workers' start-up costs more than they save. */
export const PARALLEL_SIGNATURES_FROM = 2048;

function defaultSignatureWorkers(events: number): number {
  if (events < PARALLEL_SIGNATURES_FROM) return 0;
  // this thread has as much to do meanwhile (reading, the CAR, chains, proofs) as one worker: one core stays with it
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

class StepFailure extends Error {
  constructor(
    readonly step: BundleStep,
    readonly code: string,
    message: string,
    readonly position: number | null = null,
    readonly cannotCheck = false,
  ) {
    super(message);
  }
}

/**
 * The manifest as the steps use it, either kind: a report bundle (REJUDGE_BUNDLE_FORMAT) carries no snapshots and
 * no logs, and its subject is the re-judging's id; a run's bundle's subject is the run.
 */
interface ReadManifest extends Omit<BundleManifest, 'format' | 'run' | 'task'> {
  readonly kind: BundleKind;
  /** The run bundle's format version (1 or 2; a report bundle: 1). */
  readonly version: 1 | 2;
  /** Version 2: which task files task.car carries (version 1 and reports: none). */
  readonly task: TaskMode;
  /** The run id, or the re-judging id. */
  readonly subject: string;
}

/** Steps that do not apply to a report bundle (it carries neither snapshots nor logs): reported `skipped`. */
const NOT_FOR_REPORTS: ReadonlySet<BundleStep> = new Set(['snapshots', 'task', 'logs']);

interface BundleEvent {
  readonly position: number;
  readonly wire: Buffer;
  readonly env: Envelope;
  readonly signing: Buffer;
  readonly signature: Buffer;
  readonly proof: Buffer[];
}

/** RunStarted's and the run stream's RunCompleted's envelope times (the claim is only recomputed when both exist). */
function runTimes(run: string, runEvents: readonly RunEventRecord[]): BundleVerdict['times'] {
  const started = runEvents.find((e) => e.type === 'RunStarted');
  const completed = runEvents.find((e) => e.stream === `run-${run}` && e.type === 'RunCompleted');
  return started && completed ? { startedAt: started.time, completedAt: completed.time } : null;
}

export async function verifyBundle(source: AsyncIterable<Uint8Array>, o: VerifyBundleOptions): Promise<BundleVerdict> {
  const checked = new Map<BundleStep, number>();
  let step: BundleStep = 'format';
  const enter = (s: BundleStep) => {
    step = s;
    checked.set(s, 0);
  };
  const count = (n = 1) => checked.set(step, (checked.get(step) ?? 0) + n);
  let run: string | null = null;
  let kind: BundleKind | null = null;
  let rejudgeId: string | null = null;
  let events: BundleEvent[] = [];
  let claim: JsonObject | null = null;
  let times: BundleVerdict['times'] = null;
  let checks: SignatureChecks | null = null;
  let witnesses: WitnessPolicyResult | null = null;
  try {
    enter('format');
    // The signatures step in two halves. The ordered pass (schemas, roles, revocations: which key may sign what,
    // where) runs here as each event is read, before the snapshots entry streams past, once position 0 shows a
    // trusted root; the Ed25519 arithmetic goes to workers in batches meanwhile, and they keep working while the CAR
    // is checked and chains, checkpoint and proofs are checked here.
    // Outcomes are reported in step order whichever thread finished first: a format or trust failure before any
    // signature's, the first bad item of the signatures step (ordered pass or arithmetic, whichever comes first in
    // the file) before a chain's.
    const trusted = o.trustedKeys.map((k) => parseVerifierKey(k.trim()).text);
    const registry = new KeyRegistry((text) => {
      const k = parseVerifierKey(text);
      return { keyId: k.signer, publicKey: k.publicKey };
    });
    let rootKey: string | null = null;
    let ordered: StepFailure | null = null;
    const orderedPass = (e: BundleEvent, i: number): void => {
      if (i === 0) {
        const key = e.env.data.publicKey;
        if (e.position !== 0 || e.env.type !== 'KeyRegistered' || typeof key !== 'string' || !trusted.includes(key)) return; // the trust step reports it
        rootKey = key;
      }
      if (rootKey === null || ordered !== null) return;
      const dp = eventDataProblem(e.env.type, e.env.data);
      const auth = dp ? null : registry.authorize(e.env);
      const key = e.position === 0 ? parseVerifierKey(rootKey).publicKey : registry.get(e.env.signer)?.publicKey;
      if (dp) ordered = new StepFailure('signatures', dp.code.replace(/^LEDGER_/, 'VERIFY_'), `position ${e.position}: ${dp.message}`, e.position);
      else if (auth) ordered = new StepFailure('signatures', auth.code, `position ${e.position}: ${auth.message}`, e.position);
      else if (!key) ordered = badSignature(e);
      if (ordered) return;
      (checks as SignatureChecks).add({ key: key as Uint8Array, message: e.signing, signature: e.signature });
      registry.apply(e.env);
    };
    // the events entry is parsed as soon as it has been read, so the workers check signatures while the CAR streams
    const read = await readEntries(source, (name, content, manifest) => {
      if (name !== ENTRY.events) return;
      checks = new SignatureChecks({
        workers: o.signatureWorkers ?? defaultSignatureWorkers(manifest.events),
        progress: (done) => o.progress?.(done, manifest.events),
      });
      events = parseEvents(content, manifest, orderedPass);
    });
    const { parts, manifest } = read;
    kind = manifest.kind;
    if (kind === 'run') run = manifest.subject;
    else rejudgeId = manifest.subject;
    count(events.length);

    enter('trust');
    if (o.trustedKeys.length === 0)
      throw new StepFailure('trust', 'BUNDLE_NO_TRUSTED_KEY', 'no trusted key given (--trusted-key KEY or --trusted-keys FILE)', null, true);
    const genesis = events[0];
    if (!genesis || genesis.position !== 0)
      throw new StepFailure(
        'trust',
        'BUNDLE_NO_GENESIS',
        'the bundle does not carry position 0, the ledger registering its root key',
        genesis?.position ?? null,
      );
    if (genesis.env.type !== 'KeyRegistered' || typeof genesis.env.data.publicKey !== 'string')
      throw new StepFailure('trust', 'BUNDLE_NO_GENESIS', 'position 0 is not a KeyRegistered of the root key', 0);
    if (rootKey === null)
      throw new StepFailure('trust', 'BUNDLE_UNTRUSTED_ROOT', `the ledger's root key ${String(genesis.env.data.keyId)} is none of the trusted keys`, 0, true);
    count();

    enter('signatures');
    const pendingSignatures = checks as SignatureChecks | null;
    if (!pendingSignatures) throw new Error('internal: the events entry was read without starting its signature checks');
    const signatures = pendingSignatures.firstBad().then((bad) => {
      if (bad >= 0) throw badSignature(events[bad] as BundleEvent);
      if (ordered) throw ordered;
      checked.set('signatures', events.length);
    });
    // an outcome is always observed, even when a later step fails first
    signatures.catch(() => undefined);
    const signaturesFirst = async (err: unknown): Promise<never> => {
      await signatures;
      throw err;
    };
    /** chains, checkpoint, proofs and claims: they need the events and the key registry, not the signatures' outcome */
    const checkWhileSigning = (): { runEvents: RunEventRecord[]; recomputed: JsonObject } => {
      enter('chains');
      const heads = new Map<string, { revision: number; hash: Buffer }>();
      for (const e of events) {
        const head = heads.get(e.env.stream);
        const want = head ? head.revision + 1 : 0;
        if (e.env.revision !== want)
          throw new StepFailure(
            'chains',
            'VERIFY_CHAIN_BROKEN',
            `${e.env.stream} revision ${e.env.revision} where ${want} was expected (position ${e.position})`,
            e.position,
          );
        const wantPrev = head ? head.hash.toString('hex') : '0'.repeat(64);
        if (e.env.prev !== wantPrev)
          throw new StepFailure(
            'chains',
            'VERIFY_CHAIN_BROKEN',
            `prev of ${e.env.stream}@${e.env.revision} is not the hash of the event before it`,
            e.position,
          );
        heads.set(e.env.stream, { revision: e.env.revision, hash: envelopeHash(e.wire) });
        count();
      }
      const carried = [...heads.keys()].sort();
      if (canonicalJson(carried) !== canonicalJson([...manifest.streams]))
        throw new StepFailure(
          'chains',
          'BUNDLE_STREAMS_MISMATCH',
          `the manifest lists streams ${manifest.streams.join(', ')}, the events carry ${carried.join(', ')}`,
        );

      enter('checkpoint');
      const controllers = registry.all().filter((k) => k.role === 'controller' && (k.revokedAt === null || k.revokedAt >= manifest.treeSize));
      const verifiers = controllers.map((k) => ed25519NoteVerifier(k.keyId.slice(0, k.keyId.lastIndexOf('+')), k.publicKey));
      let cp: { origin: string; treeSize: number; rootHash: Uint8Array };
      try {
        cp = openCheckpoint(parts.get(ENTRY.checkpoint) as Buffer, verifiers).checkpoint;
      } catch (err) {
        throw new StepFailure('checkpoint', 'BUNDLE_CHECKPOINT_INVALID', `the checkpoint: ${(err as Error).message}`);
      }
      if (cp.origin !== manifest.origin)
        throw new StepFailure('checkpoint', 'BUNDLE_CHECKPOINT_INVALID', `the checkpoint's origin "${cp.origin}" is not the manifest's "${manifest.origin}"`);
      if (cp.treeSize !== manifest.treeSize)
        throw new StepFailure(
          'checkpoint',
          'BUNDLE_CHECKPOINT_INVALID',
          `the checkpoint signs a tree of ${cp.treeSize} events, the manifest says ${manifest.treeSize}`,
        );
      if (o.witnessPolicy) {
        let w: WitnessPolicyResult;
        try {
          w = checkWitnessPolicy((parts.get(ENTRY.checkpoint) as Buffer).toString('utf8'), o.witnessPolicy);
        } catch (err) {
          throw new StepFailure('checkpoint', 'BUNDLE_CHECKPOINT_INVALID', `the checkpoint: ${(err as Error).message}`);
        }
        witnesses = w;
        if (!w.met) throw new StepFailure('checkpoint', 'BUNDLE_WITNESS_QUORUM', `the checkpoint ${witnessSummary(w)}`);
      }
      count();

      enter('proofs');
      const memo = new NodeHashMemo();
      for (const e of events) {
        if (e.position >= cp.treeSize || !verifyInclusion(e.position, cp.treeSize, leafHash(e.wire), e.proof, cp.rootHash, memo))
          throw new StepFailure(
            'proofs',
            'VERIFY_PROOF_INVALID',
            `the inclusion proof of position ${e.position} does not lead to the checkpoint's root (tree size ${cp.treeSize})`,
            e.position,
          );
        count();
      }

      enter('claims');
      const checker = o.claims.start();
      const runEvents: RunEventRecord[] = [];
      for (const e of events) {
        if (!CLAIM_EVENT_TYPES.includes(e.env.type)) continue;
        const problem = checker.event({
          position: e.position,
          stream: e.env.stream,
          revision: e.env.revision,
          type: e.env.type,
          signer: e.env.signer,
          data: e.env.data,
        });
        if (problem) throw new StepFailure('claims', problem.code, `${problem.stream}: ${problem.rule}: ${problem.message}`, problem.position);
        if (manifest.kind === 'run' && (e.env.stream === `run-${manifest.subject}` || e.env.stream.startsWith('judge-')))
          runEvents.push({
            position: e.position,
            stream: e.env.stream,
            revision: e.env.revision,
            id: e.env.id,
            type: e.env.type,
            time: e.env.time,
            data: e.env.data,
          });
        count();
      }
      const end = checker.end();
      if (end) throw new StepFailure('claims', end.code, `${end.stream}: ${end.rule}: ${end.message}`, end.position);
      if (manifest.kind === 'rejudge') {
        const report = checkReport(events, manifest.subject);
        run = typeof report.run === 'string' ? report.run : null;
        count();
        return { runEvents, recomputed: report };
      }
      const completed = runEvents.find((e) => e.stream === `run-${manifest.subject}` && e.type === 'RunCompleted');
      if (!completed) throw new StepFailure('claims', 'BUNDLE_RUN_INCOMPLETE', `the bundle does not carry run-${manifest.subject} up to its RunCompleted`);
      const started = runEvents.find((e) => e.type === 'RunStarted')?.data as unknown as StartedData;
      const all = events.map(recordOfEvent);
      if (manifest.version === 2) {
        checkDependencyStreams(all, manifest.subject, started.task);
        const fpImage = started.protocol?.fingerprintInput?.judgeImageDigest;
        const other = runEvents.find(
          (e) => e.type === 'JudgeLaunched' && e.data.run === manifest.subject && typeof fpImage === 'string' && e.data.image !== fpImage,
        );
        if (other)
          throw new StepFailure(
            'claims',
            'BUNDLE_JUDGE_IMAGE_MISMATCH',
            `${other.stream}: its Judge ran image ${String(other.data.image)}, but the run's protocol fingerprint binds ${String(fpImage)}`,
            other.position,
          );
      }
      const recomputed = supportedClaim(manifest.subject, runEvents, all, manifest.version === 2) as unknown as JsonObject;
      return { runEvents, recomputed };
    };
    let claimed: { runEvents: RunEventRecord[]; recomputed: JsonObject };
    try {
      claimed = checkWhileSigning();
    } catch (err) {
      return await signaturesFirst(err);
    }
    await signatures;
    const { runEvents, recomputed } = claimed;

    if (manifest.kind === 'rejudge') {
      enter('statement');
      const st = openStatement(parts.get(ENTRY.statement) as Buffer, registry, manifest.treeSize, REJUDGE_PREDICATE_TYPE);
      checkReportStatement(st, contentDigest(read.contentLines), recomputed);
      claim = st.predicate as JsonObject;
      count();
      o.progress?.(events.length, events.length);
      return verdict('valid', null);
    }

    enter('snapshots');
    const wantRoots = snapshotRootsFor(
      manifest.snapshots,
      runEvents.filter((e) => e.stream === `run-${manifest.subject}`),
    );
    if (canonicalJson(wantRoots) !== canonicalJson([...manifest.snapshotRoots]))
      throw new StepFailure(
        'snapshots',
        'BUNDLE_SNAPSHOTS_MISMATCH',
        `snapshots "${manifest.snapshots}" of this run are ${JSON.stringify(wantRoots)}, the manifest lists ${JSON.stringify(manifest.snapshotRoots)}`,
      );
    if (read.car) {
      if (read.car.problem) throw new StepFailure('snapshots', read.car.problem.code, read.car.problem.message);
      const carRoots = read.car.check.roots.map((r) => r.toString());
      if (canonicalJson(carRoots) !== canonicalJson(wantRoots))
        throw new StepFailure(
          'snapshots',
          'BUNDLE_SNAPSHOTS_MISMATCH',
          `the CAR's roots ${JSON.stringify(carRoots)} are not the manifest's ${JSON.stringify(wantRoots)}`,
        );
      const getter = nodeGetter(read.car.check);
      for (const r of read.car.check.roots) {
        try {
          await verifySnapshot(getter as never, r, { knownRaw: read.car.check.rawSizes });
        } catch (err) {
          throw new StepFailure(
            'snapshots',
            (err as { code?: string }).code ?? 'BUNDLE_SNAPSHOTS_INVALID',
            `snapshot ${r.toString()}: ${(err as Error).message}`,
          );
        }
        count();
      }
    }

    enter('task');
    if (manifest.task === 'public') count(await checkTaskFiles(read.taskCar as StreamedCar, recomputed.taskDigest as string));

    enter('logs');
    if (manifest.logs !== 'none') count(checkLogs(parts.get(ENTRY.logs) as Buffer, manifest, events));

    enter('statement');
    const statement = openStatement(parts.get(ENTRY.statement) as Buffer, registry, manifest.treeSize, PREDICATE_TYPE);
    const content = contentDigest(read.contentLines);
    checkStatement(statement, content, recomputed);
    claim = statement.predicate as JsonObject;
    times = runTimes(manifest.subject, runEvents);
    count();
    o.progress?.(events.length, events.length);
    return verdict('valid', null);
  } catch (err) {
    if (err instanceof StepFailure) return verdict(err.cannotCheck ? 'cannot_check' : 'invalid', err);
    throw err;
  } finally {
    await (checks as SignatureChecks | null)?.close();
  }

  function verdict(v: BundleVerdict['verdict'], f: StepFailure | null): BundleVerdict {
    const failedAt = f ? BUNDLE_STEPS.indexOf(f.step) : BUNDLE_STEPS.length;
    const applies = (name: BundleStep) => kind !== 'rejudge' || !NOT_FOR_REPORTS.has(name);
    return {
      verdict: v,
      kind,
      steps: BUNDLE_STEPS.map((name, i) => ({
        name,
        status: i < failedAt && applies(name) ? 'ok' : i === failedAt ? 'failed' : 'skipped',
        checked: i <= failedAt ? (checked.get(name) ?? 0) : 0,
      })),
      failure: f ? { step: f.step, code: f.code, message: f.message, position: f.position } : null,
      witnesses,
      claim,
      run,
      rejudge: rejudgeId,
      times: v === 'valid' ? times : null,
      events: events.length,
    };
  }
}

const fmt = (code: string, message: string) => new StepFailure('format', code, message);

function recordOfEvent(e: BundleEvent): RunEventRecord {
  return { position: e.position, stream: e.env.stream, revision: e.env.revision, id: e.env.id, type: e.env.type, time: e.env.time, data: e.env.data };
}

/** The manifest nodes a CarCheck kept, as the block getter verifySnapshot reads (raw chunks were checked as they passed). */
function nodeGetter(check: CarCheck): { get(cid: { toString(): string }): Promise<Uint8Array> } {
  return {
    get: async (cid) => {
      const b = check.nodes.get(cid.toString());
      if (!b) throw new Error(`block ${cid.toString()} is not a manifest node of the CAR`);
      return b;
    },
  };
}

/**
 * Version 2's stream rule: every carried stream is a key stream, the run's own (`run-`, `transcript-`,
 * `redaction-<run>`), a Judge stream whose JudgeLaunched names the run, the task's `task-<task>` or
 * `baseline-<task>`, a Judge stream a carried baseline of the task cites, or an `image-` stream holding an
 * ImageBuilt of an image the run used.
 */
function checkDependencyStreams(all: readonly RunEventRecord[], run: string, task: string): void {
  const images = new Set(
    all
      .filter((e) => (e.type === 'JudgeLaunched' && e.data.run === run) || (e.type === 'WorkStarted' && e.stream === `run-${run}`))
      .map((e) => String(e.data.image)),
  );
  const ok = new Set<string>([`run-${run}`, `transcript-${run}`, `redaction-${run}`, `task-${task}`, `baseline-${task}`]);
  for (const e of all) {
    if (e.stream.startsWith('judge-') && e.revision === 0 && e.type === 'JudgeLaunched' && e.data.run === run) ok.add(e.stream);
    if (e.stream === `baseline-${task}`) for (const j of baselineJudgesOf(e)) ok.add(`judge-${j}`);
    if (e.stream.startsWith('image-') && e.type === 'ImageBuilt' && images.has(String(e.data.digest))) ok.add(e.stream);
  }
  const bad = all.find((e) => !e.stream.startsWith('key-') && !ok.has(e.stream));
  if (bad)
    throw new StepFailure(
      'claims',
      'BUNDLE_STREAMS_MISMATCH',
      `${bad.stream} (position ${bad.position}) is none of the streams a bundle of run ${run} carries (docs/bundle-format.md, "Version 2")`,
      bad.position,
    );
}

/**
 * The task step (version 2, task "public"): task.car's one root is the run's task digest, every block matched its CID
 * as it streamed past, every block the root reaches is present except beneath the withheld `tests/` and `solution/`,
 * nothing else is there, and every recorded size adds up (the withheld entries' sizes as the root records them).
 * Returns the number of files checked.
 */
async function checkTaskFiles(t: StreamedCar, taskDigest: string): Promise<number> {
  if (t.problem) throw new StepFailure('task', t.problem.code, t.problem.message);
  const roots = t.check.roots.map((r) => r.toString());
  if (roots.length !== 1 || roots[0] !== taskDigest)
    throw new StepFailure('task', 'BUNDLE_TASK_MISMATCH', `${ENTRY.task}'s roots are ${JSON.stringify(roots)}; the run's task digest is ${taskDigest}`);
  try {
    const r = await verifySnapshot(nodeGetter(t.check) as never, t.check.roots[0] as NonNullable<(typeof t.check.roots)[0]>, {
      knownRaw: t.check.rawSizes,
      withholdRootEntries: WITHHELD_TASK_ENTRIES,
    });
    return r.files;
  } catch (err) {
    throw new StepFailure('task', (err as { code?: string }).code ?? 'BUNDLE_TASK_INVALID', `${ENTRY.task}: ${(err as Error).message}`);
  }
}

const badSignature = (e: BundleEvent) =>
  new StepFailure('signatures', 'VERIFY_BAD_SIGNATURE', `the signature of position ${e.position} does not verify with ${e.env.signer}`, e.position);

/** A CAR entry checked as it streamed past; a problem in it is kept for its step. */
interface StreamedCar {
  readonly check: CarCheck;
  readonly problem: { code: string; message: string } | null;
}

/** What reading the archive found: the entries held in memory, the manifest, and the streamed snapshots' check. */
interface BundleParts {
  readonly parts: Map<string, Buffer>;
  readonly manifest: ReadManifest;
  /** One content line per entry before the statement (the content digest's input). */
  readonly contentLines: string[];
  readonly car: StreamedCar | null;
  /** Version 2 with task "public": task.car, checked as it streamed past (its hidden entries withheld). */
  readonly taskCar: StreamedCar | null;
}

const HELD: Record<string, number> = {
  [ENTRY.manifest]: LIMITS.manifestBytes,
  [ENTRY.checkpoint]: LIMITS.checkpointBytes,
  [ENTRY.events]: LIMITS.eventsBytes,
  [ENTRY.logs]: LIMITS.logsBytes,
  [ENTRY.statement]: LIMITS.statementBytes,
};

/**
 * Reads the entries strictly: each header must be byte for byte the header the writer makes for that name and size
 * (so no header byte can change unnoticed), padding and the end (two zero blocks) must be zeros, and nothing may
 * follow. Streams the source: the small entries are held (within their bounds); the snapshots CAR is checked block
 * by block as it passes and never held (a problem in it is kept for the snapshots step).
 */
/** `entry` sees each held entry as soon as it has been read (after the manifest, which it gets with it). */
async function readEntries(
  source: AsyncIterable<Uint8Array>,
  entry: (name: string, content: Buffer, manifest: ReadManifest) => void = () => {},
): Promise<BundleParts> {
  const input = new ByteReader(source, LIMITS.archiveBytes + LIMITS.snapshotsBytes);
  const parts = new Map<string, Buffer>();
  const contentLines: string[] = [];
  let manifest: ReadManifest | null = null;
  let order: readonly string[] = entryOrder(false);
  let car: BundleParts['car'] = null;
  let taskCar: BundleParts['taskCar'] = null;
  for (let i = 0; i < order.length; i++) {
    const name = order[i] as string;
    const size = await readHeader(input, name, i);
    if (name === ENTRY.snapshots) {
      car = await streamCar(input, size, contentLines, name);
    } else if (name === ENTRY.task) {
      taskCar = await streamCar(input, size, contentLines, name, WITHHELD_TASK_ENTRIES);
    } else {
      const content = await input.take(size);
      if (!content) throw fmt('BUNDLE_TRUNCATED', `the archive ends inside ${name}`);
      parts.set(name, content);
      if (name !== ENTRY.statement) contentLines.push(contentLine(name, content));
      if (manifest) entry(name, content, manifest);
    }
    const pad = await input.take(tarPadding(size).length);
    if (!pad) throw fmt('BUNDLE_TRUNCATED', `the archive ends inside the padding of ${name}`);
    if (pad.some((b) => b !== 0)) throw fmt('BUNDLE_HEADER_INVALID', `the padding after ${name} is not all zeros`);
    if (name === ENTRY.manifest) {
      manifest = parseManifest(parts.get(name) as Buffer);
      order = entryOrder(manifest.snapshotRoots.length > 0, manifest.logs !== 'none', manifest.task === 'public');
    }
  }
  const end = await input.take(TAR_END.length);
  if (!end) throw fmt('BUNDLE_TRUNCATED', 'the archive has no end marker (two zero blocks): truncated');
  if (end.some((b) => b !== 0)) throw fmt('BUNDLE_TRAILING_DATA', 'the end marker (two zero blocks) is not all zeros');
  if (!(await input.atEnd())) throw fmt('BUNDLE_TRAILING_DATA', `bytes follow the end of the archive (at byte ${input.offset})`);
  return { parts, manifest: manifest as ReadManifest, contentLines, car, taskCar };
}

/** Entry `i`'s header, which must be the canonical one for `name`: returns the content size. */
async function readHeader(input: ByteReader, name: string, i: number): Promise<number> {
  const at = input.offset;
  const header = await input.take(TAR_BLOCK);
  if (!header) throw fmt('BUNDLE_ENTRY_MISSING', `the archive ends after ${i} entries; ${name} is missing`);
  const m = /^([0-7]{11})\0$/.exec(header.subarray(124, 136).toString('latin1'));
  const size = m ? parseInt(m[1] as string, 8) : -1;
  const gotName = header.subarray(0, 100).toString('latin1').replace(/\0.*$/s, '');
  if (gotName !== name) throw fmt('BUNDLE_ENTRY_UNEXPECTED', `entry ${i + 1} is "${gotName}", expected "${name}" (at byte ${at})`);
  if (size < 0) throw fmt('BUNDLE_HEADER_INVALID', `the header of ${name} has no valid size field (at byte ${at})`);
  const limit = name === ENTRY.snapshots ? LIMITS.snapshotsBytes : name === ENTRY.task ? LIMITS.taskBytes : (HELD[name] as number);
  if (size > limit) throw fmt('BUNDLE_ENTRY_TOO_LARGE', `${name} is ${size} bytes, more than its limit of ${limit}`);
  if (!tarHeader({ path: name, type: 'file', mode: 0o644, size }).equals(header))
    throw fmt('BUNDLE_HEADER_INVALID', `the header of ${name} is not the canonical one (ustar, mode 0644, mtime 0, uid/gid 0; at byte ${at})`);
  return size;
}

/**
 * The snapshots entry, `size` bytes of CAR v1, streamed: hashed for the content digest and checked section by
 * section (CarCheck). A CAR problem is kept, not thrown, and the rest of the entry skipped: the archive's structure
 * is still checked to its end, and the snapshots step reports the problem.
 */
async function streamCar(
  input: ByteReader,
  size: number,
  contentLines: string[],
  name: string,
  withholdRootEntries: readonly string[] = [],
): Promise<StreamedCar> {
  const hash = createHash('sha256');
  const check = new CarCheck({ keepNodes: true });
  const start = input.offset;
  let left = size;
  const take = async (n: number, what: string): Promise<Buffer> => {
    if (n > left) throw carTruncated(input.offset - start, `${what}: ${n} bytes announced, ${left} left in the entry`);
    const b = await input.take(n);
    if (!b) throw fmt('BUNDLE_TRUNCATED', `the archive ends inside ${name}`);
    hash.update(b);
    left -= n;
    return b;
  };
  const varint = async (what: string, max: number): Promise<number> => {
    const at = input.offset - start;
    let value = 0;
    for (let i = 0, shift = 0; ; i++, shift += 7) {
      const b = (await take(1, `the ${what} length`))[0] as number;
      if (i > 0 && b === 0) throw carMalformed(at, `the ${what} length is not minimally encoded`);
      value += (b & 0x7f) * 2 ** shift;
      if (value > max) throw carMalformed(at, `the ${what} length ${value}+ exceeds ${max}`);
      if ((b & 0x80) === 0) return value;
      if (shift >= 49) throw carMalformed(at, `the ${what} length varint is too long`);
    }
  };
  let problem: { code: string; message: string } | null = null;
  try {
    const hlen = await varint('header', MAX_CAR_HEADER_BYTES);
    check.header(await take(hlen, 'the header'));
    while (left > 0) {
      const at = input.offset - start;
      const len = await varint('section', MAX_CAR_SECTION_BYTES);
      if (len === 0) throw carMalformed(at, 'an empty section');
      check.block(await take(len, `block #${check.blocks}`), at);
    }
    check.finish({ withholdRootEntries });
  } catch (err) {
    if (err instanceof StepFailure) throw err;
    const e = err as { code?: string; message: string };
    problem = { code: e.code ?? (name === ENTRY.task ? 'BUNDLE_TASK_INVALID' : 'BUNDLE_SNAPSHOTS_INVALID'), message: `${name}: ${e.message}` };
    while (left > 0) await take(Math.min(left, 1 << 20), 'the rest of the entry');
  }
  contentLines.push(contentLineOf(name, size, hash.digest('hex')));
  return { check, problem };
}

/** Exact reads from a byte stream, never holding more than one pending chunk beyond what was asked. */
class ByteReader {
  private readonly it: AsyncIterator<Uint8Array>;
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  offset = 0;
  constructor(
    source: AsyncIterable<Uint8Array>,
    private readonly max: number,
  ) {
    this.it = source[Symbol.asyncIterator]();
  }

  private async fill(n: number): Promise<boolean> {
    const chunks = [this.buf];
    let have = this.buf.length;
    while (have < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else {
        chunks.push(Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength));
        have += r.value.byteLength;
        if (this.offset + have > this.max) throw fmt('BUNDLE_ENTRY_TOO_LARGE', `the archive is larger than ${this.max} bytes`);
      }
    }
    if (chunks.length > 1) this.buf = Buffer.concat(chunks);
    return have >= n;
  }

  /** Exactly n bytes, or null when the stream ends first. */
  async take(n: number): Promise<Buffer | null> {
    if (!(await this.fill(n))) return null;
    const out = Buffer.from(this.buf.subarray(0, n));
    this.buf = this.buf.subarray(n);
    this.offset += n;
    return out;
  }

  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }
}

function parseCanonical(bytes: Buffer, what: string): JsonObject {
  let v: unknown;
  try {
    v = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw fmt('BUNDLE_JSON_INVALID', `${what}: not JSON (${(err as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw fmt('BUNDLE_JSON_INVALID', `${what}: expected a JSON object`);
  if (canonicalJson(v as JsonObject) !== bytes.toString('utf8')) throw fmt('BUNDLE_JSON_INVALID', `${what}: not canonical JSON (RFC 8785)`);
  return v as JsonObject;
}

function parseManifest(bytes: Buffer): ReadManifest {
  const m = parseCanonical(bytes, ENTRY.manifest) as Record<string, unknown>;
  if (m.format !== BUNDLE_FORMAT && m.format !== BUNDLE_FORMAT_V1 && m.format !== REJUDGE_BUNDLE_FORMAT)
    throw new StepFailure(
      'format',
      'BUNDLE_UNSUPPORTED_VERSION',
      `${ENTRY.manifest}: format "${String(m.format)}" is not one this verifier reads (${BUNDLE_FORMAT}, ${BUNDLE_FORMAT_V1}, ${REJUDGE_BUNDLE_FORMAT})`,
      null,
      true,
    );
  const common =
    typeof m.origin === 'string' &&
    Number.isSafeInteger(m.events) &&
    Number.isSafeInteger(m.treeSize) &&
    Array.isArray(m.streams) &&
    m.streams.every((s) => typeof s === 'string');
  if (m.format === REJUDGE_BUNDLE_FORMAT) {
    if (!(common && typeof m.rejudge === 'string' && /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(m.rejudge) && Object.keys(m).length === 6))
      throw fmt(
        'BUNDLE_MANIFEST_INVALID',
        `${ENTRY.manifest}: expected exactly {format: "${REJUDGE_BUNDLE_FORMAT}", origin, rejudge, events, treeSize, streams}`,
      );
    return {
      kind: 'rejudge',
      version: 1,
      task: 'none',
      subject: m.rejudge,
      origin: m.origin as string,
      events: m.events as number,
      treeSize: m.treeSize as number,
      streams: m.streams as string[],
      snapshots: 'none',
      snapshotRoots: [],
      logs: 'none',
    };
  }
  const ok =
    common &&
    typeof m.run === 'string' &&
    (SNAPSHOT_MODES as readonly unknown[]).includes(m.snapshots) &&
    Array.isArray(m.snapshotRoots) &&
    m.snapshotRoots.length <= 1024 &&
    m.snapshotRoots.every((s) => typeof s === 'string' && /^[a-z0-9]{1,128}$/.test(s)) &&
    (LOG_MODES as readonly unknown[]).includes(m.logs) &&
    (m.format === BUNDLE_FORMAT_V1 ? Object.keys(m).length === 9 : Object.keys(m).length === 10 && (TASK_MODES as readonly unknown[]).includes(m.task));
  if (!ok)
    throw fmt(
      'BUNDLE_MANIFEST_INVALID',
      `${ENTRY.manifest}: expected exactly {format, origin, run, events, treeSize, streams, snapshots: "none"|"best"|"all", snapshotRoots: [CID, ...], logs: "none"|"redacted"|"full"${m.format === BUNDLE_FORMAT_V1 ? '' : ', task: "none"|"public"'}}`,
    );
  return {
    kind: 'run',
    version: m.format === BUNDLE_FORMAT_V1 ? 1 : 2,
    task: m.format === BUNDLE_FORMAT_V1 ? 'none' : (m.task as TaskMode),
    subject: m.run as string,
    origin: m.origin as string,
    events: m.events as number,
    treeSize: m.treeSize as number,
    streams: m.streams as string[],
    snapshots: m.snapshots as SnapshotMode,
    snapshotRoots: m.snapshotRoots as string[],
    logs: m.logs as LogMode,
  };
}

/**
 * A report bundle's claims: it carries only key streams and `rejudge-<id>`, which holds exactly one event, a
 * RejudgeCompleted whose event id is `<id>`, and whose data is a self-consistent report (rejudgeReportProblem).
 * Returns that data: the statement's predicate must be exactly it.
 */
function checkReport(events: readonly BundleEvent[], id: string): JsonObject {
  const bad = (code: string, message: string, position: number | null = null) => new StepFailure('claims', code, message, position);
  const stream = `${REJUDGE_STREAM_PREFIX}${id}`;
  const other = events.find((e) => !e.env.stream.startsWith('key-') && e.env.stream !== stream);
  if (other)
    throw bad(
      'BUNDLE_STREAMS_MISMATCH',
      `a report bundle carries key streams and ${stream} only; position ${other.position} is in ${other.env.stream}`,
      other.position,
    );
  const reports = events.filter((e) => e.env.stream === stream);
  const r = reports[0];
  if (!r) throw bad('BUNDLE_REPORT_INCONSISTENT', `the bundle does not carry ${stream}`);
  if (reports.length !== 1)
    throw bad('BUNDLE_REPORT_INCONSISTENT', `${stream} holds ${reports.length} events; a report is one RejudgeCompleted`, reports[1]?.position ?? null);
  if (r.env.type !== REJUDGE_EVENT || r.env.id !== id)
    throw bad('BUNDLE_REPORT_INCONSISTENT', `${stream}@0 is a ${r.env.type} with id ${r.env.id}; expected a ${REJUDGE_EVENT} with id ${id}`, r.position);
  const problem = rejudgeReportProblem(r.env.data);
  if (problem) throw bad('BUNDLE_REPORT_INCONSISTENT', `position ${r.position}: the report is not self-consistent: ${problem}`, r.position);
  return r.env.data as JsonObject;
}

/**
 * The logs step: logs.jsonl holds exactly one line per log the carried events record a digest for (each transcript
 * session's AgentTranscriptRecorded, each round's last JudgeCompleted.outputDigest), in that order; each line's digest
 * is its content's; `full`: the recorded digest; `redacted`: the `redacted` digest of a carried LogRedacted whose
 * `original` is the recorded digest. Returns the number of logs checked.
 */
function checkLogs(bytes: Buffer, m: ReadManifest, events: readonly BundleEvent[]): number {
  const bad = (code: string, message: string) => new StepFailure('logs', code, `${ENTRY.logs}: ${message}`);
  const recorded = new Map<string, string>();
  const transcripts: Array<[number, string]> = [];
  const judges = new Map<number, string>();
  const redactions = new Set<string>();
  for (const e of events) {
    const d = e.env.data as Record<string, unknown>;
    if (e.env.type === 'AgentTranscriptRecorded' && e.env.stream === `transcript-${m.subject}` && d.run === m.subject && typeof d.digest === 'string') {
      if (!transcripts.some(([s]) => s === d.session)) transcripts.push([d.session as number, d.digest]);
    } else if (e.env.type === 'JudgeCompleted' && e.env.stream.startsWith('judge-') && d.run === m.subject && typeof d.outputDigest === 'string')
      judges.set(d.round as number, d.outputDigest);
    else if (e.env.type === 'LogRedacted' && e.env.stream === `redaction-${m.subject}` && d.run === m.subject)
      redactions.add(`${String(d.log)} ${String(d.original)} ${String(d.redacted)} ${String(d.rules)}`);
  }
  for (const [s, digest] of transcripts.sort((a, b) => a[0] - b[0])) recorded.set(`transcript/session-${s}`, digest);
  for (const [r, digest] of [...judges].sort((a, b) => a[0] - b[0])) recorded.set(`judge/round-${r}`, digest);
  const text = bytes.toString('utf8');
  if (text.length > 0 && !text.endsWith('\n')) throw bad('BUNDLE_LOGS_INVALID', 'the last line has no newline (truncated?)');
  const lines = text.length === 0 ? [] : text.slice(0, -1).split('\n');
  const want = [...recorded.keys()];
  if (lines.length !== want.length)
    throw bad('BUNDLE_LOGS_INCOMPLETE', `${lines.length} logs carried; the events record ${want.length} (${want.join(', ') || 'none'})`);
  lines.forEach((line, i) => {
    const where = `line ${i + 1}`;
    let o: Record<string, unknown>;
    try {
      o = parseCanonical(Buffer.from(line, 'utf8'), `${ENTRY.logs} ${where}`) as Record<string, unknown>;
    } catch (err) {
      throw bad('BUNDLE_LOGS_INVALID', (err as Error).message);
    }
    if (typeof o.log !== 'string' || typeof o.digest !== 'string' || typeof o.content !== 'string' || Object.keys(o).length !== 3)
      throw bad('BUNDLE_LOGS_INVALID', `${where}: expected exactly {log, digest, content: base64}`);
    if (o.log !== want[i]) throw bad('BUNDLE_LOGS_INCOMPLETE', `${where} is ${JSON.stringify(o.log)}; expected ${want[i]} (the recorded logs, in order)`);
    const content = Buffer.from(o.content, 'base64');
    if (content.toString('base64') !== o.content) throw bad('BUNDLE_LOGS_INVALID', `${where}: content is not canonical standard base64`);
    const digest = `sha256:${createHash('sha256').update(content).digest('hex')}`;
    if (digest !== o.digest) throw bad('BUNDLE_LOG_DIGEST_MISMATCH', `${o.log}: the content's digest is ${digest}, the line says ${o.digest}`);
    const original = recorded.get(o.log) as string;
    if (m.logs === 'full' && digest !== original)
      throw bad('BUNDLE_LOG_DIGEST_MISMATCH', `${o.log}: the content is not the recorded log (${original}; carried ${digest})`);
    if (m.logs === 'redacted' && !redactions.has(`${o.log} ${original} ${digest} ${REDACTION_RULES}`))
      throw bad(
        'BUNDLE_LOG_NOT_REDACTION',
        `${o.log}: no carried LogRedacted links the recorded ${original} to the carried ${digest} under ${REDACTION_RULES}`,
      );
  });
  return lines.length;
}

/** The events entry, line by line; `each` sees every event as soon as it parsed (the signatures' ordered pass). */
function parseEvents(bytes: Buffer, m: ReadManifest, each: (e: BundleEvent, i: number) => void = () => {}): BundleEvent[] {
  const text = bytes.toString('utf8');
  if (text.length > 0 && !text.endsWith('\n')) throw fmt('BUNDLE_EVENTS_INVALID', `${ENTRY.events}: the last line has no newline (truncated?)`);
  const lines = text.length === 0 ? [] : text.slice(0, -1).split('\n');
  if (lines.length !== m.events) throw fmt('BUNDLE_EVENTS_INVALID', `${ENTRY.events} has ${lines.length} lines; the manifest says ${m.events} events`);
  if (lines.length > LIMITS.events) throw fmt('BUNDLE_EVENTS_INVALID', `${ENTRY.events}: more than ${LIMITS.events} events`);
  let last = -1;
  return lines.map((line, i) => {
    const where = `${ENTRY.events} line ${i + 1}`;
    const o = parseCanonical(Buffer.from(line, 'utf8'), where) as Record<string, unknown>;
    if (typeof o.envelope !== 'string' || !Array.isArray(o.proof) || Object.keys(o).length !== 2 || o.proof.length > 64)
      throw fmt('BUNDLE_EVENTS_INVALID', `${where}: expected exactly {envelope: base64, proof: [base64 hash, ...]}`);
    const wire = strictBase64(o.envelope, where);
    const proof = o.proof.map((h) => {
      const b = typeof h === 'string' ? strictBase64(h, where) : null;
      if (!b || b.length !== 32) throw fmt('BUNDLE_EVENTS_INVALID', `${where}: a proof hash is not 32 bytes of base64`);
      return b;
    });
    let parsed: ReturnType<typeof parseEnvelope>;
    try {
      parsed = parseEnvelope(wire, { line: i + 1 });
    } catch (err) {
      throw fmt('BUNDLE_EVENTS_INVALID', `${where}: ${(err as Error).message}`);
    }
    const position = parsed.envelope.position;
    if (position <= last)
      throw fmt('BUNDLE_EVENTS_INVALID', `${where}: position ${position} after position ${last} (events must be in increasing position order)`);
    last = position;
    const e = { position, wire, env: parsed.envelope, signing: parsed.signing, signature: parsed.signature, proof };
    each(e, i);
    return e;
  });
}

function strictBase64(s: string, where: string): Buffer {
  const b = Buffer.from(s, 'base64');
  if (b.toString('base64') !== s) throw fmt('BUNDLE_EVENTS_INVALID', `${where}: not canonical standard base64`);
  return b;
}

interface Statement {
  readonly _type: string;
  readonly subject: ReadonlyArray<{ name: string; digest: Record<string, string> }>;
  readonly predicateType: string;
  readonly predicate: unknown;
}

function openStatement(bytes: Buffer, registry: KeyRegistry, treeSize: number, predicateType: string): Statement {
  const bad = (code: string, message: string) => new StepFailure('statement', code, message);
  let env: Record<string, unknown>;
  try {
    env = parseCanonical(bytes, ENTRY.statement) as Record<string, unknown>;
  } catch (err) {
    throw bad('BUNDLE_DSSE_INVALID', (err as Error).message);
  }
  if (env.payloadType !== DSSE_PAYLOAD_TYPE || typeof env.payload !== 'string' || !Array.isArray(env.signatures) || env.signatures.length === 0)
    throw bad('BUNDLE_DSSE_INVALID', `${ENTRY.statement}: expected a DSSE envelope {payloadType: "${DSSE_PAYLOAD_TYPE}", payload, signatures: [...]}`);
  const payload = Buffer.from(env.payload, 'base64');
  if (payload.toString('base64') !== env.payload) throw bad('BUNDLE_DSSE_INVALID', `${ENTRY.statement}: payload is not canonical standard base64`);
  const message = pae(DSSE_PAYLOAD_TYPE, payload);
  const good = (env.signatures as Array<Record<string, unknown>>).some((s) => {
    const key = typeof s.keyid === 'string' ? registry.get(s.keyid) : undefined;
    if (!key || (key.role !== 'controller' && key.role !== 'publisher') || (key.revokedAt !== null && key.revokedAt < treeSize) || typeof s.sig !== 'string')
      return false;
    const sig = Buffer.from(s.sig, 'base64');
    return sig.toString('base64') === s.sig && nodeEd25519.verify(key.publicKey, message, sig);
  });
  if (!good)
    throw bad(
      'BUNDLE_DSSE_NOT_SIGNED',
      `${ENTRY.statement}: no signature verifies with a controller or publisher key the bundle's events register (and do not revoke)`,
    );
  let st: Statement;
  try {
    st = parseCanonical(payload, 'the DSSE payload') as unknown as Statement;
  } catch (err) {
    throw bad('BUNDLE_STATEMENT_INVALID', (err as Error).message);
  }
  if (st?._type !== STATEMENT_TYPE || st.predicateType !== predicateType || !Array.isArray(st.subject))
    throw bad('BUNDLE_STATEMENT_INVALID', `the DSSE payload is not an in-toto Statement v1 with predicateType ${predicateType}`);
  return st;
}

/** The content subject is the digest of the entries before the statement; the predicate is, member by member, `recomputed`. */
function checkContentAndPredicate(st: Statement, content: string, recomputed: JsonObject): void {
  const bad = (code: string, message: string) => new StepFailure('statement', code, message);
  const subj = st.subject.find((s) => s?.name === CONTENT_SUBJECT);
  if (!subj || subj.digest?.sha256 !== content)
    throw bad('BUNDLE_CONTENT_MISMATCH', `the statement's ${CONTENT_SUBJECT} digest is not the digest of the bundle's entries (${content})`);
  const claimed = (st.predicate ?? {}) as Record<string, unknown>;
  if (typeof claimed !== 'object' || Array.isArray(claimed)) throw bad('BUNDLE_CLAIM_MISMATCH', 'the predicate is not an object');
  for (const k of new Set([...Object.keys(recomputed), ...Object.keys(claimed)])) {
    if (k in claimed !== k in recomputed)
      throw bad('BUNDLE_CLAIM_MISMATCH', `the claim ${k in claimed ? 'has' : 'lacks'} a member ${k} the events ${k in claimed ? 'do not support' : 'support'}`);
    const a = canonicalJson((claimed[k] ?? null) as JsonObject);
    const b = canonicalJson((recomputed[k] ?? null) as JsonObject);
    if (a !== b) throw bad('BUNDLE_CLAIM_MISMATCH', `the claim's ${k} is ${a.slice(0, 200)}, but the events support ${b.slice(0, 200)}`);
  }
}

/** A snapshot subject: `snapshot:<cid>` with the SHA-256 its CID's multihash holds. */
function snapshotSubject(cid: string): { name: string; sha256: string } {
  return { name: `snapshot:${cid}`, sha256: Buffer.from(parseCid(cid).multihash.digest).toString('hex') };
}

/** A report's statement: content and predicate (the RejudgeCompleted data), then exactly the snapshot and re-judged bundle subjects. */
function checkReportStatement(st: Statement, content: string, report: JsonObject): void {
  checkContentAndPredicate(st, content, report);
  const snap = snapshotSubject(report.snapshot as string);
  const bundleSha = (report.bundleDigest as string).slice('sha256:'.length);
  const others = st.subject.filter((s) => s?.name !== CONTENT_SUBJECT);
  const want = [
    { name: snap.name, digest: { sha256: snap.sha256 } },
    { name: REJUDGED_BUNDLE_SUBJECT, digest: { sha256: bundleSha } },
  ];
  if (canonicalJson(others as unknown as JsonObject) !== canonicalJson(want as unknown as JsonObject))
    throw new StepFailure(
      'statement',
      'BUNDLE_SUBJECT_MISMATCH',
      `the report's subjects must be ${snap.name} (sha256 ${snap.sha256}) and ${REJUDGED_BUNDLE_SUBJECT} (sha256 ${bundleSha}), in that order`,
    );
}

function checkStatement(st: Statement, content: string, recomputed: JsonObject): void {
  const bad = (code: string, message: string) => new StepFailure('statement', code, message);
  checkContentAndPredicate(st, content, recomputed);
  const snapshot = recomputed.snapshot;
  const others = st.subject.filter((s) => s?.name !== CONTENT_SUBJECT);
  if (typeof snapshot === 'string') {
    const want = Buffer.from(parseCid(snapshot).multihash.digest).toString('hex');
    if (others.length !== 1 || others[0]?.name !== `snapshot:${snapshot}` || others[0]?.digest?.sha256 !== want)
      throw bad('BUNDLE_SUBJECT_MISMATCH', `the statement's snapshot subject must be snapshot:${snapshot} with sha256 ${want}`);
  } else if (others.length !== 0) throw bad('BUNDLE_SUBJECT_MISMATCH', 'the run selected no snapshot, but the statement names one');
}
