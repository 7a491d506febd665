import { Sim, startInput, T0 } from '../../../../tests/run/support/run-fixtures';
import { closedReason, cooldownLeftSec, decide, MAX_RECORDED_REJECTIONS, remainingBudgets, taskIdOf } from './decide';
import { runStream, type RunEventRecord } from './run-events';
import { bestRound, evolve, foldRun, initialRunState, openRound } from './run-state';

const types = (s: Sim, from = 0) => s.records.slice(from).map((r) => r.type);
const last = (s: Sim): RunEventRecord => s.records[s.records.length - 1] as RunEventRecord;

describe('start', () => {
  it('records RunStarted with the protocol and the selection rule, once', () => {
    const s = new Sim();
    expect(types(s)).toEqual(['RunStarted']);
    const d = s.records[0]?.data as Record<string, unknown>;
    expect(d).toMatchObject({
      run: 'r1',
      task: 'assay:test-task',
      agent: 'reference',
      selection: { scheme: 'assay.selection/1', metric: null, direction: 'maximize', tieBreak: 'earliest_round' },
    });
    expect((d.protocol as Record<string, unknown>).submission).toEqual({ endpoint: 'unix-socket', tokenSha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(d).not.toHaveProperty('model');
    expect(s.state.started?.startedAt).toBe(T0);
    expect(s.do({ kind: 'start', input: startInput() }).rejection).toMatchObject({ code: 'RUN_CONFLICT', status: 409 });
  });

  it('refuses malformed input before anything is recorded', () => {
    const s = new Sim('r1', null);
    const bad = [
      { ...startInput(), run: 'other' },
      { ...startInput(), task: 'org/name' },
      { ...startInput(), taskDigest: 'has space' },
      { ...startInput(), agent: '' },
      { ...startInput(), protocol: { ...startInput().protocol, cooldownSec: -1 } },
      { ...startInput(), selection: { ...startInput().selection, direction: 'up' as never } },
    ];
    for (const input of bad) expect(s.do({ kind: 'start', input }).rejection?.code).toBe('RUN_INVALID_INPUT');
    expect(s.records).toEqual([]);
    expect(taskIdOf('assay/tiny-optimizer')).toBe('assay:tiny-optimizer');
  });

  it('nothing but start works before RunStarted', () => {
    const s = new Sim('r1', null);
    for (const cmd of [{ kind: 'complete' }, { kind: 'tick' }, { kind: 'consume', budget: 'agent_time', amount: 1 }] as const)
      expect(s.do(cmd).rejection?.code).toBe('RUN_NOT_STARTED');
    expect(s.do({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false }).rejection?.code).toBe('RUN_NOT_STARTED');
  });
});

describe('submit', () => {
  it('401 for a missing, malformed or wrong token: recorded, no round, nothing judged', () => {
    const s = new Sim();
    for (const [auth, code] of [
      ['missing', 'SUBMIT_NO_TOKEN'],
      ['malformed', 'SUBMIT_MALFORMED_TOKEN'],
      ['wrong', 'SUBMIT_WRONG_TOKEN'],
    ] as const) {
      const d = s.do({ kind: 'submit', auth, hasBody: true, hasQuery: true });
      expect(d.rejection).toMatchObject({ code, status: 401 });
      expect(d.rejection?.reason).toMatch(/nothing was judged/);
      expect(last(s)).toMatchObject({ type: 'SubmissionRejected', data: { run: 'r1', status: 401 } });
      expect(last(s).data).not.toHaveProperty('round');
    }
    expect(s.state.rounds).toEqual([]);
    expect(s.state.rejections).toBe(3);
  });

  it('422 for a body, a query or both, using no round', () => {
    const s = new Sim();
    for (const [hasBody, hasQuery, what] of [
      [true, false, 'a body'],
      [false, true, 'a query string'],
      [true, true, 'a body and a query string'],
    ] as const) {
      const d = s.do({ kind: 'submit', auth: 'ok', hasBody, hasQuery });
      expect(d.rejection).toMatchObject({ code: 'SUBMIT_BAD_REQUEST', status: 422 });
      expect(d.rejection?.reason).toContain(what);
    }
    expect(s.state.rounds).toEqual([]);
    expect(s.submit().events).toEqual([{ type: 'SubmissionReceived', data: { run: 'r1', round: 1 } }]);
  });

  it('opens rounds 1, 2, 3 one at a time', () => {
    const s = new Sim();
    expect(s.round('completed', { reward: 0.5 })).toBe(1);
    expect(s.submit().events[0]?.data).toEqual({ run: 'r1', round: 2 });
    expect(s.submit().rejection).toMatchObject({ code: 'SUBMIT_ROUND_OPEN', status: 429 });
    s.snapshot(2, 'bafy2');
    s.judge(2, 'completed', { reward: 0.7 });
    s.ok({ kind: 'settle', round: 2 });
    expect(s.submit().events[0]?.data).toEqual({ run: 'r1', round: 3 });
  });

  it('429 during the cooldown, with the seconds left; refunded rounds start no cooldown', () => {
    const s = new Sim('r1', { settings: { cooldownSec: 30 } });
    s.round('completed', { reward: 1 });
    s.advance(10);
    const d = s.submit();
    expect(d.rejection).toMatchObject({ code: 'SUBMIT_COOLDOWN', status: 429, retryAfterSec: 20 });
    expect(d.rejection?.reason).toBe('cooldown: 20 s left (30 s between counted submissions)');
    expect(cooldownLeftSec(s.state, s.date)).toBe(20);
    s.advance(20);
    s.ok({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false });
    s.ok({ kind: 'settle', round: 2, infrastructure: 'docker went away' });
    expect(s.state.rounds[1]?.outcome).toBe('refunded');
    expect(s.submit().rejection).toBeNull(); // the refunded round 2 started no cooldown: round 3 opens at once
    expect(s.state.rounds.map((r) => r.round)).toEqual([1, 2, 3]);
  });

  it('429 when the submission budget is used up (refunds do not count)', () => {
    const s = new Sim('r1', { settings: { maxSubmissions: 2 } });
    s.round('completed', { reward: 1 });
    s.ok({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false });
    s.ok({ kind: 'settle', round: 2, infrastructure: 'boom' });
    s.round('verifier_error', null);
    expect(s.state.consumed.submissions).toBe(2);
    const d = s.submit();
    expect(d.rejection).toMatchObject({ code: 'SUBMIT_BUDGET_EXHAUSTED', status: 429 });
    expect(d.rejection?.reason).toBe('submission budget exhausted (2 of 2 used)');
    expect(remainingBudgets(s.state, s.date).submissions).toBe(0);
  });

  it('429 when the wall-time budget has run out, even before any tick', () => {
    const s = new Sim('r1', { settings: { timeBudgetSec: 60 } });
    s.advance(59);
    expect(s.submit().rejection).toBeNull();
    s.ok({ kind: 'settle', round: 1, infrastructure: 'x' });
    s.advance(1);
    expect(s.submit().rejection?.reason).toBe('time budget exhausted (60 s of 60 s used)');
  });

  it('429 when the run is closed, closing, or the queue is full', () => {
    const s = new Sim();
    expect(s.do({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false, queueFull: true }).rejection?.code).toBe('SUBMIT_QUEUE_FULL');
    expect(s.do({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false, closing: 'cancelled by the operator' }).rejection).toMatchObject({
      code: 'SUBMIT_RUN_CLOSED',
      reason: 'run closed: cancelled by the operator',
    });
    s.ok({ kind: 'complete' });
    const d = s.submit();
    expect(d.rejection).toMatchObject({ code: 'SUBMIT_RUN_CLOSED', status: 429, reason: 'run closed: the run ended (no_valid_submission)' });
    expect(d.events).toEqual([]); // the run's history ends with RunCompleted
  });

  it('401 and 422 are decided before 429: a closed run still says 401 to a wrong token', () => {
    const s = new Sim();
    s.ok({ kind: 'complete' });
    expect(s.do({ kind: 'submit', auth: 'wrong', hasBody: false, hasQuery: false }).rejection?.status).toBe(401);
    expect(s.do({ kind: 'submit', auth: 'ok', hasBody: true, hasQuery: false }).rejection?.status).toBe(422);
  });

  it(`records at most ${MAX_RECORDED_REJECTIONS} refused requests, and answers the rest the same way`, () => {
    let s = new Sim();
    s.state = { ...s.state, rejections: MAX_RECORDED_REJECTIONS };
    const d = s.do({ kind: 'submit', auth: 'missing', hasBody: false, hasQuery: false });
    expect(d.rejection?.status).toBe(401);
    expect(d.events).toEqual([]);
    s = new Sim();
  });
});

describe('settle', () => {
  it('counts a completed round: BudgetConsumed submissions with what remains', () => {
    const s = new Sim('r1', { settings: { maxSubmissions: 3 } });
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 0.25 });
    const n = s.records.length;
    s.ok({ kind: 'settle', round: 1 });
    expect(s.records.slice(n).map((r) => r.data)).toEqual([{ run: 'r1', budget: 'submissions', amount: 1, remaining: 2, round: 1 }]);
    expect(s.state.rounds[0]).toMatchObject({ outcome: 'counted', rewards: { reward: 0.25 }, judge: { status: 'completed' } });
    expect(s.state.lastCountedAt).toBe(s.state.rounds[0]?.receivedAt);
  });

  it('refunds an infrastructure_error, a missing Judge result and an explicit infrastructure failure', () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'infrastructure_error');
    s.ok({ kind: 'settle', round: 1 });
    expect(last(s)).toMatchObject({
      type: 'SubmissionRejected',
      data: { round: 1, status: 503, reason: expect.stringMatching(/^SUBMIT_REFUNDED: the Judge failed/) },
    });
    s.submit();
    s.ok({ kind: 'settle', round: 2 });
    expect(last(s).data.reason).toMatch(/no Judge result was recorded/);
    s.submit();
    s.ok({ kind: 'settle', round: 3, infrastructure: 'snapshot store full' });
    expect(last(s).data.reason).toMatch(/infrastructure failure: snapshot store full/);
    expect(s.state.consumed.submissions).toBe(0);
    expect(s.state.rounds.map((r) => r.outcome)).toEqual(['refunded', 'refunded', 'refunded']);
  });

  it('a rule broken before judging is a RuleViolation with score 0, and the round counts', () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    const n = s.records.length;
    s.ok({ kind: 'settle', round: 1, violation: { rule: 'workspace.not_editable', detail: 'added "numpy.py"' } });
    expect(types(s, n)).toEqual(['RuleViolation', 'BudgetConsumed']);
    expect(s.records[n]?.data).toEqual({ run: 'r1', round: 1, rule: 'workspace.not_editable', detail: 'added "numpy.py"', score: 0 });
    expect(s.state.rounds[0]).toMatchObject({ outcome: 'counted', violation: { rule: 'workspace.not_editable', by: 'run' } });
  });

  it("submission_error: the Judge's RuleViolation is not duplicated; without one the run records it", () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'submission_error', null, { rule: 'snapshot.path_not_allowed' });
    const n = s.records.length;
    s.ok({ kind: 'settle', round: 1 });
    expect(types(s, n)).toEqual(['BudgetConsumed']);
    expect(s.state.rounds[0]?.violation).toMatchObject({ rule: 'snapshot.path_not_allowed', by: 'judge' });
    s.submit();
    s.snapshot(2, 'bafy2');
    s.judge(2, 'submission_error');
    const m = s.records.length;
    s.ok({ kind: 'settle', round: 2 });
    expect(types(s, m)).toEqual(['RuleViolation', 'BudgetConsumed']);
    expect(s.records[m]?.data.rule).toBe('judge.submission_error');
  });

  it("a Judge's GPU-seconds are consumed for its round; over the budget the round scores zero and submissions close", () => {
    const s = new Sim('r1', { settings: { gpuBudgetSec: 36 } });
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 0.9 });
    s.ok({ kind: 'settle', round: 1, gpuSeconds: 30 });
    expect(s.state.consumed.gpu_seconds).toBe(30);
    expect(closedReason(s.state, s.date)).toBeNull();
    s.submit();
    s.snapshot(2, 'bafy2');
    s.judge(2, 'completed', { reward: 0.99 });
    const n = s.records.length;
    s.ok({ kind: 'settle', round: 2, gpuSeconds: 10 });
    expect(types(s, n)).toEqual(['BudgetConsumed', 'RuleViolation', 'BudgetConsumed']);
    expect(s.records[n]?.data).toMatchObject({ budget: 'gpu_seconds', amount: 10, round: 2 });
    expect(s.records[n]?.data.remaining).toBeCloseTo(-4);
    expect(s.records[n + 1]?.data).toMatchObject({ round: 2, rule: 'budget.gpu_seconds', score: 0 });
    expect(bestRound(s.state)).toMatchObject({ round: 1, score: 0.9 }); // round 2 would be better, but broke the budget
    expect(s.submit().rejection).toMatchObject({ code: 'SUBMIT_BUDGET_EXHAUSTED', reason: 'run closed: a budget was exceeded (budget.gpu_seconds)' });
  });

  it('refuses to settle a round that is not open, and bad GPU-seconds', () => {
    const s = new Sim();
    expect(s.do({ kind: 'settle', round: 1 }).rejection?.code).toBe('RUN_CONFLICT');
    s.round('completed', { reward: 1 });
    expect(s.do({ kind: 'settle', round: 1 }).rejection?.code).toBe('RUN_CONFLICT');
    s.submit();
    expect(s.do({ kind: 'settle', round: 2, gpuSeconds: -1 }).rejection?.code).toBe('RUN_INVALID_INPUT');
    expect(s.do({ kind: 'settle', round: 2, gpuSeconds: Number.NaN }).rejection?.code).toBe('RUN_INVALID_INPUT');
  });
});

describe('budgets', () => {
  it('consume records BudgetConsumed; going over adds one RuleViolation and closes submissions', () => {
    const s = new Sim('r1', { agentTimeoutSec: 100 });
    s.ok({ kind: 'consume', budget: 'agent_time', amount: 60 });
    expect(last(s).data).toEqual({ run: 'r1', budget: 'agent_time', amount: 60, remaining: 40 });
    expect(s.submit().rejection).toBeNull();
    s.ok({ kind: 'settle', round: 1, infrastructure: 'x' });
    s.ok({ kind: 'consume', budget: 'agent_time', amount: 40 });
    expect(s.submit().rejection?.reason).toBe('agent time budget exhausted (100 s of 100 s used)');
    const n = s.records.length;
    s.ok({ kind: 'consume', budget: 'agent_time', amount: 5 });
    expect(types(s, n)).toEqual(['BudgetConsumed', 'RuleViolation']);
    expect(s.records[n + 1]?.data).toMatchObject({ rule: 'budget.agent_time', score: 0 });
    expect(s.records[n + 1]?.data).not.toHaveProperty('round');
    const m = s.records.length;
    s.ok({ kind: 'consume', budget: 'agent_time', amount: 5 });
    expect(types(s, m)).toEqual(['BudgetConsumed']); // one run-level violation per budget
    expect(s.state.overBudget).toBe('budget.agent_time');
  });

  it('consume refuses the submissions budget, negative or non-finite amounts, and unknown rounds; 0 records nothing', () => {
    const s = new Sim();
    expect(s.do({ kind: 'consume', budget: 'submissions' as never, amount: 1 }).rejection?.code).toBe('RUN_INVALID_INPUT');
    expect(s.do({ kind: 'consume', budget: 'gpu_seconds', amount: -1 }).rejection?.code).toBe('RUN_INVALID_INPUT');
    expect(s.do({ kind: 'consume', budget: 'gpu_seconds', amount: Number.POSITIVE_INFINITY }).rejection?.code).toBe('RUN_INVALID_INPUT');
    expect(s.do({ kind: 'consume', budget: 'gpu_seconds', amount: 1, round: 4 }).rejection?.code).toBe('RUN_CONFLICT');
    expect(s.ok({ kind: 'consume', budget: 'gpu_seconds', amount: 0 }).events).toEqual([]);
  });

  it('tick records the wall time since the last tick, never beyond the budget, and no violation', () => {
    const s = new Sim('r1', { settings: { timeBudgetSec: 100 } });
    s.advance(40.5);
    s.ok({ kind: 'tick' });
    expect(last(s).data).toEqual({ run: 'r1', budget: 'wall_time', amount: 40.5, remaining: 59.5 });
    expect(s.ok({ kind: 'tick' }).events).toEqual([]);
    s.advance(500);
    s.ok({ kind: 'tick' });
    expect(last(s).data).toEqual({ run: 'r1', budget: 'wall_time', amount: 59.5, remaining: 0 });
    expect(s.state.overBudget).toBeNull();
    expect(closedReason(s.state, s.date)?.code).toBe('SUBMIT_BUDGET_EXHAUSTED');
  });
});

describe('recover (resume after a restart)', () => {
  it('refunds a round left before its snapshot, after it, or with a launched Judge that never finished', () => {
    for (const stage of ['received', 'snapshot', 'launched', 'infra'] as const) {
      const s = new Sim();
      s.submit();
      if (stage !== 'received') s.snapshot(1, 'bafy1');
      if (stage === 'launched') s.judge(1, 'completed', null, { launchOnly: true });
      if (stage === 'infra') s.judge(1, 'infrastructure_error');
      s.ok({ kind: 'recover' });
      expect(last(s)).toMatchObject({ type: 'SubmissionRejected', data: { round: 1, status: 503 } });
      expect(String(last(s).data.reason)).toMatch(
        {
          received: /before the workspace was snapshotted/,
          snapshot: /before the Judge recorded a result/,
          launched: /Judge j1 was launched/,
          infra: /infrastructure_error/,
        }[stage],
      );
      expect(openRound(s.state)).toBeNull();
      expect(s.ok({ kind: 'recover' }).events).toEqual([]);
    }
  });

  it('settles a round whose Judge had recorded a result: the result stands', () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 0.4 });
    s.ok({ kind: 'recover' });
    expect(last(s).data).toMatchObject({ budget: 'submissions', round: 1 });
    expect(bestRound(s.state)).toEqual({ round: 1, score: 0.4, snapshot: 'bafy1' });
  });
});

describe('complete', () => {
  it('selects the best completed round; ties to the earliest; rule violations and other statuses never win', () => {
    const s = new Sim('r1', { settings: { direction: 'minimize', primaryMetric: 'loss' } });
    s.round('completed', { loss: 0.5 });
    s.round('completed', { loss: 0.2 });
    s.round('verifier_error', null);
    s.round('completed', { loss: 0.2 });
    s.submit();
    s.snapshot(5, 'bafy5');
    s.ok({ kind: 'settle', round: 5, violation: { rule: 'workspace.not_editable', detail: 'x' } });
    s.round('completed', { other: 0.01 }); // no "loss": no score
    s.ok({ kind: 'complete' });
    expect(last(s)).toMatchObject({ type: 'RunCompleted', data: { run: 'r1', status: 'completed', bestRound: 2, bestScore: 0.2, bestSnapshot: 'bafy2' } });
    expect(s.state.completed).toMatchObject({ status: 'completed', bestRound: 2 });
    expect(s.do({ kind: 'complete' }).rejection?.code).toBe('RUN_CONFLICT');
  });

  it('no_valid_submission when nothing is eligible; cancelled keeps the best so far and refunds an open round', () => {
    const a = new Sim();
    a.round('verifier_timeout', null);
    a.ok({ kind: 'complete' });
    expect(last(a).data).toEqual({ run: 'r1', status: 'no_valid_submission', bestRound: null, bestScore: null, bestSnapshot: null });
    const b = new Sim();
    b.round('completed', { reward: 3 });
    b.submit();
    const n = b.records.length;
    b.ok({ kind: 'complete', status: 'cancelled', reason: 'Ctrl-C' });
    expect(types(b, n)).toEqual(['SubmissionRejected', 'RunCompleted']);
    expect(b.records[n]?.data.reason).toMatch(/the run ended \(cancelled: Ctrl-C\)/);
    expect(last(b).data).toMatchObject({ status: 'cancelled', bestRound: 1, bestScore: 3 });
  });
});

describe('evolve', () => {
  const rec = (position: number, type: string, data: Record<string, unknown>, o: Partial<RunEventRecord> = {}): RunEventRecord => ({
    position,
    stream: runStream('r1'),
    revision: position,
    id: `i${position}`,
    type,
    time: T0,
    data,
    ...o,
  });
  const started = () => foldRun('r1', new Sim().records);

  it('refuses histories a correct controller cannot write', () => {
    const s = started();
    expect(() => evolve(s, rec(1, 'SubmissionReceived', { run: 'r1', round: 2 }))).toThrow(/out of order/);
    expect(() => evolve(s, rec(2, 'SubmissionReceived', { run: 'r1', round: 1 }))).toThrow(/revision 2 of run-r1 follows revision 0/);
    expect(() => evolve(s, rec(0, 'SubmissionReceived', { run: 'r1', round: 1 }))).toThrow(/folded after/);
    expect(() => evolve(s, rec(1, 'RunStarted', { run: 'r1' }))).toThrow(/already started/);
    expect(() => evolve(initialRunState('r1'), rec(0, 'SubmissionReceived', { run: 'r1', round: 1 }))).toThrow(/must begin with RunStarted/);
    expect(() => evolve(s, rec(1, 'SubmissionRejected', { run: 'r1', round: 1, status: 503, reason: 'x' }))).toThrow(/not the open round/);
    expect(() => evolve(s, rec(1, 'BudgetConsumed', { run: 'r1', budget: 'coffee', amount: 1, remaining: null }))).toThrow(/unknown budget/);
    expect(() => evolve(s, rec(1, 'SubmissionReceived', { run: 'r2', round: 1 }))).toThrow(/names run/);
    const two = evolve(s, rec(1, 'SubmissionReceived', { run: 'r1', round: 1 }));
    expect(() => evolve(two, rec(2, 'SubmissionReceived', { run: 'r1', round: 2 }))).toThrow(/while round 1 is open/);
    expect(() => evolve(two, rec(2, 'RunCompleted', { run: 'r1', status: 'completed', bestRound: null, bestScore: null, bestSnapshot: null }))).toThrow(
      /still open/,
    );
    const bad = new Sim().records.map((r) => ({ ...r, data: { ...r.data, protocol: { scheme: 'nope' } } }));
    expect(() => foldRun('r1', bad)).toThrow(/protocol.scheme/);
  });

  it('nothing may follow RunCompleted in the run stream; late Judge news is ignored', () => {
    const s = new Sim();
    s.round('completed', { reward: 1 });
    s.ok({ kind: 'complete' });
    const before = s.state;
    s.judge(1, 'completed', { reward: 100 });
    expect(s.state.rounds).toEqual(before.rounds);
    expect(() =>
      evolve(
        s.state,
        rec(s.records.length, 'BudgetConsumed', { run: 'r1', budget: 'wall_time', amount: 1, remaining: null }, { revision: (s.state.revision ?? 0) + 1 }),
      ),
    ).toThrow(/already completed/);
  });

  it("ignores other runs' Judge events and the Judge's news about a settled round; the first Judge result stands", () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 9 }, { run: 'r2' });
    expect(s.state.rounds[0]?.judge).toBeNull();
    s.judge(1, 'completed', { reward: 0.5 });
    s.judge(1, 'completed', { reward: 0.9 });
    expect(s.state.rounds[0]).toMatchObject({ judge: { judge: 'j2' }, rewards: { reward: 0.5 } });
    s.ok({ kind: 'settle', round: 1 });
    s.judge(1, 'submission_error', null, { rule: 'late' });
    expect(s.state.rounds[0]?.violation).toBeNull();
    expect(bestRound(s.state)?.score).toBe(0.5);
  });

  it('a RewardRecorded from another Judge than the recorded result is ignored; events of unrelated streams too', () => {
    const s = new Sim();
    s.submit();
    s.judge(1, 'completed', null);
    s.append('judge-other', [
      { type: 'RewardRecorded', data: { run: 'r1', round: 1, judge: 'other', rewards: { reward: 5 }, primaryMetric: null, primaryScore: 5 } },
    ]);
    s.append('note-x', [{ type: 'Note', data: { text: 'hi' } }]);
    expect(s.state.rounds[0]?.rewards).toBeNull();
    expect(s.state.lastPosition).toBe(s.records.length - 1);
  });

  it('baseline and latest workspace roots come from SnapshotTaken and WorkspaceEdited', () => {
    const s = new Sim();
    s.snapshot(null, 'bafybase');
    s.snapshot(null, 'bafyedit');
    expect(s.state).toMatchObject({ baselineRoot: 'bafybase', lastRoot: 'bafyedit' });
    s.ok({ kind: 'work_started', container: 'c1', image: 'sha256:w', limits: { cpus: 1 } });
    expect(s.state.work).toEqual({ container: 'c1', image: 'sha256:w' });
    const d = decide(
      s.state,
      { kind: 'record_snapshot', round: 3, snapshot: { root: 'bafy', files: 0, bytes: 0, durationMs: 0, policyDigest: 'p' }, edit: null },
      s.date,
    );
    expect(d.rejection?.code).toBe('RUN_CONFLICT');
    expect(
      decide(
        s.state,
        { kind: 'record_snapshot', round: null, snapshot: { root: 'NOT A CID', files: 0, bytes: 0, durationMs: 0, policyDigest: 'p' }, edit: null },
        s.date,
      ).rejection?.code,
    ).toBe('RUN_INVALID_INPUT');
  });
});

describe('GPU-seconds with who held which GPUs', () => {
  it("records holder, devices and holding time; Work use exhausts the budget (429) and over it is the run's violation, once; a fold of the events alone gives the same use", () => {
    const s = new Sim('r1', { settings: { gpuBudgetSec: 100 } });
    s.ok({ kind: 'consume', budget: 'gpu_seconds', amount: 60, gpu: { holder: 'work', devices: ['0', '1'], heldSec: 30 } });
    expect(last(s).data).toEqual({ run: 'r1', budget: 'gpu_seconds', amount: 60, remaining: 40, holder: 'work', gpus: ['0', '1'], heldSec: 30 });
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 1 });
    const n = s.records.length;
    s.ok({ kind: 'settle', round: 1, gpu: { holder: 'judge', devices: ['1'], heldSec: 40 } }); // amount from the holding: 40
    expect(s.records[n]?.data).toEqual({ run: 'r1', budget: 'gpu_seconds', amount: 40, remaining: 0, round: 1, holder: 'judge', gpus: ['1'], heldSec: 40 });
    expect(types(s, n)).toEqual(['BudgetConsumed', 'BudgetConsumed']); // exactly at the limit: no violation, the round counts
    expect(s.submit().rejection).toMatchObject({ code: 'SUBMIT_BUDGET_EXHAUSTED', reason: 'GPU budget exhausted (100 s of 100 s used)' });
    s.ok({ kind: 'consume', budget: 'gpu_seconds', amount: 2, gpu: { holder: 'work', devices: ['0', '1'], heldSec: 1 } });
    s.ok({ kind: 'consume', budget: 'gpu_seconds', amount: 2, gpu: { holder: 'work', devices: ['0', '1'], heldSec: 1 } });
    expect(s.records.filter((r) => r.type === 'RuleViolation').map((r) => r.data)).toEqual([expect.objectContaining({ rule: 'budget.gpu_seconds', score: 0 })]);
    expect(s.records.filter((r) => r.type === 'RuleViolation')[0]?.data).not.toHaveProperty('round');
    const rebuilt = foldRun('r1', s.records);
    expect(rebuilt.consumed.gpu_seconds).toBe(104);
    expect(rebuilt.overBudget).toBe('budget.gpu_seconds');
    expect(remainingBudgets(rebuilt, s.date).gpu_seconds).toBe(0);
    expect(bestRound(rebuilt)).toMatchObject({ round: 1 }); // judged within the budget: keeps its score
  });

  it('refuses malformed holdings', () => {
    const s = new Sim('r1', { settings: { gpuBudgetSec: 100 } });
    const bad = [
      { holder: 'agent', devices: ['0'], heldSec: 1 },
      { holder: 'work', devices: [], heldSec: 1 },
      { holder: 'work', devices: [''], heldSec: 1 },
      { holder: 'work', devices: ['0'], heldSec: -1 },
      { holder: 'work', devices: ['0'], heldSec: Number.POSITIVE_INFINITY },
    ] as const;
    for (const gpu of bad) expect(s.do({ kind: 'consume', budget: 'gpu_seconds', amount: 1, gpu: gpu as never }).rejection?.code).toBe('RUN_INVALID_INPUT');
    expect(s.do({ kind: 'consume', budget: 'agent_time', amount: 1, gpu: { holder: 'work', devices: ['0'], heldSec: 1 } }).rejection?.code).toBe(
      'RUN_INVALID_INPUT',
    );
    expect(s.records).toHaveLength(1);
  });
});
