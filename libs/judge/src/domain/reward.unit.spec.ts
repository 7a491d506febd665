import { choosePrimaryMetric, parseRewardFiles, parseRewardJson, parseRewardTxt, type RewardFile } from './reward';
import { parseStrictJson } from './strict-json';

const file = (text: string | Uint8Array): RewardFile => ({ state: 'file', bytes: typeof text === 'string' ? Buffer.from(text) : text });
const absent: RewardFile = { state: 'absent' };

describe('reward.json', () => {
  it.each([
    ['{"reward": 0.5}', { reward: 0.5 }],
    ['{"reward": 1, "val_loss": 0.25, "n": -3}', { reward: 1, val_loss: 0.25, n: -3 }],
    [' \n{"x":1e-400}\n', { x: 0 }],
    ['{"reward": -0}', { reward: 0 }],
    ['{"a.b:c-d_e": 2E+3}', { 'a.b:c-d_e': 2000 }],
  ])('accepts %s', (text, rewards) => {
    const r = parseRewardJson(Buffer.from(text));
    expect(r).toEqual({ ok: true, source: 'reward.json', rewards });
    if (r.ok) expect(Object.is(r.rewards.reward, -0)).toBe(false);
  });

  it.each([
    ['', 'empty'],
    ['   \n', 'only whitespace'],
    ['{"reward": NaN}', 'NaN and Infinity are not JSON numbers'],
    ['{"reward": Infinity}', 'NaN and Infinity'],
    ['{"reward": -Infinity}', 'NaN and Infinity'],
    ['{"reward": 1e400}', '1e400, which overflows'],
    ['{"reward": -1e309}', 'overflows'],
    ['{"reward": true}', 'the boolean true, not a number'],
    ['{"reward": false}', 'the boolean false'],
    ['{"reward": null}', 'null, not a number'],
    ['{"reward": "1"}', 'a string, not a number'],
    ['{"reward": [1]}', 'an array, not a number'],
    ['{"reward": {"x": 1}}', 'an object, not a number'],
    ['{}', 'the object is empty'],
    ['[1]', 'expected an object of numbers, got an array'],
    ['1', 'expected an object of numbers, got a number'],
    ['{"reward": 1,', 'not valid JSON'],
    ['{"reward": 1,}', 'not valid JSON'],
    ["{'reward': 1}", 'not valid JSON'],
    ['{"reward": 01}', 'not valid JSON'],
    ['{"reward": .5}', 'not valid JSON'],
    ['{"reward": 1} {"reward": 2}', 'unexpected text after'],
    ['{"reward": 1, "reward": 0}', 'duplicate key "reward"'],
    ['{"re ward": 1}', 'is not a reward name'],
    ['{"": 1}', 'is not a reward name'],
    ['{"reward": 1} // comment', 'not valid JSON'],
  ])('refuses %j (%s)', (text, why) => {
    const r = parseRewardJson(Buffer.from(text));
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.source).toBe('reward.json');
      expect(r.reason).toContain(why);
    }
  });

  it('refuses invalid UTF-8, too many keys, and oversized files', () => {
    expect(parseRewardJson(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toMatchObject({ ok: false, reason: 'reward.json: not UTF-8' });
    const many = `{${Array.from({ length: 65 }, (_, i) => `"k${i}": ${i}`).join(',')}}`;
    expect(parseRewardJson(Buffer.from(many))).toMatchObject({ ok: false, reason: expect.stringContaining('65 keys') });
    expect(parseRewardJson(Buffer.alloc(70_000, 0x20))).toMatchObject({ ok: false, reason: expect.stringContaining('over 65536') });
  });

  it('bounds nesting', () => {
    expect(parseStrictJson(`${'['.repeat(100)}${']'.repeat(100)}`)).toMatchObject({ ok: false, error: expect.stringContaining('nesting deeper than 32') });
  });
});

describe('reward.txt', () => {
  it.each([
    ['1', 1],
    ['0.75\n', 0.75],
    ['  -2.5e-3 \r\n', -0.0025],
    ['+3', 3],
    ['.5', 0.5],
    ['7.', 7],
  ])('accepts %j', (text, value) => {
    expect(parseRewardTxt(Buffer.from(text))).toEqual({ ok: true, source: 'reward.txt', rewards: { reward: value } });
  });

  it.each(['', '\n', 'nan', 'NaN', 'inf', '-Infinity', '1e400', 'true', '1 2', '1\n2', '0x10', '1,5', 'one', '{"reward":1}'])('refuses %j', (text) => {
    expect(parseRewardTxt(Buffer.from(text)).ok).toBe(false);
  });
});

describe('precedence', () => {
  it('reward.json wins over reward.txt', () => {
    expect(parseRewardFiles({ json: file('{"reward": 0.1}'), txt: file('0.9') })).toMatchObject({ ok: true, rewards: { reward: 0.1 } });
  });
  it('a malformed reward.json does not fall back to a valid reward.txt', () => {
    expect(parseRewardFiles({ json: file('{"reward": 1,'), txt: file('1') })).toMatchObject({ ok: false, source: 'reward.json' });
  });
  it('a reward.json that is a symlink or directory is an error, not a fallback', () => {
    expect(parseRewardFiles({ json: { state: 'not_regular', what: 'a symbolic link' }, txt: file('1') })).toMatchObject({
      ok: false,
      reason: 'reward.json: is a symbolic link, not a regular file; only regular files count',
    });
  });
  it('reward.txt is used when reward.json is absent', () => {
    expect(parseRewardFiles({ json: absent, txt: file('0.5') })).toMatchObject({ ok: true, source: 'reward.txt', rewards: { reward: 0.5 } });
  });
  it('no file is an error, never zero', () => {
    expect(parseRewardFiles({ json: absent, txt: absent })).toMatchObject({ ok: false, source: null });
    expect(parseRewardFiles({ json: absent, txt: { state: 'too_large', size: 1e6 } })).toMatchObject({ ok: false, source: 'reward.txt' });
  });
});

describe('primary metric', () => {
  it('is the requested key, else reward, else the only key, else none', () => {
    expect(choosePrimaryMetric({ reward: 1, loss: 2 }, 'loss')).toEqual({ metric: 'loss', score: 2, note: null });
    expect(choosePrimaryMetric({ reward: 1, loss: 2 }, null)).toEqual({ metric: 'reward', score: 1, note: null });
    expect(choosePrimaryMetric({ loss: 2 }, null)).toEqual({ metric: 'loss', score: 2, note: null });
    expect(choosePrimaryMetric({ a: 1, b: 2 }, null)).toMatchObject({ metric: null, score: null, note: expect.stringContaining('no primary metric') });
  });
  it('a requested key that is missing gives no score rather than another key', () => {
    expect(choosePrimaryMetric({ reward: 1 }, 'val_loss')).toMatchObject({
      metric: 'val_loss',
      score: null,
      note: expect.stringContaining('"val_loss" is not among'),
    });
  });
});
