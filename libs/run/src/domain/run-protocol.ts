/**
 * What RunStarted records about the rules of a run: the protocol (budgets, cooldown, editable paths, how the agent
 * authenticates, the protocol fingerprint's input) and the selection rule. Both are free-form objects in the
 * catalogue; their shape is fixed here, versioned by `scheme`, and parsed defensively when a run is folded, so a
 * verifier can recompute budgets and the selected round from the events alone.
 */
import { RUN_ERROR_CODES, eventInvalid, runError } from '../run.errors';
import { BUDGET_KINDS, SHA256_HEX_RE, type BudgetKind, type JsonObject } from './run-events';
import type { Direction, RunSettings } from '@assay/task-format';

export const RUN_PROTOCOL_SCHEME = 'assay.run-protocol/1';
export const SELECTION_SCHEME = 'assay.selection/1';

export type { Direction };

/** Limit per budget; null: unlimited. Seconds for the time budgets, a count for submissions. */
export type RunBudgets = { readonly [K in BudgetKind]: number | null };

export interface RunProtocol {
  readonly scheme: typeof RUN_PROTOCOL_SCHEME;
  readonly budgets: RunBudgets;
  /** Minimum seconds between two counted submissions (measured between their SubmissionReceived events). */
  readonly cooldownSec: number;
  /**
   * Workspace paths a submission may change, relative to the workspace: exact paths, or directories ending in `/`
   * (everything under them). Null: any path.
   */
  readonly editablePaths: readonly string[] | null;
  /** How the agent reaches the submission endpoint; only the SHA-256 of the bearer token is ever recorded. */
  readonly submission: { readonly endpoint: 'unix-socket'; readonly tokenSha256: string };
  /** The object hashed into RunStarted.fingerprint (@assay/task-format protocolFingerprintInput), or null. */
  readonly fingerprintInput: JsonObject | null;
}

/**
 * The selection rule: the best round among the eligible ones by `metric` and `direction`, ties to the earliest
 * round. Eligible: counted rounds whose Judge completed, with a finite primary score, and no RuleViolation.
 */
export interface SelectionRule {
  readonly scheme: typeof SELECTION_SCHEME;
  /** The reward key that ranks rounds; null: `reward`, else the only key of the rewards. */
  readonly metric: string | null;
  readonly direction: Direction;
  readonly eligible: 'counted_completed_without_violation';
  readonly tieBreak: 'earliest_round';
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isLimit = (v: unknown): v is number | null => v === null || (typeof v === 'number' && Number.isFinite(v) && v >= 0);

/** Checks an editable-path list: relative, normalised, `/`-separated, no `.` or `..` parts. Returns a problem or null. */
export function editablePathProblem(p: unknown): string | null {
  if (typeof p !== 'string' || p.length === 0 || p.length > 1024) return 'must be a non-empty string of at most 1024 characters';
  if (p.startsWith('/')) return 'must be relative to the workspace';
  const parts = (p.endsWith('/') ? p.slice(0, -1) : p).split('/');
  if (parts.some((x) => x === '' || x === '.' || x === '..')) return 'must be normalised (no empty, "." or ".." parts)';
  if (/[\u0000-\u001f\u007f*?[\]\\]/.test(p)) return 'must be a plain path (no control characters, wildcards or backslashes)';
  return null;
}

function budgetsProblem(b: unknown): string | null {
  if (!isObj(b)) return 'budgets must be an object';
  for (const k of Object.keys(b)) if (!(BUDGET_KINDS as readonly string[]).includes(k)) return `budgets has an unknown key "${k}"`;
  for (const k of BUDGET_KINDS) {
    if (!(k in b)) return `budgets.${k} is missing`;
    if (!isLimit(b[k])) return `budgets.${k} must be a finite number >= 0 or null`;
  }
  if (b.submissions !== null && !Number.isSafeInteger(b.submissions)) return 'budgets.submissions must be an integer or null';
  return null;
}

/** Problems of a protocol object, or null. Used on the way in (start) and on the way out (fold). */
export function runProtocolProblem(p: unknown): string | null {
  if (!isObj(p)) return 'protocol must be an object';
  if (p.scheme !== RUN_PROTOCOL_SCHEME) return `protocol.scheme must be "${RUN_PROTOCOL_SCHEME}"`;
  const b = budgetsProblem(p.budgets);
  if (b) return `protocol.${b}`;
  if (typeof p.cooldownSec !== 'number' || !Number.isFinite(p.cooldownSec) || p.cooldownSec < 0) return 'protocol.cooldownSec must be a finite number >= 0';
  if (p.editablePaths !== null) {
    if (!Array.isArray(p.editablePaths) || p.editablePaths.length === 0 || p.editablePaths.length > 1000)
      return 'protocol.editablePaths must be null or a list of 1 to 1000 paths';
    for (const e of p.editablePaths) {
      const why = editablePathProblem(e);
      if (why) return `protocol.editablePaths: ${JSON.stringify(e)} ${why}`;
    }
  }
  const s = p.submission;
  if (!isObj(s) || s.endpoint !== 'unix-socket' || typeof s.tokenSha256 !== 'string' || !SHA256_HEX_RE.test(s.tokenSha256))
    return 'protocol.submission must be {endpoint: "unix-socket", tokenSha256: 64 lowercase hex}';
  if (p.fingerprintInput !== null && !isObj(p.fingerprintInput)) return 'protocol.fingerprintInput must be an object or null';
  return null;
}

export function selectionRuleProblem(s: unknown): string | null {
  if (!isObj(s)) return 'selection must be an object';
  if (s.scheme !== SELECTION_SCHEME) return `selection.scheme must be "${SELECTION_SCHEME}"`;
  if (s.metric !== null && (typeof s.metric !== 'string' || s.metric.length === 0 || s.metric.length > 256))
    return 'selection.metric must be null or 1 to 256 characters';
  if (s.direction !== 'maximize' && s.direction !== 'minimize') return 'selection.direction must be "maximize" or "minimize"';
  if (s.eligible !== 'counted_completed_without_violation') return 'selection.eligible must be "counted_completed_without_violation"';
  if (s.tieBreak !== 'earliest_round') return 'selection.tieBreak must be "earliest_round"';
  return null;
}

export function parseRunProtocol(v: unknown): RunProtocol {
  const why = runProtocolProblem(v);
  if (why) throw eventInvalid(`RunStarted: ${why}`);
  const p = v as Record<string, unknown>;
  const b = p.budgets as Record<BudgetKind, number | null>;
  const s = p.submission as Record<string, string>;
  return Object.freeze({
    scheme: RUN_PROTOCOL_SCHEME,
    budgets: Object.freeze({ submissions: b.submissions, wall_time: b.wall_time, agent_time: b.agent_time, gpu_seconds: b.gpu_seconds }),
    cooldownSec: p.cooldownSec as number,
    editablePaths: p.editablePaths === null ? null : Object.freeze([...(p.editablePaths as string[])]),
    submission: Object.freeze({ endpoint: 'unix-socket' as const, tokenSha256: s.tokenSha256 as string }),
    fingerprintInput: (p.fingerprintInput ?? null) as JsonObject | null,
  });
}

export function parseSelectionRule(v: unknown): SelectionRule {
  const why = selectionRuleProblem(v);
  if (why) throw eventInvalid(`RunStarted: ${why}`);
  const s = v as Record<string, unknown>;
  return Object.freeze({
    scheme: SELECTION_SCHEME,
    metric: s.metric as string | null,
    direction: s.direction as Direction,
    eligible: 'counted_completed_without_violation' as const,
    tieBreak: 'earliest_round' as const,
  });
}

/** The plain JSON forms recorded in RunStarted. */
export function protocolJson(p: RunProtocol): JsonObject {
  return {
    scheme: p.scheme,
    budgets: { ...p.budgets },
    cooldownSec: p.cooldownSec,
    editablePaths: p.editablePaths === null ? null : [...p.editablePaths],
    submission: { endpoint: p.submission.endpoint, tokenSha256: p.submission.tokenSha256 },
    fingerprintInput: p.fingerprintInput,
  };
}

export function selectionJson(s: SelectionRule): JsonObject {
  return { scheme: s.scheme, metric: s.metric, direction: s.direction, eligible: s.eligible, tieBreak: s.tieBreak };
}

/**
 * Run settings as @assay/task-format merges them. `gpuBudgetSec` is the `gpu_seconds` budget; the agent time
 * budget is the task's agent timeout.
 */
export type RunSettingsLike = RunSettings;

export interface ProtocolInput {
  readonly settings: RunSettingsLike;
  /** The task's agent timeout (TaskPlan.agent.timeoutSec), the agent-time budget; null: unlimited. */
  readonly agentTimeoutSec: number | null;
  readonly editablePaths: readonly string[] | null;
  readonly tokenSha256: string;
  readonly fingerprintInput: JsonObject | null;
}

/** Builds and checks the protocol and selection rule of a new run (pure). Throws RUN_INVALID_INPUT. */
export function buildRunRules(i: ProtocolInput): { protocol: RunProtocol; selection: SelectionRule } {
  const s = i.settings;
  const protocol: RunProtocol = {
    scheme: RUN_PROTOCOL_SCHEME,
    budgets: {
      submissions: s.maxSubmissions,
      wall_time: s.timeBudgetSec,
      agent_time: i.agentTimeoutSec,
      gpu_seconds: s.gpuBudgetSec,
    },
    cooldownSec: s.cooldownSec,
    editablePaths: i.editablePaths === null ? null : [...i.editablePaths],
    submission: { endpoint: 'unix-socket', tokenSha256: i.tokenSha256 },
    fingerprintInput: i.fingerprintInput,
  };
  const selection: SelectionRule = {
    scheme: SELECTION_SCHEME,
    metric: s.primaryMetric,
    direction: s.direction,
    eligible: 'counted_completed_without_violation',
    tieBreak: 'earliest_round',
  };
  const why = runProtocolProblem(protocolJson(protocol)) ?? selectionRuleProblem(selectionJson(selection));
  if (why) throw runError(RUN_ERROR_CODES.INVALID_INPUT, 'invalid_input', why);
  return { protocol: parseRunProtocol(protocolJson(protocol)), selection: parseSelectionRule(selectionJson(selection)) };
}
