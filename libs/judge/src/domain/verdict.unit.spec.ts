import { parseInfrastructureReport } from './reward';
import { decideVerdict, median } from './verdict';

const ok = { ok: true as const, source: 'reward.json' as const, rewards: { reward: 0.5, loss: 2 } };
const bad = { ok: false as const, source: 'reward.json' as const, reason: 'reward.json: not valid JSON' };
const MiB = 1048576;

describe('decideVerdict', () => {
  it('completed when a valid reward was read, whatever the exit code', () => {
    const v = decideVerdict({ run: { kind: 'exited', exitCode: 0, oomKilled: false }, rewards: ok, requestedMetric: null, memoryLimitBytes: MiB });
    expect(v).toEqual({ status: 'completed', rewards: ok.rewards, primary: { metric: 'reward', score: 0.5, note: null }, exitCode: 0, detail: null });
    const v2 = decideVerdict({ run: { kind: 'exited', exitCode: 2, oomKilled: false }, rewards: ok, requestedMetric: 'loss', memoryLimitBytes: MiB });
    expect(v2).toMatchObject({
      status: 'completed',
      exitCode: 2,
      primary: { metric: 'loss', score: 2 },
      detail: 'test.sh exited with status 2 after writing reward.json',
    });
  });
  it('verifier_error for a bad or missing reward, never a zero', () => {
    expect(decideVerdict({ run: { kind: 'exited', exitCode: 0, oomKilled: false }, rewards: bad, requestedMetric: null, memoryLimitBytes: MiB })).toMatchObject(
      { status: 'verifier_error', rewards: null, primary: null, detail: 'reward.json: not valid JSON' },
    );
    expect(
      decideVerdict({
        run: { kind: 'exited', exitCode: 137, oomKilled: true },
        rewards: { ok: false, source: null, reason: 'no reward file' },
        requestedMetric: null,
        memoryLimitBytes: 64 * MiB,
      }),
    ).toMatchObject({
      status: 'verifier_error',
      exitCode: 137,
      detail: expect.stringMatching(/no reward file; test.sh exited with status 137; the kernel's out-of-memory killer .* 64 MiB/),
    });
  });
  it('verifier_timeout discards any reward', () => {
    expect(
      decideVerdict({ run: { kind: 'timed_out', timeoutSec: 2, oomKilled: false }, rewards: ok, requestedMetric: null, memoryLimitBytes: null }),
    ).toMatchObject({ status: 'verifier_timeout', rewards: null, primary: null, exitCode: null });
  });
  it('infrastructure_error has no score', () => {
    expect(decideVerdict({ run: { kind: 'infrastructure', detail: 'docker died' }, rewards: ok, requestedMetric: null, memoryLimitBytes: null })).toEqual({
      status: 'infrastructure_error',
      rewards: null,
      primary: null,
      exitCode: null,
      detail: 'docker died',
    });
  });
});

describe('decideVerdict with an infrastructure report', () => {
  const exited = { kind: 'exited' as const, exitCode: 4, oomKilled: false };
  const none = { ok: false as const, source: null, reason: 'no reward file' };
  it('no reward and a report: infrastructure_error with the reason', () => {
    expect(decideVerdict({ run: exited, rewards: none, infrastructureReport: 'no GPU', requestedMetric: null, memoryLimitBytes: MiB })).toEqual({
      status: 'infrastructure_error',
      rewards: null,
      primary: null,
      exitCode: 4,
      detail: 'the verifier reported an infrastructure fault: no GPU; test.sh exited with status 4',
    });
    // a broken reward file beside the report: still the report
    expect(decideVerdict({ run: exited, rewards: bad, infrastructureReport: 'no GPU', requestedMetric: null, memoryLimitBytes: MiB }).status).toBe(
      'infrastructure_error',
    );
  });
  it('a valid reward beside a report: verifier_error, neither trusted; a timeout still wins', () => {
    expect(decideVerdict({ run: exited, rewards: ok, infrastructureReport: 'no GPU', requestedMetric: null, memoryLimitBytes: MiB })).toMatchObject({
      status: 'verifier_error',
      rewards: null,
      detail: expect.stringContaining('both reward.json and infrastructure-error.txt (no GPU)'),
    });
    expect(
      decideVerdict({
        run: { kind: 'timed_out', timeoutSec: 5, oomKilled: false },
        rewards: null,
        infrastructureReport: 'x',
        requestedMetric: null,
        memoryLimitBytes: MiB,
      }).status,
    ).toBe('verifier_timeout');
  });
});

describe('parseInfrastructureReport', () => {
  const file = (t: string) => ({ state: 'file' as const, bytes: new TextEncoder().encode(t) });
  it('one line, bounded; absent is null; odd entries still count as a report', () => {
    expect(parseInfrastructureReport({ state: 'absent' })).toBeNull();
    expect(parseInfrastructureReport(file('\uFEFFdriver\n\terror  \n'))).toBe('driver error');
    expect(parseInfrastructureReport(file(''))).toBe('no reason given');
    expect(parseInfrastructureReport(file('x'.repeat(5000)))).toHaveLength(1003);
    expect(parseInfrastructureReport({ state: 'file', bytes: new Uint8Array([0xff, 0xfe]) })).toBe('infrastructure-error.txt is not UTF-8');
    expect(parseInfrastructureReport({ state: 'not_regular', what: 'a directory' })).toBe('infrastructure-error.txt is a directory, not a regular file');
    expect(parseInfrastructureReport({ state: 'too_large', size: 70000 })).toContain('70000 bytes');
  });
});

describe('median', () => {
  it('of odd and even counts, ignoring non-finite values', () => {
    expect(median([])).toBeNull();
    expect(median([3])).toBe(3);
    expect(median([5, 1, 3, 2, 4])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([1, NaN, Infinity, 2])).toBe(1.5);
  });
});
