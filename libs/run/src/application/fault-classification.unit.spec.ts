/**
 * Faults are classified by who caused them: what the agent leaves in the workspace (a fifo, a non-UTF-8 name, a path
 * over PATH_MAX, an unreadable file) or does to Work (I/O that keeps it from freezing) is a violation of the round
 * (counted, score 0), never a refund; only the host's failures are refunded, and at most MAX_REFUNDED_ROUNDS times.
 */
import { AssayError } from '@assay/core';
import { startInput, submitReq, wiring, type Wiring } from '../../../../tests/run/support/run-fixtures';
import { MAX_REFUNDED_ROUNDS } from '../domain/decide';
import { classifySnapshotFailure } from '../ports/snapshotter.port';
import { WORK_FREEZE_REFUSED } from '../ports/work-control.port';
import { foldRun } from '../domain/run-state';
import { SubmissionService } from './submission-service';

const snapErr = (code: string, message: string, details: Record<string, unknown> = {}) =>
  new AssayError(code, code === 'SNAPSHOT_IO' ? 'unavailable' : 'refused', message, { details });

// What libs/snapshots raises for what a hostile agent leaves in the workspace (as seen on the current code).
const AGENT_CAUSED: Array<[string, AssayError, string]> = [
  ['a fifo', snapErr('SNAPSHOT_SPECIAL_FILE', 'pipe: a fifo is not a file, directory or symlink', { path: 'pipe' }), 'snapshot.refused'],
  [
    'a non-UTF-8 name',
    snapErr('SNAPSHOT_NAME_NOT_UTF8', 'x\\xff: the name is not valid UTF-8; such names are refused', { path: 'x\\xff' }),
    'snapshot.refused',
  ],
  [
    'a path over PATH_MAX',
    snapErr('SNAPSHOT_IO', 'listing a/a/a failed: ENAMETOOLONG: name too long', { path: 'a/a/a', errno: 'ENAMETOOLONG' }),
    'snapshot.refused',
  ],
  ['a symlink loop', snapErr('SNAPSHOT_IO', 'readlink l failed: ELOOP', { path: 'l', errno: 'ELOOP' }), 'snapshot.refused'],
  ['an unreadable file (hashing worker)', snapErr('SNAPSHOT_IO', "hashing worker failed: EACCES: permission denied, open '/w/secret'"), 'snapshot.refused'],
  ['too many files', snapErr('SNAPSHOT_TOO_MANY_FILES', 'more than 100000 files'), 'snapshot.limits'],
];
const HOST_CAUSED: Array<[string, AssayError]> = [
  ['a disk error', snapErr('SNAPSHOT_IO', 'listing a failed: EIO', { path: 'a', errno: 'EIO' })],
  ['a full store', snapErr('SNAPSHOT_IO', 'writing a pack of /home/.assay/blobs failed: ENOSPC', { path: '/home/.assay/blobs', errno: 'ENOSPC' })],
  ['an unreadable store', snapErr('SNAPSHOT_IO', 'opening the blob store at /h/blobs failed: EACCES', { path: '/h/blobs', errno: 'EACCES' })],
  ['a dead hashing pool', snapErr('SNAPSHOT_IO', 'all hashing workers died')],
  ['a plain error', new Error('docker: connection refused') as AssayError],
];

describe('classifySnapshotFailure', () => {
  it.each(AGENT_CAUSED)("%s is the agent's doing", (_what, e, rule) => {
    expect(classifySnapshotFailure(e)).toMatchObject({ by: 'agent', rule });
  });
  it.each(HOST_CAUSED)("%s is the infrastructure's", (_what, e) => {
    expect(classifySnapshotFailure(e)).toMatchObject({ by: 'infrastructure' });
  });
});

const types = (w: Wiring) =>
  w.ledger
    .all()
    .filter((e) => e.stream === 'run-r1')
    .map((e) => e.type);

async function started(o: { maxSubmissions?: number | null; work?: { freeze(): Promise<void>; thaw(): Promise<void> } } = {}) {
  const w = wiring({ script: Array.from({ length: 40 }, () => ({ status: 'completed' as const, rewards: { reward: 0.5 } })) });
  const deps = { ...w.deps, ...(o.work ? { work: o.work } : {}) };
  const svc = await new SubmissionService(deps).start(startInput('r1', { settings: { maxSubmissions: o.maxSubmissions ?? null } }));
  return { w, svc };
}

describe('snapshot failures the agent causes count against it', () => {
  it.each(AGENT_CAUSED)('%s: RuleViolation + BudgetConsumed submissions for the round, status rule_violation, no refund', async (_what, e, rule) => {
    const { w, svc } = await started({ maxSubmissions: 2 });
    w.snapshotter.fail = e;
    const r = await svc.submit(submitReq());
    expect(r).toMatchObject({ httpStatus: 200, round: 1, status: 'rule_violation' });
    expect(r.text).toContain(`score: rule violation: ${rule} (scored 0)`);
    expect(types(w)).toEqual(['RunStarted', 'SubmissionReceived', 'RuleViolation', 'BudgetConsumed']);
    const [v, b] = w.ledger.all().slice(-2);
    expect(v?.data).toMatchObject({ round: 1, rule, score: 0 });
    expect(b?.data).toMatchObject({ budget: 'submissions', amount: 1, round: 1 });
    expect(svc.current.rounds[0]?.outcome).toBe('counted');
    // the history folds (evolve accepts it) to the same state
    expect(foldRun('r1', w.ledger.all()).rounds.map((x) => x.outcome)).toEqual(['counted']);
  });

  it('an agent that keeps planting a fifo uses up its submissions: 2 rounds, then 429, never a refund', async () => {
    const { w, svc } = await started({ maxSubmissions: 2 });
    const replies = [];
    for (let i = 0; i < 5; i++) {
      w.snapshotter.fail = AGENT_CAUSED[0]![1];
      replies.push(await svc.submit(submitReq()));
    }
    expect(replies.map((r) => r.httpStatus)).toEqual([200, 200, 429, 429, 429]);
    expect(replies[2]?.code).toBe('SUBMIT_BUDGET_EXHAUSTED');
    expect(svc.current.rounds.map((r) => r.outcome)).toEqual(['counted', 'counted']);
    expect(w.ledger.all().filter((e) => e.type === 'SubmissionRejected' && e.data.status === 503)).toHaveLength(0);
  });

  it('Work that cannot be frozen because of its own I/O: the round counts (work.freeze_failed); other freeze failures refund', async () => {
    let fail: Error | null = new AssayError(WORK_FREEZE_REFUSED, 'refused', 'docker pause failed 5 times (unable to freeze)');
    const work = {
      freeze: async () => {
        if (fail) throw fail;
      },
      thaw: async () => undefined,
    };
    const { w, svc } = await started({ work });
    const a = await svc.submit(submitReq());
    expect(a).toMatchObject({ httpStatus: 200, status: 'rule_violation' });
    expect(a.text).toContain('score: rule violation: work.freeze_failed (scored 0)');
    fail = new Error('connect ENOENT /var/run/docker.sock');
    const b = await svc.submit(submitReq());
    expect(b).toMatchObject({ httpStatus: 503, status: 'refunded' });
    fail = null;
    const c = await svc.submit(submitReq());
    expect(c).toMatchObject({ httpStatus: 200, status: 'completed' });
    expect(svc.current.rounds.map((r) => r.outcome)).toEqual(['counted', 'refunded', 'counted']);
    expect(types(w).filter((t) => t === 'RuleViolation')).toHaveLength(1);
  });
});

describe('refunds are capped per run', () => {
  it(`the refund that reaches ${MAX_REFUNDED_ROUNDS} ends the run (RunCompleted failed, in the same append), keeping the best so far`, async () => {
    const { w, svc } = await started({ maxSubmissions: 2 });
    expect((await svc.submit(submitReq())).status).toBe('completed'); // round 1: the best so far
    const infra = snapErr('SNAPSHOT_IO', 'listing . failed: EIO', { path: '', errno: 'EIO' });
    const statuses: number[] = [];
    for (let i = 0; i < MAX_REFUNDED_ROUNDS + 3; i++) {
      w.snapshotter.fail = infra;
      statuses.push((await svc.submit(submitReq())).httpStatus);
    }
    expect(statuses).toEqual([...Array(MAX_REFUNDED_ROUNDS).fill(503), 429, 429, 429]);
    expect(svc.current.rounds.filter((r) => r.outcome === 'refunded')).toHaveLength(MAX_REFUNDED_ROUNDS);
    expect(svc.current.completed).toMatchObject({ status: 'failed', bestRound: 1 });
    expect(svc.ended.aborted).toBe(true);
    const all = w.ledger.all().filter((e) => e.stream === 'run-r1');
    const last = all.slice(-2);
    expect(last.map((e) => e.type)).toEqual(['SubmissionRejected', 'RunCompleted']);
    expect(last[0]?.data).toMatchObject({ status: 503, round: MAX_REFUNDED_ROUNDS + 1 });
    expect(String(last[0]?.data.reason)).toContain(`refund ${MAX_REFUNDED_ROUNDS} of the run, its cap`);
    expect(foldRun('r1', w.ledger.all()).completed?.status).toBe('failed');
    // after the end: refused, not recorded
    expect(all.filter((e) => e.type === 'SubmissionRejected' && e.data.round === undefined)).toHaveLength(0);
  });
});
