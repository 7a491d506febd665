import { canonicalJson } from './jcs';

describe('RFC 8785 canonical JSON', () => {
  it('sorts members by UTF-16 code units and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: [true, null, 'x'], '\u20ac': 0, '\ud83d\ude00': 1, '\u00e9': 2 })).toBe(
      '{"a":[true,null,"x"],"b":1,"\u00e9":2,"\u20ac":0,"\ud83d\ude00":1}',
    );
  });

  it('serialises numbers as ECMAScript does (RFC 8785 appendix B samples)', () => {
    const cases: Array<[number, string]> = [
      [0, '0'],
      [-0, '0'],
      [1e21, '1e+21'],
      [1e-7, '1e-7'],
      [123456789012345680000, '123456789012345680000'],
      [4.5, '4.5'],
      [2e-3, '0.002'],
      [333333333.3333333, '333333333.3333333'],
      [-1.7976931348623157e308, '-1.7976931348623157e+308'],
    ];
    for (const [n, s] of cases) expect(canonicalJson(n)).toBe(s);
  });

  it('escapes strings as RFC 8785 requires', () => {
    expect(canonicalJson('\u0000\b\f\n\r\t"\\/\u001f\u007f')).toBe('"\\u0000\\b\\f\\n\\r\\t\\"\\\\/\\u001f\u007f"');
  });

  it('refuses what is not I-JSON, naming where', () => {
    expect(() => canonicalJson({ a: [1, NaN] })).toThrow(/\$\.a\[1\].*not finite/);
    expect(() => canonicalJson({ s: 'x\ud800' })).toThrow(/\$\.s.*lone UTF-16 surrogate/);
    expect(() => canonicalJson({ u: undefined })).toThrow(/\$\.u.*undefined/);
    expect(() => canonicalJson(new Date(0))).toThrow(/plain objects/);
  });
});
