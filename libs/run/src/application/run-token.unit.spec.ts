import { checkBearer, generateRunToken, tokenSha256, TOKEN_RE } from './run-token';

describe('run token', () => {
  const { token, sha256 } = generateRunToken(() => Buffer.alloc(32, 0xab));
  it('is 32 random bytes in hex; only its SHA-256 is kept', () => {
    expect(token).toBe('ab'.repeat(32));
    expect(TOKEN_RE.test(token)).toBe(true);
    expect(sha256).toBe(tokenSha256(token));
    expect(sha256).not.toContain(token);
    expect(() => generateRunToken(() => Buffer.alloc(16))).toThrow(/32 random bytes/);
    expect(generateRunToken().token).not.toBe(generateRunToken().token);
  });

  it('checks the Authorization header', () => {
    expect(checkBearer(`Bearer ${token}`, sha256)).toBe('ok');
    expect(checkBearer(`bearer  ${token} `, sha256)).toBe('ok');
    expect(checkBearer(undefined, sha256)).toBe('missing');
    expect(checkBearer([], sha256)).toBe('missing');
    expect(checkBearer('  ', sha256)).toBe('missing');
    expect(checkBearer([`Bearer ${token}`, `Bearer ${token}`], sha256)).toBe('malformed');
    expect(checkBearer(`Basic ${token}`, sha256)).toBe('malformed');
    expect(checkBearer(`Bearer ${token} extra`, sha256)).toBe('malformed');
    expect(checkBearer(`Bearer ${'x'.repeat(2000)}`, sha256)).toBe('malformed');
    expect(checkBearer(`Bearer ${'08'.repeat(32)}`, sha256)).toBe('wrong');
    expect(checkBearer(`Bearer ${token.toUpperCase()}`, sha256)).toBe('wrong');
    expect(checkBearer(`Bearer ${sha256}`, sha256)).toBe('wrong'); // the recorded hash is not a token
    expect(() => checkBearer('Bearer x', 'short')).toThrow(RangeError);
  });
});
