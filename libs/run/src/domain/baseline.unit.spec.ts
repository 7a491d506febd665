import {
  baselineEventData,
  compareWithBaseline,
  findMatchedBaseline,
  MIN_DISTINGUISHING_REPEATS,
  parseBaseline,
  summarizeScores,
  type Baseline,
  type BaselineKind,
} from './baseline';

const DIGEST = 'bafytaskdigest';
const FP = 'sha256:' + 'a'.repeat(64);

function baseline(
  scores: Array<number | null>,
  o: { direction?: 'maximize' | 'minimize'; kind?: BaselineKind; digest?: string; fp?: string; position?: number } = {},
): Baseline {
  const data = baselineEventData({
    task: 'local:opt',
    taskDigest: o.digest ?? DIGEST,
    protocolFingerprint: o.fp ?? FP,
    fingerprintInput: { scheme: 'assay.protocol-fingerprint/1' },
    metric: 'loss',
    direction: o.direction ?? 'maximize',
    kind: o.kind ?? 'start',
    snapshot: 'bafysnap',
    judgeImageDigest: 'sha256:' + 'b'.repeat(64),
    scores: scores.map((s, i) => ({ judge: `j-${i}`, status: s === null ? 'verifier_error' : 'completed', primaryScore: s })),
  });
  const b = parseBaseline(data, { position: o.position ?? 10, time: '2026-12-01T10:00:00.000Z' });
  if (!b) throw new Error('did not parse');
  return b;
}

const run = (score: number | null, direction: 'maximize' | 'minimize' = 'maximize', o: { digest?: string; fp?: string } = {}) => ({
  taskDigest: o.digest ?? DIGEST,
  fingerprint: o.fp ?? FP,
  direction,
  score,
});

describe('summarizeScores', () => {
  it('median (odd and even counts), min and max of the completed scores; nulls are failed Judges', () => {
    expect(summarizeScores([3, 1, 2])).toEqual({ completed: 3, median: 2, min: 1, max: 3 });
    expect(summarizeScores([4, 1, null, 2, 3])).toEqual({ completed: 4, median: 2.5, min: 1, max: 4 });
    expect(summarizeScores([null, null])).toEqual({ completed: 0, median: null, min: null, max: null });
  });
});

describe('BaselineRecorded data', () => {
  it('records every repeat and the summary; parsing recomputes the summary from the repeats', () => {
    const b = baseline([0.5, null, 0.7, 0.6]);
    expect(b.repeats).toBe(4);
    expect(b.scores.map((s) => s.status)).toEqual(['completed', 'verifier_error', 'completed', 'completed']);
    expect([b.median, b.min, b.max]).toEqual([0.6, 0.5, 0.7]);
    const tampered = { ...baselineEventData({ ...b, fingerprintInput: {} }), median: 99 };
    expect(parseBaseline(tampered)?.median).toBe(0.6);
  });
  it('refuses data without the matching fields', () => {
    expect(parseBaseline({ task: 'x' })).toBeNull();
    expect(parseBaseline({ ...baselineEventData({ ...baseline([1]), fingerprintInput: {} }), kind: 'other' })).toBeNull();
  });
});

describe('compareWithBaseline: the matched start baseline and the rule', () => {
  it('maximize: above the range is an improvement, with absolute and relative improvement over the median', () => {
    const c = compareWithBaseline(run(0.9), [baseline([0.5, 0.6, 0.55])]);
    expect(c).toMatchObject({ matched: true, verdict: 'improvement', distinguishable: true, score: 0.9 });
    if (!c.matched) throw new Error('unmatched');
    expect(c.absolute).toBeCloseTo(0.35);
    expect(c.relative).toBeCloseTo(0.35 / 0.55);
    expect(c.baseline).toMatchObject({ repeats: 3, completed: 3, median: 0.55, min: 0.5, max: 0.6 });
    expect(c.baseline.spread).toBeCloseTo(0.1);
  });

  it('maximize: below the range is a regression (negative improvement)', () => {
    const c = compareWithBaseline(run(0.1), [baseline([0.5, 0.6, 0.55])]);
    expect(c).toMatchObject({ matched: true, verdict: 'regression', distinguishable: true });
    if (c.matched) expect(c.absolute).toBeCloseTo(-0.45);
  });

  it('inside the range (bounds included) is not distinguishable, whatever the sign of the difference', () => {
    for (const score of [0.5, 0.58, 0.6]) {
      const c = compareWithBaseline(run(score), [baseline([0.5, 0.6, 0.55])]);
      expect(c).toMatchObject({ matched: true, verdict: 'not_distinguishable', distinguishable: false });
      if (c.matched) expect(c.reason).toMatch(/within the baseline's range \[0\.5, 0\.6\]/);
    }
  });

  it(`fewer than ${MIN_DISTINGUISHING_REPEATS} completed repeats is not distinguishable, however large the difference`, () => {
    for (const scores of [[0.5], [0.5, 0.6], [0.5, null, 0.6, null]]) {
      const c = compareWithBaseline(run(100), [baseline(scores)]);
      expect(c).toMatchObject({ matched: true, verdict: 'not_distinguishable', distinguishable: false });
      if (c.matched) {
        expect(c.reason).toMatch(/completed repeat\(s\); at least 3 are needed/);
        expect(c.absolute).toBeGreaterThan(0); // the difference is still shown
      }
    }
    expect(compareWithBaseline(run(100), [baseline([0.5, 0.6, 0.55])])).toMatchObject({ verdict: 'improvement' });
  });

  it('minimize: below the range is an improvement, above it a regression; absolute is positive when better', () => {
    const start = baseline([2, 2.2, 2.1], { direction: 'minimize' });
    const better = compareWithBaseline(run(1.05, 'minimize'), [start]);
    expect(better).toMatchObject({ verdict: 'improvement', distinguishable: true });
    if (better.matched) {
      expect(better.absolute).toBeCloseTo(1.05);
      expect(better.relative).toBeCloseTo(0.5);
    }
    const worse = compareWithBaseline(run(3, 'minimize'), [start]);
    expect(worse).toMatchObject({ verdict: 'regression' });
    if (worse.matched) expect(worse.absolute).toBeCloseTo(-0.9);
    // the same scores read as maximize give the opposite verdicts
    expect(compareWithBaseline(run(1.05, 'maximize'), [baseline([2, 2.2, 2.1])])).toMatchObject({ verdict: 'regression' });
    expect(compareWithBaseline(run(2.15, 'minimize'), [start])).toMatchObject({ verdict: 'not_distinguishable' });
  });

  it('no matched baseline: another fingerprint, another task digest, only an oracle baseline, or none', () => {
    const other = compareWithBaseline(run(0.9), [baseline([0.5, 0.6, 0.55], { fp: 'sha256:' + 'c'.repeat(64) })]);
    expect(other).toEqual({ matched: false, reason: expect.stringMatching(/^no matched baseline: .*another protocol fingerprint/) });
    const digest = compareWithBaseline(run(0.9), [baseline([0.5, 0.6, 0.55], { digest: 'bafyother' })]);
    expect(digest).toEqual({ matched: false, reason: expect.stringMatching(/^no matched baseline: no start baseline of this task digest/) });
    expect(compareWithBaseline(run(0.9), [baseline([0.5, 0.6, 0.55], { kind: 'oracle' })])).toMatchObject({ matched: false });
    expect(compareWithBaseline(run(0.9), [])).toMatchObject({ matched: false });
    expect(compareWithBaseline({ taskDigest: null, fingerprint: null, direction: null, score: null }, [baseline([1, 1, 1])])).toMatchObject({ matched: false });
  });

  it('the latest matched start baseline is the one compared', () => {
    const older = baseline([0.1, 0.2, 0.15], { position: 5 });
    const newer = baseline([0.5, 0.6, 0.55], { position: 20 });
    expect(findMatchedBaseline([newer, older], { taskDigest: DIGEST, fingerprint: FP })).toBe(newer);
    expect(compareWithBaseline(run(0.58), [older, newer])).toMatchObject({ verdict: 'not_distinguishable' });
  });

  it('no score on either side: matched, not distinguishable, nothing to compare', () => {
    expect(compareWithBaseline(run(null), [baseline([0.5, 0.6, 0.55])])).toMatchObject({ matched: true, absolute: null, verdict: 'not_distinguishable' });
    const failed = compareWithBaseline(run(0.9), [baseline([null, null, null])]);
    expect(failed).toMatchObject({ matched: true, absolute: null, verdict: 'not_distinguishable', reason: 'no Judge of the baseline completed with a score' });
  });

  it('a zero median has no relative improvement', () => {
    const c = compareWithBaseline(run(1), [baseline([0, 0, 0])]);
    expect(c).toMatchObject({ verdict: 'improvement', absolute: 1, relative: null });
  });
});
