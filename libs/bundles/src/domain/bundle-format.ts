/**
 * The result bundle, version 1 (docs/bundle-format.md is the specification; keep the two in step). Pure: names,
 * limits, the claim a run's events support, the in-toto Statement around it, DSSE's pre-authentication encoding and
 * the content digest. No I/O.
 *
 * A bundle is a POSIX ustar archive of exactly these regular files, in this order:
 *
 *   assay-bundle/manifest.json        canonical JSON: format, origin, run, counts, what is included
 *   assay-bundle/checkpoint           the signed checkpoint note every inclusion proof is against
 *   assay-bundle/events.jsonl         one canonical JSON line per event, position order: {envelope, proof}
 *   assay-bundle/logs.jsonl           (only when the manifest's logs is not "none") one line per log: {log, digest, content}
 *   assay-bundle/snapshots.car        (only when the manifest's snapshots is not "none") CAR v1 of the chosen snapshots
 *   assay-bundle/statement.dsse.json  DSSE envelope: an in-toto Statement v1 whose predicate is the claim
 *
 * The statement's first subject is the content digest: SHA-256 over one line per earlier entry,
 * `<name> <size> <sha256 hex of its content>\n`, in archive order. Signing it binds the claim to the exact bytes.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, type JsonObject } from '@assay/ledger';
import { compareWithBaseline, parseBaseline, runStatusView, type Baseline, type RunEventRecord, type RunStatusView } from '@assay/run';

/**
 * What `assay bundle export` writes. Version 2 adds to version 1 (docs/bundle-format.md, "Version 2"): the streams the
 * claim depends on beyond the run (the task's registration and baselines, the run's images' builds), the task's
 * public files (`task.car`, its hidden `tests/` and `solution/` withheld), and claim members for the Judge image, the
 * task's registered digests and the comparison with the matched start baseline.
 */
export const BUNDLE_FORMAT = 'assay-bundle/v2';
/** Version 1, still verified. */
export const BUNDLE_FORMAT_V1 = 'assay-bundle/v1';
/**
 * A re-judge report's own bundle: the same archive (manifest, checkpoint, events, statement; never logs or
 * snapshots), carrying the rejudger's key streams and `rejudge-<id>` with its one RejudgeCompleted, proved against
 * the rejudger's checkpoint; the statement's predicate is that event's data (docs/bundle-format.md, "Re-judge report
 * bundles").
 */
export const REJUDGE_BUNDLE_FORMAT = 'assay-rejudge-bundle/v1';
export const ENTRY = {
  manifest: 'assay-bundle/manifest.json',
  checkpoint: 'assay-bundle/checkpoint',
  events: 'assay-bundle/events.jsonl',
  logs: 'assay-bundle/logs.jsonl',
  task: 'assay-bundle/task.car',
  snapshots: 'assay-bundle/snapshots.car',
  statement: 'assay-bundle/statement.dsse.json',
} as const;
/**
 * The entries of a bundle, in order: the logs entry is there exactly when the manifest's logs is not "none", the
 * snapshots entry exactly when the manifest lists snapshot roots.
 */
export function entryOrder(withSnapshots: boolean, withLogs = false, withTask = false): readonly string[] {
  return [
    ENTRY.manifest,
    ENTRY.checkpoint,
    ENTRY.events,
    ...(withLogs ? [ENTRY.logs] : []),
    ...(withTask ? [ENTRY.task] : []),
    ...(withSnapshots ? [ENTRY.snapshots] : []),
    ENTRY.statement,
  ];
}

/** Which of the task's files a version 2 bundle carries: none, or its public files (task.car). */
export const TASK_MODES = ['none', 'public'] as const;
export type TaskMode = (typeof TASK_MODES)[number];
/** The task directory's entries whose content a bundle never carries: the hidden tests and the reference solution. */
export const WITHHELD_TASK_ENTRIES: readonly string[] = ['tests', 'solution'];

/** Which logs a bundle carries: none (their digests are in the events), redacted copies, or the files as recorded. */
export const LOG_MODES = ['none', 'redacted', 'full'] as const;
export type LogMode = (typeof LOG_MODES)[number];

/** One line of logs.jsonl: a log's name (`transcript/session-<n>` or `judge/round-<n>`), its content's digest, the content. */
export function logLine(log: string, content: Uint8Array): string {
  return `${canonicalJson({ log, digest: `sha256:${createHash('sha256').update(content).digest('hex')}`, content: Buffer.from(content).toString('base64') })}\n`;
}

export const SNAPSHOT_MODES = ['none', 'best', 'all'] as const;
export type SnapshotMode = (typeof SNAPSHOT_MODES)[number];

/** Bounds a reader enforces before it parses anything (a hostile bundle cannot make it allocate more). */
export const LIMITS = {
  /** Everything but the snapshots entry. */
  archiveBytes: 512 * 1024 * 1024,
  manifestBytes: 64 * 1024,
  checkpointBytes: 64 * 1024,
  eventsBytes: 480 * 1024 * 1024,
  /** All logs together, base64 in JSON lines (held in memory). */
  logsBytes: 256 * 1024 * 1024,
  statementBytes: 1024 * 1024,
  /** The snapshots entry is streamed, never held: bounded only by the archive's size limit. */
  snapshotsBytes: 64 * 1024 * 1024 * 1024,
  /** The task's public files (streamed and checked like the snapshots). */
  taskBytes: 256 * 1024 * 1024,
  events: 2_000_000,
} as const;

export const DSSE_PAYLOAD_TYPE = 'application/vnd.in-toto+json';
export const STATEMENT_TYPE = 'https://in-toto.io/Statement/v1';
/** An identifier, never fetched. */
export const PREDICATE_TYPE = 'https://assay.dev/result-claim/v1';
export const CONTENT_SUBJECT = 'assay-bundle-content';
/** The report bundle's predicate type: the RejudgeCompleted data, exactly as recorded. */
export const REJUDGE_PREDICATE_TYPE = 'https://assay.dev/rejudge-report/v1';
/** The report bundle's subject naming the result bundle that was re-judged (its file's SHA-256). */
export const REJUDGED_BUNDLE_SUBJECT = 'assay-rejudged-bundle';

/** A report bundle's manifest: exactly these six members. */
export interface RejudgeBundleManifest {
  readonly format: typeof REJUDGE_BUNDLE_FORMAT;
  readonly origin: string;
  /** The re-judging's id: its stream is `rejudge-<id>`, and its RejudgeCompleted's event id is `<id>`. */
  readonly rejudge: string;
  readonly events: number;
  readonly treeSize: number;
  readonly streams: readonly string[];
}

export interface BundleManifest {
  readonly format: typeof BUNDLE_FORMAT | typeof BUNDLE_FORMAT_V1;
  /** The ledger's checkpoint origin line. */
  readonly origin: string;
  readonly run: string;
  /** Events in events.jsonl. */
  readonly events: number;
  /** The size of the tree the checkpoint signs (every proof is against it). */
  readonly treeSize: number;
  /** Streams included whole, sorted. */
  readonly streams: readonly string[];
  /** Which snapshots' blocks the bundle carries (in snapshots.car): none, the selected one, or every round's. */
  readonly snapshots: SnapshotMode;
  /** The CAR's roots, in order (empty for none); recomputed by the verifier from the events. */
  readonly snapshotRoots: readonly string[];
  /**
   * `none`: only the logs' digests, in the events (JudgeCompleted, AgentTranscriptRecorded); `full`: the files as
   * recorded; `redacted`: copies under `assay-redact/1`, each linked to the recorded digest by a LogRedacted event.
   */
  readonly logs: LogMode;
  /** Version 2 only: `public` when task.car carries the task's public files. */
  readonly task?: TaskMode;
}

/** One line of events.jsonl: the stored envelope bytes (base64) and its inclusion proof (base64 hashes, leaf side first). */
export interface BundleEventLine {
  readonly envelope: string;
  readonly proof: readonly string[];
}

export function eventLine(bytes: Uint8Array, proof: readonly string[]): string {
  return `${canonicalJson({ envelope: Buffer.from(bytes).toString('base64'), proof: [...proof] })}\n`;
}

/** The claim, as the run's events support it (predicate of the Statement). Every field is recomputed by `assay verify`. */
export interface ResultClaim {
  readonly run: string;
  readonly task: string;
  readonly taskDigest: string;
  readonly agent: string;
  readonly model: string | null;
  readonly protocolFingerprint: string;
  readonly selection: JsonObject;
  readonly metric: string | null;
  readonly direction: string | null;
  readonly status: string;
  readonly claimedScore: number | null;
  readonly round: number | null;
  readonly snapshot: string | null;
  readonly counts: {
    readonly rounds: number;
    readonly completed: number;
    readonly violating: number;
    readonly invalid: number;
    readonly failed: number;
    readonly refunded: number;
    readonly refusedRequests: number;
  };
  readonly budgets: Readonly<Record<string, { readonly granted: number | null; readonly used: number }>>;
}

/** What a version 2 claim adds to version 1's members (`claimDependenciesOf`). */
export interface ClaimDependencies {
  /** The Judge image every Judge of the run ran (JudgeLaunched.image), each distinct id once, in position order. */
  readonly judgeImages: readonly string[];
  /** The carried ImageBuilt of the run's Judge and Work images, in position order. */
  readonly images: ReadonlyArray<{ readonly digest: string; readonly image: string; readonly purpose: string; readonly recipeDigest: string | null }>;
  /** The carried TaskRegistered of the run's task digest (the latest), or null. */
  readonly taskRegistration: {
    readonly name: string;
    readonly instructionDigest: string;
    readonly testsDigest: string;
    readonly environmentDigest: string;
  } | null;
  /**
   * The best score against the matched start baseline among the carried ones (`compareWithBaseline`):
   * `{matched: false}`, or `{matched: true, position, snapshot, repeats, completed, median, min, max, score, absolute,
   * relative, verdict}`.
   */
  readonly baseline: JsonObject;
}

/** The claim a run's fold supports (null when the run has not started or not ended). */
export function claimOf(
  v: RunStatusView,
  started: { taskDigest: string; fingerprint: string; model: string | null; selection: JsonObject },
): ResultClaim | null {
  if (!v.ended || v.task === null || v.agent === null) return null;
  const n = (pred: (s: string) => boolean) => v.rounds.filter((r) => pred(r.status)).length;
  return {
    run: v.run,
    task: v.task,
    taskDigest: started.taskDigest,
    agent: v.agent,
    model: started.model,
    protocolFingerprint: started.fingerprint,
    selection: started.selection,
    metric: v.metric,
    direction: v.direction,
    status: v.state,
    claimedScore: v.best?.score ?? null,
    round: v.best?.round ?? null,
    snapshot: null,
    counts: {
      rounds: v.rounds.length,
      completed: n((s) => s === 'completed'),
      violating: n((s) => s === 'rule_violation'),
      invalid: n((s) => s === 'submission_error'),
      failed: n((s) => s === 'verifier_error' || s === 'verifier_timeout'),
      refunded: n((s) => s === 'refunded'),
      refusedRequests: v.refusedRequests,
    },
    budgets: Object.fromEntries(Object.entries(v.budgets).map(([k, b]) => [k, { granted: b.limit, used: b.used }])),
  };
}

/** `<name> <size> <sha256 hex>\n` per entry before the statement; its SHA-256 is the content subject's digest. */
export function contentLine(name: string, content: Uint8Array): string {
  return contentLineOf(name, content.length, createHash('sha256').update(content).digest('hex'));
}

export function contentLineOf(name: string, size: number, sha256Hex: string): string {
  return `${name} ${size} ${sha256Hex}\n`;
}

/**
 * The snapshots a bundle carries for a mode, from the run's events in position order: `best`, RunCompleted's
 * bestSnapshot (none when no round was selected); `all`, every round's SnapshotTaken root, each once, in order.
 */
export function snapshotRootsFor(
  mode: SnapshotMode,
  runEvents: ReadonlyArray<{ readonly type: string; readonly data: Readonly<Record<string, unknown>> }>,
): string[] {
  if (mode === 'none') return [];
  if (mode === 'best') {
    const best = runEvents.find((e) => e.type === 'RunCompleted')?.data.bestSnapshot;
    return typeof best === 'string' ? [best] : [];
  }
  const out: string[] = [];
  for (const e of runEvents)
    if (e.type === 'SnapshotTaken' && typeof e.data.round === 'number' && typeof e.data.root === 'string' && !out.includes(e.data.root)) out.push(e.data.root);
  return out;
}

export function contentDigest(lines: readonly string[]): string {
  return createHash('sha256').update(lines.join('')).digest('hex');
}

/** An in-toto Statement v1 for a claim: subjects are the bundle content and, when one was selected, the snapshot. */
export function statementOf(claim: ResultClaim, content: string, snapshotDigest: { cid: string; sha256: string } | null): JsonObject {
  const subject: JsonObject[] = [{ name: CONTENT_SUBJECT, digest: { sha256: content } }];
  if (snapshotDigest) subject.push({ name: `snapshot:${snapshotDigest.cid}`, digest: { sha256: snapshotDigest.sha256 } });
  return { _type: STATEMENT_TYPE, subject, predicateType: PREDICATE_TYPE, predicate: claim as unknown as JsonObject };
}

/**
 * The in-toto Statement v1 of a re-judge report: subjects are the bundle content, the re-judged snapshot and the
 * re-judged result bundle (the file's SHA-256); the predicate is the RejudgeCompleted data as recorded.
 */
export function rejudgeStatementOf(data: JsonObject, content: string, snapshot: { cid: string; sha256: string }, bundleSha256: string): JsonObject {
  return {
    _type: STATEMENT_TYPE,
    subject: [
      { name: CONTENT_SUBJECT, digest: { sha256: content } },
      { name: `snapshot:${snapshot.cid}`, digest: { sha256: snapshot.sha256 } },
      { name: REJUDGED_BUNDLE_SUBJECT, digest: { sha256: bundleSha256 } },
    ],
    predicateType: REJUDGE_PREDICATE_TYPE,
    predicate: data,
  };
}

/** DSSE v1 pre-authentication encoding: `DSSEv1 <len(type)> <type> <len(body)> <body>` (lengths in bytes, decimal). */
export function pae(payloadType: string, payload: Uint8Array): Buffer {
  const t = Buffer.from(payloadType, 'utf8');
  return Buffer.concat([Buffer.from(`DSSEv1 ${t.length} `), t, Buffer.from(` ${payload.length} `), Buffer.from(payload)]);
}

export interface DsseEnvelope {
  readonly payloadType: string;
  /** Standard base64 of the payload bytes. */
  readonly payload: string;
  readonly signatures: ReadonlyArray<{ readonly keyid: string; readonly sig: string }>;
}

/** The Judge ids a BaselineRecorded cites (its `scores[].judge`). */
export function baselineJudgesOf(e: Pick<RunEventRecord, 'type' | 'data'>): string[] {
  if (e.type !== 'BaselineRecorded' || !Array.isArray(e.data.scores)) return [];
  return (e.data.scores as Array<{ judge?: unknown }>).flatMap((x) => (typeof x?.judge === 'string' ? [x.judge] : []));
}

/**
 * Which dependency streams a version 2 bundle carries besides the run's own (bundleStreamsOf), decided once the run's
 * events are known: `task-<task>` and `baseline-<task>` of RunStarted.task, and every `image-` stream holding an
 * ImageBuilt whose digest is an image the run used (a JudgeLaunched's or WorkStarted's `image`).
 */
export function dependencyStreamsOf(
  runEvents: ReadonlyArray<Pick<RunEventRecord, 'type' | 'data'>>,
  candidates: ReadonlyArray<Pick<RunEventRecord, 'stream' | 'type' | 'data'>>,
): Set<string> {
  const started = runEvents.find((e) => e.type === 'RunStarted')?.data as { task?: unknown } | undefined;
  const task = typeof started?.task === 'string' ? started.task : null;
  const images = new Set(runEvents.filter((e) => e.type === 'JudgeLaunched' || e.type === 'WorkStarted').map((e) => String(e.data.image)));
  const out = new Set<string>();
  for (const e of candidates) {
    if (task !== null && (e.stream === `task-${task}` || e.stream === `baseline-${task}`)) out.add(e.stream);
    else if (e.stream.startsWith('image-') && e.type === 'ImageBuilt' && images.has(String(e.data.digest))) out.add(e.stream);
  }
  // the Judges the task's baselines cite (each repeat is a standalone Judge): their streams back the scores
  for (const e of candidates) if (task !== null && e.stream === `baseline-${task}`) for (const j of baselineJudgesOf(e)) out.add(`judge-${j}`);
  return out;
}

/**
 * A version 2 claim's added members, from the carried events (run, Judge and dependency streams, position order) and
 * the run's best score. Export and verify both compute it, so a claim says exactly what its events support.
 */
export function claimDependenciesOf(
  events: ReadonlyArray<RunEventRecord>,
  run: {
    readonly run: string;
    readonly task: string;
    readonly taskDigest: string;
    readonly fingerprint: string;
    readonly direction: 'maximize' | 'minimize' | null;
    readonly score: number | null;
  },
): ClaimDependencies {
  const judgeImages: string[] = [];
  const used = new Set<string>();
  for (const e of events) {
    const ofRun = (e.type === 'JudgeLaunched' && e.data.run === run.run) || (e.type === 'WorkStarted' && e.stream === `run-${run.run}`);
    if (!ofRun) continue;
    if (e.type === 'JudgeLaunched' && typeof e.data.image === 'string' && !judgeImages.includes(e.data.image)) judgeImages.push(e.data.image);
    used.add(String(e.data.image));
  }
  const images: Array<ClaimDependencies['images'][number]> = [];
  let taskRegistration: ClaimDependencies['taskRegistration'] = null;
  const baselines: Baseline[] = [];
  for (const e of events) {
    const d = e.data as Record<string, unknown>;
    if (e.type === 'ImageBuilt' && e.stream.startsWith('image-') && used.has(String(d.digest)))
      images.push({
        digest: String(d.digest),
        image: String(d.image),
        purpose: String(d.purpose),
        recipeDigest: typeof d.recipeDigest === 'string' ? d.recipeDigest : null,
      });
    else if (e.type === 'TaskRegistered' && e.stream === `task-${run.task}` && d.digest === run.taskDigest)
      taskRegistration = {
        name: String(d.name),
        instructionDigest: String(d.instructionDigest),
        testsDigest: String(d.testsDigest),
        environmentDigest: String(d.environmentDigest),
      };
    else if (e.type === 'BaselineRecorded' && e.stream === `baseline-${run.task}`) {
      const b = parseBaseline(e.data as JsonObject, { position: e.position, time: e.time });
      if (b) baselines.push(b);
    }
  }
  const c = compareWithBaseline({ taskDigest: run.taskDigest, fingerprint: run.fingerprint, direction: run.direction, score: run.score }, baselines);
  // structural members only (no prose), so that a verifier in any language recomputes them exactly
  const baseline: JsonObject = c.matched
    ? {
        matched: true,
        position: c.baseline.position,
        snapshot: c.baseline.snapshot,
        repeats: c.baseline.repeats,
        completed: c.baseline.completed,
        median: c.baseline.median,
        min: c.baseline.min,
        max: c.baseline.max,
        score: c.score,
        absolute: c.absolute,
        relative: c.relative,
        verdict: c.verdict,
      }
    : { matched: false };
  return { judgeImages, images, taskRegistration, baseline };
}

/** RunStarted's data as the claim reads it. */
export interface StartedData {
  readonly task: string;
  readonly taskDigest: string;
  readonly fingerprint: string;
  readonly model?: string;
  readonly selection: JsonObject;
  readonly protocol?: { readonly fingerprintInput?: { readonly judgeImageDigest?: unknown } };
}

/**
 * The claim a run's events support, as export writes it and verify recomputes it: version 1's members from the run's
 * fold (`runEvents`: the run's stream and its Judge streams), the selected snapshot, and with `dependencies` (version
 * 2) the members `claimDependenciesOf` gives over every carried event (`carried`, position order). Null when the run
 * has not started or not ended.
 */
export function supportedClaim(
  run: string,
  runEvents: readonly RunEventRecord[],
  carried: readonly RunEventRecord[],
  dependencies: boolean,
): (ResultClaim & Partial<ClaimDependencies>) | null {
  const started = runEvents.find((e) => e.type === 'RunStarted')?.data as StartedData | undefined;
  const completed = runEvents.find((e) => e.stream === `run-${run}` && e.type === 'RunCompleted')?.data as { bestSnapshot: string | null } | undefined;
  if (!started || !completed) return null;
  const base = claimOf(runStatusView(run, runEvents), {
    taskDigest: started.taskDigest,
    fingerprint: started.fingerprint,
    model: started.model ?? null,
    selection: started.selection,
  });
  if (!base) return null;
  const claim = { ...base, snapshot: completed.bestSnapshot };
  if (!dependencies) return claim;
  return {
    ...claim,
    ...claimDependenciesOf(carried, {
      run,
      task: started.task,
      taskDigest: started.taskDigest,
      fingerprint: started.fingerprint,
      direction: base.direction as 'maximize' | 'minimize' | null,
      score: base.claimedScore,
    }),
  };
}
