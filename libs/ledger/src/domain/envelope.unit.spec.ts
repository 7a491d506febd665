import { canonicalJson } from './jcs';
import { ZERO_HASH, canonicalEnvelopeText, envelopeFieldProblem, envelopeText, parseEnvelope, signingBytes, wireBytes, type Envelope } from './envelope';

const SIG = Buffer.alloc(64, 7).toString('base64');

function envelope(over: Partial<Envelope> = {}): Envelope {
  return {
    type: 'Note',
    data: { text: 'héllo "world" \u2028 😀', nested: { sig: 'x', id: 'y', z: [1, 2.5, 0, 1e21, null, true] } },
    stream: 'run-r-1',
    revision: 3,
    position: 42,
    id: '00000000-0000-4000-8000-00000000002a',
    time: '2026-12-02T10:00:00.000Z',
    prev: ZERO_HASH,
    signer: 'assay-controller-1a2b3c4d+0badcafe',
    sig: SIG,
    ...over,
  };
}

describe('event envelope encoding', () => {
  it('envelopeText is exactly RFC 8785 of the whole object, with and without sig', () => {
    const e = envelope();
    const { sig, ...unsigned } = e;
    expect(envelopeText(e, canonicalJson(e.data), sig)).toBe(canonicalJson(e));
    expect(envelopeText(unsigned, canonicalJson(e.data))).toBe(canonicalJson(unsigned));
  });

  it("canonicalEnvelopeText (the parser's fast canonical form) equals RFC 8785 of the whole envelope for every valid field value", () => {
    const variants: Array<Partial<Envelope>> = [
      {},
      { signer: 'we"ird\\name\u0001é😀+0badcafe' },
      { stream: 'judge-A.b:c_d-e', type: 'RewardRecorded', revision: 0, position: 0 },
      { sig: `${'+/'.repeat(42)}+w==`, prev: 'f'.repeat(64), revision: Number.MAX_SAFE_INTEGER, position: 9007199254740990 },
      { data: {} },
      { data: { '\u00e9': [-0, 1e-7, 123456789012345680000, 'a\u2029b'], b: { a: null }, '': false } },
    ];
    for (const over of variants) {
      const e = envelope(over);
      expect(envelopeFieldProblem(e as unknown as Record<string, unknown>, true)).toBeNull();
      expect(canonicalEnvelopeText(e)).toBe(canonicalJson(e));
      // The parser's path: the value as JSON.parse gives it back from the canonical text.
      const text = canonicalJson(e);
      expect(canonicalEnvelopeText(JSON.parse(text) as Envelope, text)).toBe(text);
    }
  });

  it('refuses data whose members are out of order, repeated, or hold escapes the canonical form does not use', () => {
    const base = wireBytes(envelope({ data: { a: 1, b: { c: 2, d: [3, { e: 4, f: 5 }] } } })).toString('utf8');
    const swaps: Array<[string, string]> = [
      ['"a":1,"b":', '"b":{"c":2,"d":[3,{"e":4,"f":5}]},"a":1,"x":'],
      ['"c":2,"d":[3,{"e":4,"f":5}]', '"d":[3,{"e":4,"f":5}],"c":2'],
      ['{"e":4,"f":5}', '{"f":5,"e":4}'],
      ['{"e":4,"f":5}', '{"e":4,"e":4,"f":5}'],
      ['"c":2', '"c":2.0'],
      ['"c":2', '"\\u0063":2'],
    ];
    for (const [from, to] of swaps) {
      const text = base.replace(from, to);
      expect(text).not.toBe(base);
      expect(() => parseEnvelope(Buffer.from(text))).toThrow(
        expect.objectContaining({ code: expect.stringMatching(/ENVELOPE_NOT_CANONICAL|ENVELOPE_MALFORMED/) }),
      );
    }
    // Integer-like names: JavaScript orders them numerically first, RFC 8785 by code units; canonical input still parses.
    const ints = wireBytes(envelope({ data: { '10': 'a', '9': 'b', x: { '2': 1, '11': 2 } } }));
    expect(ints.toString('utf8')).toContain('{"10":"a","9":"b","x":{"11":2,"2":1}}');
    expect(parseEnvelope(ints).envelope.data).toEqual({ '10': 'a', '9': 'b', x: { '2': 1, '11': 2 } });
    // A signature text whose unused low bits are set decodes to the same 64 bytes: refused, one text per signature.
    const sig = Buffer.alloc(64, 7).toString('base64');
    expect(sig.endsWith('w==')).toBe(true);
    const loose = `${sig.slice(0, 85)}x==`;
    expect(Buffer.from(loose, 'base64').equals(Buffer.alloc(64, 7))).toBe(true);
    expect(() => parseEnvelope(wireBytes(envelope({ sig: loose })))).toThrow(/field "sig" must be standard base64 of 64 bytes/);
    // A lone surrogate written as an escape is not I-JSON.
    const lone = base.replace('"c":2', '"c":"\\ud800"');
    expect(() => parseEnvelope(Buffer.from(lone))).toThrow(expect.objectContaining({ code: 'ENVELOPE_NOT_CANONICAL' }));
  });

  it('parses canonical wire bytes and recovers the exact signing bytes, even with "sig" and "id" keys inside data', () => {
    const e = envelope();
    const p = parseEnvelope(wireBytes(e));
    expect(p.envelope).toEqual(e);
    expect(p.signing.equals(signingBytes(e))).toBe(true);
    expect(p.signature.equals(Buffer.alloc(64, 7))).toBe(true);
    expect(p.dataBytes).toBe(Buffer.byteLength(canonicalJson(e.data)));
  });

  it('refuses bytes that are valid JSON but not canonical', () => {
    const text = wireBytes(envelope()).toString('utf8');
    for (const bad of [
      text.replace('{"data":', '{ "data":'), // whitespace
      text.replace('"id":', '"id" :'),
      text.replace(/"position":42/, '"position":42.0'), // number form
      text.replace('{"data":{', '{"data":{"text":"shadowed",'), // duplicate name: JSON.parse keeps the last one
    ]) {
      expect(() => parseEnvelope(Buffer.from(bad))).toThrow(expect.objectContaining({ code: expect.stringMatching(/ENVELOPE_(NOT_CANONICAL|MALFORMED)/) }));
    }
  });

  it('names the field that is wrong', () => {
    const wire = (e: Record<string, unknown>): Buffer => Buffer.from(canonicalJson(e));
    const e = envelope() as unknown as Record<string, unknown>;
    expect(() => parseEnvelope(wire({ ...e, revision: -1 }))).toThrow(/field "revision"/);
    expect(() => parseEnvelope(wire({ ...e, stream: 'run_without_dash' }))).toThrow(/field "stream"/);
    expect(() => parseEnvelope(wire({ ...e, time: '2026-12-02T10:00:00Z' }))).toThrow(/field "time"/);
    expect(() => parseEnvelope(wire({ ...e, extra: 1 }))).toThrow(/unexpected field "extra"/);
    const { sig: _sig, ...noSig } = e;
    expect(() => parseEnvelope(wire(noSig))).toThrow(/missing field "sig"/);
    expect(() => parseEnvelope(Buffer.from('{"data":'))).toThrow(/not valid JSON/);
    expect(() => parseEnvelope(Buffer.alloc(1024 * 1024 + 1, 32))).toThrow(/above the limit/);
  });
});
