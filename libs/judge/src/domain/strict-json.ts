/**
 * A strict RFC 8259 JSON reader for verifier output. Unlike JSON.parse it refuses duplicate object keys (two
 * parsers could otherwise read two different rewards from one file), and it keeps the literal text of every
 * number, so `1e400` is reported as an overflow rather than silently becoming Infinity. No NaN, Infinity,
 * comments, trailing commas or single quotes. Nesting is bounded.
 */
export type StrictJson =
  | { readonly kind: 'object'; readonly entries: ReadonlyArray<readonly [string, StrictJson]> }
  | { readonly kind: 'array'; readonly items: readonly StrictJson[] }
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'number'; readonly text: string; readonly value: number }
  | { readonly kind: 'boolean'; readonly value: boolean }
  | { readonly kind: 'null' };

export type StrictJsonParse = { readonly ok: true; readonly value: StrictJson } | { readonly ok: false; readonly error: string };

const MAX_DEPTH = 32;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const WS = /[ \t\n\r]*/y;

class Fail extends Error {}

export function parseStrictJson(text: string): StrictJsonParse {
  let i = 0;
  const fail = (what: string): never => {
    const near = JSON.stringify(text.slice(i, i + 12));
    throw new Fail(`${what} at offset ${i}${i < text.length ? ` (near ${near})` : ' (end of input)'}`);
  };
  const ws = () => {
    WS.lastIndex = i;
    WS.exec(text);
    i = WS.lastIndex;
  };
  const string = (): string => {
    const start = i;
    i += 1;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c < 0x20) fail('control character in a string');
      if (c === 0x5c) {
        const e = text.charAt(i + 1);
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail('bad \\u escape');
          i += 6;
        } else if ('"\\/bfnrt'.includes(e) && e !== '') i += 2;
        else fail('bad escape');
      } else i += 1;
    }
    i += 1;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (depth: number): StrictJson => {
    if (depth > MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH}`);
    ws();
    const c = text.charAt(i);
    if (c === '{') {
      i += 1;
      const entries: Array<readonly [string, StrictJson]> = [];
      const seen = new Set<string>();
      ws();
      if (text.charAt(i) === '}') {
        i += 1;
        return { kind: 'object', entries };
      }
      for (;;) {
        ws();
        if (text.charAt(i) !== '"') fail('expected a string key');
        const keyAt = i;
        const key = string();
        if (seen.has(key)) {
          i = keyAt;
          fail(`duplicate key ${JSON.stringify(key)}`);
        }
        seen.add(key);
        ws();
        if (text.charAt(i) !== ':') fail('expected ":"');
        i += 1;
        entries.push([key, value(depth + 1)]);
        ws();
        if (text.charAt(i) === ',') {
          i += 1;
          continue;
        }
        if (text.charAt(i) === '}') {
          i += 1;
          return { kind: 'object', entries };
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i += 1;
      const items: StrictJson[] = [];
      ws();
      if (text.charAt(i) === ']') {
        i += 1;
        return { kind: 'array', items };
      }
      for (;;) {
        items.push(value(depth + 1));
        ws();
        if (text.charAt(i) === ',') {
          i += 1;
          continue;
        }
        if (text.charAt(i) === ']') {
          i += 1;
          return { kind: 'array', items };
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') return { kind: 'string', value: string() };
    if (text.startsWith('true', i)) {
      i += 4;
      return { kind: 'boolean', value: true };
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return { kind: 'boolean', value: false };
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return { kind: 'null' };
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (m && m[0].length > 0) {
      i += m[0].length;
      return { kind: 'number', text: m[0], value: Number(m[0]) };
    }
    if (/^[-+]?(NaN|Infinity|inf|nan)/i.test(text.slice(i))) fail('NaN and Infinity are not JSON numbers');
    return fail('expected a JSON value');
  };
  try {
    const v = value(0);
    ws();
    if (i !== text.length) fail('unexpected text after the JSON value');
    return { ok: true, value: v };
  } catch (e) {
    if (e instanceof Fail) return { ok: false, error: e.message };
    throw e;
  }
}

/** A short name of a value's type for messages. */
export function jsonKindName(v: StrictJson): string {
  return v.kind === 'boolean'
    ? `the boolean ${String(v.value)}`
    : v.kind === 'null'
      ? 'null'
      : `a${v.kind === 'object' || v.kind === 'array' ? 'n' : ''} ${v.kind}`;
}
