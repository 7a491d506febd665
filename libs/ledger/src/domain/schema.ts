/**
 * A small, strict schema language for event data. Every event type in the catalogue declares one; data with an
 * unknown field, a missing required field or a value of the wrong shape is refused, naming the field path.
 */
import type { JsonValue } from './json';

export type FieldSpec =
  /** `min`/`max` count UTF-16 code units (JavaScript's length); `maxBytes`, when given, bounds the UTF-8 bytes too. */
  | { kind: 'string'; optional?: boolean; nullable?: boolean; min?: number; max: number; maxBytes?: number; pattern?: RegExp; enum?: readonly string[] }
  | { kind: 'integer'; optional?: boolean; nullable?: boolean; min?: number; max?: number }
  | { kind: 'number'; optional?: boolean; nullable?: boolean; min?: number; max?: number; exactly?: number }
  | { kind: 'boolean'; optional?: boolean; nullable?: boolean }
  | { kind: 'object'; optional?: boolean; nullable?: boolean; fields: Readonly<Record<string, FieldSpec>> }
  /** A JSON object whose values all follow `values` (e.g. a map of metric name to finite number). */
  | { kind: 'map'; optional?: boolean; nullable?: boolean; values: FieldSpec; maxKeys: number; keyPattern?: RegExp }
  | { kind: 'array'; optional?: boolean; nullable?: boolean; of: FieldSpec; max: number }
  /** Any JSON object (free-form description such as task metadata), bounded by the envelope size. */
  | { kind: 'freeObject'; optional?: boolean; nullable?: boolean };

export type ObjectSchema = Readonly<Record<string, FieldSpec>>;

function describe(spec: FieldSpec): string {
  switch (spec.kind) {
    case 'string':
      return spec.enum
        ? `one of ${spec.enum.map((e) => JSON.stringify(e)).join(', ')}`
        : `a string of at most ${spec.max} characters${spec.maxBytes !== undefined ? ` and ${spec.maxBytes} UTF-8 bytes` : ''}${spec.pattern ? ` matching ${spec.pattern}` : ''}`;
    case 'integer':
      return `an integer${spec.min !== undefined ? ` >= ${spec.min}` : ''}${spec.max !== undefined ? ` <= ${spec.max}` : ''}`;
    case 'number':
      return spec.exactly !== undefined ? `exactly ${spec.exactly}` : 'a finite number';
    case 'boolean':
      return 'a boolean';
    case 'object':
    case 'freeObject':
      return 'an object';
    case 'map':
      return `an object of at most ${spec.maxKeys} entries`;
    case 'array':
      return `an array of at most ${spec.max} items`;
  }
}

/**
 * A field's path, built only when a problem is reported or a container is entered: `parent` and `key` give
 * `parent.key` (or `parent[key]` for an array index). Checking valid data, the common case, then builds no strings.
 */
function join(parent: string, key: string | number): string {
  return typeof key === 'number' ? `${parent}[${key}]` : `${parent}.${key}`;
}

/** Returns the first problem as `<path>: <what was expected>`, or null when the value conforms. */
export function checkValue(spec: FieldSpec, v: JsonValue | undefined, path: string): string | null {
  return check(spec, v, path, null);
}

function check(spec: FieldSpec, v: JsonValue | undefined, parent: string, key: string | number | null): string | null {
  const path = (): string => (key === null ? parent : join(parent, key));
  if (v === undefined) return spec.optional ? null : `${path()}: is required (${describe(spec)})`;
  if (v === null) return spec.nullable ? null : `${path()}: must be ${describe(spec)}, not null`;
  switch (spec.kind) {
    case 'string':
      if (typeof v !== 'string') return `${path()}: must be ${describe(spec)}`;
      if (v.length > spec.max || v.length < (spec.min ?? 0) || (spec.pattern && !spec.pattern.test(v)) || (spec.enum && !spec.enum.includes(v)))
        return `${path()}: must be ${describe(spec)}`;
      if (spec.maxBytes !== undefined && Buffer.byteLength(v, 'utf8') > spec.maxBytes) return `${path()}: must be ${describe(spec)}`;
      return null;
    case 'integer':
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || (spec.min !== undefined && v < spec.min) || (spec.max !== undefined && v > spec.max))
        return `${path()}: must be ${describe(spec)}`;
      return null;
    case 'number':
      if (
        typeof v !== 'number' ||
        !Number.isFinite(v) ||
        (spec.exactly !== undefined && v !== spec.exactly) ||
        (spec.min !== undefined && v < spec.min) ||
        (spec.max !== undefined && v > spec.max)
      )
        return `${path()}: must be ${describe(spec)}`;
      return null;
    case 'boolean':
      return typeof v === 'boolean' ? null : `${path()}: must be a boolean`;
    case 'object':
      if (typeof v !== 'object' || Array.isArray(v)) return `${path()}: must be an object`;
      return checkObject(spec.fields, v as Record<string, JsonValue>, path());
    case 'freeObject':
      return typeof v === 'object' && !Array.isArray(v) ? null : `${path()}: must be an object`;
    case 'map': {
      if (typeof v !== 'object' || Array.isArray(v)) return `${path()}: must be an object`;
      const obj = v as Record<string, JsonValue>;
      let n = 0;
      for (const _k in obj) n++;
      if (n > spec.maxKeys) return `${path()}: must have at most ${spec.maxKeys} entries`;
      const here = path();
      for (const k in obj) {
        if (spec.keyPattern && !spec.keyPattern.test(k)) return `${here}: key ${JSON.stringify(k)} must match ${spec.keyPattern}`;
        const p = check(spec.values, obj[k], here, k);
        if (p) return p;
      }
      return null;
    }
    case 'array': {
      if (!Array.isArray(v)) return `${path()}: must be ${describe(spec)}`;
      if (v.length > spec.max) return `${path()}: must have at most ${spec.max} items`;
      const here = path();
      for (let i = 0; i < v.length; i++) {
        const p = check(spec.of, v[i], here, i);
        if (p) return p;
      }
      return null;
    }
  }
}

/** Each schema's fields as a list, made once (schemas are module constants). */
const fieldLists = new WeakMap<ObjectSchema, ReadonlyArray<readonly [string, FieldSpec]>>();

export function checkObject(schema: ObjectSchema, obj: Record<string, JsonValue>, path = 'data'): string | null {
  for (const k in obj) if (!Object.prototype.hasOwnProperty.call(schema, k)) return `${path}.${k}: is not a field of this event type`;
  let fields = fieldLists.get(schema);
  if (!fields) {
    fields = Object.entries(schema);
    fieldLists.set(schema, fields);
  }
  for (const [k, spec] of fields) {
    const p = check(spec, obj[k], path, k);
    if (p) return p;
  }
  return null;
}
