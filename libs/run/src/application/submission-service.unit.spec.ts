import { AssayError } from '@assay/core';
import { BEARER, startInput, submitReq, wiring, type Wiring } from '../../../../tests/run/support/run-fixtures';
import { SubmissionService } from './submission-service';

const types = (w: Wiring, stream?: string) =>
  w.ledger
    .all()
    .filter((e) => stream === undefined || e.stream === stream)
    .map((e) => e.type);
const tick = () => new Promise((r) => setImmediate(r));

async function started(o: Parameters<typeof wiring>[0] & { start?: Parameters<typeof startInput>[1] } = {}) {
  const w = wiring(o);
  const svc = await new SubmissionService(w.deps).start(startInput(w.deps.run, o.start ?? {}));
  return { w, svc };
}

describe('SubmissionService', () => {
  it('judges a submission: events in order, the footer with the round, status and score', async () => {
    const { w, svc } = await started({ script: [{ status: 'completed', rewards: { reward: 0.75 } }] });
    const r = await svc.submit(submitReq());
    expect(r).toMatchObject({ httpStatus: 200, round: 1, status: 'completed', code: null });
    expect(r.text).toContain('round: 1\nstatus: completed\ncode: 200\nreward: reward=0.75\nscore: 0.75 (reward, maximize)\n');
    expect(r.text).toContain('log: /logs/assay/round-1.log\n');
    expect(types(w)).toEqual(['RunStarted', 'SubmissionReceived', 'SnapshotTaken', 'JudgeLaunched', 'JudgeCompleted', 'RewardRecorded', 'BudgetConsumed']);
    expect(w.judge.calls).toEqual([
      { run: 'r1', round: 1, snapshot: w.snapshotter.calls.length ? expect.stringMatching(/^f[0-9a-f]{64}$/) : '', signal: expect.any(Object) },
    ]);
    expect(w.snapshotter.calls).toEqual([{ run: 'r1', round: 1 }]);
  });

  it('serialises concurrent submits into rounds 1, 2, ...; one Judge at a time', async () => {
    const { w, svc } = await started();
    let active = 0;
    let most = 0;
    w.judge.onJudge = async () => {
      active += 1;
      most = Math.max(most, active);
      await tick();
      active -= 1;
    };
    const replies = await Promise.all(Array.from({ length: 6 }, () => svc.submit(submitReq())));
    expect(replies.map((r) => r.round).sort()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(most).toBe(1);
    expect(w.judge.calls.map((c) => c.round)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(svc.current.consumed.submissions).toBe(6);
  });

  it('answers 401 and 422 at once, even while a round is being judged, and judges nothing for them', async () => {
    const { w, svc } = await started({ script: [{ hang: true }] });
    const first = svc.submit(submitReq());
    await tick();
    await tick();
    expect((await svc.submit(submitReq(null))).httpStatus).toBe(401);
    expect((await svc.submit(submitReq('Bearer ' + 'f'.repeat(64)))).code).toBe('SUBMIT_WRONG_TOKEN');
    expect((await svc.submit(submitReq(BEARER, { hasBody: true }))).httpStatus).toBe(422);
    expect((await svc.submit(submitReq(BEARER, { hasQuery: true }))).text).toContain('no round was used');
    expect(w.judge.calls).toHaveLength(1);
    w.judge.release();
    expect((await first).status).toBe('refunded');
    expect(svc.current.rounds).toHaveLength(1);
    expect(svc.current.rejections).toBe(4);
  });

  it('refunds an infrastructure failure: no submission used, no cooldown', async () => {
    const { w, svc } = await started({
      script: [{ throws: new Error('docker: connection refused') }, { dieAfterLaunch: true, status: 'completed' }, { status: 'completed' }],
      start: { settings: { cooldownSec: 600, maxSubmissions: 1 } },
    });
    const a = await svc.submit(submitReq());
    expect(a).toMatchObject({ httpStatus: 503, status: 'refunded', code: 'SUBMIT_REFUNDED', round: 1 });
    expect(a.text).toContain('docker: connection refused');
    const b = await svc.submit(submitReq());
    expect(b).toMatchObject({ httpStatus: 503, round: 2 });
    const c = await svc.submit(submitReq());
    expect(c).toMatchObject({ httpStatus: 200, round: 3, status: 'completed' });
    const d = await svc.submit(submitReq());
    expect(d).toMatchObject({ httpStatus: 429, code: 'SUBMIT_BUDGET_EXHAUSTED' });
    expect(d.text).toContain('remaining: submissions=0 ');
    expect(types(w).filter((t) => t === 'BudgetConsumed')).toHaveLength(1);
  });

  it('a path outside the editable ones is a RuleViolation before any Judge; the edit is recorded', async () => {
    const { w, svc } = await started({ files: { 'optimizer.py': 'sgd' }, start: { editablePaths: ['optimizer.py'] } });
    expect(await svc.recordWorkspace()).toMatchObject({ changed: true });
    expect(await svc.recordWorkspace()).toMatchObject({ changed: false });
    w.snapshotter.files.set('optimizer.py', 'adam');
    expect((await svc.submit(submitReq())).status).toBe('completed');
    w.snapshotter.files.set('numpy.py', 'raise ImportError');
    const r = await svc.submit(submitReq());
    expect(r).toMatchObject({ httpStatus: 200, status: 'rule_violation', round: 2 });
    expect(r.text).toContain('score: rule violation: workspace.not_editable (scored 0)');
    expect(r.text).toContain('added "numpy.py"');
    expect(w.judge.calls.map((c) => c.round)).toEqual([1]);
    const edited = w.ledger
      .all()
      .filter((e) => e.type === 'WorkspaceEdited')
      .map((e) => e.data);
    expect(edited).toEqual([
      expect.objectContaining({ changed: 1, added: 0, paths: { added: [], removed: [], changed: ['optimizer.py'] }, truncated: false }),
      expect.objectContaining({ added: 1, bytesAdded: 17, paths: { added: ['numpy.py'], removed: [], changed: [] } }),
    ]);
  });

  it('a snapshot over the limits is a RuleViolation; any other snapshot failure is refunded', async () => {
    const { w, svc } = await started();
    w.snapshotter.fail = new AssayError('SNAPSHOT_TOO_MANY_FILES', 'invalid_input', 'more than 10 files');
    expect(await svc.submit(submitReq())).toMatchObject({ status: 'rule_violation', round: 1 });
    w.snapshotter.fail = new Error('EIO');
    expect(await svc.submit(submitReq())).toMatchObject({ status: 'refunded', httpStatus: 503, round: 2 });
    expect(w.judge.calls).toEqual([]);
  });

  it('a full queue is 429; cancelling refunds the round being judged and refuses what waits', async () => {
    const { w, svc } = await started({ script: [{ hang: true }], options: { maxWaiting: 1 } });
    const a = svc.submit(submitReq());
    const b = svc.submit(submitReq());
    await tick();
    expect(await svc.submit(submitReq())).toMatchObject({ httpStatus: 429, code: 'SUBMIT_QUEUE_FULL' });
    await new Promise((r) => setTimeout(r, 5));
    const done = svc.cancel('Ctrl-C');
    expect(await a).toMatchObject({ httpStatus: 503, status: 'refunded', round: 1 });
    expect(await b).toMatchObject({ httpStatus: 429, code: 'SUBMIT_RUN_CLOSED' });
    expect(await done).toMatchObject({ status: 'cancelled', bestRound: null });
    expect(types(w, 'run-r1').slice(-2)).toEqual(['SubmissionRejected', 'RunCompleted']);
    expect(await svc.submit(submitReq())).toMatchObject({ httpStatus: 429, code: 'SUBMIT_RUN_CLOSED' });
  });

  it('freezes Work only for the snapshot, unless the task keeps it paused for the Judge', async () => {
    for (const keep of [false, true]) {
      const log: string[] = [];
      const w = wiring({ options: { keepWorkPausedDuringJudge: keep } });
      const svc = await new SubmissionService({
        ...w.deps,
        work: { freeze: async () => void log.push('freeze'), thaw: async () => void log.push('thaw') },
      }).start(startInput());
      w.judge.onJudge = () => void log.push('judge');
      await svc.submit(submitReq());
      expect(log).toEqual(keep ? ['freeze', 'judge', 'thaw'] : ['freeze', 'thaw', 'judge']);
    }
  });

  it('history shows this run only', async () => {
    const w = wiring();
    const one = await new SubmissionService(w.deps).start(startInput('r1'));
    const two = await new SubmissionService({ ...w.deps, run: 'r2' }).start(startInput('r2'));
    await one.submit(submitReq());
    await two.submit(submitReq());
    await two.submit(submitReq());
    const h1 = await one.history({ authorization: BEARER });
    expect(h1.body.match(/^round \d/gm)).toEqual(['round 1']);
    const j2 = JSON.parse((await two.history({ authorization: BEARER, json: true })).body);
    expect(j2).toMatchObject({ run: 'r2', rounds: [{ round: 1 }, { round: 2 }] });
    expect((await one.history({ authorization: 'Bearer nope' })).httpStatus).toBe(401);
    expect(one.current.rejections).toBe(0); // reading the history is not a submission
  });

  it('budgets: Work GPU time and agent time through consume, wall time through tick', async () => {
    const { w, svc } = await started({ start: { settings: { gpuBudgetSec: 3.6, timeBudgetSec: 10 } } });
    await svc.workStarted('work-1', 'sha256:w', { cpus: 1 });
    await svc.consume('gpu_seconds', 3);
    await svc.consume('gpu_seconds', 1);
    expect(svc.current.overBudget).toBe('budget.gpu_seconds');
    expect((await svc.submit(submitReq())).code).toBe('SUBMIT_BUDGET_EXHAUSTED');
    w.clock.advance(4000);
    await svc.tick();
    expect(svc.current.consumed.wall_time).toBe(4);
    await expect(svc.consume('agent_time', -1)).rejects.toMatchObject({ code: 'RUN_INVALID_INPUT' });
  });

  it('a second controller on the same run is stopped by the ledger', async () => {
    const { w, svc } = await started();
    let stale = false;
    // The other controller read the run, then lost the race: its next read sees nothing new.
    const racing = { read: (run: string, from?: number) => (stale ? Promise.resolve([]) : w.ledger.read(run, from)), append: w.ledger.append.bind(w.ledger) };
    const other = await new SubmissionService({ ...w.deps, ledger: racing }).load();
    stale = true;
    await svc.submit(submitReq());
    await expect(other.workStarted('c', 'sha256:x', {})).rejects.toMatchObject({ code: 'RUN_CONCURRENT_WRITER' });
    await expect(new SubmissionService(w.deps).start(startInput())).rejects.toMatchObject({ code: 'RUN_CONFLICT' });
    expect(types(w, 'run-r1')).not.toContain('WorkStarted');
  });
});

describe('resume: a controller that dies mid-round is rebuilt from the ledger alone', () => {
  it('between SubmissionReceived and the snapshot: refunded, and the next round is 2', async () => {
    const { w, svc } = await started();
    let release!: () => void;
    w.snapshotter.gate = new Promise((r) => (release = r));
    void svc.submit(submitReq()); // the controller "dies" here: this promise is abandoned
    await tick();
    await tick();
    expect(types(w).at(-1)).toBe('SubmissionReceived');
    w.snapshotter.gate = null;
    const service = new SubmissionService(w.deps);
    const recovery = await service.resume();
    expect(recovery).toEqual({ round: 1, outcome: 'refunded' });
    expect(w.ledger.all().at(-1)?.data.reason).toMatch(/before the workspace was snapshotted/);
    expect((await service.submit(submitReq())).round).toBe(2);
    release();
  });

  it('during a Judge: refunded; after the Judge recorded its result: the result stands', async () => {
    const a = await started({ script: [{ hang: true }] });
    void a.svc.submit(submitReq());
    await new Promise((r) => setTimeout(r, 5));
    expect(types(a.w).at(-1)).toBe('JudgeLaunched');
    expect(await new SubmissionService(a.w.deps).resume()).toEqual({ round: 1, outcome: 'refunded' });
    expect(a.w.ledger.all().at(-1)?.data.reason).toMatch(/Judge fake-1-r1 was launched/);
    a.w.judge.release();

    const b = await started({ script: [{ status: 'completed', rewards: { reward: 0.5 } }] });
    b.w.judge.onRecorded = () => new Promise(() => undefined); // dies after the Judge's events, before settling
    void b.svc.submit(submitReq());
    await new Promise((r) => setTimeout(r, 5));
    expect(types(b.w).at(-1)).toBe('RewardRecorded');
    expect(await new SubmissionService(b.w.deps).resume()).toEqual({ round: 1, outcome: 'counted' });
    const again = new SubmissionService(b.w.deps);
    expect(await again.resume()).toEqual({ round: null, outcome: null });
    expect(await again.complete()).toMatchObject({ status: 'completed', bestRound: 1, bestScore: 0.5 });
    const ids = b.w.ledger.all().map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(types(b.w, 'run-r1')).toEqual(['RunStarted', 'SubmissionReceived', 'SnapshotTaken', 'BudgetConsumed', 'RunCompleted']);
  });

  it('refuses to resume a run that never started', async () => {
    await expect(new SubmissionService(wiring({ run: 'ghost' }).deps).resume()).rejects.toMatchObject({ code: 'RUN_NOT_STARTED' });
  });
});
