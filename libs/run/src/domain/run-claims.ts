/**
 * The run's rules as the ledger verifier's `claims` step (ClaimRules, @assay/ledger): whatever is signed, a best
 * score, a count or a budget must follow from the recorded events. Every event of the claim types is handed in, in
 * position order, after it passed the cryptographic steps; this folds
 *
 *   - every run stream `run-<id>` with the run's own strict fold (`evolve`, run-state.ts), plus what a verifier
 *     needs on top of it: the controller's decisions (decide.ts) re-checked against the state they were made on;
 *   - every Judge stream `judge-<id>` with the Judge's own order (what JudgeRunner writes), and, when its events
 *     name a run, against that run: a started run, an existing round, the round's snapshot.
 *
 * Pure: no I/O. The rules, their names and codes are listed in CLAIM_RULES and documented in docs/formats.md
 * ("Claims"), precisely enough for an independent verifier to implement the same checks.
 */
import type { ClaimChecker, ClaimEvent, ClaimProblem, ClaimRules } from '@assay/ledger';
import { isAssayError } from '@assay/core';
import { BUDGET_EPSILON, MAX_REFUNDED_ROUNDS, refundedRounds } from './decide';
import { BUDGET_KINDS, isJudgeStream, RUN_STREAM_CATEGORY, type BudgetKind, type JudgeStatus, type RunEventRecord } from './run-events';
import { bestRound, evolve, initialRunState, openRound, roundOf, type RunState } from './run-state';
import { BASELINE_EVENT_TYPE, baselineStream, summarizeScores } from './baseline';
import { primaryScoreOf } from './selection';

/** The name of this rule set, as reports print it. */
export const RUN_CLAIM_RULES_NAME = 'assay.run-claims/1';

/** Every rule of the claims step: name -> code. The name says what broke; the code groups rules for scripts. */
export const CLAIM_RULES = {
  /** A claim type in a stream it is never written to. */
  'claims.stream': 'VERIFY_CLAIM_STREAM',
  /** A run stream begins with RunStarted. */
  'run.started_first': 'VERIFY_CLAIM_NOT_STARTED',
  /** RunStarted once per run stream. */
  'run.started_once': 'VERIFY_CLAIM_RUN_INVALID',
  /** RunStarted's protocol and selection rule parse (assay.run-protocol/1, assay.selection/1). */
  'run.protocol': 'VERIFY_CLAIM_RUN_INVALID',
  /** Every event of a run stream that names a run names the stream's own. */
  'run.own_run': 'VERIFY_CLAIM_WRONG_RUN',
  /** Nothing follows RunCompleted in a run stream. */
  'run.ended': 'VERIFY_CLAIM_AFTER_END',
  /** A refused request (SubmissionRejected without a round) has status 401, 422 or 429. */
  'run.rejection_status': 'VERIFY_CLAIM_REJECTION',
  /** RunCompleted with no round left open. */
  'run.open_round': 'VERIFY_CLAIM_OPEN_ROUND',
  /** RunCompleted's bestRound, bestScore, bestSnapshot are the selection rule applied to the recorded rounds. */
  'run.best': 'VERIFY_CLAIM_BEST',
  /** RunCompleted's status: `completed` only with a best round, `no_valid_submission` only without one. */
  'run.status': 'VERIFY_CLAIM_RUN_STATUS',
  /** Anything else the run's fold refuses. */
  'run.fold': 'VERIFY_CLAIM_RUN_INVALID',
  /** SubmissionReceived opens round n = rounds so far + 1, while no round is open. */
  'round.order': 'VERIFY_CLAIM_ROUND_ORDER',
  /** No round is opened while the run is closed by its budgets. */
  'round.closed': 'VERIFY_CLAIM_SUBMISSION_CLOSED',
  /** SnapshotTaken with a round: the open round, once. */
  'round.snapshot': 'VERIFY_CLAIM_ROUND_SNAPSHOT',
  /** A round is settled once, while open: refunded (SubmissionRejected status 503) or counted (BudgetConsumed submissions, amount 1). */
  'round.settled_once': 'VERIFY_CLAIM_ROUND_SETTLEMENT',
  /** A counted round has a RuleViolation or a Judge result other than infrastructure_error; submission_error has a RuleViolation. */
  'round.judged': 'VERIFY_CLAIM_ROUND_UNJUDGED',
  /** A run-stream RuleViolation or BudgetConsumed naming a round names one that was received. */
  'round.exists': 'VERIFY_CLAIM_UNKNOWN_ROUND',
  /** BudgetConsumed.remaining is the limit minus all consumption of that budget so far (null without a limit). */
  'budget.remaining': 'VERIFY_CLAIM_BUDGET_REMAINING',
  /** Consumption over a limit comes with a RuleViolation budget.<kind>. */
  'budget.over': 'VERIFY_CLAIM_BUDGET_OVER',
  /** At most MAX_REFUNDED_ROUNDS (10) refunded rounds per run; the refund that reaches the cap ends the run: no round opens after it, and RunCompleted's status is failed. */
  'run.refund_cap': 'VERIFY_CLAIM_REFUND_CAP',
  /** JudgeLaunched, JudgeCompleted, RewardRecorded name the judge of their stream. */
  'judge.id': 'VERIFY_CLAIM_JUDGE_ID',
  /** JudgeLaunched is the first event of its stream; one JudgeCompleted per stream. */
  'judge.order': 'VERIFY_CLAIM_JUDGE_ORDER',
  /** A result that needs a running Judge (completed, verifier_error, verifier_timeout) follows a JudgeLaunched. */
  'judge.launched': 'VERIFY_CLAIM_JUDGE_NOT_LAUNCHED',
  /** RewardRecorded once, after the stream's JudgeCompleted with status completed. */
  'judge.reward': 'VERIFY_CLAIM_REWARD',
  /** A Judge's RuleViolation: once, and only with a submission_error result. */
  'judge.violation': 'VERIFY_CLAIM_JUDGE_VIOLATION',
  /** A Judge stream names one run and round throughout (or none), both or neither. */
  'judge.run_ref': 'VERIFY_CLAIM_JUDGE_RUN',
  /** A run named by a Judge event has a RunStarted before it. */
  'judge.run_started': 'VERIFY_CLAIM_UNKNOWN_RUN',
  /** A round named by a Judge event was received before it. */
  'judge.round_exists': 'VERIFY_CLAIM_UNKNOWN_ROUND',
  /** A Judge is launched for the open round, on that round's snapshot (JudgeLaunched.snapshot = SnapshotTaken.root). */
  'judge.snapshot': 'VERIFY_CLAIM_JUDGE_SNAPSHOT',
  /** BaselineRecorded is in its task's stream `baseline-<task>` only. */
  'baseline.stream': 'VERIFY_CLAIM_BASELINE',
  /**
   * Every repeat of a BaselineRecorded is a distinct standalone Judge recorded before it, launched on the baseline's
   * snapshot (and its judge image when named), with the repeat's status and, when completed, the primary score its
   * RewardRecorded's rewards give under the baseline's metric.
   */
  'baseline.judges': 'VERIFY_CLAIM_BASELINE',
  /** A BaselineRecorded's repeats is the number of its scores; median, min and max are those of its completed scores. */
  'baseline.summary': 'VERIFY_CLAIM_BASELINE',
} as const;

export type ClaimRuleName = keyof typeof CLAIM_RULES;

/** Types only a run stream holds. */
const RUN_ONLY = new Set(['RunStarted', 'WorkStarted', 'SubmissionReceived', 'SubmissionRejected', 'BudgetConsumed', 'RunCompleted', 'GpusProbed']);
/** Types only a Judge stream holds. */
const JUDGE_ONLY = new Set(['JudgeLaunched', 'JudgeCompleted', 'RewardRecorded']);
/** Statuses a Judge can report without having launched a container (its rules or its set-up failed first). */
const UNLAUNCHED_STATUSES: ReadonlySet<string> = new Set(['infrastructure_error', 'submission_error']);
/** Statuses of refused requests (SubmissionRejected without a round). */
const REFUSAL_STATUSES: ReadonlySet<number> = new Set([401, 422, 429]);
/** Wall time is recorded by ticks rounded to the millisecond: they may overshoot the limit by half of one. */
const WALL_TIME_TICK_SLACK = 0.0005;
/** The fold keeps times for cooldowns and wall time, which claims do not use: every event gets this one. */
const NO_TIME = '1970-01-01T00:00:00.000Z';

const RUN_PREFIX = `${RUN_STREAM_CATEGORY}-`;

type Data = Readonly<Record<string, unknown>>;

interface RunEntry {
  readonly run: string;
  state: RunState;
  /** Consumption over a limit whose RuleViolation must be the next event of the run stream. */
  owed: { readonly kind: BudgetKind; readonly round: number | null; readonly position: number } | null;
}

interface JudgeEntry {
  readonly stream: string;
  readonly judge: string;
  /** The run and round the stream is about, fixed by its first event; null: a standalone Judge. */
  ref: { readonly run: string; readonly round: number } | null;
  events: number;
  launched: boolean;
  completed: JudgeStatus | null;
  rewarded: boolean;
  /** Position of the stream's RuleViolation, if any. */
  violation: number | null;
  /** JudgeLaunched's snapshot and image; RewardRecorded's rewards (for baselines' repeats). */
  snapshot: string | null;
  image: string | null;
  rewards: Readonly<Record<string, number>> | null;
}

const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const show = (v: unknown): string => JSON.stringify(v) ?? 'undefined';

class RunClaimChecker implements ClaimChecker {
  private readonly runs = new Map<string, RunEntry>();
  private readonly judges = new Map<string, JudgeEntry>();
  private e!: ClaimEvent;

  private problem(rule: ClaimRuleName, message: string, at: { stream?: string; position?: number | null; type?: string } = {}): ClaimProblem {
    const position = at.position === undefined ? this.e.position : at.position;
    const where = position === null ? 'at the end of the log' : at.type !== undefined ? `${at.type} at position ${position}` : this.e.type;
    return { code: CLAIM_RULES[rule], rule, message: `${where}: ${message}`, stream: at.stream ?? this.e.stream, position };
  }

  event(e: ClaimEvent): ClaimProblem | null {
    this.e = e;
    const inRun = e.stream.startsWith(RUN_PREFIX);
    const inJudge = isJudgeStream(e.stream);
    if (RUN_ONLY.has(e.type) && !inRun) return this.problem('claims.stream', `${e.type} is written by the run controller in the run's stream run-<id> only`);
    if (JUDGE_ONLY.has(e.type) && !inJudge) return this.problem('claims.stream', `${e.type} is written by the Judge in its stream judge-<id> only`);
    if (e.type === 'RuleViolation' && !inRun && !inJudge)
      return this.problem('claims.stream', 'RuleViolation is written by the run controller (run-<id>) or a Judge (judge-<id>) only');
    if (inJudge && !JUDGE_ONLY.has(e.type) && e.type !== 'RuleViolation')
      return this.problem('claims.stream', `a Judge stream holds JudgeLaunched, JudgeCompleted, RewardRecorded and RuleViolation only, not ${e.type}`);
    if (inRun) return this.runEvent(e, e.stream.slice(RUN_PREFIX.length));
    if (inJudge) return this.judgeEvent(e);
    if (e.type === BASELINE_EVENT_TYPE) return this.baselineEvent(e);
    // SnapshotTaken / WorkspaceEdited of the snapshot commands: about no run.
    if ('run' in e.data || 'round' in e.data) return this.problem('claims.stream', `${e.type} naming a run or round belongs in that run's stream run-<id>`);
    return null;
  }

  end(): ClaimProblem | null {
    for (const r of this.runs.values()) {
      if (r.owed) return this.owedProblem(r, `run-${r.run}`, null);
    }
    for (const j of this.judges.values()) {
      if (j.violation !== null && j.completed === null)
        return {
          code: CLAIM_RULES['judge.violation'],
          rule: 'judge.violation',
          stream: j.stream,
          position: null,
          message: `at the end of the log: the Judge's RuleViolation at position ${j.violation} has no JudgeCompleted (submission_error) with it`,
        };
    }
    return null;
  }

  // ---- baselines ----------------------------------------------------------------------------------------------

  /** A BaselineRecorded against the Judges it cites (`assay baseline` records them first, each a standalone Judge). */
  private baselineEvent(e: ClaimEvent): ClaimProblem | null {
    const d = e.data;
    if (e.stream !== baselineStream(String(d.task)))
      return this.problem('baseline.stream', `is in ${e.stream}, not its task's stream ${baselineStream(String(d.task))}`);
    const scores = (Array.isArray(d.scores) ? d.scores : []) as Array<{ judge?: unknown; status?: unknown; primaryScore?: unknown }>;
    const metric = str(d.metric);
    const seen = new Set<string>();
    for (const [i, sc] of scores.entries()) {
      const at = `repeat ${i + 1} (judge ${show(sc.judge)})`;
      const judge = str(sc.judge);
      if (judge === null || seen.has(judge)) return this.problem('baseline.judges', `${at}: each repeat is a Judge of its own`);
      seen.add(judge);
      const j = this.judges.get(`judge-${judge}`);
      if (!j || j.completed === null) return this.problem('baseline.judges', `${at}: no completed Judge stream judge-${judge} before it`);
      if (j.ref !== null) return this.problem('baseline.judges', `${at}: judge-${judge} judged round ${j.ref.round} of run ${show(j.ref.run)}, not a baseline`);
      if (j.snapshot !== d.snapshot)
        return this.problem('baseline.judges', `${at}: judge-${judge} judged snapshot ${show(j.snapshot)}, the baseline is of ${show(d.snapshot)}`);
      if (typeof d.judgeImageDigest === 'string' && j.image !== d.judgeImageDigest)
        return this.problem('baseline.judges', `${at}: judge-${judge} ran image ${show(j.image)}, the baseline names ${d.judgeImageDigest}`);
      if (sc.status !== j.completed) return this.problem('baseline.judges', `${at}: says ${show(sc.status)}, judge-${judge} reported ${j.completed}`);
      const want = j.completed === 'completed' ? primaryScoreOf(j.rewards, metric) : null;
      if ((sc.primaryScore ?? null) !== want)
        return this.problem(
          'baseline.judges',
          `${at}: says score ${show(sc.primaryScore)}, judge-${judge}'s rewards give ${show(want)} under ${show(metric ?? 'reward')}`,
        );
    }
    const sum = summarizeScores(scores.map((x) => (typeof x.primaryScore === 'number' ? x.primaryScore : null)));
    if (d.repeats !== scores.length) return this.problem('baseline.summary', `repeats is ${show(d.repeats)}, but it has ${scores.length} scores`);
    for (const k of ['median', 'min', 'max'] as const)
      if ((d[k] ?? null) !== sum[k]) return this.problem('baseline.summary', `${k} is ${show(d[k])}, but its completed scores give ${show(sum[k])}`);
    return null;
  }

  // ---- run streams --------------------------------------------------------------------------------------------

  private entry(run: string): RunEntry {
    let r = this.runs.get(run);
    if (!r) {
      r = { run, state: initialRunState(run), owed: null };
      this.runs.set(run, r);
    }
    return r;
  }

  private owedProblem(r: RunEntry, stream: string, position: number | null): ClaimProblem {
    const o = r.owed as NonNullable<RunEntry['owed']>;
    const limit = r.state.started?.protocol.budgets[o.kind];
    return this.problem(
      'budget.over',
      `takes ${o.kind} to ${r.state.consumed[o.kind]}, over the limit of ${limit}, without a RuleViolation budget.${o.kind}${o.round !== null ? ` for round ${o.round}` : ''} before it or as the next event of the run stream${position === null ? ' (the log ends first)' : ` (the next one is ${this.e.type} at position ${position})`}`,
      { stream, position: o.position, type: 'BudgetConsumed' },
    );
  }

  private runEvent(e: ClaimEvent, run: string): ClaimProblem | null {
    const r = this.entry(run);
    const s = r.state;
    const d = e.data;
    if (r.owed) {
      const o = r.owed;
      const settles = e.type === 'RuleViolation' && d.rule === `budget.${o.kind}` && (num(d.round) ?? null) === o.round;
      if (!settles) return this.owedProblem(r, e.stream, e.position);
      r.owed = null;
    }
    if (!s.started && e.type !== 'RunStarted')
      return this.problem('run.started_first', `the run stream does not begin with RunStarted: ${e.type} claims a run that was never started`);
    if (s.completed) return this.problem('run.ended', `the run completed (${s.completed.status}); nothing follows RunCompleted in its stream`);
    if (e.type === 'RunStarted' && s.started) return this.problem('run.started_once', 'the run was already started');
    if ('run' in d && d.run !== run) return this.problem('run.own_run', `names run ${show(d.run)}, but the stream is run ${show(run)}`);

    const pre = this.beforeRunFold(e, r);
    if (pre) return pre;

    const before = s;
    // Revisions were checked by the chains step; the fold counts only the claim types of the stream (a Note may sit
    // in between), so it is handed the revision it expects.
    const rec: RunEventRecord = {
      position: e.position,
      stream: e.stream,
      revision: s.revision === null ? 0 : s.revision + 1,
      id: '',
      type: e.type,
      time: NO_TIME,
      data: d,
    };
    try {
      r.state = evolve(s, rec);
    } catch (err) {
      if (!isAssayError(err)) throw err;
      return this.problem(e.type === 'RunStarted' ? 'run.protocol' : 'run.fold', err.message);
    }
    return e.type === 'BudgetConsumed' ? this.afterBudget(e, r, before) : null;
  }

  /** Checks of one run-stream event against the state it was decided on (decide.ts). */
  private beforeRunFold(e: ClaimEvent, r: RunEntry): ClaimProblem | null {
    const s = r.state;
    const d: Data = e.data;
    const round = num(d.round);
    const open = openRound(s);
    switch (e.type) {
      case 'SubmissionReceived': {
        if (open) return this.problem('round.order', `opens round ${round} while round ${open.round} is open`);
        if (round !== s.rounds.length + 1) return this.problem('round.order', `opens round ${round}, but the next round is ${s.rounds.length + 1}`);
        const closed = closedByBudgets(s);
        if (closed) return this.problem('round.closed', `opens round ${round} while submissions are closed: ${closed}`);
        if (refundedRounds(s) >= MAX_REFUNDED_ROUNDS)
          return this.problem(
            'run.refund_cap',
            `opens round ${round} after ${refundedRounds(s)} refunded rounds: the refund that reached the cap (${MAX_REFUNDED_ROUNDS}) ended the run`,
          );
        return null;
      }
      case 'SnapshotTaken':
        if (round === null) return null;
        if (!open || open.round !== round)
          return this.problem('round.snapshot', `snapshots round ${round}, which is not the open round${open ? ` (${open.round})` : ''}`);
        if (open.snapshot) return this.problem('round.snapshot', `round ${round} already has a snapshot (${open.snapshot.root})`);
        return null;
      case 'SubmissionRejected':
        if (round === null)
          return REFUSAL_STATUSES.has(num(d.status) ?? 0)
            ? null
            : this.problem('run.rejection_status', `a refused request has status 401, 422 or 429, not ${show(d.status)}`);
        if (!open || open.round !== round)
          return this.problem(
            'round.settled_once',
            `refunds round ${round}, which is not open${roundOf(s, round) ? ' (it was settled before)' : ' (it was never received)'}`,
          );
        if (d.status !== 503) return this.problem('round.settled_once', `a refunded round has status 503, not ${show(d.status)}`);
        if (refundedRounds(s) >= MAX_REFUNDED_ROUNDS)
          return this.problem(
            'run.refund_cap',
            `refunds round ${round}, refund ${refundedRounds(s) + 1} of the run; at most ${MAX_REFUNDED_ROUNDS} are refunded`,
          );
        return null;
      case 'BudgetConsumed': {
        const kind = d.budget as BudgetKind;
        if (kind === 'submissions') {
          if (round === null)
            return this.problem('round.settled_once', 'submissions are consumed only by settling a round: BudgetConsumed submissions names no round');
          if (!open || open.round !== round)
            return this.problem(
              'round.settled_once',
              `counts round ${round}, which is not open${roundOf(s, round) ? ' (it was settled before)' : ' (it was never received)'}`,
            );
          if (d.amount !== 1) return this.problem('round.settled_once', `a counted round uses 1 submission, not ${show(d.amount)}`);
          if (open.violation === null) {
            if (open.judge === null)
              return this.problem(
                'round.judged',
                `counts round ${round}, which has neither a Judge result nor a RuleViolation (a round without a result is refunded)`,
              );
            if (open.judge.status === 'infrastructure_error')
              return this.problem(
                'round.judged',
                `counts round ${round}, whose Judge failed (infrastructure_error) with no RuleViolation (such a round is refunded)`,
              );
            if (open.judge.status === 'submission_error')
              return this.problem('round.judged', `counts round ${round}, a submission_error, without a RuleViolation for the round (its score is 0)`);
          }
        } else if (round !== null && !roundOf(s, round)) return this.problem('round.exists', `names round ${round}, which was never received`);
        const limit = s.started?.protocol.budgets[kind] ?? null;
        const amount = num(d.amount) ?? 0;
        const want = limit === null ? null : limit - (s.consumed[kind] + amount);
        if (d.remaining !== want)
          return this.problem(
            'budget.remaining',
            `remaining is ${show(d.remaining)}, but the ${kind} limit ${limit === null ? 'is none (null)' : `${limit} minus ${s.consumed[kind] + amount} consumed is ${want}`}`,
          );
        return null;
      }
      case 'RuleViolation':
        if (round !== null && !roundOf(s, round)) return this.problem('round.exists', `names round ${round}, which was never received`);
        return null;
      case 'RunCompleted':
        return this.completion(d, s);
      default:
        return null;
    }
  }

  private completion(d: Data, s: RunState): ClaimProblem | null {
    const open = openRound(s);
    if (open) return this.problem('run.open_round', `round ${open.round} is still open (a round open at the end is refunded first)`);
    if (refundedRounds(s) >= MAX_REFUNDED_ROUNDS && d.status !== 'failed')
      return this.problem(
        'run.refund_cap',
        `ends ${show(d.status)} after ${refundedRounds(s)} refunded rounds; the refund that reaches the cap (${MAX_REFUNDED_ROUNDS}) ends the run failed`,
      );
    const best = bestRound(s);
    const want = { bestRound: best?.round ?? null, bestScore: best?.score ?? null, bestSnapshot: best?.snapshot ?? null };
    if (d.bestRound !== want.bestRound || d.bestScore !== want.bestScore || d.bestSnapshot !== want.bestSnapshot) {
      const rule = s.started?.selection;
      const how = rule ? `${rule.direction} ${rule.metric ?? '(primary reward)'}` : 'the selection rule';
      return this.problem(
        'run.best',
        `claims best round ${show(d.bestRound)}, score ${show(d.bestScore)}, snapshot ${show(d.bestSnapshot)}; the recorded rounds give ${best ? `round ${best.round}, score ${best.score}, snapshot ${best.snapshot}` : 'no eligible round (all null)'} under ${how}`,
      );
    }
    if (d.status === 'completed' && !best) return this.problem('run.status', 'status completed, but no round is eligible (that is no_valid_submission)');
    if (d.status === 'no_valid_submission' && best) return this.problem('run.status', `status no_valid_submission, but round ${best.round} is eligible`);
    return null;
  }

  private afterBudget(e: ClaimEvent, r: RunEntry, before: RunState): ClaimProblem | null {
    const kind = e.data.budget as BudgetKind;
    const limit = r.state.started?.protocol.budgets[kind] ?? null;
    if (limit === null) return null;
    const slack = BUDGET_EPSILON + (kind === 'wall_time' ? WALL_TIME_TICK_SLACK : 0);
    if (!(r.state.consumed[kind] > limit + slack)) return null;
    const round = num(e.data.round);
    const rule = `budget.${kind}`;
    // Recorded before (the submissions rule is recorded ahead of its BudgetConsumed; a run-level one once per budget) ...
    if (before.violations.some((v) => v.rule === rule && v.round === round)) return null;
    // ... or owed by the next event of the run stream.
    r.owed = { kind, round, position: e.position };
    return null;
  }

  // ---- Judge streams ------------------------------------------------------------------------------------------

  private judgeEvent(e: ClaimEvent): ClaimProblem | null {
    const d = e.data;
    let j = this.judges.get(e.stream);
    if (!j) {
      j = {
        stream: e.stream,
        judge: e.stream.slice('judge-'.length),
        ref: null,
        events: 0,
        launched: false,
        completed: null,
        rewarded: false,
        violation: null,
        snapshot: null,
        image: null,
        rewards: null,
      };
      this.judges.set(e.stream, j);
    }
    if (JUDGE_ONLY.has(e.type) && d.judge !== j.judge)
      return this.problem('judge.id', `names judge ${show(d.judge)}, but the stream is Judge ${show(j.judge)}`);

    // the run and round the stream is about
    const run = str(d.run);
    const round = num(d.round);
    if ((run === null) !== (round === null))
      return this.problem(
        'judge.run_ref',
        `names ${run === null ? `round ${round} but no run` : `run ${show(run)} but no round`}; a Judge event names both or neither`,
      );
    if (j.events === 0) j.ref = run !== null && round !== null ? { run, round } : null;
    else if (run !== null && (j.ref === null || j.ref.run !== run || j.ref.round !== round))
      return this.problem(
        'judge.run_ref',
        `names run ${show(run)} round ${round}, but the stream's first event ${j.ref ? `names run ${show(j.ref.run)} round ${j.ref.round}` : 'names no run (a standalone Judge)'}`,
      );
    const ref = run !== null && round !== null ? { run, round } : null;
    const target = ref ? this.runs.get(ref.run) : undefined;
    if (ref) {
      if (!target?.state.started) return this.problem('judge.run_started', `names run ${show(ref.run)}, which has no RunStarted before it`);
      if (!roundOf(target.state, ref.round))
        return this.problem(
          'judge.round_exists',
          `names round ${ref.round} of run ${show(ref.run)}, which was never received (the run has ${target.state.rounds.length} rounds)`,
        );
    }

    const status = str(d.status) as JudgeStatus | null;
    switch (e.type) {
      case 'JudgeLaunched': {
        if (j.events > 0) return this.problem('judge.order', 'JudgeLaunched is the first event of a Judge stream, and there is one');
        if (ref && target) {
          const open = openRound(target.state);
          if (!open || open.round !== ref.round)
            return this.problem('judge.snapshot', `launches a Judge for round ${ref.round} of run ${show(ref.run)}, which is not open`);
          if (!open.snapshot)
            return this.problem('judge.snapshot', `launches a Judge for round ${ref.round} of run ${show(ref.run)}, which has no snapshot yet`);
          if (d.snapshot !== open.snapshot.root)
            return this.problem(
              'judge.snapshot',
              `launches a Judge on snapshot ${show(d.snapshot)}, but round ${ref.round}'s snapshot is ${open.snapshot.root}`,
            );
        }
        j.launched = true;
        j.snapshot = str(d.snapshot);
        j.image = str(d.image);
        break;
      }
      case 'JudgeCompleted':
        if (j.completed !== null) return this.problem('judge.order', `a second JudgeCompleted (the first reported ${j.completed})`);
        if (!j.launched && !UNLAUNCHED_STATUSES.has(status ?? ''))
          return this.problem(
            'judge.launched',
            `reports ${show(status)}, but no Judge was launched in this stream (only infrastructure_error, or submission_error with its RuleViolation, come without a JudgeLaunched)`,
          );
        if (!j.launched && status === 'submission_error' && j.violation === null)
          return this.problem(
            'judge.launched',
            'reports submission_error without a JudgeLaunched and without the RuleViolation that says which rule was broken',
          );
        if (j.violation !== null && status !== 'submission_error')
          return this.problem(
            'judge.violation',
            `reports ${show(status)} after the Judge's RuleViolation at position ${j.violation} (a broken rule is a submission_error)`,
          );
        j.completed = status;
        break;
      case 'RewardRecorded':
        if (j.rewarded) return this.problem('judge.reward', 'a second RewardRecorded for this Judge');
        if (j.completed !== 'completed')
          return this.problem(
            'judge.reward',
            j.completed === null
              ? 'RewardRecorded before any JudgeCompleted of this Judge: rewards come only from a completed Judge'
              : `RewardRecorded for a Judge that reported ${j.completed}, not completed`,
          );
        j.rewarded = true;
        j.rewards = typeof d.rewards === 'object' && d.rewards !== null ? (d.rewards as Record<string, number>) : null;
        break;
      case 'RuleViolation':
        if (j.violation !== null) return this.problem('judge.violation', `a second RuleViolation by this Judge (the first is at position ${j.violation})`);
        if (j.completed !== null && j.completed !== 'submission_error')
          return this.problem('judge.violation', `a RuleViolation after the Judge reported ${j.completed} (a broken rule is a submission_error)`);
        j.violation = e.position;
        break;
    }
    j.events += 1;

    if (ref && target) {
      const rec: RunEventRecord = { position: e.position, stream: e.stream, revision: j.events - 1, id: '', type: e.type, time: NO_TIME, data: d };
      try {
        target.state = evolve(target.state, rec);
      } catch (err) {
        if (!isAssayError(err)) throw err;
        return this.problem('run.fold', err.message);
      }
    }
    return null;
  }
}

/**
 * Why submissions are closed by what is recorded (decide.ts closedReason without the clock): a budget rule broken,
 * or a budget used up. Null when open.
 */
function closedByBudgets(s: RunState): string | null {
  if (s.overBudget) return `a budget was exceeded (${s.overBudget})`;
  for (const k of BUDGET_KINDS) {
    const limit = s.started?.protocol.budgets[k] ?? null;
    if (limit !== null && s.consumed[k] >= limit - BUDGET_EPSILON) return `the ${k} budget is used up (${s.consumed[k]} of ${limit})`;
  }
  return null;
}

/** The run's rules for the ledger verifier's claims step. */
export function runClaimRules(): ClaimRules {
  return { name: RUN_CLAIM_RULES_NAME, start: () => new RunClaimChecker() };
}
