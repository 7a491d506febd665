/**
 * Renders the event catalogue and the envelope as JSON Schema (draft 2020-12): docs/events.schema.json, for
 * implementations in other languages. Pure: the same catalogue always gives the same text.
 *
 * What JSON Schema cannot say is stated in `x-assay-*` annotations (ignored by validators) and in the descriptions:
 *
 * - lengths: Assay counts string lengths in UTF-16 code units; JSON Schema's minLength/maxLength count code points.
 *   `x-assay-maxUtf16` repeats each maximum in Assay's unit; a string with characters above U+FFFF can pass a JSON
 *   Schema validator and still be refused by Assay.
 * - patterns: Assay evaluates them as ECMAScript regular expressions without the `u` flag (over UTF-16 code units);
 *   JSON Schema validators usually evaluate them over code points. They differ only on characters above U+FFFF
 *   matched by `[^...]` classes under a counted repeat (the key name part of `keyId`, `publicKey` and `signer`).
 * - sizes: `x-assay-maxDataBytes` (UTF-8 bytes of the canonical JSON of `data`) and `x-assay-maxEnvelopeBytes`;
 *   `x-assay-maxUtf8Bytes` on a string bounds its UTF-8 bytes too (key ids and key texts: names of at most 128 bytes).
 * - roles: `x-assay-roles`, the key roles that may sign the type; other plain properties of a catalogue entry follow
 *   as `x-assay-<name>`.
 *
 * Unknown properties of a catalogue entry are ignored, so the catalogue may grow fields without breaking this.
 */
import { CATALOGUE, EVENT_TYPES, type EventTypeSpec } from './catalogue';
import { EVENT_TYPE_RE, HASH_HEX_RE, MAX_ENVELOPE_BYTES, MAX_SIGNER_BYTES, SIGNER_RE, STREAM_RE, UUID_RE } from './envelope';
import type { FieldSpec, ObjectSchema } from './schema';

export type JsonSchema = { [key: string]: unknown };

export const EVENTS_SCHEMA_ID = 'urn:assay:ledger:events';
const DIALECT = 'https://json-schema.org/draft/2020-12/schema';
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/**
 * `time` exactly as the envelope check accepts it (YYYY-MM-DDTHH:MM:SS.sssZ that ECMAScript's Date.parse takes):
 * month 01-12, day 01-31 in every month (2026-02-30 passes), hour 00-23, minute and second 00-59, or 24:00:00.000.
 */
export const ENVELOPE_TIME_PATTERN = '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])T(([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d\\.\\d{3}|24:00:00\\.000)Z$';
/** `sig`: standard padded base64 of 64 bytes whose last character's 4 unused bits are zero. */
export const ENVELOPE_SIG_PATTERN = '^[A-Za-z0-9+/]{85}[AQgw]==$';

function pattern(re: RegExp): string {
  if (re.flags !== '') throw new Error(`catalogue-schema: pattern ${String(re)} has flags, which JSON Schema cannot carry`);
  return re.source;
}

function nullable(spec: FieldSpec, schema: JsonSchema): JsonSchema {
  return spec.nullable ? { anyOf: [schema, { type: 'null' }] } : schema;
}

/** The JSON Schema of one field (without its optionality, which the enclosing object's `required` carries). */
export function fieldSchema(spec: FieldSpec): JsonSchema {
  switch (spec.kind) {
    case 'string': {
      const s: JsonSchema = { type: 'string' };
      if (spec.enum) s.enum = [...spec.enum];
      if (spec.min !== undefined && spec.min > 0) s.minLength = spec.min;
      s.maxLength = spec.max;
      s['x-assay-maxUtf16'] = spec.max;
      if (spec.maxBytes !== undefined) s['x-assay-maxUtf8Bytes'] = spec.maxBytes;
      if (spec.pattern) s.pattern = pattern(spec.pattern);
      return nullable(spec, s);
    }
    case 'integer':
      return nullable(spec, { type: 'integer', minimum: spec.min ?? -MAX_SAFE, maximum: spec.max ?? MAX_SAFE });
    case 'number': {
      const s: JsonSchema = { type: 'number' };
      if (spec.exactly !== undefined) s.const = spec.exactly;
      if (spec.min !== undefined) s.minimum = spec.min;
      if (spec.max !== undefined) s.maximum = spec.max;
      return nullable(spec, s);
    }
    case 'boolean':
      return nullable(spec, { type: 'boolean' });
    case 'object':
      return nullable(spec, objectSchema(spec.fields));
    case 'freeObject':
      return nullable(spec, { type: 'object', description: 'any JSON object (bounded only by the size limit of the data)' });
    case 'map': {
      const s: JsonSchema = { type: 'object', maxProperties: spec.maxKeys };
      if (spec.keyPattern) s.propertyNames = { pattern: pattern(spec.keyPattern) };
      s.additionalProperties = fieldSchema(spec.values);
      return nullable(spec, s);
    }
    case 'array':
      return nullable(spec, { type: 'array', maxItems: spec.max, items: fieldSchema(spec.of) });
    default: {
      const kind = (spec as { kind?: unknown }).kind;
      throw new Error(`catalogue-schema: field kind ${String(kind)} has no JSON Schema rendering`);
    }
  }
}

function objectSchema(fields: ObjectSchema): JsonSchema {
  const entries = Object.entries(fields);
  // fromEntries: every name becomes an own property, whatever it is.
  const properties = Object.fromEntries(entries.map(([name, spec]) => [name, fieldSchema(spec)]));
  const required = entries.filter(([, spec]) => !spec.optional).map(([name]) => name);
  return { type: 'object', properties, required, additionalProperties: false };
}

const RENDERED_SPEC_PROPERTIES: ReadonlySet<string> = new Set(['type', 'roles', 'schema', 'maxDataBytes', 'summary']);

function isPlainJson(v: unknown): boolean {
  return v === null || ['string', 'number', 'boolean'].includes(typeof v) || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
}

/**
 * The schema of one type's `data`. Any other property of the catalogue entry that is plain JSON (a string, number,
 * boolean, null or list of strings) is carried as `x-assay-<name>`, so the published schema grows with the catalogue.
 */
export function eventDataSchema(spec: EventTypeSpec): JsonSchema {
  const extra = Object.entries(spec)
    .filter(([k, v]) => !RENDERED_SPEC_PROPERTIES.has(k) && isPlainJson(v))
    .map(([k, v]) => [`x-assay-${k}`, Array.isArray(v) ? [...(v as string[])] : v]);
  return {
    title: `${spec.type} data`,
    description: spec.summary,
    'x-assay-roles': [...spec.roles],
    'x-assay-maxDataBytes': spec.maxDataBytes,
    ...Object.fromEntries(extra),
    ...objectSchema(spec.schema),
  };
}

function envelopeSchema(): JsonSchema {
  const integer = (description: string): JsonSchema => ({ type: 'integer', minimum: 0, maximum: MAX_SAFE, description });
  return {
    title: 'Event envelope',
    description:
      'One ledger event. Stored and signed as RFC 8785 canonical JSON (UTF-8): the stored bytes must equal the canonical ' +
      'encoding of the object they parse to, so no whitespace outside strings, members in order, numbers as ECMAScript ' +
      'prints them. `data` must follow the schema of its `type` in $defs.',
    'x-assay-maxEnvelopeBytes': MAX_ENVELOPE_BYTES,
    type: 'object',
    properties: {
      type: { type: 'string', pattern: pattern(EVENT_TYPE_RE), enum: [...EVENT_TYPES], description: 'the event type' },
      data: { type: 'object', description: "the event's payload; see the type's schema" },
      stream: { type: 'string', pattern: pattern(STREAM_RE), description: '<category>-<id>' },
      revision: integer('position within the stream, dense from 0'),
      position: integer('position in the whole log, dense from 0; the Merkle leaf index'),
      id: { type: 'string', pattern: pattern(UUID_RE), description: 'lowercase UUID of any version and variant; unique in the log' },
      time: {
        type: 'string',
        pattern: ENVELOPE_TIME_PATTERN,
        description: 'UTC with milliseconds; writers use the real time, readers accept day 01-31 in every month and 24:00:00.000',
      },
      prev: { type: 'string', pattern: pattern(HASH_HEX_RE), description: 'hex SHA-256 of the previous envelope of the stream; 64 zeros at revision 0' },
      signer: {
        type: 'string',
        pattern: pattern(SIGNER_RE),
        'x-assay-maxUtf8Bytes': MAX_SIGNER_BYTES,
        description: '<key name>+<8 hex key id>; the key name is at most 128 UTF-16 code units and 128 UTF-8 bytes',
      },
      sig: { type: 'string', pattern: ENVELOPE_SIG_PATTERN, description: 'standard base64 (padded, unused bits zero) of the 64-byte Ed25519 signature' },
    },
    required: ['type', 'data', 'stream', 'revision', 'position', 'id', 'time', 'prev', 'signer', 'sig'],
    additionalProperties: false,
    allOf: EVENT_TYPES.map((t) => ({
      if: { properties: { type: { const: t } }, required: ['type'] },
      then: { properties: { data: { $ref: `#/$defs/${t}` } } },
    })),
  };
}

/** The whole document: an envelope at the root, the envelope and every type's data schema in $defs. */
export function renderCatalogueJsonSchema(): JsonSchema {
  const defs: JsonSchema = { envelope: envelopeSchema() };
  for (const spec of CATALOGUE.values()) defs[spec.type] = eventDataSchema(spec);
  return {
    $schema: DIALECT,
    $id: EVENTS_SCHEMA_ID,
    title: 'Assay ledger events',
    description:
      'The event envelope and the data schema of every event type, generated from the event catalogue. What JSON ' +
      'Schema cannot express is in x-assay-* annotations: string lengths are counted in UTF-16 code units ' +
      '(x-assay-maxUtf16; maxLength counts code points, so it is looser for characters above U+FFFF), patterns are ' +
      'ECMAScript regular expressions evaluated without the u flag, x-assay-maxUtf8Bytes bounds the UTF-8 bytes of a ' +
      'string, x-assay-maxDataBytes those of the canonical JSON of data, x-assay-maxEnvelopeBytes those of the whole envelope, x-assay-roles names the roles ' +
      "whose keys may sign the type, and any other x-assay-<name> is the catalogue entry's property <name>. Integers are safe integers (|n| <= 2^53 - 1), numbers finite.",
    $ref: '#/$defs/envelope',
    $defs: defs,
  };
}

/** docs/events.schema.json: the schema as 2-space indented JSON and a final newline. */
export function renderCatalogueJsonSchemaText(): string {
  return `${JSON.stringify(renderCatalogueJsonSchema(), null, 2)}\n`;
}
