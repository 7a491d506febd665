import { Sim } from '../../../../tests/run/support/run-fixtures';
import type { JudgeStatus } from './run-events';
import { bestRound } from './run-state';
import { better, primaryScoreOf, selectBest, type RoundScore } from './selection';
import { prng as rng } from '../../../../tests/support/prng';

/** The naive reference: sort by score (direction), then by round, take the first. */
function naive(c: RoundScore[], direction: 'maximize' | 'minimize'): RoundScore | null {
  const ok = c.filter((x) => Number.isFinite(x.score));
  ok.sort((a, b) => (a.score === b.score ? a.round - b.round : direction === 'maximize' ? b.score - a.score : a.score - b.score));
  return ok[0] ?? null;
}

describe('primaryScoreOf', () => {
  it('the named metric, else reward, else the only key, else none', () => {
    expect(primaryScoreOf({ loss: 0.3, reward: 1 }, 'loss')).toBe(0.3);
    expect(primaryScoreOf({ reward: 1 }, 'loss')).toBeNull();
    expect(primaryScoreOf({ loss: 0.3, reward: 1 }, null)).toBe(1);
    expect(primaryScoreOf({ loss: 0.3 }, null)).toBe(0.3);
    expect(primaryScoreOf({ a: 1, b: 2 }, null)).toBeNull();
    expect(primaryScoreOf(null, null)).toBeNull();
    expect(primaryScoreOf({}, null)).toBeNull();
    expect(primaryScoreOf({ toString: 1 } as never, 'valueOf')).toBeNull();
  });
});

describe('selectBest', () => {
  it('maximize and minimize; ties to the earliest round whatever the order', () => {
    const c = [
      { round: 3, score: 2, snapshot: 'c' },
      { round: 1, score: 2, snapshot: 'a' },
      { round: 2, score: 1, snapshot: 'b' },
    ];
    expect(selectBest(c, 'maximize')).toEqual({ round: 1, score: 2, snapshot: 'a' });
    expect(selectBest(c, 'minimize')).toEqual({ round: 2, score: 1, snapshot: 'b' });
    expect(selectBest([], 'maximize')).toBeNull();
    expect(better(1, 0, 'maximize') && better(0, 1, 'minimize') && !better(1, 1, 'maximize')).toBe(true);
    expect(
      selectBest(
        [
          { round: 1, score: -0, snapshot: 'a' },
          { round: 2, score: 0, snapshot: 'b' },
        ],
        'maximize',
      )?.round,
    ).toBe(1);
  });

  for (const seed of [1, 2, 3, 42, 1234, 99991]) {
    it(`agrees with a naive reference on 300 random sets of rounds (seed ${seed})`, () => {
      const r = rng(seed);
      for (let t = 0; t < 300; t++) {
        const n = Math.floor(r() * 12);
        const pool = [0, 1, -1, 0.5, 1e-9, -1e300, 1e300];
        const rounds = Array.from({ length: n }, (_, i) => i + 1).sort(() => r() - 0.5);
        const c = rounds.map((round) => ({
          round,
          score: r() < 0.5 ? (pool[Math.floor(r() * pool.length)] as number) : Math.round(r() * 20) / 4 - 2,
          snapshot: `s${round}`,
        }));
        for (const dir of ['maximize', 'minimize'] as const) expect(selectBest(c, dir)).toEqual(naive(c, dir));
      }
    });
  }

  it('through the aggregate: random runs select what the naive rule over eligible rounds selects', () => {
    const r = rng(7);
    const statuses: JudgeStatus[] = ['completed', 'completed', 'completed', 'submission_error', 'verifier_error', 'verifier_timeout', 'infrastructure_error'];
    for (let t = 0; t < 150; t++) {
      const direction = r() < 0.5 ? 'maximize' : 'minimize';
      const s = new Sim('r1', { settings: { direction, primaryMetric: 'm' } });
      const eligible: RoundScore[] = [];
      const n = 1 + Math.floor(r() * 8);
      for (let i = 0; i < n; i++) {
        const status = statuses[Math.floor(r() * statuses.length)] as JudgeStatus;
        const score = Math.floor(r() * 5);
        const violate = status === 'completed' && r() < 0.2;
        s.submit();
        const round = s.state.rounds.length;
        s.snapshot(round, `bafy${round}`);
        if (violate) s.ok({ kind: 'settle', round, violation: { rule: 'workspace.not_editable', detail: 'x' } });
        else {
          s.judge(round, status, status === 'completed' ? (r() < 0.9 ? { m: score } : { other: score }) : null);
          s.ok({ kind: 'settle', round });
          const rec = s.state.rounds[round - 1];
          if (status === 'completed' && rec?.rewards && 'm' in rec.rewards) eligible.push({ round, score, snapshot: `bafy${round}` });
        }
      }
      expect(bestRound(s.state)).toEqual(naive(eligible, direction));
      s.ok({ kind: 'complete' });
      const best = naive(eligible, direction);
      expect(s.state.completed).toMatchObject({
        status: best ? 'completed' : 'no_valid_submission',
        bestRound: best?.round ?? null,
        bestScore: best?.score ?? null,
      });
    }
  });
});
