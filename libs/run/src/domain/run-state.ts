/**
 * The run as an event-sourced aggregate: `evolve(state, event)` folds one event of the run's history (its own stream
 * and the Judge's events about it, in global position order) into the state. Pure and strict: an event that breaks
 * the run's invariants (a round out of order, two open rounds, a RunStarted twice, a malformed protocol) throws
 * RUN_EVENT_INVALID, because such a history was not written by a correct controller.
 *
 * Rounds: SubmissionReceived opens round n (dense from 1, one open round at a time). A round is settled exactly
 * once, in the run stream, by either
 *   - BudgetConsumed {budget: "submissions", round: n}: the round counts (it used a submission); or
 *   - SubmissionRejected {round: n, status: 503}: the round was closed without a score and refunded (no submission
 *     used, no cooldown started): an infrastructure failure, or a controller that stopped mid-round.
 * The Judge's facts about the round (JudgeCompleted status, RewardRecorded rewards, RuleViolation) are taken while
 * the round is open; a RuleViolation the controller records for the round (run stream) marks it at any time.
 */
import { eventInvalid } from '../run.errors';
import {
  BUDGET_KINDS,
  CID_RE,
  isJudgeStream,
  JUDGE_STATUSES,
  REWARD_KEY_RE,
  RUN_END_STATUSES,
  runStream,
  type BudgetKind,
  type JudgeStatus,
  type RunEndStatus,
  type RunEventRecord,
} from './run-events';
import { parseRunProtocol, parseSelectionRule, type RunProtocol, type SelectionRule } from './run-protocol';
import { primaryScoreOf, selectBest, type RoundScore } from './selection';

export type RoundOutcome = 'open' | 'counted' | 'refunded';

export interface RoundJudgeFacts {
  readonly judge: string;
  readonly status: JudgeStatus;
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly detail: string | null;
}

export interface RoundViolation {
  readonly rule: string;
  readonly detail: string;
  /** Who recorded it: the controller (run stream) or the Judge (its stream). */
  readonly by: 'run' | 'judge';
}

export interface RoundState {
  readonly round: number;
  /** Time of its SubmissionReceived. */
  readonly receivedAt: string;
  readonly snapshot: { readonly root: string; readonly files: number; readonly bytes: number } | null;
  readonly judgesLaunched: readonly string[];
  readonly judge: RoundJudgeFacts | null;
  readonly rewards: Readonly<Record<string, number>> | null;
  readonly violation: RoundViolation | null;
  readonly outcome: RoundOutcome;
  readonly refund: { readonly status: number; readonly reason: string } | null;
}

export interface RunStartedFacts {
  readonly task: string;
  readonly taskDigest: string;
  readonly agent: string;
  readonly model: string | null;
  readonly fingerprint: string;
  readonly startedAt: string;
  readonly protocol: RunProtocol;
  readonly selection: SelectionRule;
}

export interface RunCompletedFacts {
  readonly status: RunEndStatus;
  readonly bestRound: number | null;
  readonly bestScore: number | null;
  readonly bestSnapshot: string | null;
  readonly at: string;
}

export interface RunState {
  readonly run: string;
  /** Revision of the last event of the run stream; null while the stream does not exist. */
  readonly revision: number | null;
  /** Position of the last event folded; -1 for none. */
  readonly lastPosition: number;
  readonly started: RunStartedFacts | null;
  readonly work: { readonly container: string; readonly image: string } | null;
  /** Ascending by round number, dense from 1. */
  readonly rounds: readonly RoundState[];
  readonly consumed: Readonly<Record<BudgetKind, number>>;
  /** SubmissionReceived time of the latest counted round: the cooldown runs from there. */
  readonly lastCountedAt: string | null;
  /** The starting workspace: the first SnapshotTaken of the run stream without a round. */
  readonly baselineRoot: string | null;
  /** The latest snapshot root recorded in the run stream. */
  readonly lastRoot: string | null;
  /** SubmissionRejected events without a round (refused requests: 401, 422, 429). */
  readonly rejections: number;
  readonly violations: ReadonlyArray<{ readonly round: number | null; readonly rule: string; readonly detail: string; readonly by: 'run' | 'judge' }>;
  /** The first budget rule broken (RuleViolation `budget.*`); closes submissions. */
  readonly overBudget: string | null;
  readonly completed: RunCompletedFacts | null;
}

const ZERO: Readonly<Record<BudgetKind, number>> = Object.freeze({ submissions: 0, wall_time: 0, agent_time: 0, gpu_seconds: 0 });

export function initialRunState(run: string): RunState {
  return {
    run,
    revision: null,
    lastPosition: -1,
    started: null,
    work: null,
    rounds: [],
    consumed: ZERO,
    lastCountedAt: null,
    baselineRoot: null,
    lastRoot: null,
    rejections: 0,
    violations: [],
    overBudget: null,
    completed: null,
  };
}

// ---- reading event data defensively ------------------------------------------------------------------------------

type Data = Readonly<Record<string, unknown>>;

function str(d: Data, k: string, where: string, opts: { optional?: boolean; nullable?: boolean; max?: number } = {}): string | null {
  const v = d[k];
  if (v === undefined && opts.optional) return null;
  if (v === null && opts.nullable) return null;
  if (typeof v !== 'string' || v.length > (opts.max ?? 4096)) throw eventInvalid(`${where}: field "${k}" must be a string`, { field: k });
  return v;
}

function int(d: Data, k: string, where: string, opts: { optional?: boolean; nullable?: boolean; min?: number } = {}): number | null {
  const v = d[k];
  if (v === undefined && opts.optional) return null;
  if (v === null && opts.nullable) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < (opts.min ?? 0))
    throw eventInvalid(`${where}: field "${k}" must be an integer >= ${opts.min ?? 0}`, { field: k });
  return v;
}

function num(d: Data, k: string, where: string, opts: { nullable?: boolean; min?: number } = {}): number | null {
  const v = d[k];
  if (v === null && opts.nullable) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || (opts.min !== undefined && v < opts.min))
    throw eventInvalid(`${where}: field "${k}" must be a finite number`, { field: k });
  return v;
}

function rewardsOf(v: unknown, where: string): Record<string, number> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw eventInvalid(`${where}: rewards must be an object`);
  const out: Record<string, number> = {};
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > 64) throw eventInvalid(`${where}: more than 64 rewards`);
  for (const [k, x] of entries) {
    if (!REWARD_KEY_RE.test(k) || typeof x !== 'number' || !Number.isFinite(x))
      throw eventInvalid(`${where}: reward ${JSON.stringify(k)} must be a finite number under a plain key`);
    out[k] = x;
  }
  return out;
}

// ---- queries ------------------------------------------------------------------------------------------------------

export function openRound(s: RunState): RoundState | null {
  const last = s.rounds[s.rounds.length - 1];
  return last !== undefined && last.outcome === 'open' ? last : null;
}

export function roundOf(s: RunState, round: number): RoundState | null {
  const r = s.rounds[round - 1];
  return r !== undefined && r.round === round ? r : null;
}

export const nextRoundNumber = (s: RunState): number => s.rounds.length + 1;

/** The score of a round under the run's selection rule, or null when the round is not eligible. */
export function eligibleScore(s: RunState, r: RoundState): number | null {
  if (!s.started || r.outcome !== 'counted' || r.violation !== null || r.snapshot === null) return null;
  if (r.judge?.status !== 'completed') return null;
  return primaryScoreOf(r.rewards, s.started.selection.metric);
}

/** The primary score of a judged round (whatever its eligibility), or null. */
export function roundScore(s: RunState, r: RoundState): number | null {
  return s.started ? primaryScoreOf(r.rewards, s.started.selection.metric) : null;
}

export function eligibleRounds(s: RunState): RoundScore[] {
  const out: RoundScore[] = [];
  for (const r of s.rounds) {
    const score = eligibleScore(s, r);
    if (score !== null && r.snapshot) out.push({ round: r.round, score, snapshot: r.snapshot.root });
  }
  return out;
}

/** The best round so far under the recorded selection rule. */
export function bestRound(s: RunState): RoundScore | null {
  return s.started ? selectBest(eligibleRounds(s), s.started.selection.direction) : null;
}

// ---- evolve -------------------------------------------------------------------------------------------------------

function replaceRound(s: RunState, r: RoundState): RunState {
  const rounds = s.rounds.slice();
  rounds[r.round - 1] = r;
  return { ...s, rounds };
}

function evolveOwn(s: RunState, e: RunEventRecord): RunState {
  const d = e.data;
  const where = `${e.type} at position ${e.position}`;
  if (e.type === 'RunStarted') {
    if (s.started) throw eventInvalid(`${where}: the run was already started`, { position: e.position });
    if (d.run !== s.run) throw eventInvalid(`${where}: names run ${JSON.stringify(d.run)}, not ${s.run}`, { position: e.position });
    return {
      ...s,
      started: {
        task: str(d, 'task', where) as string,
        taskDigest: str(d, 'taskDigest', where) as string,
        agent: str(d, 'agent', where) as string,
        model: str(d, 'model', where, { optional: true }),
        fingerprint: str(d, 'fingerprint', where) as string,
        startedAt: e.time,
        protocol: parseRunProtocol(d.protocol),
        selection: parseSelectionRule(d.selection),
      },
    };
  }
  if (!s.started) throw eventInvalid(`${where}: the run stream must begin with RunStarted`, { position: e.position });
  if (s.completed) throw eventInvalid(`${where}: the run already completed`, { position: e.position });
  if ('run' in d && d.run !== s.run) throw eventInvalid(`${where}: names run ${JSON.stringify(d.run)}, not ${s.run}`, { position: e.position });
  switch (e.type) {
    case 'WorkStarted':
      return { ...s, work: { container: str(d, 'container', where) as string, image: str(d, 'image', where) as string } };
    case 'SnapshotTaken': {
      const root = str(d, 'root', where) as string;
      if (!CID_RE.test(root)) throw eventInvalid(`${where}: root is not a CID`);
      const round = int(d, 'round', where, { optional: true, min: 1 });
      if (round === null) return { ...s, baselineRoot: s.baselineRoot ?? root, lastRoot: root };
      const r = openRound(s);
      if (!r || r.round !== round) throw eventInvalid(`${where}: round ${round} is not the open round`, { position: e.position, round });
      if (r.snapshot) throw eventInvalid(`${where}: round ${round} already has a snapshot`, { position: e.position, round });
      const files = int(d, 'files', where) as number;
      const bytes = int(d, 'bytes', where) as number;
      return { ...replaceRound(s, { ...r, snapshot: { root, files, bytes } }), lastRoot: root };
    }
    case 'WorkspaceEdited': {
      const to = str(d, 'to', where) as string;
      return { ...s, lastRoot: to };
    }
    case 'SubmissionReceived': {
      const round = int(d, 'round', where, { min: 1 }) as number;
      if (openRound(s)) throw eventInvalid(`${where}: round ${round} opened while round ${openRound(s)?.round} is open`, { position: e.position });
      if (round !== nextRoundNumber(s)) throw eventInvalid(`${where}: round ${round} out of order (next is ${nextRoundNumber(s)})`, { position: e.position });
      const r: RoundState = {
        round,
        receivedAt: e.time,
        snapshot: null,
        judgesLaunched: [],
        judge: null,
        rewards: null,
        violation: null,
        outcome: 'open',
        refund: null,
      };
      return { ...s, rounds: [...s.rounds, r] };
    }
    case 'SubmissionRejected': {
      const round = int(d, 'round', where, { optional: true, min: 1 });
      const status = int(d, 'status', where, { min: 100 }) as number;
      const reason = str(d, 'reason', where) as string;
      if (round === null) return { ...s, rejections: s.rejections + 1 };
      const r = openRound(s);
      if (!r || r.round !== round) throw eventInvalid(`${where}: refunds round ${round}, which is not the open round`, { position: e.position, round });
      return replaceRound(s, { ...r, outcome: 'refunded', refund: { status, reason } });
    }
    case 'BudgetConsumed': {
      const budget = str(d, 'budget', where) as string;
      if (!(BUDGET_KINDS as readonly string[]).includes(budget)) throw eventInvalid(`${where}: unknown budget ${JSON.stringify(budget)}`);
      const amount = num(d, 'amount', where, { min: 0 }) as number;
      const kind = budget as BudgetKind;
      const round = int(d, 'round', where, { optional: true, min: 1 });
      let next: RunState = { ...s, consumed: { ...s.consumed, [kind]: s.consumed[kind] + amount } };
      if (kind === 'submissions' && round !== null) {
        const r = openRound(s);
        if (!r || r.round !== round) throw eventInvalid(`${where}: counts round ${round}, which is not the open round`, { position: e.position, round });
        next = { ...replaceRound(next, { ...r, outcome: 'counted' }), lastCountedAt: r.receivedAt };
      }
      return next;
    }
    case 'RuleViolation':
      return violation(s, e, 'run');
    case 'RunCompleted': {
      const status = str(d, 'status', where) as string;
      if (!(RUN_END_STATUSES as readonly string[]).includes(status)) throw eventInvalid(`${where}: unknown status ${JSON.stringify(status)}`);
      if (openRound(s)) throw eventInvalid(`${where}: round ${openRound(s)?.round} is still open`, { position: e.position });
      const bestRoundNo = int(d, 'bestRound', where, { nullable: true, min: 1 });
      return {
        ...s,
        completed: {
          status: status as RunEndStatus,
          bestRound: bestRoundNo,
          bestScore: num(d, 'bestScore', where, { nullable: true }),
          bestSnapshot: str(d, 'bestSnapshot', where, { nullable: true }),
          at: e.time,
        },
      };
    }
    default:
      return s; // a type the run does not interpret (the catalogue decides what may be appended at all)
  }
}

function violation(s: RunState, e: RunEventRecord, by: 'run' | 'judge'): RunState {
  const d = e.data;
  const where = `${e.type} at position ${e.position}`;
  const rule = str(d, 'rule', where) as string;
  const detail = str(d, 'detail', where) as string;
  const round = int(d, 'round', where, { optional: true, min: 1 });
  const record = { round, rule, detail, by };
  let next: RunState = { ...s, violations: [...s.violations, record], overBudget: s.overBudget ?? (rule.startsWith('budget.') ? rule : null) };
  if (round !== null) {
    const r = roundOf(next, round);
    if (!r) {
      if (by === 'run') throw eventInvalid(`${where}: names round ${round}, which does not exist`, { position: e.position, round });
      return s; // the Judge speaking of a round this run never opened: not ours to fold
    }
    if (by === 'judge' && r.outcome !== 'open') return next;
    if (r.violation === null) next = replaceRound(next, { ...r, violation: { rule, detail, by } });
  }
  return next;
}

function evolveJudge(s: RunState, e: RunEventRecord): RunState {
  const d = e.data;
  if (d.run !== s.run || !s.started || s.completed) return s;
  const where = `${e.type} at position ${e.position}`;
  const round = int(d, 'round', where, { optional: true, min: 1 });
  if (round === null) return s;
  const r = roundOf(s, round);
  if (!r) return s;
  if (e.type === 'RuleViolation') return violation(s, e, 'judge');
  if (r.outcome !== 'open') return s; // late news about a settled round: the settlement stands
  switch (e.type) {
    case 'JudgeLaunched':
      return replaceRound(s, { ...r, judgesLaunched: [...r.judgesLaunched, str(d, 'judge', where) as string] });
    case 'JudgeCompleted': {
      if (r.judge !== null) return s; // the first result of a round stands
      const status = str(d, 'status', where) as string;
      if (!(JUDGE_STATUSES as readonly string[]).includes(status)) throw eventInvalid(`${where}: unknown status ${JSON.stringify(status)}`);
      return replaceRound(s, {
        ...r,
        judge: {
          judge: str(d, 'judge', where) as string,
          status: status as JudgeStatus,
          exitCode: d.exitCode === null ? null : (int(d, 'exitCode', where, { min: Number.MIN_SAFE_INTEGER }) as number),
          durationMs: int(d, 'durationMs', where) as number,
          detail: str(d, 'detail', where, { optional: true }),
        },
      });
    }
    case 'RewardRecorded': {
      if (r.judge === null || r.judge.judge !== d.judge || r.rewards !== null) return s;
      return replaceRound(s, { ...r, rewards: rewardsOf(d.rewards, where) });
    }
    default:
      return s;
  }
}

/** Folds one event. Events of other runs and of streams the run does not read are ignored. */
export function evolve(s: RunState, e: RunEventRecord): RunState {
  if (e.position <= s.lastPosition) throw eventInvalid(`event at position ${e.position} folded after position ${s.lastPosition}`, { position: e.position });
  let next: RunState;
  if (e.stream === runStream(s.run)) {
    if (e.revision !== (s.revision === null ? 0 : s.revision + 1))
      throw eventInvalid(`${e.type} at position ${e.position}: revision ${e.revision} of ${e.stream} follows revision ${s.revision ?? 'none'}`, {
        position: e.position,
      });
    next = { ...evolveOwn(s, e), revision: e.revision };
  } else if (isJudgeStream(e.stream)) next = evolveJudge(s, e);
  else next = s;
  return { ...next, lastPosition: e.position };
}

export function foldRun(run: string, events: Iterable<RunEventRecord>, from: RunState = initialRunState(run)): RunState {
  let s = from;
  for (const e of events) s = evolve(s, e);
  return s;
}
