/**
 * The events a run is made of, as plain data (schemas: docs/events.md; the catalogue in @assay/ledger is the
 * authority). A run's history is:
 *
 *   - every event of its own stream `run-<id>` (controller and runtime keys): RunStarted, WorkStarted, SnapshotTaken,
 *     WorkspaceEdited, SubmissionReceived, SubmissionRejected, BudgetConsumed, RuleViolation, RunCompleted, and, in a
 *     GPU run, GpusProbed (what the host said its GPUs are; the fold records nothing of it);
 *   - the Judge's events about it, in `judge-<judge id>` streams, with `data.run` = the run (judge and runtime keys):
 *     JudgeLaunched, JudgeCompleted, RewardRecorded, RuleViolation.
 *
 * Both are folded in global position order (docs/run.md, "Events").
 */

import { BUDGETS, JUDGE_STATUSES, RUN_STATUSES, parseEnvelope, type JsonObject, type RecordedEvent } from '@assay/ledger';

// One vocabulary: the ledger's catalogue defines JSON, budgets and statuses; the run uses its names for them.
export type { JsonPrimitive, JsonValue, JsonObject } from '@assay/ledger';

export const RUN_STREAM_CATEGORY = 'run';
export const JUDGE_STREAM_CATEGORY = 'judge';
/** A run id: the catalogue's id pattern, and a valid stream id. */
export const RUN_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const CID_RE = /^[a-z0-9]{1,128}$/;
export const DIGEST_RE = /^[A-Za-z0-9:+/=._-]{1,256}$/;
export const SHA256_HEX_RE = /^[0-9a-f]{64}$/;
export const REWARD_KEY_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

export const runStream = (run: string): string => `${RUN_STREAM_CATEGORY}-${run}`;
export const isJudgeStream = (stream: string): boolean => stream.startsWith(`${JUDGE_STREAM_CATEGORY}-`);

export const BUDGET_KINDS = BUDGETS;
export type BudgetKind = (typeof BUDGET_KINDS)[number];

export { JUDGE_STATUSES };
export type JudgeStatus = (typeof JUDGE_STATUSES)[number];

export const RUN_END_STATUSES = RUN_STATUSES;
export type RunEndStatus = (typeof RUN_END_STATUSES)[number];

export const RUN_EVENT_TYPES = {
  RunStarted: 'RunStarted',
  WorkStarted: 'WorkStarted',
  WorkspaceEdited: 'WorkspaceEdited',
  SubmissionReceived: 'SubmissionReceived',
  SubmissionRejected: 'SubmissionRejected',
  SnapshotTaken: 'SnapshotTaken',
  BudgetConsumed: 'BudgetConsumed',
  RuleViolation: 'RuleViolation',
  RunCompleted: 'RunCompleted',
  GpusProbed: 'GpusProbed',
} as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[keyof typeof RUN_EVENT_TYPES];

/** Judge events a run folds (from judge streams only). */
export const JUDGE_EVENT_TYPES = ['JudgeLaunched', 'JudgeCompleted', 'RewardRecorded', 'RuleViolation'] as const;

/** An event as the run reads it back: parsed from a stored envelope (or from the in-memory fake). */
export interface RunEventRecord {
  readonly position: number;
  readonly stream: string;
  readonly revision: number;
  readonly id: string;
  readonly type: string;
  /** Envelope time, RFC 3339 UTC with milliseconds. */
  readonly time: string;
  readonly data: Readonly<Record<string, unknown>>;
}

/** An event the run wants appended to its stream (the application adds the id, the idempotency key). */
export interface RunEventDraft {
  readonly type: RunEventType;
  readonly data: JsonObject;
}

/** RuleViolation rule names the run itself records. */
export const RUN_RULES = {
  /** A budget was exceeded: `budget.submissions`, `budget.wall_time`, `budget.agent_time`, `budget.gpu_seconds`. */
  budget: (k: BudgetKind): string => `budget.${k}`,
  /** A submission changed a path outside the task's editable paths. */
  notEditable: 'workspace.not_editable',
  /** The workspace could not be snapshotted within the task's limits (too many files, too large, too deep). */
  snapshotLimits: 'snapshot.limits',
  /** The workspace holds what snapshots refuse (a fifo, a non-UTF-8 name, a path over PATH_MAX, an unreadable file). */
  snapshotRefused: 'snapshot.refused',
  /** Work could not be frozen for the round's snapshot because of what ran in it (heavy I/O). */
  workFreezeFailed: 'work.freeze_failed',
  /** The Judge reported submission_error without recording a RuleViolation itself. */
  submissionError: 'judge.submission_error',
} as const;

export const MAX_DETAIL_CHARS = 4096;
export const MAX_REASON_CHARS = 1024;
export const MAX_RULE_CHARS = 128;

/** Clips text for an event field: control characters other than newline and tab become spaces. */
export function clipText(text: string, max: number): string {
  const clean = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, ' ');
  if (clean.length <= max) return clean;
  return `${clean.slice(0, Math.max(0, max - 14))} [... clipped]`;
}

/** A stored event as the run reads it: its envelope parsed (the ledger's own parser and checks). */
export function recordOf(e: RecordedEvent): RunEventRecord {
  const env = parseEnvelope(e.bytes, { position: e.position }).envelope;
  return { position: e.position, stream: env.stream, revision: env.revision, id: env.id, type: env.type, time: env.time, data: env.data };
}
