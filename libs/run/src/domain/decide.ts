/**
 * Decisions of the run aggregate: `decide(state, command, now)` returns the events to append to the run stream, and
 * a rejection when the command is refused. Pure: the caller appends the events (with ids), folds them back with
 * `evolve`, and answers the agent. docs/run.md describes every rule; in short:
 *
 *   submit    401 without a valid token (nothing judged), 422 with a body or query (no round used), 429 when the run
 *             is closed, a budget is exhausted or the cooldown runs; otherwise SubmissionReceived opens the next round.
 *             Refused requests are recorded as SubmissionRejected without a round (the first 1000 of a run, and
 *             none after RunCompleted).
 *   settle    closes the open round: counted (BudgetConsumed submissions; RuleViolation score 0 when a rule broke)
 *             or refunded (SubmissionRejected with the round, status 503) when the infrastructure failed.
 *   consume   BudgetConsumed; going over a limit adds a RuleViolation `budget.<kind>` (score 0) and closes submissions.
 *   recover   after a restart: a round with a recorded Judge result is settled with it, any other is refunded.
 *   complete  refunds an open round, selects the best round and records RunCompleted.
 *   gpus_probed  GpusProbed: the host's GPUs behind `--gpus` at a controller session's start (GPU runs only).
 */
import { RUN_ERROR_CODES, SUBMIT_REJECTION_CODES as S } from '../run.errors';
import {
  BUDGET_KINDS,
  CID_RE,
  clipText,
  DIGEST_RE,
  MAX_DETAIL_CHARS,
  MAX_REASON_CHARS,
  MAX_RULE_CHARS,
  RUN_ID_RE,
  RUN_RULES,
  type BudgetKind,
  type JsonObject,
  type RunEndStatus,
  type RunEventDraft,
} from './run-events';
import { protocolJson, runProtocolProblem, selectionJson, selectionRuleProblem, type RunProtocol, type SelectionRule } from './run-protocol';
import { bestRound, openRound, roundOf, type RoundState, type RunState } from './run-state';
import type { ProbedGpu } from './gpu-host';

/** How the request's bearer token compared with the run's (computed by the application in constant time). */
export type AuthVerdict = 'ok' | 'missing' | 'malformed' | 'wrong';

export interface Rejection {
  readonly code: string;
  /** HTTP status for the endpoint: 401, 422, 429, 503; 409 or 422 for a caller's misuse (not agent-facing). */
  readonly status: number;
  readonly reason: string;
  /** Seconds until a retry can succeed (cooldown), else null. */
  readonly retryAfterSec: number | null;
}

export interface Decision {
  readonly events: RunEventDraft[];
  readonly rejection: Rejection | null;
}

export interface RunStartInput {
  readonly run: string;
  /** A task id (the catalogue's id pattern; see taskIdOf). */
  readonly task: string;
  readonly taskDigest: string;
  readonly agent: string;
  readonly model?: string | null;
  readonly fingerprint: string;
  readonly protocol: RunProtocol;
  readonly selection: SelectionRule;
}

export interface SnapshotFacts {
  /** Root CID (CIDv1, base32, lowercase). */
  readonly root: string;
  readonly files: number;
  readonly bytes: number;
  readonly durationMs: number;
  /** Digest of the snapshot policy (excludes, limits) it was taken under. */
  readonly policyDigest: string;
  /** What was snapshotted (e.g. the workspace directory), for the record. */
  readonly source?: string | null;
  /** Paths the snapshot flagged (symlinks leaving the workspace, skipped special files), at most 100. */
  readonly flagged?: readonly string[];
}

/** What changed between two snapshots (WorkspaceEdited), summarised by the application. */
export interface WorkspaceEditFacts {
  readonly from: string;
  readonly to: string;
  readonly added: number;
  readonly removed: number;
  readonly changed: number;
  readonly bytesAdded: number;
  readonly bytesRemoved: number;
  /** The first changed paths, by kind of change. */
  readonly paths: { readonly added: readonly string[]; readonly removed: readonly string[]; readonly changed: readonly string[] };
  readonly truncated: boolean;
}

/** GPUs held by Work or a Judge: the detail recorded with a `gpu_seconds` BudgetConsumed. */
export interface GpuHolding {
  readonly holder: 'work' | 'judge';
  /** Host device ids (indices or UUIDs), at most 64. */
  readonly devices: readonly string[];
  /** Seconds they were held; the amount is devices × heldSec. */
  readonly heldSec: number;
}

/** GPU-seconds of a holding. */
export const gpuSecondsOf = (h: GpuHolding): number => h.devices.length * h.heldSec;

export interface RuleBroken {
  readonly rule: string;
  readonly detail: string;
}

export type RunCommand =
  | { readonly kind: 'start'; readonly input: RunStartInput }
  | {
      readonly kind: 'submit';
      readonly auth: AuthVerdict;
      readonly hasBody: boolean;
      readonly hasQuery: boolean;
      /** Too many requests are already waiting for their turn. */
      readonly queueFull?: boolean;
      /** The controller is ending the run (cancel, shutdown): why. */
      readonly closing?: string | null;
    }
  | { readonly kind: 'work_started'; readonly container: string; readonly image: string; readonly limits: JsonObject }
  | { readonly kind: 'record_snapshot'; readonly round: number | null; readonly snapshot: SnapshotFacts; readonly edit: WorkspaceEditFacts | null }
  | {
      readonly kind: 'settle';
      readonly round: number;
      /** GPU-seconds the round's Judge held. */
      readonly gpuSeconds?: number;
      /** Which GPUs the Judge held and for how long (recorded with the BudgetConsumed). */
      readonly gpu?: GpuHolding | null;
      /** A rule the round broke before judging (workspace not editable, snapshot limits). */
      readonly violation?: RuleBroken | null;
      /** The round could not be judged for a reason that is not the candidate's: refund it. */
      readonly infrastructure?: string | null;
    }
  | {
      readonly kind: 'consume';
      readonly budget: Exclude<BudgetKind, 'submissions'>;
      readonly amount: number;
      readonly round?: number | null;
      readonly gpu?: GpuHolding | null;
    }
  | { readonly kind: 'tick' }
  | { readonly kind: 'recover' }
  | { readonly kind: 'complete'; readonly status?: 'cancelled' | 'failed'; readonly reason?: string }
  | { readonly kind: 'gpus_probed'; readonly node: string; readonly gpus: readonly ProbedGpu[]; readonly resumed: boolean };

/**
 * Most rounds a run refunds (SubmissionRejected {round, status: 503}). A refund is for infrastructure failures only,
 * but a run whose infrastructure keeps failing (or whose agent found a failure that is wrongly classified) must not
 * go on forever writing signed events: the refund that reaches the cap also ends the run, `RunCompleted {status:
 * "failed"}` in the same append, with the best round so far (docs/run.md, "Who caused a fault").
 */
export const MAX_REFUNDED_ROUNDS = 10;

/** Rounds refunded so far. */
export const refundedRounds = (s: RunState): number => s.rounds.reduce((n, r) => n + (r.outcome === 'refunded' ? 1 : 0), 0);

/** Most refused requests recorded per run; later ones are answered the same way but not recorded. */
export const MAX_RECORDED_REJECTIONS = 1000;
/** Tolerance when comparing consumption with a limit (floating-point sums of seconds). */
export const BUDGET_EPSILON = 1e-6;

const ok = (events: RunEventDraft[]): Decision => ({ events, rejection: null });
const misuse = (code: string, reason: string): Decision => ({
  events: [],
  rejection: { code, status: code === RUN_ERROR_CODES.INVALID_INPUT ? 422 : 409, reason, retryAfterSec: null },
});

/** A task name (`org/name`) as an id the catalogue accepts in RunStarted.task: `/` becomes `:`. */
export function taskIdOf(name: string): string {
  return name.replace(/\//g, ':');
}

/** Seconds since RunStarted (0 before it). */
export function elapsedSec(s: RunState, now: Date): number {
  if (!s.started) return 0;
  return Math.max(0, (now.getTime() - Date.parse(s.started.startedAt)) / 1000);
}

/** How much of each budget is used at `now` (wall time: the larger of recorded and elapsed time). */
export function usedBudgets(s: RunState, now: Date): Record<BudgetKind, number> {
  return {
    submissions: s.consumed.submissions + (openRound(s) ? 1 : 0),
    wall_time: Math.max(s.consumed.wall_time, elapsedSec(s, now)),
    agent_time: s.consumed.agent_time,
    gpu_seconds: s.consumed.gpu_seconds,
  };
}

/** What is left of each budget at `now`, never below 0; null for an unlimited budget. */
export function remainingBudgets(s: RunState, now: Date): Record<BudgetKind, number | null> {
  const used = usedBudgets(s, now);
  const out = {} as Record<BudgetKind, number | null>;
  for (const k of BUDGET_KINDS) {
    const limit = s.started?.protocol.budgets[k] ?? null;
    out[k] = limit === null ? null : Math.max(0, limit - used[k]);
  }
  return out;
}

const BUDGET_LABEL: Record<BudgetKind, string> = { submissions: 'submission', wall_time: 'time', agent_time: 'agent time', gpu_seconds: 'GPU' };
const fmt = (n: number): string => String(Math.round(n * 1000) / 1000);

/** Why submissions are closed at `now`, or null when they are open. */
export function closedReason(s: RunState, now: Date): { code: string; reason: string } | null {
  if (!s.started) return { code: S.RUN_CLOSED, reason: 'the run has not started' };
  if (s.completed) return { code: S.RUN_CLOSED, reason: `run closed: the run ended (${s.completed.status})` };
  if (s.overBudget) return { code: S.BUDGET_EXHAUSTED, reason: `run closed: a budget was exceeded (${s.overBudget})` };
  const used = usedBudgets(s, now);
  for (const k of BUDGET_KINDS) {
    const limit = s.started.protocol.budgets[k];
    if (limit === null) continue;
    const u = k === 'submissions' ? s.consumed.submissions : used[k];
    if (u >= limit - BUDGET_EPSILON) {
      const unit = k === 'submissions' ? '' : ' s';
      return { code: S.BUDGET_EXHAUSTED, reason: `${BUDGET_LABEL[k]} budget exhausted (${fmt(u)}${unit} of ${fmt(limit)}${unit} used)` };
    }
  }
  return null;
}

/** Seconds left of the cooldown at `now`, 0 when none runs. */
export function cooldownLeftSec(s: RunState, now: Date): number {
  const c = s.started?.protocol.cooldownSec ?? 0;
  if (c <= 0 || s.lastCountedAt === null) return 0;
  return Math.max(0, c - (now.getTime() - Date.parse(s.lastCountedAt)) / 1000);
}

function rejected(s: RunState, code: string, status: number, reason: string, retryAfterSec: number | null = null): Decision {
  // Not recorded: before RunStarted, after RunCompleted (the run's history ends there), past the cap.
  const record = s.started !== null && s.completed === null && s.rejections < MAX_RECORDED_REJECTIONS;
  const events: RunEventDraft[] = record
    ? [{ type: 'SubmissionRejected', data: { run: s.run, reason: clipText(`${code}: ${reason}`, MAX_REASON_CHARS), status } }]
    : [];
  return { events, rejection: { code, status, reason, retryAfterSec } };
}

function decideSubmit(s: RunState, c: Extract<RunCommand, { kind: 'submit' }>, now: Date): Decision {
  if (c.auth !== 'ok') {
    const [code, reason] =
      c.auth === 'missing'
        ? [S.NO_TOKEN, 'no bearer token: send "Authorization: Bearer <token>" (rsi-submit reads ASSAY_SUBMIT_TOKEN or its token file)']
        : c.auth === 'malformed'
          ? [S.MALFORMED_TOKEN, 'the Authorization header must be exactly one "Bearer <token>"']
          : [S.WRONG_TOKEN, "the token is not this run's"];
    return rejected(s, code, 401, `${reason}; nothing was judged`);
  }
  if (c.hasBody || c.hasQuery) {
    const what = c.hasBody && c.hasQuery ? 'a body and a query string' : c.hasBody ? 'a body' : 'a query string';
    return rejected(s, S.BAD_REQUEST, 422, `the request has ${what}; POST /submit takes neither (it submits the whole workspace); no round was used`);
  }
  if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
  const closed = closedReason(s, now);
  if (closed) return rejected(s, closed.code, 429, closed.reason);
  if (c.closing) return rejected(s, S.RUN_CLOSED, 429, `run closed: ${c.closing}`);
  if (c.queueFull) return rejected(s, S.QUEUE_FULL, 429, 'too many submissions are already waiting for their turn');
  const open = openRound(s);
  if (open) return rejected(s, S.ROUND_OPEN, 429, `round ${open.round} is still being judged; submit again when it is done`);
  const left = cooldownLeftSec(s, now);
  if (left > 0) {
    const wait = Math.ceil(left * 10) / 10;
    return rejected(s, S.COOLDOWN, 429, `cooldown: ${wait} s left (${fmt(s.started.protocol.cooldownSec)} s between counted submissions)`, Math.ceil(left));
  }
  return ok([{ type: 'SubmissionReceived', data: { run: s.run, round: s.rounds.length + 1 } }]);
}

function decideStart(s: RunState, i: RunStartInput): Decision {
  if (s.started) return misuse(RUN_ERROR_CODES.CONFLICT, `run ${s.run} was already started`);
  if (i.run !== s.run || !RUN_ID_RE.test(i.run))
    return misuse(RUN_ERROR_CODES.INVALID_INPUT, `run id ${JSON.stringify(i.run)} must match ${RUN_ID_RE} and be the run being started`);
  if (!RUN_ID_RE.test(i.task)) return misuse(RUN_ERROR_CODES.INVALID_INPUT, `task ${JSON.stringify(i.task)} must match ${RUN_ID_RE} (see taskIdOf)`);
  if (!DIGEST_RE.test(i.taskDigest) || !DIGEST_RE.test(i.fingerprint))
    return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'taskDigest and fingerprint must be digests (printable, no spaces, at most 256 characters)');
  if (typeof i.agent !== 'string' || i.agent.length === 0 || i.agent.length > 256)
    return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'agent must be 1 to 256 characters');
  if (i.model !== undefined && i.model !== null && (typeof i.model !== 'string' || i.model.length > 256))
    return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'model must be at most 256 characters');
  const protocol = protocolJson(i.protocol);
  const selection = selectionJson(i.selection);
  const why = runProtocolProblem(protocol) ?? selectionRuleProblem(selection);
  if (why) return misuse(RUN_ERROR_CODES.INVALID_INPUT, why);
  const data: JsonObject = { run: i.run, task: i.task, taskDigest: i.taskDigest, agent: i.agent, fingerprint: i.fingerprint, protocol, selection };
  if (i.model) data.model = i.model;
  return ok([{ type: 'RunStarted', data }]);
}

function budgetEvent(
  s: RunState,
  kind: BudgetKind,
  amount: number,
  consumedBefore: number,
  round: number | null,
  gpu: GpuHolding | null = null,
): RunEventDraft {
  const limit = s.started?.protocol.budgets[kind] ?? null;
  const data: JsonObject = { run: s.run, budget: kind, amount, remaining: limit === null ? null : limit - (consumedBefore + amount) };
  if (round !== null) data.round = round;
  if (kind === 'gpu_seconds' && gpu) {
    data.holder = gpu.holder;
    data.gpus = gpu.devices.slice(0, 64).map((d) => clipText(d, 128));
    data.heldSec = gpu.heldSec;
  }
  return { type: 'BudgetConsumed', data };
}

function violationEvent(s: RunState, round: number | null, rule: string, detail: string): RunEventDraft {
  const data: JsonObject = { run: s.run, rule: clipText(rule, MAX_RULE_CHARS), detail: clipText(detail, MAX_DETAIL_CHARS), score: 0 };
  if (round !== null) data.round = round;
  return { type: 'RuleViolation', data };
}

const refund = (s: RunState, round: number, reason: string): RunEventDraft => ({
  type: 'SubmissionRejected',
  data: { run: s.run, round, status: 503, reason: clipText(`${S.REFUNDED}: ${reason}`, MAX_REASON_CHARS) },
});

const completedEvent = (s: RunState, status: RunEndStatus): RunEventDraft => {
  const best = bestRound(s);
  return {
    type: 'RunCompleted',
    data: { run: s.run, status, bestRound: best?.round ?? null, bestScore: best?.score ?? null, bestSnapshot: best?.snapshot ?? null },
  };
};

/** A refund of the open round; the one that reaches MAX_REFUNDED_ROUNDS also ends the run (`failed`). */
function refundRound(s: RunState, round: number, reason: string): RunEventDraft[] {
  if (refundedRounds(s) + 1 < MAX_REFUNDED_ROUNDS) return [refund(s, round, reason)];
  return [refund(s, round, `${reason}; this is refund ${MAX_REFUNDED_ROUNDS} of the run, its cap: the run ends (failed)`), completedEvent(s, 'failed')];
}

/** Over a limit after adding `amount`? */
function over(s: RunState, kind: BudgetKind, consumedAfter: number): boolean {
  const limit = s.started?.protocol.budgets[kind] ?? null;
  return limit !== null && consumedAfter > limit + BUDGET_EPSILON;
}

/** Settles an open round whose Judge result (or pre-judging violation) is known: it counts. */
function countRound(s: RunState, r: RoundState, gpuSeconds: number, broken: RuleBroken | null, gpu: GpuHolding | null = null): RunEventDraft[] {
  const events: RunEventDraft[] = [];
  let hasViolation = r.violation !== null;
  const addViolation = (rule: string, detail: string) => {
    events.push(violationEvent(s, r.round, rule, detail));
    hasViolation = true;
  };
  if (gpuSeconds > 0) {
    events.push(budgetEvent(s, 'gpu_seconds', gpuSeconds, s.consumed.gpu_seconds, r.round, gpu));
    if (over(s, 'gpu_seconds', s.consumed.gpu_seconds + gpuSeconds))
      addViolation(
        RUN_RULES.budget('gpu_seconds'),
        `round ${r.round}'s Judge brought GPU use to ${fmt(s.consumed.gpu_seconds + gpuSeconds)} s, over the budget of ${fmt(s.started?.protocol.budgets.gpu_seconds ?? 0)} s`,
      );
  }
  if (broken && r.violation === null) addViolation(broken.rule, broken.detail);
  if (!hasViolation && r.judge?.status === 'submission_error')
    addViolation(RUN_RULES.submissionError, r.judge.detail ?? 'the Judge refused the submission before running the tests');
  const after = s.consumed.submissions + 1;
  if (over(s, 'submissions', after))
    addViolation(RUN_RULES.budget('submissions'), `round ${r.round} is submission ${after}, over the budget of ${s.started?.protocol.budgets.submissions}`);
  events.push(budgetEvent(s, 'submissions', 1, s.consumed.submissions, r.round));
  return events;
}

function decideSettle(s: RunState, c: Extract<RunCommand, { kind: 'settle' }>): Decision {
  const r = roundOf(s, c.round);
  if (!r || r.outcome !== 'open') return misuse(RUN_ERROR_CODES.CONFLICT, `round ${c.round} is not open`);
  const gpu = c.gpuSeconds ?? (c.gpu ? gpuSecondsOf(c.gpu) : 0);
  if (!Number.isFinite(gpu) || gpu < 0) return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'gpuSeconds must be a finite number >= 0');
  const holdingWhy = c.gpu ? gpuHoldingProblem(c.gpu) : null;
  if (holdingWhy) return misuse(RUN_ERROR_CODES.INVALID_INPUT, holdingWhy);
  if (c.infrastructure)
    return ok(refundRound(s, r.round, `infrastructure failure: ${c.infrastructure}; the round is refunded (no submission used, no cooldown)`));
  const broken = c.violation ?? null;
  if (!broken && r.violation === null) {
    if (r.judge === null) return ok(refundRound(s, r.round, 'no Judge result was recorded for the round; it is refunded (no submission used, no cooldown)'));
    if (r.judge.status === 'infrastructure_error')
      return ok(
        refundRound(
          s,
          r.round,
          `the Judge failed for reasons outside the submission (infrastructure_error${r.judge.detail ? `: ${r.judge.detail}` : ''}); the round is refunded (no submission used, no cooldown)`,
        ),
      );
  }
  return ok(countRound(s, r, gpu, broken, c.gpu ?? null));
}

function gpuHoldingProblem(h: GpuHolding): string | null {
  if (h.holder !== 'work' && h.holder !== 'judge') return 'gpu.holder must be "work" or "judge"';
  if (
    !Array.isArray(h.devices) ||
    h.devices.length === 0 ||
    h.devices.length > 64 ||
    h.devices.some((d) => typeof d !== 'string' || d.length === 0 || d.length > 128)
  )
    return 'gpu.devices must be 1 to 64 device ids';
  if (typeof h.heldSec !== 'number' || !Number.isFinite(h.heldSec) || h.heldSec < 0) return 'gpu.heldSec must be a finite number >= 0';
  return null;
}

function decideConsume(s: RunState, c: Extract<RunCommand, { kind: 'consume' }>): Decision {
  if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
  if (s.completed) return misuse(RUN_ERROR_CODES.CONFLICT, 'the run already completed');
  if (!(['wall_time', 'agent_time', 'gpu_seconds'] as const).includes(c.budget))
    return misuse(
      RUN_ERROR_CODES.INVALID_INPUT,
      `budget ${JSON.stringify(c.budget)} cannot be consumed directly (submissions are counted when a round settles)`,
    );
  if (typeof c.amount !== 'number' || !Number.isFinite(c.amount) || c.amount < 0)
    return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'amount must be a finite number >= 0');
  const round = c.round ?? null;
  if (round !== null && !roundOf(s, round)) return misuse(RUN_ERROR_CODES.CONFLICT, `round ${round} does not exist`);
  if (c.gpu && (c.budget !== 'gpu_seconds' || gpuHoldingProblem(c.gpu)))
    return misuse(
      RUN_ERROR_CODES.INVALID_INPUT,
      c.budget !== 'gpu_seconds' ? 'a GPU holding goes with the gpu_seconds budget only' : (gpuHoldingProblem(c.gpu) as string),
    );
  if (c.amount === 0) return ok([]);
  const events = [budgetEvent(s, c.budget, c.amount, s.consumed[c.budget], round, c.gpu ?? null)];
  const after = s.consumed[c.budget] + c.amount;
  const rule = RUN_RULES.budget(c.budget);
  if (over(s, c.budget, after) && (round !== null || !s.violations.some((v) => v.rule === rule && v.round === null))) {
    const limit = s.started.protocol.budgets[c.budget] as number;
    events.push(
      violationEvent(
        s,
        round,
        rule,
        `${BUDGET_LABEL[c.budget]} use reached ${fmt(after)} s, over the budget of ${fmt(limit)} s${round !== null ? ` (during round ${round})` : ''}; submissions are closed`,
      ),
    );
  }
  return ok(events);
}

function decideTick(s: RunState, now: Date): Decision {
  if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
  if (s.completed) return ok([]);
  const limit = s.started.protocol.budgets.wall_time;
  const elapsed = elapsedSec(s, now);
  const target = limit === null ? elapsed : Math.min(elapsed, limit);
  const amount = Math.round((target - s.consumed.wall_time) * 1000) / 1000;
  if (amount < 0.001) return ok([]);
  return ok([budgetEvent(s, 'wall_time', amount, s.consumed.wall_time, null)]);
}

function recoverRound(s: RunState, r: RoundState): RunEventDraft[] {
  if (r.violation !== null || (r.judge !== null && r.judge.status !== 'infrastructure_error')) return countRound(s, r, 0, null);
  const where =
    r.snapshot === null
      ? 'before the workspace was snapshotted'
      : r.judge === null
        ? `after the snapshot and before the Judge recorded a result${r.judgesLaunched.length ? ` (Judge ${r.judgesLaunched.join(', ')} was launched)` : ''}`
        : `and the Judge failed (infrastructure_error${r.judge.detail ? `: ${r.judge.detail}` : ''})`;
  return refundRound(s, r.round, `the controller stopped ${where}; the round is refunded (no submission used, no cooldown)`);
}

function decideComplete(s: RunState, c: Extract<RunCommand, { kind: 'complete' }>): Decision {
  if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
  if (s.completed) return misuse(RUN_ERROR_CODES.CONFLICT, `the run already completed (${s.completed.status})`);
  const events: RunEventDraft[] = [];
  const open = openRound(s);
  if (open) {
    const why = c.reason ? `: ${c.reason}` : '';
    events.push(refund(s, open.round, `the run ended (${c.status ?? 'completed'}${why}) before the round was judged; it is refunded`));
  }
  const best = bestRound(s);
  const status: RunEndStatus = c.status ?? (best ? 'completed' : 'no_valid_submission');
  events.push({
    type: 'RunCompleted',
    data: { run: s.run, status, bestRound: best?.round ?? null, bestScore: best?.score ?? null, bestSnapshot: best?.snapshot ?? null },
  });
  return ok(events);
}

function decideSnapshot(s: RunState, c: Extract<RunCommand, { kind: 'record_snapshot' }>): Decision {
  if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
  if (s.completed) return misuse(RUN_ERROR_CODES.CONFLICT, 'the run already completed');
  const snap = c.snapshot;
  if (!CID_RE.test(snap.root)) return misuse(RUN_ERROR_CODES.INVALID_INPUT, `snapshot root ${JSON.stringify(snap.root)} is not a CID`);
  if (!DIGEST_RE.test(snap.policyDigest)) return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'policyDigest must be a digest');
  for (const [k, v] of [
    ['files', snap.files],
    ['bytes', snap.bytes],
    ['durationMs', snap.durationMs],
  ] as const)
    if (!Number.isSafeInteger(v) || v < 0) return misuse(RUN_ERROR_CODES.INVALID_INPUT, `snapshot ${k} must be an integer >= 0`);
  if (c.round !== null) {
    const r = openRound(s);
    if (!r || r.round !== c.round) return misuse(RUN_ERROR_CODES.CONFLICT, `round ${c.round} is not the open round`);
    if (r.snapshot) return misuse(RUN_ERROR_CODES.CONFLICT, `round ${c.round} already has a snapshot`);
  }
  const data: JsonObject = { run: s.run, root: snap.root, files: snap.files, bytes: snap.bytes, durationMs: snap.durationMs, policyDigest: snap.policyDigest };
  if (c.round !== null) data.round = c.round;
  if (snap.source) data.source = clipText(snap.source, 4096);
  if (snap.flagged && snap.flagged.length) data.flagged = snap.flagged.slice(0, 100).map((f) => clipText(f, 4096));
  const events: RunEventDraft[] = [{ type: 'SnapshotTaken', data }];
  const e = c.edit;
  if (e && e.from !== e.to) {
    if (!CID_RE.test(e.from) || !CID_RE.test(e.to)) return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'edit from/to must be CIDs');
    for (const v of [e.added, e.removed, e.changed, e.bytesAdded, e.bytesRemoved])
      if (!Number.isSafeInteger(v) || v < 0) return misuse(RUN_ERROR_CODES.INVALID_INPUT, 'edit counts must be integers >= 0');
    const clip = (xs: readonly string[]) => xs.slice(0, 100).map((p) => clipText(p, 1024));
    events.push({
      type: 'WorkspaceEdited',
      data: {
        run: s.run,
        from: e.from,
        to: e.to,
        added: e.added,
        removed: e.removed,
        changed: e.changed,
        bytesAdded: e.bytesAdded,
        bytesRemoved: e.bytesRemoved,
        paths: { added: clip(e.paths.added), removed: clip(e.paths.removed), changed: clip(e.paths.changed) },
        truncated: e.truncated,
      },
    });
  }
  return ok(events);
}

export function decide(s: RunState, c: RunCommand, now: Date): Decision {
  switch (c.kind) {
    case 'start':
      return decideStart(s, c.input);
    case 'submit':
      return decideSubmit(s, c, now);
    case 'work_started':
      if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
      if (s.completed) return misuse(RUN_ERROR_CODES.CONFLICT, 'the run already completed');
      return ok([{ type: 'WorkStarted', data: { run: s.run, container: clipText(c.container, 128), image: c.image, limits: c.limits } }]);
    case 'record_snapshot':
      return decideSnapshot(s, c);
    case 'settle':
      return decideSettle(s, c);
    case 'consume':
      return decideConsume(s, c);
    case 'tick':
      return decideTick(s, now);
    case 'recover': {
      const open = openRound(s);
      return ok(open && !s.completed ? recoverRound(s, open) : []);
    }
    case 'complete':
      return decideComplete(s, c);
    case 'gpus_probed':
      return decideGpusProbed(s, c);
  }
}

/** Most GPUs one GpusProbed lists (the `--gpus` limit). */
export const MAX_PROBED_GPUS = 64;

function decideGpusProbed(s: RunState, c: Extract<RunCommand, { kind: 'gpus_probed' }>): Decision {
  if (!s.started) return misuse(RUN_ERROR_CODES.NOT_STARTED, 'the run has not started');
  if (s.completed) return misuse(RUN_ERROR_CODES.CONFLICT, 'the run already completed');
  if (c.gpus.length === 0 || c.gpus.length > MAX_PROBED_GPUS)
    return misuse(RUN_ERROR_CODES.INVALID_INPUT, `GpusProbed lists 1 to ${MAX_PROBED_GPUS} GPUs, not ${c.gpus.length}`);
  const gpus = c.gpus.map((g) => ({
    device: g.device,
    index: g.index,
    uuid: g.uuid,
    model: clipText(g.model, 256),
    memoryMiB: g.memoryMiB,
    driver: g.driver,
    cuda: g.cuda,
    ...(g.mig ? { mig: { parent: g.mig.parent, profile: g.mig.profile } } : {}),
  }));
  return ok([{ type: 'GpusProbed', data: { run: s.run, node: clipText(c.node, 256) || 'unknown', gpus, ...(c.resumed ? { resumed: true } : {}) } }]);
}
