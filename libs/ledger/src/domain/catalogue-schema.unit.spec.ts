import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020';
import { CATALOGUE, EVENT_TYPES, eventDataProblem, type EventTypeSpec } from './catalogue';
import { ENVELOPE_SIG_PATTERN, ENVELOPE_TIME_PATTERN, EVENTS_SCHEMA_ID, renderCatalogueJsonSchema, renderCatalogueJsonSchemaText } from './catalogue-schema';
import { envelopeFieldProblem, isCanonicalSigBase64, MAX_SIGNER_BYTES, SIGNER_RE, TIME_RE } from './envelope';
import { canonicalJson } from './jcs';
import { emptyRoot } from './merkle';
import type { JsonObject, JsonValue } from './json';
import type { FieldSpec, ObjectSchema } from './schema';
import { prng } from '../../../../tests/support/prng';

/**
 * docs/events.schema.json is the catalogue's JSON Schema, and a standard validator (ajv, draft 2020-12, default
 * options) agrees with the catalogue's own check (eventDataProblem, envelopeFieldProblem) on many generated valid and
 * invalid objects, except where JSON Schema cannot say what Assay checks. Those divergences are listed here, each
 * asserted to happen and to be the only ones:
 *
 * - `size`: the canonical JSON of data is larger than the type's limit (x-assay-maxDataBytes): Assay refuses
 *   (LEDGER_EVENT_TOO_LARGE), a JSON Schema validator cannot count canonical bytes.
 * - `utf8-bytes`: a string over its x-assay-maxUtf8Bytes (key names are at most 128 UTF-8 bytes, in keyId, publicKey
 *   and signer): Assay refuses, JSON Schema has no byte length.
 * - `utf16-length`: a string longer than its maximum in UTF-16 code units but not in code points (characters above
 *   U+FFFF): Assay refuses, JSON Schema's maxLength (code points) accepts.
 * - `utf16-pattern`: a pattern whose counted `[^...]` class matches such characters as one code point (the validator's
 *   `u` mode) but as two code units (Assay's): the key name in keyId, publicKey and signer (where the byte limit, four
 *   bytes to such a character, refuses the same names).
 * - lone surrogates: not valid Unicode; Assay refuses them when canonicalizing, before any schema check.
 * In every divergence Assay is the stricter side.
 */

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const ASTRAL = '\u{1F600}'; // one code point, two UTF-16 code units, four UTF-8 bytes

type StringSpec = Extract<FieldSpec, { kind: 'string' }>;
type Reason = 'size' | 'utf8-bytes' | 'utf16-length' | 'utf16-pattern';

/** Every `x-assay-*` annotation keyword the schema uses (the vocabulary a strict validator must be told of). */
function annotations(v: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(v)) for (const x of v) annotations(x, out);
  else if (typeof v === 'object' && v !== null)
    for (const [k, x] of Object.entries(v)) {
      if (k.startsWith('x-assay-')) out.add(k);
      else annotations(x, out);
    }
  return out;
}

function makeAjv(): Ajv2020 {
  const warnings: unknown[] = [];
  const ajv = new Ajv2020({
    strict: true,
    logger: { log: () => undefined, warn: (...a: unknown[]) => warnings.push(a), error: (...a: unknown[]) => warnings.push(a) },
  });
  const schema = renderCatalogueJsonSchema();
  ajv.addVocabulary([...annotations(schema)]);
  ajv.addSchema(schema);
  for (const ref of ['', ...EVENT_TYPES.map((t) => `#/$defs/${t}`)]) ajv.getSchema(`${EVENTS_SCHEMA_ID}${ref}`);
  if (warnings.length > 0) throw new Error(`ajv warned: ${JSON.stringify(warnings)}`);
  return ajv;
}

function validator(ajv: Ajv2020, ref: string): ValidateFunction {
  const v = ajv.getSchema(`${EVENTS_SCHEMA_ID}${ref}`);
  if (!v) throw new Error(`no schema ${ref}`);
  return v;
}

// ---- values per field spec -------------------------------------------------------------------------------------------

/** Strings of exactly n code units, tried in turn for a pattern (covers every pattern of the catalogue). */
const TEMPLATES: Array<(n: number) => string> = [
  (n) => 'a'.repeat(n),
  (n) => 'A'.repeat(n),
  (n) => '0'.repeat(n),
  (n) => `${'k'.repeat(Math.max(0, n - 9))}+0123abcd`,
  (n) => `${'k'.repeat(Math.max(0, n - 54))}+0123abcd+${'A'.repeat(44)}`,
  (n) => `sha256:${'0'.repeat(Math.max(0, n - 7))}`,
  (n) => `judge/round-${'1'.repeat(Math.max(0, n - 12))}`,
  (n) => `GPU-${'0'.repeat(Math.max(0, n - 4))}`,
  (n) => `${'1'.repeat(Math.ceil((n - 1) / 2))}.${'1'.repeat(Math.max(0, Math.floor((n - 1) / 2)))}`,
];

function sample(spec: StringSpec, n: number): string | null {
  if (n < 0) return null;
  for (const t of TEMPLATES) {
    const s = t(n);
    if (s.length === n && (!spec.pattern || spec.pattern.test(s))) return s;
  }
  return null;
}

/** The longest (down from `from`) or shortest (up from `from`) matching sample within [lo, hi]. */
function boundarySample(spec: StringSpec, from: number, step: 1 | -1, lo: number, hi: number): string | null {
  for (let n = from; n >= lo && n <= hi; n += step) {
    const s = sample(spec, n);
    if (s !== null) return s;
  }
  return null;
}

function wrongTypes(spec: FieldSpec): JsonValue[] {
  const all: JsonValue[] = ['x', 1, 1.5, true, [], {}, null];
  const ok = (v: JsonValue): boolean => {
    if (v === null) return spec.nullable === true;
    switch (spec.kind) {
      case 'string':
        return typeof v === 'string';
      case 'integer':
        return typeof v === 'number' && Number.isInteger(v);
      case 'number':
        return typeof v === 'number';
      case 'boolean':
        return typeof v === 'boolean';
      case 'array':
        return Array.isArray(v);
      default:
        return typeof v === 'object' && !Array.isArray(v);
    }
  };
  return all.filter((v) => !ok(v));
}

function baseObject(fields: ObjectSchema, withOptional: boolean): JsonObject {
  const out: JsonObject = {};
  for (const [k, f] of Object.entries(fields)) if (withOptional || !f.optional) out[k] = validValues(f)[0] as JsonValue;
  return out;
}

/** Valid values of a field: boundaries and typical values (some may still make the whole data too large). */
function validValues(spec: FieldSpec): JsonValue[] {
  const out: JsonValue[] = [];
  switch (spec.kind) {
    case 'string': {
      if (spec.enum) {
        out.push(...spec.enum);
        break;
      }
      const lo = spec.min ?? 0;
      const small = boundarySample(spec, Math.max(lo, spec.pattern ? 1 : 0), 1, lo, spec.max);
      const large = boundarySample(spec, spec.max, -1, lo, spec.max);
      const mid = boundarySample(spec, Math.floor((lo + spec.max) / 2), -1, lo, spec.max);
      for (const s of [small, mid, large]) if (s !== null) out.push(s);
      if (!spec.pattern) {
        out.push('é'.repeat(spec.max), '€'.repeat(Math.max(lo, 1)), ASTRAL.repeat(Math.max(1, Math.floor(spec.max / 2))), 'tab\there', ' spaced ');
        if (lo === 0) out.push('');
      }
      break;
    }
    case 'integer': {
      const min = spec.min ?? -MAX_SAFE;
      const max = spec.max ?? MAX_SAFE;
      out.push(min, max, Math.min(max, min + 1));
      if (min <= 0 && max >= 0) out.push(-0, 0);
      break;
    }
    case 'number': {
      if (spec.exactly !== undefined) {
        out.push(spec.exactly);
        if (spec.exactly === 0) out.push(-0);
        break;
      }
      const inRange = (v: number): boolean => (spec.min === undefined || v >= spec.min) && (spec.max === undefined || v <= spec.max);
      out.push(...[0, 1.5, 1e-7, 5e-324, 1e21, 1e308, -2.5, -1e308].filter(inRange));
      if (spec.min !== undefined) out.push(spec.min);
      break;
    }
    case 'boolean':
      out.push(true, false);
      break;
    case 'object':
      out.push(baseObject(spec.fields, true), baseObject(spec.fields, false));
      break;
    case 'freeObject':
      out.push({}, { nested: { list: [1, 'x', null, true, 1.5] } });
      break;
    case 'map': {
      const v = validValues(spec.values)[0] as JsonValue;
      const keys = ['a', 'a'.repeat(64), 'loss.val_1:x-y'].filter((k) => !spec.keyPattern || spec.keyPattern.test(k));
      out.push({}, Object.fromEntries(keys.map((k) => [k, v])));
      out.push(
        Object.fromEntries(
          Array.from({ length: spec.maxKeys }, (_, i) => [`m${i}`, validValues(spec.values)[i % validValues(spec.values).length] as JsonValue]),
        ),
      );
      break;
    }
    case 'array': {
      const items = validValues(spec.of);
      out.push(
        [],
        [items[0] as JsonValue],
        Array.from({ length: spec.max }, (_, i) => items[i % items.length] as JsonValue),
      );
      break;
    }
  }
  if (spec.nullable) out.push(null);
  return out;
}

/** Invalid values of a field (each refused by the catalogue's check, except for the divergences above). */
function invalidValues(spec: FieldSpec): JsonValue[] {
  const out: JsonValue[] = wrongTypes(spec);
  switch (spec.kind) {
    case 'string': {
      if (spec.enum) {
        out.push('nope', (spec.enum[0] as string).toUpperCase(), ` ${spec.enum[0] as string}`, '');
        break;
      }
      const over = sample(spec, spec.max + 1) ?? 'a'.repeat(spec.max + 1);
      out.push(over, `${over}${over}`);
      if ((spec.min ?? 0) > 0) out.push(spec.min === 1 ? '' : 'a'.repeat((spec.min as number) - 1));
      if (spec.pattern) {
        const ok = boundarySample(spec, 20, 1, spec.min ?? 0, spec.max) ?? boundarySample(spec, spec.max, -1, 0, spec.max);
        if (ok !== null)
          for (const c of [' ', '\n', '\u00a0', 'é', '+', '!', ASTRAL, '\u0000']) {
            for (const s of [`${c}${ok.slice(1)}`, `${ok.slice(0, -1)}${c}`, `${ok.slice(0, 4)}${c}${ok.slice(5)}`]) if (!spec.pattern.test(s)) out.push(s);
          }
        // Characters above U+FFFF in the counted part of a key name (a divergence where the class admits them).
        if (ok !== null && spec.pattern.source.startsWith('^[^\\s+]{1,128}')) {
          const tail = ok.slice(ok.indexOf('+'));
          out.push(`${ASTRAL.repeat(64)}${tail}`, `${ASTRAL.repeat(65)}${tail}`, `${'é'.repeat(129)}${tail}`);
        }
      } else {
        out.push(ASTRAL.repeat(Math.floor(spec.max / 2) + 1), `a${ASTRAL.repeat(Math.floor(spec.max / 2))}`);
      }
      break;
    }
    case 'integer': {
      const min = spec.min ?? -MAX_SAFE;
      const max = spec.max ?? MAX_SAFE;
      out.push(min - 1, max + 1, min + 0.5, 1e21, -1e21, 2 ** 53, -(2 ** 53), 2 ** 64);
      break;
    }
    case 'number':
      if (spec.exactly !== undefined) out.push(spec.exactly + 0.5, spec.exactly + 5e-324, spec.exactly - 1e-300);
      if (spec.min !== undefined) out.push(spec.min - 0.5, spec.min - 5e-324);
      if (spec.max !== undefined) out.push(spec.max + 0.5);
      break;
    case 'object':
      out.push({ ...baseObject(spec.fields, true), extra: 1 });
      break;
    case 'map': {
      const v = validValues(spec.values)[0] as JsonValue;
      out.push(Object.fromEntries(Array.from({ length: spec.maxKeys + 1 }, (_, i) => [`m${i}`, v])));
      if (spec.keyPattern) for (const k of ['', 'a'.repeat(65), 'bad key', 'é', 'a/b']) if (!spec.keyPattern.test(k)) out.push({ [k]: v });
      for (const bad of invalidValues(spec.values).slice(0, 6)) out.push({ ok: v, bad });
      break;
    }
    case 'array': {
      const item = validValues(spec.of)[0] as JsonValue;
      out.push(Array.from({ length: spec.max + 1 }, () => item));
      for (const bad of invalidValues(spec.of).slice(0, 6)) out.push([item, bad]);
      break;
    }
    default:
      break;
  }
  return out;
}

// ---- the divergences -------------------------------------------------------------------------------------------------

function visitStrings(spec: FieldSpec, v: JsonValue | undefined, visit: (s: StringSpec, v: string) => void): void {
  if (v === undefined || v === null) return;
  switch (spec.kind) {
    case 'string':
      if (typeof v === 'string') visit(spec, v);
      return;
    case 'object':
      if (typeof v === 'object' && !Array.isArray(v)) for (const [k, f] of Object.entries(spec.fields)) visitStrings(f, (v as JsonObject)[k], visit);
      return;
    case 'map':
      if (typeof v === 'object' && !Array.isArray(v)) for (const x of Object.values(v)) visitStrings(spec.values, x, visit);
      return;
    case 'array':
      if (Array.isArray(v)) for (const x of v) visitStrings(spec.of, x, visit);
      return;
    default:
      return;
  }
}

function stringReasons(spec: StringSpec, v: string, out: Set<Reason>): void {
  if (spec.maxBytes !== undefined && Buffer.byteLength(v, 'utf8') > spec.maxBytes) out.add('utf8-bytes');
  if (v.length > spec.max && [...v].length <= spec.max) out.add('utf16-length');
  if (spec.pattern && !spec.pattern.test(v) && new RegExp(spec.pattern.source, 'u').test(v)) out.add('utf16-pattern');
}

function dataReasons(spec: EventTypeSpec, data: JsonObject): Set<Reason> {
  const out = new Set<Reason>();
  if (Buffer.byteLength(canonicalJson(data), 'utf8') > spec.maxDataBytes) out.add('size');
  for (const [k, f] of Object.entries(spec.schema)) visitStrings(f, data[k], (s, v) => stringReasons(s, v, out));
  return out;
}

interface Tally {
  cases: number;
  valid: number;
  invalid: number;
  divergent: Record<Reason, number>;
  problems: string[];
}

function newTally(): Tally {
  return { cases: 0, valid: 0, invalid: 0, divergent: { size: 0, 'utf8-bytes': 0, 'utf16-length': 0, 'utf16-pattern': 0 }, problems: [] };
}

/** Compares the two verdicts; a disagreement must be Assay refusing for one of the listed reasons. */
function compare(t: Tally, what: string, assayOk: boolean, ajvOk: boolean, reasons: Set<Reason>): void {
  t.cases++;
  if (assayOk) t.valid++;
  else t.invalid++;
  if (assayOk === ajvOk) return;
  if (ajvOk && !assayOk && reasons.size > 0) {
    for (const r of reasons) t.divergent[r]++;
    return;
  }
  if (t.problems.length < 20) t.problems.push(`${what}: catalogue says ${assayOk ? 'valid' : 'invalid'}, JSON Schema says ${ajvOk ? 'valid' : 'invalid'}`);
}

function describeCase(data: JsonObject): string {
  const s = JSON.stringify(data);
  return s.length > 160 ? `${s.slice(0, 160)}…` : s;
}

// ---- the tests -------------------------------------------------------------------------------------------------------

describe('the event catalogue as JSON Schema', () => {
  const ajv = makeAjv();

  it('is committed in docs/events.schema.json exactly as the generator renders it (npm run docs:schema regenerates it)', () => {
    const file = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'events.schema.json'), 'utf8');
    expect(file).toBe(renderCatalogueJsonSchemaText());
  });

  it('is a strict draft 2020-12 schema with an envelope at the root and one data schema per catalogue type', () => {
    const schema = renderCatalogueJsonSchema() as { $schema: string; $defs: Record<string, { 'x-assay-roles'?: string[]; 'x-assay-maxDataBytes'?: number }> };
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(Object.keys(schema.$defs)).toEqual(['envelope', ...EVENT_TYPES]);
    for (const spec of CATALOGUE.values()) {
      expect(schema.$defs[spec.type]?.['x-assay-roles']).toEqual([...spec.roles]);
      expect(schema.$defs[spec.type]?.['x-assay-maxDataBytes']).toBe(spec.maxDataBytes);
    }
    expect(renderCatalogueJsonSchemaText()).toBe(renderCatalogueJsonSchemaText());
    for (const k of ['x-assay-roles', 'x-assay-maxDataBytes', 'x-assay-maxUtf16', 'x-assay-maxUtf8Bytes', 'x-assay-maxEnvelopeBytes'])
      expect(annotations(schema)).toContain(k);
  });

  it.each(EVENT_TYPES.map((t) => [t]))('%s: ajv and eventDataProblem agree on generated data, but for the listed divergences', (type) => {
    const spec = CATALOGUE.get(type) as EventTypeSpec;
    const validate = validator(ajv, `#/$defs/${type}`);
    const t = newTally();
    const check = (data: JsonObject): void => {
      const problem = eventDataProblem(type, data);
      const reasons = dataReasons(spec, data);
      if (problem?.code === 'LEDGER_EVENT_TOO_LARGE') expect(reasons.has('size')).toBe(true);
      compare(t, describeCase(data), problem === null, validate(data), reasons);
    };
    const fields = Object.entries(spec.schema);
    const base = baseObject(spec.schema, false);
    const full = baseObject(spec.schema, true);
    check(base);
    check(full);
    for (const [name, f] of fields) {
      for (const v of validValues(f)) check({ ...full, [name]: v });
      for (const v of invalidValues(f)) check({ ...full, [name]: v });
      const { [name]: _dropped, ...without } = full;
      check(without);
    }
    check({ ...full, extra: 1 });
    for (const name of ['constructor', 'toString', '__proto__']) check({ ...full, ...(JSON.parse(`{"${name}":1}`) as JsonObject) });
    check({});
    // Over the size limit with otherwise valid values: every free-form object and free text as large as it may be.
    const big: JsonObject = { ...full };
    for (const [name, f] of fields) {
      if (f.kind === 'freeObject') big[name] = { pad: 'x'.repeat(spec.maxDataBytes) };
      else if (f.kind === 'string' && !f.pattern && !f.enum) big[name] = '€'.repeat(f.max);
    }
    check(big);
    // Random combinations of valid and invalid field values.
    const random = prng(0x5eed + type.length * 7919 + type.charCodeAt(0));
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const pools = new Map(fields.map(([name, f]) => [name, { valid: validValues(f), invalid: invalidValues(f) }]));
    for (let i = 0; i < 300; i++) {
      const data: JsonObject = {};
      for (const [name, f] of fields) {
        const r = random();
        if (r < (f.optional ? 0.25 : 0.03)) continue;
        const pool = pools.get(name) as { valid: JsonValue[]; invalid: JsonValue[] };
        data[name] = random() < 0.9 ? pick(pool.valid) : pick(pool.invalid);
      }
      if (random() < 0.03) data[`extra${i}`] = 'x';
      check(data);
    }
    expect(t.problems).toEqual([]);
    expect(t.cases).toBeGreaterThan(300);
    expect(t.valid).toBeGreaterThan(20);
    expect(t.invalid).toBeGreaterThan(20);
    // Every type has something over its size limit (free text or free-form objects), so that divergence shows.
    if (fields.some(([, f]) => f.kind === 'freeObject' || (f.kind === 'string' && !f.pattern && !f.enum && 3 * f.max > spec.maxDataBytes)))
      expect(t.divergent.size).toBeGreaterThan(0);
  });

  it('shows each divergence on purpose: size, UTF-8 bytes, UTF-16 lengths, UTF-16 patterns, lone surrogates', () => {
    const note = validator(ajv, '#/$defs/Note');
    // size: Note text is at most 65536 code units, its data at most 71680 bytes of canonical JSON.
    const atLimit = { text: `${'€'.repeat(23889)}aa` };
    expect(Buffer.byteLength(canonicalJson(atLimit))).toBe(71680);
    expect([eventDataProblem('Note', atLimit), note(atLimit)]).toEqual([null, true]);
    const over = { text: `${'€'.repeat(23889)}aaa` };
    expect([eventDataProblem('Note', over)?.code, note(over)]).toEqual(['LEDGER_EVENT_TOO_LARGE', true]);
    // utf16-length: 513 characters above U+FFFF are 1026 code units (more than 1024) but 513 code points.
    const rejected = validator(ajv, '#/$defs/SubmissionRejected');
    const reason = { run: 'r', reason: ASTRAL.repeat(513), status: 429 };
    expect([eventDataProblem('SubmissionRejected', reason)?.code, rejected(reason)]).toEqual(['LEDGER_EVENT_INVALID', true]);
    const fits = { ...reason, reason: ASTRAL.repeat(512) };
    expect([eventDataProblem('SubmissionRejected', fits), rejected(fits)]).toEqual([null, true]);
    // (The data size is checked first: the same 513 characters in a KeyRevoked, limited to 2048 bytes, are too large.)
    expect(eventDataProblem('KeyRevoked', { keyId: 'k+0123abcd', reason: ASTRAL.repeat(513) })?.code).toBe('LEDGER_EVENT_TOO_LARGE');
    // utf8-bytes and utf16-pattern: key names are at most 128 UTF-8 bytes; 65 characters above U+FFFF are also 130
    // code units (more than the pattern's 128) but 65 code points.
    const reject = validator(ajv, '#/$defs/KeyRevoked');
    const keyRevoked = (name: string): JsonObject => ({ keyId: `${name}+0123abcd`, reason: 'r' });
    for (const [name, assay] of [
      ['k'.repeat(128), null],
      ['é'.repeat(64), null],
      [ASTRAL.repeat(32), null],
      ['é'.repeat(65), 'LEDGER_EVENT_INVALID'],
      ['k'.repeat(127) + 'é', 'LEDGER_EVENT_INVALID'],
      [ASTRAL.repeat(33), 'LEDGER_EVENT_INVALID'],
      [ASTRAL.repeat(65), 'LEDGER_EVENT_INVALID'],
    ] as const)
      expect([name, eventDataProblem('KeyRevoked', keyRevoked(name))?.code ?? null, reject(keyRevoked(name))]).toEqual([name, assay, true]);
    // Lone surrogates: refused when canonicalizing (before any schema check); a JSON Schema validator sees a string.
    const lone = JSON.parse('{"text":"\\ud800"}') as JsonObject;
    expect(note(lone)).toBe(true);
    expect(() => eventDataProblem('Note', lone)).toThrow(expect.objectContaining({ code: 'JCS_NOT_CANONICALIZABLE' }));
  });

  describe('docs/formats.md states what the code does', () => {
    const formats = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'formats.md'), 'utf8');
    const flat = formats.replace(/\s+/g, ' ');

    it('quotes the exact time pattern, the empty root, and RFC 8785 number spellings', () => {
      expect(formats).toContain(`\n${ENVELOPE_TIME_PATTERN}\n`);
      expect(formats).toContain(emptyRoot().toString('base64'));
      for (const [n, text] of [
        [1e21, '1e+21'],
        [1e-7, '1e-7'],
        [0.002, '0.002'],
        [1e20, '100000000000000000000'],
        [5e-324, '5e-324'],
        [-0, '0'],
      ] as const) {
        expect(canonicalJson(n)).toBe(text);
        expect(formats).toContain(`\`${text}\``);
      }
      expect(canonicalJson(JSON.parse('12345678901234567891'))).toBe('12345678901234567000');
      expect(flat).toContain('`12345678901234567891` becomes `12345678901234567000`');
    });

    it("lists ECMAScript's white space exactly", () => {
      const cps: number[] = [];
      for (let c = 0; c <= 0xffff; c++) if (/\s/.test(String.fromCharCode(c))) cps.push(c);
      const u = (c: number): string => `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
      const parts: string[] = [];
      for (let i = 0; i < cps.length;) {
        let j = i;
        while (j + 1 < cps.length && (cps[j + 1] as number) === (cps[j] as number) + 1) j++;
        if (j - i >= 2) parts.push(`${u(cps[i] as number)} to ${u(cps[j] as number)}`);
        else for (let k = i; k <= j; k++) parts.push(u(cps[k] as number));
        i = j + 1;
      }
      expect(flat).toContain(`exactly ${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1] as string} (not U+0085, not U+180E)`);
    });

    it('shows checkpoint.last as the ledger writes it, for the example checkpoint', () => {
      const note = /```\n(assay\.example\/ledger\n[\s\S]*?\n)```/.exec(formats)?.[1] as string;
      expect(note).toMatch(/^assay\.example\/ledger\n3\n/);
      const rootHash = note.split('\n')[2] as string;
      expect(formats).toContain(`\n${JSON.stringify({ treeSize: 3, rootHash, note }, null, 2)}\n`);
    });
  });

  describe('the envelope', () => {
    const envelope = validator(ajv, '');
    // The worked example of docs/formats.md.
    const example = JSON.parse(
      '{"data":{"text":"hello"},"id":"00000000-0000-4000-8000-000000000001","position":3,"prev":"0000000000000000000000000000000000000000000000000000000000000000","revision":0,"sig":"yDEaTzVrGpoYggbnT3gPu3En62DESO4DpA+m8An3Eeiof2plpNtQRMAu6C4Whgbgx0k+/LSdddARWBmz0iL+Cw==","signer":"assay-controller-9d61b19d+a4fa239f","stream":"note-demo","time":"2026-12-02T10:00:00.000Z","type":"Note"}',
    ) as JsonObject;
    const assayOk = (e: JsonObject): boolean => envelopeFieldProblem(e, true) === null && eventDataProblem(e.type as string, e.data as JsonObject) === null;
    const reasons = (e: JsonObject): Set<Reason> => {
      const out = new Set<Reason>();
      const spec = typeof e.type === 'string' ? CATALOGUE.get(e.type) : undefined;
      if (spec && typeof e.data === 'object' && e.data !== null && !Array.isArray(e.data)) for (const r of dataReasons(spec, e.data)) out.add(r);
      if (typeof e.signer === 'string') stringReasons({ kind: 'string', max: 140, maxBytes: MAX_SIGNER_BYTES, pattern: SIGNER_RE }, e.signer, out);
      return out;
    };

    it('agrees with envelopeFieldProblem and the catalogue on mutated envelopes', () => {
      const t = newTally();
      const check = (e: JsonObject): void => compare(t, describeCase(e), assayOk(e), envelope(e), reasons(e));
      const alternatives: Record<string, JsonValue[]> = {
        type: ['Note', 'Nope', 'note', '', `N${'a'.repeat(63)}`, `N${'a'.repeat(64)}`, 'KeyRegistered', 1, null],
        data: [{ text: 'x' }, {}, { text: 'x', extra: 1 }, [], 'x', null],
        stream: [
          'note-demo',
          'a-b',
          `${'a'.repeat(32)}-x`,
          `${'a'.repeat(33)}-x`,
          'note-',
          `note-${'x'.repeat(128)}`,
          `note-${'x'.repeat(129)}`,
          'Note-x',
          'note-x-y',
          'note-.x',
          'n0te-A:b.c_d',
          'note_x',
          'note-é',
          1,
        ],
        revision: [0, 1, MAX_SAFE, MAX_SAFE + 1, -1, 1.5, -0, '1', null, 1e21],
        position: [0, 3, MAX_SAFE, 2 ** 53, -1, 0.5, -0, '3', null],
        id: [
          '00000000-0000-0000-0000-000000000000',
          'ffffffff-ffff-1fff-0fff-ffffffffffff',
          '00000000-0000-4000-8000-00000000000A',
          '0000000000004000800000000000000a',
          '{00000000-0000-4000-8000-000000000001}',
          'g0000000-0000-4000-8000-000000000001',
          7,
        ],
        time: [
          '2026-02-30T00:00:00.000Z',
          '2026-01-01T24:00:00.000Z',
          '2026-01-01T24:00:00.001Z',
          '2026-12-02t10:00:00.000Z',
          '2026-12-02T10:00:00.000+00:00',
          '2026-12-02T10:00:00Z',
          '2026-12-02T10:00:00.0000Z',
          '+002026-12-02T10:00:00.000Z',
          '2026-12-02 10:00:00.000Z',
          '٢٠٢٦-12-02T10:00:00.000Z',
          0,
        ],
        prev: ['f'.repeat(64), 'F'.repeat(64), '0'.repeat(63), '0'.repeat(65), `${'0'.repeat(63)}g`, null],
        signer: [
          'a+0123abcd',
          `${'a'.repeat(128)}+0123abcd`,
          `${'a'.repeat(129)}+0123abcd`,
          'a b+0123abcd',
          '\u00a0+0123abcd',
          '\u0085+0123abcd',
          '\u0001+0123abcd',
          'é+0123abcd',
          `${ASTRAL.repeat(64)}+0123abcd`,
          `${ASTRAL.repeat(65)}+0123abcd`,
          'a+0123ABCD',
          'a+0123abc',
          '+0123abcd',
          'a+b+0123abcd',
          'a\u3000+0123abcd',
          'a\ufeff+0123abcd',
        ],
        sig: [
          'A'.repeat(86) + '==',
          'A'.repeat(85) + 'B==',
          'A'.repeat(85) + 'w==',
          'A'.repeat(86) + '=',
          'A'.repeat(87) + '=',
          'A'.repeat(88),
          '-'.repeat(86) + '==',
          'A'.repeat(84) + '==A=',
          '',
        ],
      };
      check(example);
      for (const [field, values] of Object.entries(alternatives)) for (const v of values) check({ ...example, [field]: v });
      // Every base64 character in the last data position of sig: only A, Q, g and w leave the unused bits zero.
      for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/') {
        const sig = `${'A'.repeat(85)}${c}==`;
        check({ ...example, sig });
        expect(new RegExp(ENVELOPE_SIG_PATTERN).test(sig)).toBe(isCanonicalSigBase64(sig));
      }
      for (const k of Object.keys(example)) {
        const { [k]: _dropped, ...without } = example;
        check(without);
      }
      check({ ...example, extra: 1 });
      // Other types: a valid KeyRegistered envelope, and one whose data is a Note's.
      const key = { ...example, type: 'KeyRegistered', data: { keyId: 'k+0123abcd', publicKey: `k+0123abcd+${'A'.repeat(43)}=`, role: 'auditor' } };
      check(key);
      check({ ...key, data: { text: 'hello' } });
      expect(t.problems).toEqual([]);
      expect(t.divergent['utf8-bytes']).toBeGreaterThan(0);
      expect(t.divergent['utf16-pattern']).toBeGreaterThan(0);
      expect(t.valid).toBeGreaterThan(20);
      expect(t.invalid).toBeGreaterThan(60);
    });

    it('states the time rule exactly: ENVELOPE_TIME_PATTERN accepts what TIME_RE and Date.parse accept', () => {
      const time = validator(ajv, '#/$defs/envelope/properties/time');
      const two = (n: number): string => String(n).padStart(2, '0');
      let disagreements = 0;
      let accepted = 0;
      let cases = 0;
      for (const y of ['0000', '1970', '2024', '2026', '9999'])
        for (let mo = 0; mo <= 13; mo++)
          for (let d = 0; d <= 32; d++)
            for (const hh of [0, 23, 24, 25])
              for (const mm of [0, 59, 60])
                for (const ss of [0, 59, 60])
                  for (const ms of ['000', '001']) {
                    const s = `${y}-${two(mo)}-${two(d)}T${two(hh)}:${two(mm)}:${two(ss)}.${ms}Z`;
                    const assay = TIME_RE.test(s) && !Number.isNaN(Date.parse(s));
                    cases++;
                    if (assay) accepted++;
                    if (assay !== time(s) || assay !== new RegExp(ENVELOPE_TIME_PATTERN).test(s)) disagreements++;
                  }
      expect(cases).toBeGreaterThan(100_000);
      expect(accepted).toBeGreaterThan(10_000);
      expect(disagreements).toBe(0);
      // The lenient cases, spelled out.
      for (const s of [
        '2026-02-30T00:00:00.000Z',
        '2026-02-31T12:00:00.000Z',
        '2025-04-31T00:00:00.000Z',
        '2026-01-01T24:00:00.000Z',
        '0000-01-01T00:00:00.000Z',
      ])
        expect([s, time(s), TIME_RE.test(s) && !Number.isNaN(Date.parse(s))]).toEqual([s, true, true]);
      for (const s of ['2026-02-32T00:00:00.000Z', '2026-01-01T24:00:00.001Z', '2026-01-01T23:59:60.000Z', '2026-13-01T00:00:00.000Z'])
        expect([s, time(s), TIME_RE.test(s) && !Number.isNaN(Date.parse(s))]).toEqual([s, false, false]);
    });
  });
});
