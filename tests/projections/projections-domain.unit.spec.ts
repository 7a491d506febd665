/**
 * The pure projections over events as data: grouping by protocol fingerprint, ranking and ties, a run without a
 * valid submission, trajectories' best-so-far for both directions, and routing (Judge events, foreign streams).
 */
import {
  baselineOfEvent,
  leaderboardRow,
  projectRunEvent,
  rankLeaderboard,
  runOfEvent,
  trajectoryOf,
  type LeaderboardRow,
  type RunSlot,
} from '@assay/projections';
import type { RunEventRecord } from '@assay/run';
import { asRecords, baselineDraft, noValidRun, preamble, sampleVariant, type EventDraft } from './projection-fixtures';

function fold(records: readonly RunEventRecord[]): Map<string, RunSlot> {
  const slots = new Map<string, RunSlot>();
  for (const e of records) {
    const run = runOfEvent(e);
    if (run === null) continue;
    const next = projectRunEvent(slots.get(run) ?? null, e);
    if (next) slots.set(run, next);
  }
  return slots;
}

const rowsOf = (slots: Map<string, RunSlot>): LeaderboardRow[] => [...slots.values()].map(leaderboardRow).filter((r): r is LeaderboardRow => r !== null);

const FP_B = 'sha256:' + 'b'.repeat(64);

describe('leaderboard projection', () => {
  it('a row per run from the run fold: best, its round and snapshot, submissions, round counts, wall time', () => {
    const slots = fold(asRecords([...preamble(), ...sampleVariant({ run: 'a' })]));
    const [row] = rowsOf(slots);
    expect(row).toMatchObject({
      run: 'a',
      task: 'tiny-optimizer',
      agent: 'reference',
      model: 'scripted',
      status: 'completed',
      best: { score: 0.433, round: 5, snapshot: 'bafyreiboe6hdth4qf62rxbxzt6d4rv3y64krgfhxiyw4qhxat6apyjqkny' },
      submissions: { used: 4, allowed: 4 },
      rounds: { total: 5, invalid: 0, failed: 0, violating: 1, refunded: 1 },
      source: 'ledger',
    });
    // RunStarted is the 4th event (position 3), RunCompleted the 43rd (position 42): 39 s apart.
    expect(row!.wallTimeMs).toBe(39_000);
  });

  it('two runs of the same task under different fingerprints are never ranked together', () => {
    const events = [...preamble(), ...sampleVariant({ run: 'a' }), ...sampleVariant({ run: 'b', fingerprint: FP_B, scores: [0.1, 0.2, 0.3] })];
    const groups = rankLeaderboard(rowsOf(fold(asRecords(events))));
    expect(groups).toHaveLength(2);
    for (const g of groups) {
      expect(g.rows).toHaveLength(1);
      expect(g.rows[0]!.rank).toBe(1);
      expect(g.rows[0]!.fingerprint).toBe(g.fingerprint);
    }
    expect(groups.map((g) => g.rows[0]!.run).sort()).toEqual(['a', 'b']);
  });

  it('ranks by the direction; ties go to the earlier completion, then the run id; no valid submission sorts last', () => {
    const events: EventDraft[] = [
      ...preamble(),
      ...noValidRun('a-none'),
      ...sampleVariant({ run: 'z-tie-first' }), // completes before the other tie
      ...sampleVariant({ run: 'b-tie-second' }),
      ...sampleVariant({ run: 'c-worse', scores: [0.9, 0.8, 0.7] }),
      ...sampleVariant({ run: 'd-best', scores: [0.9, 0.8, 0.1] }),
    ];
    const [g] = rankLeaderboard(rowsOf(fold(asRecords(events))));
    expect(g!.direction).toBe('minimize');
    expect(g!.rows.map((r) => [r.run, r.rank, r.best?.score ?? null])).toEqual([
      ['d-best', 1, 0.1],
      ['z-tie-first', 2, 0.433],
      ['b-tie-second', 3, 0.433],
      ['c-worse', 4, 0.7],
      ['a-none', null, null],
    ]);
    const none = g!.rows[4]!;
    expect(none).toMatchObject({ status: 'no_valid_submission', best: null, rounds: { total: 1, violating: 1 } });
  });

  it('equal scores and equal completion times: the run id decides', () => {
    const row = (run: string): LeaderboardRow => ({ ...rowsOf(fold(asRecords([...preamble(), ...sampleVariant({ run: 'x' })])))[0]!, run });
    const [g] = rankLeaderboard([row('m'), row('k'), row('q')]);
    expect(g!.rows.map((r) => r.run)).toEqual(['k', 'm', 'q']);
  });

  it('maximize ranks the highest first; a running run ties after a completed one', () => {
    const events = [
      ...preamble(),
      ...sampleVariant({ run: 'low', direction: 'maximize', scores: [0.1, 0.2, 0.3] }),
      ...sampleVariant({ run: 'running', direction: 'maximize', scores: [0.5, 0.9, 0.2], complete: false }),
      ...sampleVariant({ run: 'done', direction: 'maximize', scores: [0.9, 0.5, 0.2] }),
    ];
    const [g] = rankLeaderboard(rowsOf(fold(asRecords(events))));
    expect(g!.rows.map((r) => [r.run, r.best?.score, r.best?.round, r.status])).toEqual([
      ['done', 0.9, 1, 'completed'],
      ['running', 0.9, 2, 'running'],
      ['low', 0.3, 5, 'completed'],
    ]);
    expect(g!.rows[1]!.wallTimeMs).toBeNull();
  });
});

describe('baselines on the leaderboard', () => {
  it('a BaselineRecorded of its task stream becomes a baseline; other streams and types do not', () => {
    const [rec] = asRecords([baselineDraft({ kind: 'start', scores: [1, 2, 3] })], 40);
    expect(baselineOfEvent(rec!)).toMatchObject({ kind: 'start', median: 2, min: 1, max: 3, position: 40, task: 'tiny-optimizer' });
    expect(baselineOfEvent({ ...rec!, stream: 'baseline-other' })).toBeNull();
    expect(baselineOfEvent({ ...rec!, type: 'Note' })).toBeNull();
    expect(baselineOfEvent({ ...rec!, data: { kind: 'start' } })).toBeNull();
  });

  it('maximize: a score above the range of 3 repeats is an improvement, within it not distinguishable, below it a regression', () => {
    const base = asRecords([baselineDraft({ kind: 'start', scores: [0.5, 0.6, 0.55], direction: 'maximize' })], 100).map((e) => baselineOfEvent(e)!);
    const rows = (scores: [number, number, number]) => rowsOf(fold(asRecords([...preamble(), ...sampleVariant({ run: 'm', direction: 'maximize', scores })])));
    const verdict = (scores: [number, number, number]) => rankLeaderboard(rows(scores), base)[0]!.rows[0]!.vsBaseline;
    expect(verdict([0.1, 0.2, 0.7])).toMatchObject({ verdict: 'improvement', absolute: expect.closeTo(0.15, 10), distinguishable: true });
    expect(verdict([0.1, 0.2, 0.58])).toMatchObject({ verdict: 'not_distinguishable', distinguishable: false });
    expect(verdict([0.1, 0.2, 0.3])).toMatchObject({ verdict: 'regression' });
  });

  it('a baseline under a fingerprint no run used makes a group of baseline rows only; the oracle is shown, never compared', () => {
    const base = asRecords(
      [baselineDraft({ kind: 'start', scores: [0.9, 0.9, 0.9], fingerprint: FP_B }), baselineDraft({ kind: 'oracle', scores: [0.1, 0.1, 0.1] })],
      100,
    ).map((e) => baselineOfEvent(e)!);
    const groups = rankLeaderboard(rowsOf(fold(asRecords([...preamble(), ...sampleVariant({ run: 'a' })]))), base);
    expect(groups.map((g) => [g.fingerprint === FP_B, g.rows.length, g.baselines.start?.median ?? null, g.baselines.oracle?.median ?? null])).toEqual([
      [false, 1, null, 0.1],
      [true, 0, 0.9, null],
    ]);
    expect(groups[0]!.rows[0]!.vsBaseline).toMatchObject({ matched: false, reason: expect.stringContaining('another protocol fingerprint') });
  });
});

describe('trajectory projection', () => {
  it('minimize: every round with elapsed time, status, score and the best so far', () => {
    const slots = fold(asRecords([...preamble(), ...sampleVariant({ run: 'a' })]));
    const t = trajectoryOf(slots.get('a')!)!;
    expect(t).toMatchObject({ run: 'a', status: 'completed', metric: 'val_loss', direction: 'minimize' });
    expect(t.rounds.map((r) => [r.round, r.status, r.score, r.eligible, r.bestSoFar, r.bestRoundSoFar])).toEqual([
      [1, 'completed', 0.912, true, 0.912, 1],
      [2, 'completed', 0.574, true, 0.574, 2],
      [3, 'rule_violation', null, false, 0.574, 2],
      [4, 'refunded', null, false, 0.574, 2],
      [5, 'completed', 0.433, true, 0.433, 5],
    ]);
    // RunStarted at position 3; round 1's SubmissionReceived at position 6.
    expect(t.rounds[0]!.elapsedMs).toBe(3000);
    expect(t.rounds.every((r, i) => i === 0 || r.elapsedMs > t.rounds[i - 1]!.elapsedMs)).toBe(true);
  });

  it('maximize: the best so far only rises; a tie keeps the earlier round', () => {
    const slots = fold(asRecords([...preamble(), ...sampleVariant({ run: 'm', direction: 'maximize', scores: [0.5, 0.4, 0.5] })]));
    const t = trajectoryOf(slots.get('m')!)!;
    expect(t.rounds.map((r) => [r.score, r.bestSoFar, r.bestRoundSoFar])).toEqual([
      [0.5, 0.5, 1],
      [0.4, 0.5, 1],
      [null, 0.5, 1],
      [null, 0.5, 1],
      [0.5, 0.5, 1],
    ]);
  });

  it('a run without a valid submission has no best so far', () => {
    const slots = fold(asRecords([...preamble(), ...noValidRun('n')]));
    const t = trajectoryOf(slots.get('n')!)!;
    expect(t.status).toBe('no_valid_submission');
    expect(t.rounds.map((r) => [r.status, r.score, r.bestSoFar])).toEqual([['rule_violation', null, null]]);
  });
});

describe('routing and robustness', () => {
  it('Judge events go to the run they name; other streams and Judge events before RunStarted are ignored', () => {
    expect(runOfEvent({ stream: 'run-x', type: 'Anything', data: {} })).toBe('x');
    expect(runOfEvent({ stream: 'judge-x-1', type: 'RewardRecorded', data: { run: 'x' } })).toBe('x');
    expect(runOfEvent({ stream: 'judge-x-1', type: 'Note', data: { run: 'x' } })).toBeNull();
    expect(runOfEvent({ stream: 'note-x', type: 'Note', data: {} })).toBeNull();
    const [judge] = asRecords([{ stream: 'judge-x-1', type: 'JudgeLaunched', data: { run: 'x', round: 1 } }]);
    expect(projectRunEvent(null, judge!)).toBeNull();
  });

  it('an event that breaks the run rules freezes the run as invalid instead of throwing', () => {
    const events = sampleVariant({ run: 'bad' });
    const records = asRecords([...events.slice(0, 3), events[0]!]); // RunStarted twice
    const slot = fold(records).get('bad')!;
    expect(slot.error).toMatch(/RunStarted/);
    expect(leaderboardRow(slot)!.status).toBe('invalid');
    expect(trajectoryOf(slot)!.status).toBe('invalid');
  });
});
