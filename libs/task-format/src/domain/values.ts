/**
 * Typed readers over parsed TOML / YAML values that collect problems instead of throwing, so one pass reports
 * everything wrong with a file. TOML is parsed with integers as BigInt, which keeps `1` (integer) apart from `1.0`
 * (float): an integer count written as a float is a type error, as is a boolean or a string where a number belongs.
 */
import { parse as parseToml, TomlDate, TomlError } from 'smol-toml';
import { problem, TASK_ERROR_CODES as C, type TaskErrorCode, type TaskProblem } from '../task-format.errors';
import type { JsonObject, JsonValue } from './json';

export type Table = Record<string, unknown>;

/** Collects the problems of one file. */
export class Problems {
  constructor(
    readonly file: string,
    readonly list: TaskProblem[] = [],
  ) {}
  add(code: TaskErrorCode, key: string | null, message: string): void {
    this.list.push(problem(code, this.file, key, message));
  }
  /** Same sink, another file name. */
  forFile(file: string): Problems {
    return new Problems(file, this.list);
  }
}

export function isTable(v: unknown): v is Table {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

export function has(t: Table, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(t, key);
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

/** Dotted key path, quoting keys that are not bare TOML keys: `environment.env."A.B"`. */
export function keyPath(parent: string, key: string): string {
  const k = BARE_KEY.test(key) ? key : JSON.stringify(key);
  return parent === '' ? k : `${parent}.${k}`;
}

function clip(s: string, n = 60): string {
  return s.length > n ? `${s.slice(0, n)}...` : s;
}

/** "the boolean true", "the string \"2\"", "the float 1.0", "a table", for messages. */
export function describe(v: unknown): string {
  if (typeof v === 'bigint') return `the integer ${v.toString()}`;
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return 'the float nan';
    if (!Number.isFinite(v)) return `the float ${v > 0 ? 'inf' : '-inf'}`;
    return `the float ${Number.isInteger(v) ? v.toFixed(1) : String(v)}`;
  }
  if (typeof v === 'boolean') return `the boolean ${String(v)}`;
  if (typeof v === 'string') return `the string ${JSON.stringify(clip(v))}`;
  if (v instanceof Date) return 'a date-time';
  if (Array.isArray(v)) return 'an array';
  if (v === null) return 'null';
  if (isTable(v)) return 'a table';
  return `a value of type ${typeof v}`;
}

export const TOML_MAX_DEPTH = 32;

export type TomlParse = { ok: true; table: Table } | { ok: false; problem: TaskProblem };

/** Parses TOML 1.0; unsafe keys (`__proto__`, `constructor`) and deep nesting are refused. */
export function parseTomlText(text: string, file: string): TomlParse {
  try {
    const table = parseToml(text, { integersAsBigInt: true, unsafeKeyBehaviour: 'throw', maxDepth: TOML_MAX_DEPTH });
    return { ok: true, table: table as Table };
  } catch (e) {
    const where = e instanceof TomlError ? ` at line ${e.line}, column ${e.column}` : '';
    const first = (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? 'parse error';
    if (e instanceof TomlError && /redefine/.test(first)) {
      const key = duplicateKeyAt(text, e.line, e.column);
      if (key !== undefined) {
        return {
          ok: false,
          problem: problem(C.TOML_SYNTAX, file, key, `duplicate key${where}: ${key} is already defined; TOML 1.0 forbids defining a key or table twice`),
        };
      }
    }
    return { ok: false, problem: problem(C.TOML_SYNTAX, file, null, `not valid TOML 1.0${where}: ${first}`) };
  }
}

const TOML_KEY_PART = /^\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*/;

/** Reads the dotted key at the start of `s` (bare, "basic" or 'literal' parts), or undefined. */
function readTomlKey(s: string): string[] | undefined {
  const parts: string[] = [];
  let rest = s;
  for (;;) {
    const m = TOML_KEY_PART.exec(rest);
    if (!m) return undefined;
    let part = m[1] ?? m[3];
    if (part === undefined) {
      try {
        part = JSON.parse(`"${m[2] ?? ''}"`) as string;
      } catch {
        part = m[2] ?? '';
      }
    }
    parts.push(part);
    rest = rest.slice(m[0].length);
    if (!rest.startsWith('.')) return parts;
    rest = rest.slice(1);
  }
}

/**
 * The dotted path of the key that a "redefine" error points at (line and column are 1-based): a table header names
 * itself; a key is prefixed with the last table header above it. Best effort: undefined when the text there is not
 * recognisably a key (the problem then names no key).
 */
export function duplicateKeyAt(text: string, line: number, column: number): string | undefined {
  const lines = text.split(/\r?\n/);
  const here = lines[line - 1];
  if (here === undefined) return undefined;
  const header = /^\s*\[\[?(.*?)\]\]?\s*(?:#.*)?$/.exec(here);
  if (header) {
    const parts = readTomlKey(header[1] ?? '');
    return parts === undefined ? undefined : parts.reduce(keyPath, '');
  }
  const parts = readTomlKey(here.slice(Math.max(0, column - 1)));
  if (parts === undefined) return undefined;
  let table: string[] = [];
  for (let i = line - 2; i >= 0; i -= 1) {
    const h = /^\s*\[\[?(.*?)\]\]?\s*(?:#.*)?$/.exec(lines[i] ?? '');
    if (h) {
      table = readTomlKey(h[1] ?? '') ?? [];
      break;
    }
  }
  // Inside an inline table (`a = {b = 1, b = 2}`) the key before the brace is the parent.
  const before = here.slice(0, Math.max(0, column - 1));
  const brace = before.lastIndexOf('{');
  const inline = brace >= 0 ? readTomlKey(before.slice(0, before.lastIndexOf('=', brace))) : undefined;
  return [...table, ...(inline ?? []), ...parts].reduce(keyPath, '');
}

/** Reports every key of `t` that is neither allowed nor known-unsupported. */
export function checkKeys(
  p: Problems,
  t: Table,
  path: string,
  allowed: readonly string[],
  unsupported: Readonly<Record<string, string>> = {},
  hint: Readonly<Record<string, string>> = {},
): void {
  for (const key of Object.keys(t)) {
    if (allowed.includes(key)) continue;
    const at = keyPath(path, key);
    const reason = unsupported[key];
    if (reason !== undefined) {
      p.add(C.UNSUPPORTED, at, `not supported by Assay: ${reason}`);
    } else {
      const where = path === '' ? 'at the top level' : `in [${path}]`;
      const extra = hint[key] ? `; ${hint[key]}` : '';
      p.add(C.UNKNOWN_KEY, at, `unknown key ${where}; expected one of: ${allowed.join(', ')}${extra}`);
    }
  }
}

export function readTable(p: Problems, t: Table, key: string, path: string): Table | undefined {
  if (!has(t, key)) return undefined;
  const v = t[key];
  if (isTable(v)) return v;
  p.add(C.INVALID_TYPE, keyPath(path, key), `expected a table, got ${describe(v)}`);
  return undefined;
}

export interface StringRule {
  nonEmpty?: boolean;
  maxLength?: number;
  pattern?: RegExp;
  patternHint?: string;
}

export function readString(p: Problems, t: Table, key: string, path: string, rule: StringRule = {}): string | undefined {
  if (!has(t, key)) return undefined;
  const v = t[key];
  const at = keyPath(path, key);
  if (typeof v !== 'string') {
    p.add(C.INVALID_TYPE, at, `expected a string, got ${describe(v)}`);
    return undefined;
  }
  return checkString(p, at, v, rule);
}

export function checkString(p: Problems, at: string, v: string, rule: StringRule): string | undefined {
  const max = rule.maxLength ?? 4096;
  if (rule.nonEmpty && v.trim() === '') {
    p.add(C.INVALID_VALUE, at, 'expected a non-empty string');
    return undefined;
  }
  if (v.length > max) {
    p.add(C.INVALID_VALUE, at, `expected at most ${max} characters, got ${v.length}`);
    return undefined;
  }
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(v)) {
    p.add(C.INVALID_VALUE, at, 'expected a string without control characters');
    return undefined;
  }
  if (rule.pattern && !rule.pattern.test(v)) {
    p.add(C.INVALID_VALUE, at, `expected ${rule.patternHint ?? `a string matching ${String(rule.pattern)}`}, got ${describe(v)}`);
    return undefined;
  }
  return v;
}

export function readBool(p: Problems, t: Table, key: string, path: string): boolean | undefined {
  if (!has(t, key)) return undefined;
  const v = t[key];
  if (typeof v === 'boolean') return v;
  p.add(C.INVALID_TYPE, keyPath(path, key), `expected a boolean (true or false), got ${describe(v)}`);
  return undefined;
}

export interface IntRule {
  min: number;
  max: number;
}

/** A TOML integer (not a float, not a string, not a boolean) within [min, max]. */
export function readInt(p: Problems, t: Table, key: string, path: string, rule: IntRule): number | undefined {
  if (!has(t, key)) return undefined;
  return checkInt(p, keyPath(path, key), t[key], rule);
}

export function checkInt(p: Problems, at: string, v: unknown, rule: IntRule): number | undefined {
  const range = `an integer from ${rule.min} to ${rule.max}`;
  if (typeof v !== 'bigint') {
    p.add(C.INVALID_TYPE, at, `expected ${range}, got ${describe(v)}`);
    return undefined;
  }
  if (v < BigInt(rule.min) || v > BigInt(rule.max)) {
    p.add(C.INVALID_VALUE, at, `expected ${range}, got ${v.toString()}`);
    return undefined;
  }
  return Number(v);
}

export interface NumberRule {
  /** Exclusive lower bound (timeouts must be > 0). */
  gt?: number;
  /** Inclusive lower bound. */
  min?: number;
  max: number;
}

/** A TOML integer or float, finite, within the rule. Booleans and strings are type errors. */
export function readNumber(p: Problems, t: Table, key: string, path: string, rule: NumberRule): number | undefined {
  if (!has(t, key)) return undefined;
  return checkNumber(p, keyPath(path, key), t[key], rule);
}

export function checkNumber(p: Problems, at: string, v: unknown, rule: NumberRule): number | undefined {
  const lower = rule.gt !== undefined ? `greater than ${rule.gt}` : `at least ${rule.min ?? 0}`;
  const want = `a number ${lower} and at most ${rule.max}`;
  let n: number;
  if (typeof v === 'bigint') n = Number(v);
  else if (typeof v === 'number') n = v;
  else {
    p.add(C.INVALID_TYPE, at, `expected ${want}, got ${describe(v)}`);
    return undefined;
  }
  if (!Number.isFinite(n)) {
    p.add(C.INVALID_VALUE, at, `expected ${want}, got ${describe(v)}`);
    return undefined;
  }
  if ((rule.gt !== undefined && !(n > rule.gt)) || (rule.min !== undefined && n < rule.min) || n > rule.max) {
    p.add(C.INVALID_VALUE, at, `expected ${want}, got ${typeof v === 'bigint' ? v.toString() : String(n)}`);
    return undefined;
  }
  return n;
}

export function readEnum<T extends string>(p: Problems, t: Table, key: string, path: string, values: readonly T[]): T | undefined {
  if (!has(t, key)) return undefined;
  const v = t[key];
  const at = keyPath(path, key);
  const want = `one of ${values.map((x) => JSON.stringify(x)).join(', ')}`;
  if (typeof v !== 'string') {
    p.add(C.INVALID_TYPE, at, `expected ${want}, got ${describe(v)}`);
    return undefined;
  }
  if (!(values as readonly string[]).includes(v)) {
    p.add(C.INVALID_VALUE, at, `expected ${want}, got ${describe(v)}`);
    return undefined;
  }
  return v as T;
}

export function readStringArray(p: Problems, t: Table, key: string, path: string, rule: StringRule & { maxItems?: number } = {}): string[] | undefined {
  if (!has(t, key)) return undefined;
  const v = t[key];
  const at = keyPath(path, key);
  if (!Array.isArray(v)) {
    p.add(C.INVALID_TYPE, at, `expected an array of strings, got ${describe(v)}`);
    return undefined;
  }
  const max = rule.maxItems ?? 1024;
  if (v.length > max) {
    p.add(C.INVALID_VALUE, at, `expected at most ${max} entries, got ${v.length}`);
    return undefined;
  }
  const out: string[] = [];
  let ok = true;
  v.forEach((item: unknown, i) => {
    const ati = `${at}[${i}]`;
    if (typeof item !== 'string') {
      p.add(C.INVALID_TYPE, ati, `expected a string, got ${describe(item)}`);
      ok = false;
      return;
    }
    const s = checkString(p, ati, item, rule);
    if (s === undefined) ok = false;
    else out.push(s);
  });
  return ok ? out : undefined;
}

/**
 * Converts free-form TOML ([metadata]) to JSON: integers must be exactly representable (|n| <= 2^53 - 1), floats
 * finite; dates become RFC 3339 strings. Keys keep their order.
 */
export function tomlToJson(p: Problems, v: unknown, at: string, depth = 0): JsonValue | undefined {
  if (depth > TOML_MAX_DEPTH) {
    p.add(C.INVALID_VALUE, at, `nested deeper than ${TOML_MAX_DEPTH} levels`);
    return undefined;
  }
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) {
      p.add(C.INVALID_VALUE, at, `integer ${v.toString()} cannot be represented exactly in JSON (limit ±2^53-1)`);
      return undefined;
    }
    return Number(v);
  }
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) {
      p.add(C.INVALID_VALUE, at, `expected a finite number, got ${describe(v)} (not representable in JSON)`);
      return undefined;
    }
    return v;
  }
  if (typeof v === 'string' || typeof v === 'boolean') return v;
  if (v instanceof TomlDate) return v.toISOString();
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.toISOString();
  if (Array.isArray(v)) {
    const out: JsonValue[] = [];
    v.forEach((item: unknown, i) => {
      const j = tomlToJson(p, item, `${at}[${i}]`, depth + 1);
      if (j !== undefined) out.push(j);
    });
    return out;
  }
  if (isTable(v)) {
    const out: Record<string, JsonValue> = {};
    for (const [k, item] of Object.entries(v)) {
      const j = tomlToJson(p, item, keyPath(at, k), depth + 1);
      if (j !== undefined) out[k] = j;
    }
    return out as JsonObject;
  }
  p.add(C.INVALID_TYPE, at, `unexpected value ${describe(v)}`);
  return undefined;
}

/** Freezes a plain-data tree in place and returns it. */
export function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
