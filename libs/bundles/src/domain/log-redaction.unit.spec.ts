import { redactLog, REDACTION_RULES } from './log-redaction';

const red = (text: string, hostnames: string[] = []) => {
  const r = redactLog(Buffer.from(text, 'latin1'), { hostnames });
  return { text: r.bytes.toString('latin1'), replaced: r.replaced, total: r.total };
};

describe(`log redaction (${REDACTION_RULES})`, () => {
  it('replaces tokens by their published shapes, and credentials after Bearer/Basic', () => {
    const r = red(
      [
        'key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345 used',
        'gh: ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ',
        'aws AKIAIOSFODNN7EXAMPLE, hf hf_abcdefghijklmnopqrstuvwxyzABCDEF',
        'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig',
      ].join('\n'),
    );
    expect(r.text).toBe(
      ['key [redacted:token] used', 'gh: [redacted:token]', 'aws [redacted:token], hf [redacted:token]', 'Authorization: Bearer [redacted:token]'].join('\n'),
    );
    expect(r.replaced.token).toBe(5);
  });

  it('replaces values assigned to secret-looking names (env, YAML, JSON), private keys, home directories and host names', () => {
    const r = red(
      [
        'OPENAI_API_KEY=abc123 DB_PASSWORD: hunter2 "HF_TOKEN": "zzz"',
        '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\nBBBB\n-----END OPENSSH PRIVATE KEY-----',
        'PRIVATE+KEY+assay-controller-1a2b3c4d+Abc/def=',
        'opened /home/alice/project/train.py and /Users/bob/x',
        'on build-7.lab.example and build-7: done; rebuild-70 stays',
      ].join('\n'),
      ['build-7.lab.example', 'build-7'],
    );
    expect(r.text).toBe(
      [
        'OPENAI_API_KEY=[redacted] DB_PASSWORD: [redacted] "HF_TOKEN": "[redacted]"',
        '[redacted:private-key]',
        '[redacted:private-key]',
        'opened /home/[user]/project/train.py and /Users/[user]/x',
        'on [host] and [host]: done; rebuild-70 stays',
      ].join('\n'),
    );
    expect(r.replaced).toEqual({ 'private-key': 2, token: 0, assignment: 3, 'home-path': 2, host: 2 });
  });

  it('keeps every other byte exactly (not UTF-8 included), is deterministic and idempotent', () => {
    const raw = Buffer.concat([Buffer.from([0xff, 0x00, 0xc3]), Buffer.from(' TOKEN=x \u00e9 plain\n', 'utf8'), Buffer.from([0x80])]);
    const a = redactLog(raw, { hostnames: [] });
    const b = redactLog(raw, { hostnames: [] });
    expect(a.bytes.equals(b.bytes)).toBe(true);
    expect(a.bytes.subarray(0, 3)).toEqual(Buffer.from([0xff, 0x00, 0xc3]));
    expect(a.bytes.subarray(-1)).toEqual(Buffer.from([0x80]));
    expect(a.bytes.toString('latin1')).toContain('TOKEN=[redacted]');
    const again = redactLog(a.bytes, { hostnames: [] });
    expect(again.bytes.equals(a.bytes)).toBe(true);
    expect(again.total).toBe(0);
    // nothing to replace: the same bytes
    const clean = Buffer.from('epoch 3 loss 0.0173\n');
    expect(redactLog(clean, { hostnames: ['x'] }).bytes.equals(clean)).toBe(true);
  });
});
