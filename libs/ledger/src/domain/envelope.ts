/**
 * The event envelope (docs/formats.md, "Event envelope").
 *
 *   signing bytes = JCS(envelope without `sig`)            (UTF-8)
 *   sig           = base64(Ed25519(signer key, signing bytes))
 *   wire bytes    = JCS(envelope with `sig`)                (what the store keeps, byte for byte)
 *   envelope hash = SHA-256(wire bytes)                     (`prev` of the next event in the stream, hex)
 *   Merkle leaf   = SHA-256(0x00 || wire bytes)             (RFC 9162 leaf hash, merkle.ts leafHash)
 */
import { hash } from 'node:crypto';
import { AssayError } from '@assay/core';
import { canonicalJson } from './jcs';
import { isJsonObject, type JsonObject } from './json';

export const ZERO_HASH = '0'.repeat(64);
/** Upper bound on one envelope's wire bytes. Larger payloads belong in the snapshot store, referenced by CID. */
export const MAX_ENVELOPE_BYTES = 1024 * 1024;

export const EVENT_TYPE_RE = /^[A-Z][A-Za-z0-9]{0,63}$/;
/** `<category>-<id>`: no dash inside the category; the id may contain dashes (UUIDs). */
export const STREAM_RE = /^([a-z][a-z0-9]{0,31})-([A-Za-z0-9][A-Za-z0-9._:-]{0,127})$/;
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const HASH_HEX_RE = /^[0-9a-f]{64}$/;
/**
 * A signer is a C2SP signed-note key name and key id: `<name>+<8 hex digits>`. The pattern counts UTF-16 code units;
 * the name is also at most 128 UTF-8 bytes (MAX_SIGNER_BYTES for the whole signer, checked with it).
 */
export const SIGNER_RE = /^[^\s+]{1,128}\+[0-9a-f]{8}$/;
/** 128 bytes of key name, "+", 8 hex digits. */
export const MAX_SIGNER_BYTES = 128 + 9;
const BASE64_ALPHABET = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/') BASE64_ALPHABET[c.charCodeAt(0)] = 1;

/**
 * 64 bytes in standard, padded base64: 86 alphabet characters and `==`, and canonical: the last character carries 2
 * bits of data and 4 unused bits, which must be zero (A, Q, g or w), so that one signature has exactly one text.
 */
export function isCanonicalSigBase64(s: string): boolean {
  if (s.length !== 88 || s.charCodeAt(86) !== 61 || s.charCodeAt(87) !== 61) return false;
  for (let i = 0; i < 86; i++) {
    const c = s.charCodeAt(i);
    if (c > 127 || BASE64_ALPHABET[c] !== 1) return false;
  }
  const last = s.charCodeAt(85);
  return last === 65 || last === 81 || last === 103 || last === 119;
}

export interface UnsignedEnvelope {
  type: string;
  data: JsonObject;
  stream: string;
  revision: number;
  position: number;
  id: string;
  time: string;
  prev: string;
  signer: string;
}

export interface Envelope extends UnsignedEnvelope {
  sig: string;
}

export const ENVELOPE_FIELDS = ['data', 'id', 'position', 'prev', 'revision', 'sig', 'signer', 'stream', 'time', 'type'];
const FIELD_SET: ReadonlySet<string> = new Set(ENVELOPE_FIELDS);

export function sha256(bytes: Uint8Array): Buffer {
  return hash('sha256', bytes, 'buffer');
}

/**
 * The canonical text of an envelope, given the canonical text of its data: the members in RFC 8785 order
 * (data, id, position, prev, revision, sig, signer, stream, time, type). Equal to canonicalJson of the whole object
 * (a unit test holds them together); it exists so a writer canonicalizes the data once, not once per encoding.
 */
export function envelopeText(u: Omit<UnsignedEnvelope, 'data'>, dataJson: string, sig?: string): string {
  const q = (v: string): string => canonicalJson(v);
  if (!Number.isSafeInteger(u.position) || !Number.isSafeInteger(u.revision))
    throw new AssayError('ENVELOPE_MALFORMED', 'invalid_input', 'position and revision must be safe integers');
  return (
    `{"data":${dataJson},"id":${q(u.id)},"position":${u.position},"prev":${q(u.prev)},"revision":${u.revision},` +
    `${sig === undefined ? '' : `"sig":${q(sig)},`}"signer":${q(u.signer)},"stream":${q(u.stream)},"time":${q(u.time)},"type":${q(u.type)}}`
  );
}

export function signingBytes(u: UnsignedEnvelope): Buffer {
  return Buffer.from(envelopeText(u, canonicalJson(u.data)), 'utf8');
}

export function wireBytes(e: Envelope): Buffer {
  return Buffer.from(envelopeText(e, canonicalJson(e.data), e.sig), 'utf8');
}

export function envelopeHash(wire: Uint8Array): Buffer {
  return sha256(wire);
}

function bad(code: string, message: string, details: Record<string, unknown>): AssayError {
  return new AssayError(code, 'integrity', message, { details });
}

/** HASH_HEX_RE.test(s) without a regular expression (this runs once per event on the verification hot path). */
function isHashHex(s: string): boolean {
  if (s.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/** Field-level checks shared by the parser and by code that builds envelopes. Returns a problem or null. */
export function envelopeFieldProblem(e: Record<string, unknown>, requireSig: boolean): string | null {
  for (const k in e) if (!FIELD_SET.has(k) || (!requireSig && k === 'sig')) return `unexpected field "${k}"`;
  for (const k of ENVELOPE_FIELDS) if ((requireSig || k !== 'sig') && !(k in e)) return `missing field "${k}"`;
  if (typeof e.type !== 'string' || !EVENT_TYPE_RE.test(e.type)) return 'field "type" must match ' + EVENT_TYPE_RE;
  if (!isJsonObject(e.data)) return 'field "data" must be a JSON object';
  if (typeof e.stream !== 'string' || !STREAM_RE.test(e.stream)) return 'field "stream" must be <category>-<id>';
  if (!Number.isSafeInteger(e.revision) || (e.revision as number) < 0) return 'field "revision" must be an integer >= 0';
  if (!Number.isSafeInteger(e.position) || (e.position as number) < 0) return 'field "position" must be an integer >= 0';
  if (typeof e.id !== 'string' || !UUID_RE.test(e.id)) return 'field "id" must be a lowercase UUID';
  if (typeof e.time !== 'string' || !TIME_RE.test(e.time) || Number.isNaN(Date.parse(e.time)))
    return 'field "time" must be RFC 3339 UTC with milliseconds (YYYY-MM-DDTHH:MM:SS.sssZ)';
  if (typeof e.prev !== 'string' || !isHashHex(e.prev)) return 'field "prev" must be 64 lowercase hex digits';
  if (typeof e.signer !== 'string' || !SIGNER_RE.test(e.signer) || Buffer.byteLength(e.signer, 'utf8') > MAX_SIGNER_BYTES)
    return 'field "signer" must be <key name of at most 128 UTF-8 bytes>+<8 hex>';
  if (requireSig && (typeof e.sig !== 'string' || !isCanonicalSigBase64(e.sig)))
    return 'field "sig" must be standard base64 of 64 bytes (88 characters, padded, unused bits zero)';
  return null;
}

export interface ParsedEnvelope {
  envelope: Envelope;
  /** The exact bytes the signature covers. */
  signing: Buffer;
  signature: Buffer;
  /** Size of the canonical `data` member's value in bytes. */
  dataBytes: number;
}

/**
 * canonicalJson(env) for an envelope whose fields passed envelopeFieldProblem, at a third of the cost: only `data` and
 * `signer` can hold characters that need escaping; id, prev, time, type, stream and sig match patterns of ASCII
 * letters, digits and `-.:_+/=`, whose canonical JSON string is the text in quotes, and position and revision are
 * non-negative safe integers, whose canonical number is their decimal text. A unit test holds it equal to
 * canonicalJson(env).
 */
export function canonicalEnvelopeText(env: Envelope, text?: string): string {
  return (
    `{"data":${text === undefined || text.includes('\\u') ? canonicalJson(env.data) : canonicalParsedJson(env.data)},"id":"${env.id}","position":${env.position},"prev":"${env.prev}","revision":${env.revision},` +
    `"sig":"${env.sig}","signer":${canonicalJson(env.signer)},"stream":"${env.stream}","time":"${env.time}","type":"${env.type}"}`
  );
}

/** True when every object in the value has its member names in RFC 8785 order (UTF-16 code units, no repeats). */
function namesSorted(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return true;
  if (Array.isArray(v)) {
    for (const x of v) if (!namesSorted(x)) return false;
    return true;
  }
  let last: string | null = null;
  for (const k in v) {
    if (last !== null && !(last < k)) return false;
    last = k;
    if (!namesSorted((v as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/**
 * canonicalJson of a value just produced by JSON.parse from text that holds no `\u` escape, at a fraction of the cost:
 * RFC 8785 serializes strings and numbers exactly as JSON.stringify does, so when every object's members are already in
 * canonical order the two outputs are the same. Without `\u` escapes in the text no string can hold a lone surrogate
 * (UTF-8 decoding never yields one), which is the one input JSON.stringify writes and RFC 8785 refuses. Otherwise, or
 * when some object's members are out of order (JavaScript puts integer-like names first), it falls back to
 * canonicalJson, so the result is always canonicalJson(v).
 */
function canonicalParsedJson(v: JsonObject): string {
  return namesSorted(v) ? JSON.stringify(v) : canonicalJson(v);
}

/**
 * The object `text` encodes when `text` is already its RFC 8785 canonical form in the common shape (no `\u` escape,
 * every object's names in order), else null; null says nothing about validity, only that the general parser must
 * decide. For the fast path of verification, which has the rest of the envelope checked elsewhere.
 */
export function parseCommonCanonicalObject(text: string): JsonObject | null {
  if (text.includes('\\u')) return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  return isJsonObject(v) && namesSorted(v) && JSON.stringify(v) === text ? v : null;
}

/**
 * Parses stored or received wire bytes, hostile by default: size bound, strict UTF-8 JSON, exact field set and
 * types, and the bytes must already be canonical (so there is exactly one byte string per envelope and a parser
 * that keeps the first of two duplicate names cannot be shown a different event than one that keeps the last).
 *
 * Because the bytes are canonical, the signing bytes are the wire bytes without the `"sig":"…",` member: the
 * canonical form of an object without one member is the canonical form with that member cut out. The parser builds
 * the canonical text in three parts (before the sig member, the member, after it), compares it with the bytes, and
 * cuts the signing bytes at the parts' byte lengths.
 */
export function parseEnvelope(wire: Uint8Array, where: Record<string, unknown> = {}): ParsedEnvelope {
  if (wire.byteLength > MAX_ENVELOPE_BYTES)
    throw bad('ENVELOPE_TOO_LARGE', `envelope is ${wire.byteLength} bytes, above the limit of ${MAX_ENVELOPE_BYTES}`, where);
  const buf = Buffer.isBuffer(wire) ? wire : Buffer.from(wire.buffer, wire.byteOffset, wire.byteLength);
  const text = buf.toString('utf8');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw bad('ENVELOPE_MALFORMED', `envelope is not valid JSON: ${(e as Error).message}`, where);
  }
  if (!isJsonObject(raw)) throw bad('ENVELOPE_MALFORMED', 'envelope is not a JSON object', where);
  const problem = envelopeFieldProblem(raw, true);
  if (problem) throw bad('ENVELOPE_MALFORMED', `envelope ${problem}`, where);
  const env = raw as unknown as Envelope;
  // The canonical text in three parts (see canonicalEnvelopeText): everything before the sig member, the sig
  // member, everything after it. Signing bytes are the first and the last part.
  let dataJson: string;
  let head: string;
  let tail: string;
  try {
    // Without \u escapes no string can hold a lone surrogate, and JSON.stringify writes RFC 8785's strings.
    const escapes = text.includes('\\u');
    dataJson = escapes ? canonicalJson(env.data) : canonicalParsedJson(env.data);
    head = `{"data":${dataJson},"id":"${env.id}","position":${env.position},"prev":"${env.prev}","revision":${env.revision},`;
    tail = `"signer":${escapes ? canonicalJson(env.signer) : JSON.stringify(env.signer)},"stream":"${env.stream}","time":"${env.time}","type":"${env.type}"}`;
  } catch (e) {
    throw bad('ENVELOPE_NOT_CANONICAL', `envelope cannot be canonicalized: ${(e as Error).message}`, where);
  }
  const canonical = `${head}"sig":"${env.sig}",${tail}`;
  if (canonical !== text || Buffer.byteLength(canonical) !== buf.byteLength)
    throw bad('ENVELOPE_NOT_CANONICAL', 'envelope bytes are not in RFC 8785 canonical form', where);
  // Valid UTF-8 of `text` from here on; all-ASCII text has as many bytes as UTF-16 units.
  const ascii = text.length === buf.byteLength;
  const headBytes = ascii ? head.length : Buffer.byteLength(head);
  const tailBytes = ascii ? tail.length : Buffer.byteLength(tail);
  const signing = Buffer.allocUnsafe(headBytes + tailBytes);
  buf.copy(signing, 0, 0, headBytes);
  buf.copy(signing, headBytes, buf.byteLength - tailBytes);
  const dataBytes = ascii ? dataJson.length : Buffer.byteLength(dataJson);
  return { envelope: env, signing, signature: Buffer.from(env.sig, 'base64'), dataBytes };
}
