/**
 * The event catalogue: every event type Assay records, the schema of its data and the roles allowed to sign it.
 * Unknown types are refused on append and reported by verification. docs/events.md is the reader's version of
 * this file; keep them in step (a unit test checks that every type here is documented there).
 */
import { checkObject, type FieldSpec, type ObjectSchema } from './schema';
import { canonicalJson } from './jcs';
import type { JsonObject } from './json';
import type { Role } from './roles';
import { ROLES } from './roles';

export interface EventTypeSpec {
  type: string;
  roles: readonly Role[];
  /**
   * null: the generic appends (`assay ledger append`, `POST /ledger/events`) may write this type, signed by a held key
   * of one of `roles`. Otherwise the component that alone writes it (the run controller, the runtime, the Judge, the
   * key commands): generic appends refuse the type (LEDGER_TYPE_RESERVED), because what it records is a claim that
   * only that component's own process can make.
   */
  onlyWrittenBy: string | null;
  schema: ObjectSchema;
  /** Largest canonical size of `data` in bytes. */
  maxDataBytes: number;
  summary: string;
}

const KIB = 1024;
const DEFAULT_MAX_DATA = 64 * KIB;

// Reusable field shapes.
const id = (optional = false): FieldSpec => ({ kind: 'string', max: 128, min: 1, pattern: /^[A-Za-z0-9][A-Za-z0-9._:-]*$/, optional });
const text = (max: number, optional = false): FieldSpec => ({ kind: 'string', max, optional });
const digest = (optional = false): FieldSpec => ({ kind: 'string', max: 256, min: 1, pattern: /^[A-Za-z0-9:+/=._-]+$/, optional });
const cid = (optional = false, nullable = false): FieldSpec => ({ kind: 'string', max: 128, min: 1, pattern: /^[a-z0-9]+$/, optional, nullable });
const count = (optional = false): FieldSpec => ({ kind: 'integer', min: 0, optional });
const round = (optional = false): FieldSpec => ({ kind: 'integer', min: 1, optional });
const millis: FieldSpec = { kind: 'integer', min: 0 };
const finite = (optional = false, nullable = false): FieldSpec => ({ kind: 'number', optional, nullable });
const rewards = (optional = false): FieldSpec => ({ kind: 'map', values: { kind: 'number' }, maxKeys: 64, keyPattern: /^[A-Za-z0-9_.:-]{1,64}$/, optional });

export const JUDGE_STATUSES = ['completed', 'submission_error', 'verifier_error', 'verifier_timeout', 'infrastructure_error'] as const;
export const RUN_STATUSES = ['completed', 'no_valid_submission', 'failed', 'cancelled'] as const;
/** `assay rejudge`'s verdicts: within the tolerance of the recorded score, outside it, or no Judge completed. */
export const REJUDGE_VERDICTS = ['reproduced', 'not_reproduced', 'could_not_judge'] as const;
export const BUDGETS = ['submissions', 'wall_time', 'agent_time', 'gpu_seconds'] as const;

/**
 * A verifier key in C2SP signed-note text form: `<name>+<8 hex>+<base64(0x01 || 32-byte key)>`, and a signer
 * `<name>+<8 hex>`. Key names are at most 128 UTF-8 bytes: the rest of each text is ASCII (54 and 9 bytes), so
 * `maxBytes` bounds the name exactly (the patterns count UTF-16 code units, which alone would let a name of 128
 * three-byte characters, 384 bytes, through).
 */
const verifierKeyText: FieldSpec = { kind: 'string', max: 300, maxBytes: 128 + 54, pattern: /^[^\s+]{1,128}\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}$/ };
const signerId: FieldSpec = { kind: 'string', max: 140, maxBytes: 128 + 9, pattern: /^[^\s+]{1,128}\+[0-9a-f]{8}$/ };

const specs: EventTypeSpec[] = [
  {
    type: 'KeyRegistered',
    roles: ['controller'],
    onlyWrittenBy: 'the key commands (`assay ledger init`, `assay keys register`)',
    summary: 'A signing key and its role. Position 0 is the controller key registering itself (the trust anchor).',
    maxDataBytes: 2 * KIB,
    schema: { keyId: signerId, publicKey: verifierKeyText, role: { kind: 'string', max: 16, enum: ROLES } },
  },
  {
    type: 'KeyRevoked',
    roles: ['controller'],
    onlyWrittenBy: 'the key commands (`assay keys revoke`)',
    summary: 'A key may sign nothing after this position.',
    maxDataBytes: 2 * KIB,
    schema: { keyId: signerId, reason: text(1024) },
  },
  {
    type: 'TaskRegistered',
    roles: ['controller'],
    onlyWrittenBy: null,
    summary: 'A task directory, by its digests.',
    maxDataBytes: DEFAULT_MAX_DATA,
    schema: {
      task: id(),
      name: text(256),
      digest: digest(),
      instructionDigest: digest(),
      testsDigest: digest(),
      environmentDigest: digest(),
      metadata: { kind: 'freeObject', optional: true },
    },
  },
  {
    type: 'ImageBuilt',
    roles: ['runtime'],
    onlyWrittenBy: 'the runtime (`assay images`, `assay run`, `assay judge`)',
    summary: 'A locally built container image.',
    maxDataBytes: 8 * KIB,
    schema: {
      image: text(256),
      digest: digest(),
      purpose: { kind: 'string', max: 16, enum: ['base', 'work', 'judge'] },
      task: id(true),
      recipeDigest: digest(true),
      buildLogDigest: digest(true),
      durationMs: millis,
    },
  },
  {
    type: 'RunStarted',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: 'A run of an agent on a task under a protocol.',
    maxDataBytes: DEFAULT_MAX_DATA,
    schema: {
      run: id(),
      task: id(),
      taskDigest: digest(),
      agent: text(256),
      model: text(256, true),
      fingerprint: digest(),
      protocol: { kind: 'freeObject' },
      selection: { kind: 'freeObject' },
    },
  },
  {
    type: 'GpusProbed',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary:
      'The host GPUs behind a GPU run\'s `--gpus`, as nvidia-smi reported them when a controller session started: right after RunStarted, and again after a resume (`resumed`), before WorkStarted (docs/run.md, "GPUs").',
    maxDataBytes: DEFAULT_MAX_DATA,
    schema: {
      run: id(),
      /** The controller host's name (os.hostname()). */
      node: text(256),
      gpus: {
        kind: 'array',
        max: 64,
        of: {
          kind: 'object',
          fields: {
            /** The `--gpus` id as given. */
            device: { kind: 'string', max: 124, min: 1, pattern: /^(?:[0-9]{1,4}|(?:GPU|MIG)-[A-Za-z0-9-]{1,120})$/ },
            index: { kind: 'integer', min: 0, max: 9999 },
            uuid: { kind: 'string', max: 136, min: 5, pattern: /^(?:GPU|MIG)-[A-Za-z0-9-]{1,120}(?:\/[0-9]{1,4}\/[0-9]{1,4})?$/ },
            model: text(256),
            /** Total memory of the physical GPU in MiB; null for a MIG device. */
            memoryMiB: { kind: 'integer', min: 0, nullable: true },
            driver: { kind: 'string', max: 64, min: 1, pattern: /^[0-9][0-9A-Za-z.-]{0,63}$/ },
            /** The CUDA driver API version (nvidia-smi's header), null when it says N/A. */
            cuda: { kind: 'string', max: 7, min: 3, pattern: /^[0-9]{1,3}\.[0-9]{1,3}$/, nullable: true },
            mig: {
              kind: 'object',
              optional: true,
              fields: {
                parent: { kind: 'string', max: 124, min: 5, pattern: /^GPU-[A-Za-z0-9-]{1,120}$/ },
                profile: { kind: 'string', max: 32, min: 1, pattern: /^[A-Za-z0-9.+-]{1,32}$/ },
              },
            },
          },
        },
      },
      /** Recorded by a resumed controller session. */
      resumed: { kind: 'boolean', optional: true },
    },
  },
  {
    type: 'WorkStarted',
    roles: ['runtime'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: 'The persistent Work container of a run started.',
    maxDataBytes: 8 * KIB,
    schema: { run: id(), container: text(128), image: digest(), limits: { kind: 'freeObject' } },
  },
  {
    type: 'WorkspaceEdited',
    roles: ['runtime'],
    onlyWrittenBy: 'the run controller (`assay run`) and the snapshot commands (`assay snapshot`)',
    summary: 'What changed in a workspace between two snapshots.',
    maxDataBytes: DEFAULT_MAX_DATA,
    schema: {
      run: id(true),
      from: cid(),
      to: cid(),
      added: count(),
      removed: count(),
      changed: count(),
      bytesAdded: count(),
      bytesRemoved: count(),
      paths: { kind: 'freeObject', optional: true },
      truncated: { kind: 'boolean', optional: true },
    },
  },
  {
    type: 'SubmissionReceived',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: 'An authenticated submission opened a round.',
    maxDataBytes: 4 * KIB,
    schema: { run: id(), round: round() },
  },
  {
    type: 'SubmissionRejected',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: 'A submission was refused before judging (cooldown, budget, closed run, bad request).',
    maxDataBytes: 4 * KIB,
    schema: { run: id(), round: round(true), reason: text(1024), status: { kind: 'integer', min: 100, max: 599 } },
  },
  {
    type: 'SnapshotTaken',
    roles: ['runtime'],
    onlyWrittenBy: 'the run controller (`assay run`) and the snapshot commands (`assay snapshot`)',
    summary: 'A workspace frozen as a content-addressed snapshot.',
    maxDataBytes: 8 * KIB,
    schema: {
      run: id(true),
      round: round(true),
      root: cid(),
      format: text(64, true),
      files: count(),
      directories: count(true),
      symlinks: count(true),
      bytes: count(),
      newBytes: count(true),
      durationMs: millis,
      policyDigest: digest(),
      source: text(4096, true),
      /** Symlinks that point outside the snapshot root (recorded, never followed), at most 100 listed. */
      flagged: { kind: 'array', of: { kind: 'string', max: 4096 }, max: 100, optional: true },
    },
  },
  {
    type: 'JudgeLaunched',
    roles: ['runtime'],
    onlyWrittenBy: 'the Judge (`assay judge`, `assay run`)',
    summary: 'A fresh Judge container started on a snapshot.',
    maxDataBytes: 8 * KIB,
    schema: {
      run: id(true),
      round: round(true),
      judge: id(),
      image: digest(),
      snapshot: cid(),
      testsDigest: digest(),
      limits: { kind: 'freeObject' },
      network: text(64),
    },
  },
  {
    type: 'JudgeCompleted',
    roles: ['judge'],
    onlyWrittenBy: 'the Judge (`assay judge`, `assay run`)',
    summary: 'A Judge finished, with its status and output digest.',
    maxDataBytes: 8 * KIB,
    schema: {
      run: id(true),
      round: round(true),
      judge: id(),
      status: { kind: 'string', max: 32, enum: JUDGE_STATUSES },
      exitCode: { kind: 'integer', nullable: true },
      durationMs: millis,
      outputDigest: digest(),
      outputBytes: count(),
      detail: text(4096, true),
    },
  },
  {
    type: 'RewardRecorded',
    roles: ['judge'],
    onlyWrittenBy: 'the Judge (`assay judge`, `assay run`)',
    summary: 'The parsed rewards of a completed Judge and the primary score.',
    maxDataBytes: 8 * KIB,
    schema: {
      run: id(true),
      round: round(true),
      judge: id(),
      rewards: rewards(),
      primaryMetric: { kind: 'string', max: 64, nullable: true },
      primaryScore: finite(false, true),
    },
  },
  {
    type: 'BudgetConsumed',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: 'A budget was drawn down.',
    maxDataBytes: 4 * KIB,
    schema: {
      run: id(),
      budget: { kind: 'string', max: 32, enum: BUDGETS },
      amount: { kind: 'number', min: 0 },
      remaining: finite(false, true),
      round: round(true),
      /** gpu_seconds only: who held the GPUs (`work` or `judge`), which host devices, and for how long (amount = devices × heldSec). */
      holder: { kind: 'string', max: 16, enum: ['work', 'judge'], optional: true },
      gpus: { kind: 'array', of: { kind: 'string', max: 128, min: 1 }, max: 64, optional: true },
      heldSec: { kind: 'number', min: 0, optional: true },
    },
  },
  {
    type: 'RuleViolation',
    roles: ['controller', 'judge'],
    onlyWrittenBy: 'the run controller and the Judge (`assay run`, `assay judge`)',
    summary: 'A rule was broken; the round scores zero. The zero is part of the event.',
    maxDataBytes: 8 * KIB,
    schema: { run: id(true), round: round(true), rule: text(128), detail: text(4096), score: { kind: 'number', exactly: 0 } },
  },
  {
    type: 'RunCompleted',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: 'A run ended; the selected best round under the recorded selection rule.',
    maxDataBytes: 4 * KIB,
    schema: {
      run: id(),
      status: { kind: 'string', max: 32, enum: RUN_STATUSES },
      bestRound: { kind: 'integer', min: 1, nullable: true },
      bestScore: finite(false, true),
      bestSnapshot: cid(false, true),
    },
  },
  {
    type: 'AgentTranscriptRecorded',
    roles: ['controller'],
    onlyWrittenBy: 'the run controller (`assay run`)',
    summary: "The digest of one controller session's agent transcript (`runs/<run>/agent/session-<n>.log`), in the run's transcript stream `transcript-<run>`.",
    maxDataBytes: 2 * KIB,
    schema: {
      run: id(),
      session: { kind: 'integer', min: 1 },
      /** sha256:<hex> of the file's bytes as kept (redacted, cut at the cap, the cut line included). */
      digest: { kind: 'string', max: 71, min: 71, pattern: /^sha256:[0-9a-f]{64}$/ },
      bytes: count(),
      /** Bytes of agent output not kept after the cap. */
      dropped: count(),
      /** Recorded by a later controller for a session whose controller ended without recording it (killed). */
      recovered: { kind: 'boolean' },
    },
  },
  {
    type: 'LogRedacted',
    roles: ['controller'],
    onlyWrittenBy: '`assay bundle export --logs redacted`',
    summary:
      'A run\'s log as published in a result bundle: the recorded file\'s digest, the digest of its redacted copy, and the redaction rule set applied (docs/bundle-format.md, "logs.jsonl"), in the stream `redaction-<run>`.',
    maxDataBytes: 2 * KIB,
    schema: {
      run: id(),
      /** `transcript/session-<n>` (AgentTranscriptRecorded) or `judge/round-<n>` (JudgeCompleted.outputDigest). */
      log: { kind: 'string', max: 40, pattern: /^(transcript\/session-[1-9][0-9]{0,8}|judge\/round-[1-9][0-9]{0,8})$/ },
      /** sha256:<hex> of the file as the ledger recorded it. */
      original: { kind: 'string', max: 71, min: 71, pattern: /^sha256:[0-9a-f]{64}$/ },
      /** sha256:<hex> of the redacted copy the bundle carries. */
      redacted: { kind: 'string', max: 71, min: 71, pattern: /^sha256:[0-9a-f]{64}$/ },
      rules: { kind: 'string', max: 32, enum: ['assay-redact/1'] },
      /** Replacements made, all rules together. */
      replaced: count(),
    },
  },
  {
    type: 'RejudgeCompleted',
    roles: ['controller', 'auditor'],
    onlyWrittenBy: null,
    summary:
      "A third party re-judged a frozen snapshot (`assay rejudge`, docs/rejudge.md): the recorded score, each fresh Judge's, and whether they agree within the tolerance.",
    maxDataBytes: 32 * KIB,
    schema: {
      snapshot: cid(),
      run: id(true),
      round: round(true),
      /** `completed` when at least one Judge completed, else the last Judge's status. */
      status: { kind: 'string', max: 32, enum: JUDGE_STATUSES },
      rewards: rewards(true),
      /** The median of the completed Judges' primary scores (null: none completed). */
      primaryScore: finite(false, true),
      /** The verdict is `reproduced`. */
      matches: { kind: 'boolean' },
      // What `assay rejudge` adds (optional, so that events appended by hand before it stay valid).
      verdict: { kind: 'string', max: 32, enum: REJUDGE_VERDICTS, optional: true },
      /** sha256:<hex> of the bundle file that was verified. */
      bundleDigest: { kind: 'string', max: 71, min: 71, pattern: /^sha256:[0-9a-f]{64}$/, optional: true },
      task: id(true),
      taskDigest: digest(true),
      protocolFingerprint: digest(true),
      metric: { kind: 'string', max: 128, optional: true, nullable: true },
      direction: { kind: 'string', max: 16, enum: ['maximize', 'minimize'], optional: true, nullable: true },
      recordedScore: finite(true, true),
      scores: {
        kind: 'array',
        max: 100,
        optional: true,
        of: {
          kind: 'object',
          fields: { judge: id(), status: { kind: 'string', max: 32, enum: JUDGE_STATUSES }, primaryScore: finite(false, true) },
        },
      },
      median: finite(true, true),
      spread: { kind: 'number', min: 0, optional: true, nullable: true },
      delta: finite(true, true),
      tolerance: { kind: 'number', min: 0, optional: true },
    },
  },
  {
    type: 'BaselineRecorded',
    roles: ['controller'],
    onlyWrittenBy: '`assay baseline`',
    summary:
      'A task\'s starting workspace (`start`) or its oracle (`oracle`) judged N times under the protocol a run of the task uses (docs/task-format.md, "Baselines"), in the stream `baseline-<task>`; runs with the same task digest and protocol fingerprint are compared with it.',
    maxDataBytes: 16 * KIB,
    schema: {
      task: id(),
      taskDigest: digest(),
      protocolFingerprint: digest(),
      /** The object hashed into protocolFingerprint (RunStarted records the same in protocol.fingerprintInput). */
      fingerprintInput: { kind: 'freeObject' },
      metric: { kind: 'string', max: 128, nullable: true },
      direction: { kind: 'string', max: 16, enum: ['maximize', 'minimize'] },
      kind: { kind: 'string', max: 16, enum: ['start', 'oracle'] },
      /** The snapshot CID judged. */
      snapshot: cid(),
      judgeImageDigest: { kind: 'string', max: 256, min: 1, pattern: /^[A-Za-z0-9:+/=._-]+$/, nullable: true },
      repeats: { kind: 'integer', min: 1, max: 20 },
      scores: {
        kind: 'array',
        max: 20,
        of: {
          kind: 'object',
          fields: { judge: id(), status: { kind: 'string', max: 32, enum: JUDGE_STATUSES }, primaryScore: finite(false, true) },
        },
      },
      /** Over the completed repeats' primary scores; null when none completed. */
      median: finite(false, true),
      min: finite(false, true),
      max: finite(false, true),
    },
  },
  {
    type: 'Note',
    roles: ['controller', 'auditor'],
    onlyWrittenBy: null,
    summary: "An operator's free-form annotation.",
    maxDataBytes: 70 * KIB,
    schema: { text: { kind: 'string', min: 1, max: 64 * KIB } },
  },
];

/**
 * The types a run's claims are made of: verification folds them, in position order, with the run's own rules (the
 * `claims` step; the rules live with the run, in @assay/run, and are handed to the verifier).
 */
export const CLAIM_EVENT_TYPES: readonly string[] = [
  'RunStarted',
  // no claim of its own, but part of the run stream: folded so the stream's events stay dense (and it must sit in one)
  'GpusProbed',
  'WorkStarted',
  'WorkspaceEdited',
  'SubmissionReceived',
  'SubmissionRejected',
  'SnapshotTaken',
  'JudgeLaunched',
  'JudgeCompleted',
  'RewardRecorded',
  'BudgetConsumed',
  'RuleViolation',
  'RunCompleted',
  'BaselineRecorded',
];

export const CATALOGUE: ReadonlyMap<string, EventTypeSpec> = new Map(specs.map((s) => [s.type, s]));
export const EVENT_TYPES: readonly string[] = specs.map((s) => s.type);
/** Types the generic appends may write (`onlyWrittenBy: null`). */
export const GENERIC_EVENT_TYPES: readonly string[] = specs.filter((s) => s.onlyWrittenBy === null).map((s) => s.type);

/**
 * Whether a generic append (`assay ledger append`, `POST /ledger/events`) may write a type: null, or the refusal
 * `{code, message}` naming the type and its writer. Unknown types are left to eventDataProblem.
 */
/** Stream categories a generic append never writes: their revisions belong to the run controller, the runtime, the Judge and the key commands. */
export const RESERVED_STREAM_CATEGORIES: readonly string[] = ['run', 'judge', 'key', 'transcript', 'redaction', 'baseline'];

/** Why a generic append may not write to `stream` (a reserved category), or null. */
export function genericStreamProblem(stream: string): { code: string; message: string } | null {
  const dash = stream.indexOf('-');
  const category = dash < 0 ? stream : stream.slice(0, dash);
  if (!RESERVED_STREAM_CATEGORIES.includes(category)) return null;
  const owner = category === 'key' ? 'the key commands' : category === 'transcript' ? 'the run controller' : 'the run controller, the runtime and the Judge';
  return {
    code: 'LEDGER_STREAM_RESERVED',
    message: `stream "${stream}": ${category}- streams are written only by ${owner}; a generic append would shift their revisions (annotate in another stream, e.g. note-${stream.slice(dash + 1) || 'ops'})`,
  };
}

export function genericAppendProblem(type: string): { code: string; message: string } | null {
  const spec = CATALOGUE.get(type);
  if (!spec || spec.onlyWrittenBy === null) return null;
  return {
    code: 'LEDGER_TYPE_RESERVED',
    message: `${type} is written only by ${spec.onlyWrittenBy}, never by a generic append; generic appends may write ${GENERIC_EVENT_TYPES.join(', ')}`,
  };
}

/**
 * Checks a proposed or recorded event's type and data: known type, schema, size.
 * Returns null or a problem `{ code, message }` naming the field. `canonicalSize`, when the caller already
 * knows the byte length of the canonical data, saves re-encoding it.
 */
export function eventDataProblem(type: string, data: JsonObject, canonicalSize?: number): { code: string; message: string } | null {
  const spec = CATALOGUE.get(type);
  if (!spec) return { code: 'LEDGER_UNKNOWN_EVENT_TYPE', message: `unknown event type "${type}"; known types: ${EVENT_TYPES.join(', ')}` };
  const size = canonicalSize ?? Buffer.byteLength(canonicalJson(data), 'utf8');
  if (size > spec.maxDataBytes)
    return { code: 'LEDGER_EVENT_TOO_LARGE', message: `${type} data is ${size} bytes, above the limit of ${spec.maxDataBytes} for this type` };
  const p = checkObject(spec.schema, data);
  return p ? { code: 'LEDGER_EVENT_INVALID', message: `${type} ${p}` } : null;
}
