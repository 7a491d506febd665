import { canonicalJson } from './jcs';
import { ZERO_HASH, envelopeText, parseEnvelope, signingBytes, wireBytes, type Envelope } from './envelope';

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
