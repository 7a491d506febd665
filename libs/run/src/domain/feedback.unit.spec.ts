import { Sim } from '../../../../tests/run/support/run-fixtures';
import { formatFooter, formatHistory, formatRoundLine, historyJson, oneLine, rejectionFooter, roundFooter } from './feedback';

describe('footer', () => {
  it('has exactly the documented lines for a judged round', () => {
    const s = new Sim('r1', { settings: { direction: 'minimize', primaryMetric: 'val_loss', maxSubmissions: 5 }, agentTimeoutSec: 1800 });
    s.round('completed', { val_loss: 0.125, failed_sizes: 0 });
    s.advance(12.7);
    const f = roundFooter(s.state, 1, s.date, '/logs/assay/round-1.log');
    expect(f.httpStatus).toBe(200);
    expect(f.text).toBe(
      [
        '--- assay ---',
        'round: 1',
        'status: completed',
        'code: 200',
        'reward: failed_sizes=0 val_loss=0.125',
        'score: 0.125 (val_loss, minimize)',
        'best: round 1, score 0.125',
        'remaining: submissions=4 wall_time_s=unlimited agent_time_s=1800 gpu_seconds=unlimited',
        'log: /logs/assay/round-1.log',
        'detail: -',
        '--- end ---',
        '',
      ].join('\n'),
    );
  });

  it('rule violations score 0, refunds are 503, rejections say why', () => {
    const s = new Sim();
    s.round('completed', { reward: 0.5 });
    s.submit();
    s.snapshot(2, 'bafy2');
    s.ok({ kind: 'settle', round: 2, violation: { rule: 'workspace.not_editable', detail: 'added "numpy.py"\nand more' } });
    const v = roundFooter(s.state, 2, s.date, null);
    expect(v.text).toContain(
      'status: rule_violation\ncode: 200\nreward: -\nscore: rule violation: workspace.not_editable (scored 0)\nbest: round 1, score 0.5\n',
    );
    expect(v.text).toContain('detail: added "numpy.py" and more\n');
    s.submit();
    s.ok({ kind: 'settle', round: 3, infrastructure: 'docker died' });
    const r = roundFooter(s.state, 3, s.date, null);
    expect(r.httpStatus).toBe(503);
    expect(r.text).toMatch(/^status: refunded\ncode: 503 SUBMIT_REFUNDED\n/m);
    const rej = rejectionFooter(s.state, s.date, 429, 'SUBMIT_COOLDOWN', 'cooldown: 3 s left');
    expect(rej.split('\n').slice(1, 4)).toEqual(['round: -', 'status: rejected', 'code: 429 SUBMIT_COOLDOWN']);
    expect(rej).toContain('detail: cooldown: 3 s left\n');
    const unauth = rejectionFooter(s.state, s.date, 401, 'SUBMIT_WRONG_TOKEN', 'no');
    expect(unauth).toContain('best: -\nremaining: submissions=unlimited');
  });

  it('one line per value: control characters and long details cannot break the format', () => {
    expect(oneLine('a\r\nb\u0000c\u2028d')).toBe('a b c d');
    expect(oneLine('x'.repeat(500))).toHaveLength(300);
    const text = formatFooter({
      round: 1,
      status: 'completed',
      httpStatus: 200,
      code: null,
      rewards: { 'bad key\n': 1, ok: 2 },
      score: 2,
      rule: null,
      metric: null,
      direction: null,
      best: null,
      remaining: { submissions: null, wall_time: 5.9, agent_time: null, gpu_seconds: 0 },
      log: '/x\n/y',
      detail: 'line1\nline2',
    });
    expect(text.split('\n')).toHaveLength(12);
    expect(text).toContain('reward: ok=2\n');
    expect(text).toContain('remaining: submissions=unlimited wall_time_s=5 agent_time_s=unlimited gpu_seconds=0\n');
  });
});

describe('history', () => {
  it("lists this run's rounds with status and score, the refused requests, the best round and the budgets", () => {
    const s = new Sim('r1', { settings: { maxSubmissions: 3 } });
    s.round('completed', { reward: 0.5 });
    s.do({ kind: 'submit', auth: 'wrong', hasBody: false, hasQuery: false });
    s.submit();
    s.ok({ kind: 'settle', round: 2, infrastructure: 'x' });
    s.round('verifier_error', null);
    const text = formatHistory(s.state, s.date, (r) => `/logs/assay/round-${r}.log`);
    expect(text.split('\n')).toEqual([
      '--- assay: run r1 ---',
      'round 1: completed, score 0.5, snapshot bafy1, received 2026-03-01T10:00:00.000Z, log /logs/assay/round-1.log',
      expect.stringMatching(/^round 2: refunded, score -, snapshot -, received .*, detail: SUBMIT_REFUNDED: infrastructure failure: x/),
      'round 3: verifier_error, score -, snapshot bafy3, received 2026-03-01T10:00:00.000Z, log /logs/assay/round-3.log',
      'refused requests (no round used): 1',
      'best: round 1, score 0.5 (reward, maximize)',
      'remaining: submissions=1 wall_time_s=unlimited agent_time_s=unlimited gpu_seconds=unlimited',
      '--- end ---',
      '',
    ]);
    const j = historyJson(s.state, s.date);
    expect(j).toMatchObject({ run: 'r1', refusedRequests: 1, best: { round: 1, score: 0.5, snapshot: 'bafy1' }, remaining: { submissions: 1 }, closed: null });
    expect((j.rounds as unknown[]).length).toBe(3);
  });
});

describe('the controller round line', () => {
  it('one line per settled round: status, score with metric and direction, best so far; a rule violation never reads like a score', () => {
    const s = new Sim('r1', { settings: { direction: 'minimize', primaryMetric: 'val_loss' } });
    s.round('completed', { val_loss: 0.125 });
    expect(formatRoundLine(s.state, 1)).toBe('round 1: completed, score 0.125 (val_loss, minimize); best: round 1, score 0.125');
    s.submit();
    s.snapshot(2, 'bafy2');
    s.ok({ kind: 'settle', round: 2, violation: { rule: 'workspace.not_editable', detail: 'x' } });
    expect(formatRoundLine(s.state, 2)).toBe('round 2: rule violation: workspace.not_editable (scored 0); best: round 1, score 0.125');
    s.submit();
    s.ok({ kind: 'settle', round: 3, infrastructure: 'docker died' });
    expect(formatRoundLine(s.state, 3)).toBe('round 3: refunded (not counted); best: round 1, score 0.125');
    expect(formatRoundLine(s.state, 9)).toBeNull();
  });
});
