/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * - objects: members sorted by the UTF-16 code units of their names, no whitespace;
 * - strings: the ECMAScript JSON.stringify escaping (", \, \b \f \n \r \t, other controls as \u00xx lowercase);
 * - numbers: the ECMAScript Number-to-string algorithm (JSON.stringify), finite only;
 * - input must be I-JSON: no lone surrogates, no duplicate names (JSON.parse keeps the last one, so parsers that
 *   accept untrusted bytes must compare the canonical form against the bytes they were given; see envelope.ts).
 */
import { AssayError } from '@assay/core';
import type { JsonValue } from './json';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function fail(path: string, what: string): never {
  throw new AssayError('JCS_NOT_CANONICALIZABLE', 'invalid_input', `cannot canonicalize ${path}: ${what}`, {
    details: { path },
  });
}

function str(s: string, path: string): string {
  if (LONE_SURROGATE.test(s)) fail(path, 'string contains a lone UTF-16 surrogate (not I-JSON)');
  return JSON.stringify(s);
}

function write(v: unknown, path: string, out: string[]): void {
  if (v === null) {
    out.push('null');
    return;
  }
  switch (typeof v) {
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'number':
      if (!Number.isFinite(v)) fail(path, `number ${String(v)} is not finite`);
      out.push(JSON.stringify(v));
      return;
    case 'string':
      out.push(str(v, path));
      return;
    case 'object': {
      if (Array.isArray(v)) {
        out.push('[');
        for (let i = 0; i < v.length; i++) {
          if (i > 0) out.push(',');
          write(v[i], `${path}[${i}]`, out);
        }
        out.push(']');
        return;
      }
      const proto = Object.getPrototypeOf(v) as unknown;
      if (proto !== Object.prototype && proto !== null) fail(path, 'only plain objects can be canonicalized');
      const keys = Object.keys(v).sort();
      out.push('{');
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i] as string;
        const val = (v as Record<string, unknown>)[k];
        if (val === undefined) fail(`${path}.${k}`, 'undefined is not JSON');
        if (i > 0) out.push(',');
        out.push(str(k, path), ':');
        write(val, `${path}.${k}`, out);
      }
      out.push('}');
      return;
    }
    default:
      fail(path, `${typeof v} is not JSON`);
  }
}

/** The canonical JSON text of a value. */
export function canonicalJson(value: JsonValue | unknown): string {
  const out: string[] = [];
  write(value, '$', out);
  return out.join('');
}

/** The canonical UTF-8 bytes of a value. */
export function canonicalBytes(value: JsonValue | unknown): Buffer {
  return Buffer.from(canonicalJson(value), 'utf8');
}
