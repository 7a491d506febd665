import { CLAIM_EVENT_TYPES, type ClaimEvent, type ClaimProblem, type JsonObject } from '@assay/ledger';
import { Sim, TOKEN_SHA, wiring, submitReq } from '../../../../tests/run/support/run-fixtures';
import { buildRunRules } from './run-protocol';
import { CLAIM_RULES, RUN_CLAIM_RULES_NAME, runClaimRules } from './run-claims';
import { runStream, type RunEventRecord } from './run-events';
import { SubmissionService } from '../application/submission-service';

const CLAIMS = new Set(CLAIM_EVENT_TYPES);

/** The events the verifier hands the claims step: the claim types, in position order. */
function claimEvents(records: readonly RunEventRecord[]): ClaimEvent[] {
  return records
    .filter((r) => CLAIMS.has(r.type))
    .map((r) => ({ position: r.position, stream: r.stream, revision: r.revision, type: r.type, signer: 'k+00000000', data: r.data as JsonObject }));
}

function check(records: readonly RunEventRecord[]): ClaimProblem | null {
  const c = runClaimRules().start();
  for (const e of claimEvents(records)) {
    const p = c.event(e);
    if (p) return p;
  }
  return c.end();
}

/** A history to forge on: a genuine one, and raw events appended after it as a key holder could. */
class Forge {
  readonly records: RunEventRecord[];
  private readonly revs = new Map<string, number>();
  constructor(base: readonly RunEventRecord[] = []) {
    this.records = [...base];
    for (const r of base) this.revs.set(r.stream, r.revision);
  }
  add(stream: string, type: string, data: Record<string, unknown>): number {
    const revision = (this.revs.get(stream) ?? -1) + 1;
    this.revs.set(stream, revision);
    const position = this.records.length;
    this.records.push({ position, stream, revision, id: `f-${position}`, type, time: '2026-03-01T10:00:00.000Z', data });
    return position;
  }
}

const RUN = runStream('r1');
const expectProblem = (p: ClaimProblem | null, rule: keyof typeof CLAIM_RULES, stream: string, position: number | null) => {
  expect(p).toMatchObject({ rule, code: CLAIM_RULES[rule], stream, position });
  expect(p?.code).toMatch(/^VERIFY_CLAIM_[A-Z_]+$/);
};

/** Three judged rounds (minimize val_loss), one not editable, one refunded, completed: a genuine run. */
function genuine(): Sim {
  const s = new Sim('r1', { settings: { primaryMetric: 'val_loss', direction: 'minimize', maxSubmissions: 5 }, agentTimeoutSec: 600 });
  s.snapshot(null, 'bafybase');
  s.round('completed', { val_loss: 0.9 });
  s.round('completed', { val_loss: 0.4 });
  s.submit();
  s.snapshot(3, 'bafy3');
  s.ok({ kind: 'settle', round: 3, violation: { rule: 'workspace.not_editable', detail: 'changed train.py' } });
  s.submit();
  s.snapshot(4, 'bafy4');
  s.judge(4, 'infrastructure_error');
  s.ok({ kind: 'settle', round: 4 });
  s.round('completed', { val_loss: 0.5 });
  s.ok({ kind: 'consume', budget: 'agent_time', amount: 120 });
  s.ok({ kind: 'complete' });
  return s;
}

describe('genuine histories verify', () => {
  it('names its rule set', () => {
    expect(runClaimRules().name).toBe(RUN_CLAIM_RULES_NAME);
  });

  it('a run with judged, not editable and refunded rounds, and its RunCompleted', () => {
    const s = genuine();
    expect(s.state.completed).toMatchObject({ status: 'completed', bestRound: 2, bestScore: 0.4, bestSnapshot: 'bafy2' });
    expect(check(s.records)).toBeNull();
  });

  it("the Judge's own rule violation (before any launch) and a submission_error without one", () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    // what JudgeRunner writes when the snapshot breaks the task's rules: RuleViolation + JudgeCompleted, no launch
    s.append('judge-real1', [
      { type: 'RuleViolation', data: { run: 'r1', round: 1, rule: 'snapshot.path_not_allowed', detail: 'x', score: 0 } },
      {
        type: 'JudgeCompleted',
        data: { run: 'r1', round: 1, judge: 'real1', status: 'submission_error', exitCode: null, durationMs: 1, outputDigest: 'sha256:o', outputBytes: 0 },
      },
    ]);
    s.ok({ kind: 'settle', round: 1 });
    s.round('submission_error', null); // launched, no RuleViolation: the run records judge.submission_error
    s.submit();
    s.snapshot(3, 'bafy3');
    s.judge(3, 'submission_error', null, { rule: 'snapshot.limits' }); // the fake's order: the RuleViolation last
    s.ok({ kind: 'settle', round: 3 });
    s.ok({ kind: 'complete' });
    expect(s.state.completed?.status).toBe('no_valid_submission');
    expect(check(s.records)).toBeNull();
  });

  it('a Judge that could not start (infrastructure_error, no launch) and a snapshot over the limits are settled as recorded', () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    s.append('judge-nolaunch', [
      {
        type: 'JudgeCompleted',
        data: {
          run: 'r1',
          round: 1,
          judge: 'nolaunch',
          status: 'infrastructure_error',
          exitCode: null,
          durationMs: 1,
          outputDigest: 'sha256:o',
          outputBytes: 0,
        },
      },
    ]);
    s.ok({ kind: 'settle', round: 1 }); // refunded
    s.submit();
    s.ok({ kind: 'settle', round: 2, violation: { rule: 'snapshot.limits', detail: 'too many files' } }); // no SnapshotTaken
    s.round('verifier_timeout', null);
    s.ok({ kind: 'complete', status: 'cancelled' });
    expect(check(s.records)).toBeNull();
  });

  it('budgets: GPU-seconds over for a round, Work over twice (one violation), agent time over, wall-time ticks', () => {
    const s = new Sim('r1', { settings: { gpuBudgetSec: 100, timeBudgetSec: 50, maxSubmissions: 3 }, agentTimeoutSec: 10 });
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 1 });
    s.ok({ kind: 'settle', round: 1, gpuSeconds: 150, gpu: { holder: 'judge', devices: ['0'], heldSec: 150 } });
    s.ok({ kind: 'consume', budget: 'gpu_seconds', amount: 10, gpu: { holder: 'work', devices: ['0'], heldSec: 10 } });
    s.ok({ kind: 'consume', budget: 'gpu_seconds', amount: 10, gpu: { holder: 'work', devices: ['0'], heldSec: 10 } });
    s.advance(30).ok({ kind: 'tick' });
    s.advance(30).ok({ kind: 'tick' });
    s.ok({ kind: 'consume', budget: 'agent_time', amount: 11 });
    expect(s.submit().rejection?.code).toBe('SUBMIT_BUDGET_EXHAUSTED');
    s.ok({ kind: 'complete' });
    expect(s.state.violations.map((v) => [v.rule, v.round])).toEqual([
      ['budget.gpu_seconds', 1],
      ['budget.gpu_seconds', null],
      ['budget.agent_time', null],
    ]);
    expect(check(s.records)).toBeNull();
  });

  it('resume: a round with a recorded result is counted, one without is refunded; late news stands aside', () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    s.judge(1, 'completed', { reward: 0.5 });
    s.ok({ kind: 'recover' }); // counted with its result
    s.submit();
    s.snapshot(2, 'bafy2');
    s.judge(2, 'completed', null, { launchOnly: true }); // the Judge died with the controller
    s.ok({ kind: 'recover' }); // refunded
    // the Judge's sweep records the dead Judge's end later, without the run (its owner file has none)
    s.append('judge-j2', [
      {
        type: 'JudgeCompleted',
        data: { judge: 'j2', status: 'infrastructure_error', exitCode: null, durationMs: 5, outputDigest: 'sha256:o', outputBytes: 0 },
      },
    ]);
    s.ok({ kind: 'work_started', container: 'c2', image: 'sha256:w', limits: {} });
    s.round('completed', { reward: 0.7 });
    s.ok({ kind: 'complete' });
    expect(s.state.completed).toMatchObject({ bestRound: 3, bestScore: 0.7 });
    expect(check(s.records)).toBeNull();
  });

  it('standalone Judges (no run), snapshot commands and refused requests', () => {
    const s = new Sim();
    for (const auth of ['missing', 'wrong'] as const) s.do({ kind: 'submit', auth, hasBody: false, hasQuery: false });
    s.do({ kind: 'submit', auth: 'ok', hasBody: true, hasQuery: false });
    const f = new Forge(s.records);
    f.add('judge-solo', 'JudgeLaunched', { judge: 'solo', image: 'sha256:i', snapshot: 'bafyx', testsDigest: 'sha256:t', limits: {}, network: 'none' });
    f.add('judge-solo', 'JudgeCompleted', { judge: 'solo', status: 'completed', exitCode: 0, durationMs: 1, outputDigest: 'sha256:o', outputBytes: 0 });
    f.add('judge-solo', 'RewardRecorded', { judge: 'solo', rewards: { reward: 1 }, primaryMetric: 'reward', primaryScore: 1 });
    f.add('judge-solo2', 'RuleViolation', { rule: 'snapshot.limits', detail: 'x', score: 0 });
    f.add('judge-solo2', 'JudgeCompleted', {
      judge: 'solo2',
      status: 'submission_error',
      exitCode: null,
      durationMs: 1,
      outputDigest: 'sha256:o',
      outputBytes: 0,
    });
    f.add('judge-solo3', 'JudgeCompleted', {
      judge: 'solo3',
      status: 'infrastructure_error',
      exitCode: null,
      durationMs: 1,
      outputDigest: 'sha256:o',
      outputBytes: 0,
    });
    f.add('judge-solo4', 'JudgeLaunched', { judge: 'solo4', image: 'sha256:i', snapshot: 'bafyx', testsDigest: 'sha256:t', limits: {}, network: 'none' }); // still running
    f.add('snapshot-cli', 'SnapshotTaken', { root: 'bafyx', files: 1, bytes: 1, durationMs: 1, policyDigest: 'sha256:p' });
    f.add('snapshot-cli', 'WorkspaceEdited', { from: 'bafyx', to: 'bafyy', added: 1, removed: 0, changed: 0, bytesAdded: 1, bytesRemoved: 0 });
    f.add('note-x', 'Note', { text: 'not a claim' });
    expect(check(f.records)).toBeNull();
  });

  it('a live run (a round open, no RunCompleted yet) verifies as far as it goes', () => {
    const s = new Sim();
    s.round('completed', { reward: 1 });
    s.submit();
    s.snapshot(2, 'bafy2');
    s.judge(2, 'completed', null, { launchOnly: true });
    expect(check(s.records)).toBeNull();
  });

  it('histories written by the SubmissionService itself (fake Judge, memory ledger), refunds and violations included', async () => {
    const w = wiring({
      script: [
        { status: 'completed', rewards: { reward: 0.2 } },
        { throws: new Error('docker down') },
        { status: 'submission_error' },
        { status: 'completed', rewards: { reward: 0.9 }, dieAfterLaunch: true },
        { status: 'infrastructure_error' },
        { status: 'completed', rewards: { reward: 0.6 } },
      ],
    });
    const { protocol, selection } = buildRunRules({
      settings: { primaryMetric: null, direction: 'maximize', maxSubmissions: 10, cooldownSec: 0, timeBudgetSec: null, gpuBudgetSec: null },
      agentTimeoutSec: null,
      editablePaths: null,
      tokenSha256: TOKEN_SHA,
      fingerprintInput: null,
    });
    const svc = await new SubmissionService(w.deps).start({
      run: 'r1',
      task: 't',
      taskDigest: 'sha256:t',
      agent: 'a',
      fingerprint: 'sha256:f',
      protocol,
      selection,
    });
    await svc.workStarted('c', 'sha256:w', {});
    await svc.recordWorkspace();
    for (let i = 0; i < 6; i++) {
      w.snapshotter.files.set('solve.py', `v${i + 1}`);
      await svc.submit(submitReq());
    }
    await svc.submit(submitReq(null));
    await svc.complete();
    expect(svc.current.rounds.map((r) => r.outcome)).toEqual(['counted', 'refunded', 'counted', 'refunded', 'refunded', 'counted']);
    expect(svc.current.completed).toMatchObject({ status: 'completed', bestRound: 6, bestScore: 0.6 });
    expect(check(w.ledger.all())).toBeNull();
  });
});

describe('forgeries fail with the rule, the stream and the position', () => {
  it("the issue's RunCompleted in run-fake with no RunStarted and no rounds", () => {
    const f = new Forge(genuine().records);
    const at = f.add('run-fake', 'RunCompleted', { run: 'fake', status: 'completed', bestRound: 1, bestScore: 1e-7, bestSnapshot: 'bafyfake' });
    const p = check(f.records);
    expectProblem(p, 'run.started_first', 'run-fake', at);
    expect(p?.message).toMatch(/does not begin with RunStarted/);
  });

  it('a hand-written RewardRecorded: in a fresh Judge stream, twice, and for a Judge that did not complete', () => {
    const base = genuine().records;
    let f = new Forge(base);
    let at = f.add('judge-forged', 'RewardRecorded', {
      run: 'r1',
      round: 2,
      judge: 'forged',
      rewards: { val_loss: 0.0001 },
      primaryMetric: 'val_loss',
      primaryScore: 0.0001,
    });
    expectProblem(check(f.records), 'judge.reward', 'judge-forged', at);
    f = new Forge(base);
    at = f.add('judge-j2', 'RewardRecorded', {
      run: 'r1',
      round: 2,
      judge: 'j2',
      rewards: { val_loss: 0.0001 },
      primaryMetric: 'val_loss',
      primaryScore: 0.0001,
    });
    expectProblem(check(f.records), 'judge.reward', 'judge-j2', at);
    f = new Forge(base);
    at = f.add('judge-j3', 'RewardRecorded', {
      run: 'r1',
      round: 4,
      judge: 'j3',
      rewards: { val_loss: 0.0001 },
      primaryMetric: 'val_loss',
      primaryScore: 0.0001,
    });
    expect(check(f.records)).toMatchObject({
      rule: 'judge.reward',
      stream: 'judge-j3',
      position: at,
      message: expect.stringMatching(/reported infrastructure_error/),
    });
  });

  it('a RunCompleted whose best is not what the recorded rounds give, or whose status does not fit', () => {
    const s = genuine();
    const done = s.records[s.records.length - 1] as RunEventRecord;
    const cases: Array<[Record<string, unknown>, keyof typeof CLAIM_RULES]> = [
      [{ bestScore: 0.0001 }, 'run.best'],
      [{ bestRound: 5, bestScore: 0.5, bestSnapshot: 'bafy5' }, 'run.best'],
      [{ bestSnapshot: 'bafyother' }, 'run.best'],
      [{ status: 'no_valid_submission' }, 'run.status'],
      [{ bestRound: null, bestScore: null, bestSnapshot: null }, 'run.best'],
    ];
    for (const [patch, rule] of cases) {
      const forged = [...s.records.slice(0, -1), { ...done, data: { ...done.data, ...patch } }];
      expectProblem(check(forged), rule, RUN, done.position);
    }
    const empty = new Sim();
    empty.ok({ kind: 'complete' });
    const last = empty.records[empty.records.length - 1] as RunEventRecord;
    expectProblem(check([...empty.records.slice(0, -1), { ...last, data: { ...last.data, status: 'completed' } }]), 'run.status', RUN, last.position);
  });

  it('anything after RunCompleted; a second RunStarted; a bad protocol; another run named in the stream', () => {
    let f = new Forge(genuine().records);
    let at = f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 6 });
    expectProblem(check(f.records), 'run.ended', RUN, at);
    const s = new Sim();
    f = new Forge(s.records);
    at = f.add(RUN, 'RunStarted', s.records[0]?.data as Record<string, unknown>);
    expectProblem(check(f.records), 'run.started_once', RUN, at);
    f = new Forge();
    at = f.add('run-x', 'RunStarted', { ...(s.records[0]?.data as Record<string, unknown>), run: 'x', protocol: { scheme: 'assay.run-protocol/1' } });
    expectProblem(check(f.records), 'run.protocol', 'run-x', at);
    f = new Forge(s.records);
    at = f.add(RUN, 'SubmissionReceived', { run: 'r2', round: 1 });
    expectProblem(check(f.records), 'run.own_run', RUN, at);
  });

  it('run-only and Judge-only types outside their streams', () => {
    const f = new Forge(new Sim().records);
    const at = f.add('note-x', 'BudgetConsumed', { run: 'r1', budget: 'submissions', amount: 1, remaining: null, round: 1 });
    expectProblem(check(f.records), 'claims.stream', 'note-x', at);
    const g = new Forge(new Sim().records);
    const at2 = g.add(RUN, 'JudgeCompleted', {
      run: 'r1',
      round: 1,
      judge: 'x',
      status: 'completed',
      exitCode: 0,
      durationMs: 1,
      outputDigest: 'sha256:o',
      outputBytes: 0,
    });
    expectProblem(check(g.records), 'claims.stream', RUN, at2);
    const h = new Forge(new Sim().records);
    const at3 = h.add('snapshot-cli', 'SnapshotTaken', { run: 'r1', round: 1, root: 'bafyx', files: 1, bytes: 1, durationMs: 1, policyDigest: 'sha256:p' });
    expectProblem(check(h.records), 'claims.stream', 'snapshot-cli', at3);
  });

  it('refunds: the controller stops at the cap (10) and ends the run failed; a forged 11th refund, a round after the cap or another status fail', () => {
    const refundOnce = (s: Sim, n: number) => {
      s.submit();
      s.snapshot(n, `bafy${n}`);
      s.judge(n, 'infrastructure_error');
      s.ok({ kind: 'settle', round: n });
    };
    const s = new Sim('r1', { settings: { maxSubmissions: 50 } });
    for (let n = 1; n <= 10; n++) refundOnce(s, n);
    const last = s.records[s.records.length - 1];
    expect(last).toMatchObject({ type: 'RunCompleted', data: { status: 'failed' } });
    expect(check(s.records)).toBeNull();
    // the same history forged on: the cap's RunCompleted dropped, one more round refunded or a different ending
    const upToCap = s.records.slice(0, -1);
    let f = new Forge(upToCap);
    let at = f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 11 });
    expectProblem(check(f.records), 'run.refund_cap', RUN, at);
    f = new Forge(upToCap);
    at = f.add(RUN, 'RunCompleted', { run: 'r1', status: 'no_valid_submission', bestRound: null, bestScore: null, bestSnapshot: null });
    expectProblem(check(f.records), 'run.refund_cap', RUN, at);
    const nine = new Sim('r1', { settings: { maxSubmissions: 50 } });
    for (let n = 1; n <= 9; n++) refundOnce(nine, n);
    f = new Forge(nine.records);
    f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 10 });
    f.add(RUN, 'SubmissionRejected', { run: 'r1', round: 10, reason: 'x', status: 503 });
    f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 11 });
    at = f.add(RUN, 'SubmissionRejected', { run: 'r1', round: 11, reason: 'x', status: 503 });
    const p = check(f.records);
    expect(p?.rule).toBe('run.refund_cap');
    expect(p?.position).toBeLessThanOrEqual(at);
  });

  it('rounds: out of order, opened while one is open or while closed, snapshotted twice, settled twice, a refund that is not 503', () => {
    const s = new Sim('r1', { settings: { maxSubmissions: 1 } });
    let f = new Forge(s.records);
    let at = f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 2 });
    expectProblem(check(f.records), 'round.order', RUN, at);
    s.submit();
    f = new Forge(s.records);
    at = f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 2 });
    expectProblem(check(f.records), 'round.order', RUN, at);
    s.snapshot(1, 'bafy1');
    f = new Forge(s.records);
    at = f.add(RUN, 'SnapshotTaken', { run: 'r1', round: 1, root: 'bafy9', files: 1, bytes: 1, durationMs: 1, policyDigest: 'sha256:p' });
    expectProblem(check(f.records), 'round.snapshot', RUN, at);
    f = new Forge(s.records);
    at = f.add(RUN, 'SubmissionRejected', { run: 'r1', round: 1, reason: 'x', status: 500 });
    expectProblem(check(f.records), 'round.settled_once', RUN, at);
    s.judge(1, 'completed', { reward: 1 });
    s.ok({ kind: 'settle', round: 1 });
    f = new Forge(s.records);
    at = f.add(RUN, 'SubmissionRejected', { run: 'r1', round: 1, reason: 'x', status: 503 });
    expectProblem(check(f.records), 'round.settled_once', RUN, at);
    f = new Forge(s.records);
    at = f.add(RUN, 'SubmissionReceived', { run: 'r1', round: 2 });
    const p = check(f.records);
    expectProblem(p, 'round.closed', RUN, at);
    expect(p?.message).toMatch(/submissions budget is used up/);
    f = new Forge(s.records);
    at = f.add(RUN, 'SubmissionRejected', { run: 'r1', reason: 'x', status: 200 });
    expectProblem(check(f.records), 'run.rejection_status', RUN, at);
  });

  it('a counted round needs a Judge result (not infrastructure_error) or a RuleViolation; submission_error needs its RuleViolation', () => {
    const cases: Array<[string, (s: Sim) => void]> = [
      ['no result', () => undefined],
      ['infrastructure_error', (s) => void s.judge(1, 'infrastructure_error')],
      ['launched only', (s) => void s.judge(1, 'completed', null, { launchOnly: true })],
      ['submission_error', (s) => void s.judge(1, 'submission_error')],
    ];
    for (const [, judge] of cases) {
      const s = new Sim();
      s.submit();
      s.snapshot(1, 'bafy1');
      judge(s);
      const f = new Forge(s.records);
      const at = f.add(RUN, 'BudgetConsumed', { run: 'r1', budget: 'submissions', amount: 1, remaining: null, round: 1 });
      expectProblem(check(f.records), 'round.judged', RUN, at);
    }
  });

  it('budgets: remaining that does not add up, consumption over a limit with no RuleViolation', () => {
    const s = new Sim('r1', { agentTimeoutSec: 100 });
    let f = new Forge(s.records);
    let at = f.add(RUN, 'BudgetConsumed', { run: 'r1', budget: 'agent_time', amount: 10, remaining: 95 });
    expectProblem(check(f.records), 'budget.remaining', RUN, at);
    f = new Forge(s.records);
    at = f.add(RUN, 'BudgetConsumed', { run: 'r1', budget: 'agent_time', amount: 150, remaining: -50 });
    expectProblem(check(f.records), 'budget.over', RUN, at); // at the end of the log
    const next = f.add(RUN, 'RunCompleted', { run: 'r1', status: 'no_valid_submission', bestRound: null, bestScore: null, bestSnapshot: null });
    const p = check(f.records);
    expectProblem(p, 'budget.over', RUN, at);
    expect(p?.message).toContain(`RunCompleted at position ${next}`);
    f = new Forge(s.records);
    at = f.add(RUN, 'BudgetConsumed', { run: 'r1', budget: 'wall_time', amount: 1, remaining: 5 }); // no wall-time limit: null
    expectProblem(check(f.records), 'budget.remaining', RUN, at);
    f = new Forge(s.records);
    at = f.add(RUN, 'RuleViolation', { run: 'r1', round: 3, rule: 'x', detail: 'y', score: 0 });
    expectProblem(check(f.records), 'round.exists', RUN, at);
  });

  it('RunCompleted with a round still open', () => {
    const s = new Sim();
    s.submit();
    const f = new Forge(s.records);
    const at = f.add(RUN, 'RunCompleted', { run: 'r1', status: 'no_valid_submission', bestRound: null, bestScore: null, bestSnapshot: null });
    expectProblem(check(f.records), 'run.open_round', RUN, at);
  });

  it('Judges: for another snapshot, a settled round, an unknown run or round, without a launch, under another id, switching runs', () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    const launched = (judge: string, o: Record<string, unknown> = {}) => ({
      run: 'r1',
      round: 1,
      judge,
      image: 'sha256:i',
      snapshot: 'bafy1',
      testsDigest: 'sha256:t',
      limits: {},
      network: 'none',
      ...o,
    });
    const completed = (judge: string, o: Record<string, unknown> = {}) => ({
      run: 'r1',
      round: 1,
      judge,
      status: 'completed',
      exitCode: 0,
      durationMs: 1,
      outputDigest: 'sha256:o',
      outputBytes: 0,
      ...o,
    });
    let f = new Forge(s.records);
    let at = f.add('judge-a', 'JudgeLaunched', launched('a', { snapshot: 'bafyother' }));
    expectProblem(check(f.records), 'judge.snapshot', 'judge-a', at);
    f = new Forge(s.records);
    at = f.add('judge-a', 'JudgeCompleted', completed('a'));
    expectProblem(check(f.records), 'judge.launched', 'judge-a', at);
    f = new Forge(s.records);
    at = f.add('judge-a', 'JudgeCompleted', completed('a', { status: 'submission_error' }));
    expectProblem(check(f.records), 'judge.launched', 'judge-a', at);
    f = new Forge(s.records);
    at = f.add('judge-a', 'JudgeLaunched', launched('a', { run: 'nope' }));
    expectProblem(check(f.records), 'judge.run_started', 'judge-a', at);
    f = new Forge(s.records);
    at = f.add('judge-a', 'JudgeLaunched', launched('a', { round: 2 }));
    expectProblem(check(f.records), 'judge.round_exists', 'judge-a', at);
    f = new Forge(s.records);
    at = f.add('judge-a', 'JudgeLaunched', launched('b'));
    expectProblem(check(f.records), 'judge.id', 'judge-a', at);
    f = new Forge(s.records);
    f.add('judge-a', 'JudgeLaunched', launched('a'));
    at = f.add('judge-a', 'JudgeLaunched', launched('a'));
    expectProblem(check(f.records), 'judge.order', 'judge-a', at);
    f = new Forge(s.records);
    f.add('judge-a', 'JudgeLaunched', launched('a'));
    f.add('judge-a', 'JudgeCompleted', completed('a'));
    at = f.add('judge-a', 'JudgeCompleted', completed('a'));
    expectProblem(check(f.records), 'judge.order', 'judge-a', at);
    f = new Forge(s.records);
    f.add('judge-a', 'JudgeLaunched', launched('a'));
    at = f.add('judge-a', 'JudgeCompleted', { ...completed('a'), round: 2 });
    expectProblem(check(f.records), 'judge.run_ref', 'judge-a', at);
    f = new Forge(s.records);
    at = f.add('judge-a', 'JudgeLaunched', { ...launched('a'), round: undefined });
    delete (f.records[at]?.data as Record<string, unknown>).round;
    expectProblem(check(f.records), 'judge.run_ref', 'judge-a', at);
    f = new Forge(s.records);
    f.add('judge-a', 'JudgeLaunched', { judge: 'a', image: 'sha256:i', snapshot: 'bafy1', testsDigest: 'sha256:t', limits: {}, network: 'none' });
    at = f.add('judge-a', 'JudgeCompleted', completed('a'));
    expectProblem(check(f.records), 'judge.run_ref', 'judge-a', at); // a standalone Judge cannot speak for a run later
    // a Judge launched after its round was settled
    s.judge(1, 'completed', { reward: 1 });
    s.ok({ kind: 'settle', round: 1 });
    f = new Forge(s.records);
    at = f.add('judge-late', 'JudgeLaunched', launched('late'));
    expectProblem(check(f.records), 'judge.snapshot', 'judge-late', at);
  });

  it("a Judge's RuleViolation: twice, with a result other than submission_error, or left without a JudgeCompleted", () => {
    const s = new Sim();
    s.submit();
    s.snapshot(1, 'bafy1');
    const rv = { run: 'r1', round: 1, rule: 'snapshot.limits', detail: 'x', score: 0 };
    const done = (status: string) => ({ run: 'r1', round: 1, judge: 'a', status, exitCode: null, durationMs: 1, outputDigest: 'sha256:o', outputBytes: 0 });
    let f = new Forge(s.records);
    f.add('judge-a', 'RuleViolation', rv);
    let at = f.add('judge-a', 'RuleViolation', rv);
    expectProblem(check(f.records), 'judge.violation', 'judge-a', at);
    f = new Forge(s.records);
    f.add('judge-a', 'RuleViolation', rv);
    at = f.add('judge-a', 'JudgeCompleted', done('infrastructure_error'));
    expectProblem(check(f.records), 'judge.violation', 'judge-a', at);
    f = new Forge(s.records);
    f.add('judge-a', 'RuleViolation', rv);
    expectProblem(check(f.records), 'judge.violation', 'judge-a', null);
    f = new Forge(s.records);
    f.add('judge-a', 'JudgeLaunched', {
      run: 'r1',
      round: 1,
      judge: 'a',
      image: 'sha256:i',
      snapshot: 'bafy1',
      testsDigest: 'sha256:t',
      limits: {},
      network: 'none',
    });
    f.add('judge-a', 'JudgeCompleted', done('verifier_error'));
    at = f.add('judge-a', 'RuleViolation', rv);
    expectProblem(check(f.records), 'judge.violation', 'judge-a', at);
  });

  it('stops at the first problem: what follows is not folded', () => {
    const f = new Forge();
    const at = f.add('run-a', 'SubmissionReceived', { run: 'a', round: 1 });
    f.add('run-b', 'RunCompleted', { run: 'b', status: 'completed', bestRound: 1, bestScore: 1, bestSnapshot: 'bafy' });
    expectProblem(check(f.records), 'run.started_first', 'run-a', at);
  });
});

describe('baselines: BaselineRecorded against the Judges it cites', () => {
  const IMAGE = `sha256:${'a'.repeat(64)}`;
  /** Three standalone Judges on snapshot bafystart (the second failed), then the baseline citing them. */
  function baseline(edit: (data: Record<string, unknown>, f: Forge) => void = () => {}): { f: Forge; at: number } {
    const f = new Forge();
    const judge = (id: string, status: string, rewards: Record<string, number> | null) => {
      f.add(`judge-${id}`, 'JudgeLaunched', { judge: id, image: IMAGE, snapshot: 'bafystart' });
      f.add(`judge-${id}`, 'JudgeCompleted', { judge: id, status });
      if (rewards) f.add(`judge-${id}`, 'RewardRecorded', { judge: id, rewards, primaryScore: rewards.loss ?? null });
    };
    judge('b1', 'completed', { loss: 0.5, other: 9 });
    judge('b2', 'verifier_error', null);
    judge('b3', 'completed', { loss: 0.25 });
    const data: Record<string, unknown> = {
      task: 'org:t',
      metric: 'loss',
      kind: 'start',
      snapshot: 'bafystart',
      judgeImageDigest: IMAGE,
      repeats: 3,
      scores: [
        { judge: 'b1', status: 'completed', primaryScore: 0.5 },
        { judge: 'b2', status: 'verifier_error', primaryScore: null },
        { judge: 'b3', status: 'completed', primaryScore: 0.25 },
      ],
      median: 0.375,
      min: 0.25,
      max: 0.5,
    };
    edit(data, f);
    const at = f.add('baseline-org:t', 'BaselineRecorded', data);
    return { f, at };
  }
  const scores = (d: Record<string, unknown>) => d.scores as Array<Record<string, unknown>>;

  it('a baseline whose every repeat is its Judge verifies', () => {
    expect(check(baseline().f.records)).toBeNull();
  });

  it('refuses a score its Judge did not give, a status it did not report, a Judge that is missing or cited twice', () => {
    const better = baseline((d) => (scores(d)[2]!.primaryScore = 0.1));
    expectProblem(check(better.f.records), 'baseline.judges', 'baseline-org:t', better.at);
    const status = baseline((d) => (scores(d)[1]!.status = 'completed'));
    expectProblem(check(status.f.records), 'baseline.judges', 'baseline-org:t', status.at);
    const missing = baseline((d) => (scores(d)[0]!.judge = 'nobody'));
    expectProblem(check(missing.f.records), 'baseline.judges', 'baseline-org:t', missing.at);
    const twice = baseline((d) => (scores(d)[2] = { ...scores(d)[0] }));
    expectProblem(check(twice.f.records), 'baseline.judges', 'baseline-org:t', twice.at);
  });

  it("refuses a Judge of another snapshot, of another image, or of a run's round", () => {
    const snapshot = baseline((d) => (d.snapshot = 'bafyother'));
    expectProblem(check(snapshot.f.records), 'baseline.judges', 'baseline-org:t', snapshot.at);
    const image = baseline((d) => (d.judgeImageDigest = `sha256:${'b'.repeat(64)}`));
    expectProblem(check(image.f.records), 'baseline.judges', 'baseline-org:t', image.at);
    const ofRun = baseline((d, f) => {
      const s = genuine();
      for (const r of s.records) f.add(r.stream, r.type, r.data as Record<string, unknown>);
      const judged = f.records.find((r) => r.type === 'JudgeCompleted' && r.data.run === 'r1' && r.data.status === 'completed')!;
      scores(d)[0] = { judge: judged.data.judge, status: 'completed', primaryScore: 0.5 };
    });
    expectProblem(check(ofRun.f.records), 'baseline.judges', 'baseline-org:t', ofRun.at);
  });

  it("refuses a median, min, max or repeats its scores do not give, and a baseline outside its task's stream", () => {
    const median = baseline((d) => (d.median = 0.3));
    expectProblem(check(median.f.records), 'baseline.summary', 'baseline-org:t', median.at);
    const repeats = baseline((d) => (d.repeats = 5));
    expectProblem(check(repeats.f.records), 'baseline.summary', 'baseline-org:t', repeats.at);
    const elsewhere = new Forge(baseline().f.records.slice(0, -1));
    const at = elsewhere.add('baseline-org:other', 'BaselineRecorded', baseline().f.records.at(-1)!.data as Record<string, unknown>);
    expectProblem(check(elsewhere.records), 'baseline.stream', 'baseline-org:other', at);
  });
});
