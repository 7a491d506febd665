/**
 * The event envelope (docs/formats.md, "Event envelope").
 *
 *   signing bytes = JCS(envelope without `sig`)            (UTF-8)
 *   sig           = base64(Ed25519(signer key, signing bytes))
 *   wire bytes    = JCS(envelope with `sig`)                (what the store keeps, byte for byte)
 *   envelope hash = SHA-256(wire bytes)                     (`prev` of the next event in the stream, hex)
 *   Merkle leaf   = SHA-256(0x00 || wire bytes)             (RFC 9162 leaf hash, merkle.ts leafHash)
 */
import { createHash } from 'node:crypto';
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
/** A signer is a C2SP signed-note key name and key id: `<name>+<8 hex digits>`. */
export const SIGNER_RE = /^[^\s+]{1,128}\+[0-9a-f]{8}$/;
const SIG_B64_RE = /^[A-Za-z0-9+/]{86}==$/;

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

export function sha256(bytes: Uint8Array): Buffer {
  return createHash('sha256').update(bytes).digest();
}

export function signingBytes(u: UnsignedEnvelope): Buffer {
  const { type, data, stream, revision, position, id, time, prev, signer } = u;
  return Buffer.from(canonicalJson({ type, data, stream, revision, position, id, time, prev, signer }), 'utf8');
}

export function wireBytes(e: Envelope): Buffer {
  const { type, data, stream, revision, position, id, time, prev, signer, sig } = e;
  return Buffer.from(canonicalJson({ type, data, stream, revision, position, id, time, prev, signer, sig }), 'utf8');
}

export function envelopeHash(wire: Uint8Array): Buffer {
  return sha256(wire);
}

function bad(code: string, message: string, details: Record<string, unknown>): AssayError {
  return new AssayError(code, 'integrity', message, { details });
}

/** Field-level checks shared by the parser and by code that builds envelopes. Returns a problem or null. */
export function envelopeFieldProblem(e: Record<string, unknown>, requireSig: boolean): string | null {
  const keys = Object.keys(e);
  const expected = requireSig ? ENVELOPE_FIELDS : ENVELOPE_FIELDS.filter((f) => f !== 'sig');
  for (const k of keys) if (!expected.includes(k)) return `unexpected field "${k}"`;
  for (const k of expected) if (!(k in e)) return `missing field "${k}"`;
  if (typeof e.type !== 'string' || !EVENT_TYPE_RE.test(e.type)) return 'field "type" must match ' + EVENT_TYPE_RE;
  if (!isJsonObject(e.data)) return 'field "data" must be a JSON object';
  if (typeof e.stream !== 'string' || !STREAM_RE.test(e.stream)) return 'field "stream" must be <category>-<id>';
  if (!Number.isSafeInteger(e.revision) || (e.revision as number) < 0) return 'field "revision" must be an integer >= 0';
  if (!Number.isSafeInteger(e.position) || (e.position as number) < 0) return 'field "position" must be an integer >= 0';
  if (typeof e.id !== 'string' || !UUID_RE.test(e.id)) return 'field "id" must be a lowercase UUID';
  if (typeof e.time !== 'string' || !TIME_RE.test(e.time) || Number.isNaN(Date.parse(e.time)))
    return 'field "time" must be RFC 3339 UTC with milliseconds (YYYY-MM-DDTHH:MM:SS.sssZ)';
  if (typeof e.prev !== 'string' || !HASH_HEX_RE.test(e.prev)) return 'field "prev" must be 64 lowercase hex digits';
  if (typeof e.signer !== 'string' || !SIGNER_RE.test(e.signer)) return 'field "signer" must be <key name>+<8 hex>';
  if (requireSig && (typeof e.sig !== 'string' || !SIG_B64_RE.test(e.sig)))
    return 'field "sig" must be standard base64 of 64 bytes';
  return null;
}

export interface ParsedEnvelope {
  envelope: Envelope;
  /** The exact bytes the signature covers. */
  signing: Buffer;
  signature: Buffer;
}

/**
 * Parses stored or received wire bytes, hostile by default: size bound, strict UTF-8 JSON, exact field set and
 * types, and the bytes must already be canonical (so there is exactly one byte string per envelope and a parser
 * that keeps the first of two duplicate names cannot be shown a different event than one that keeps the last).
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
  let canonical: string;
  try {
    canonical = canonicalJson(env);
  } catch (e) {
    throw bad('ENVELOPE_NOT_CANONICAL', `envelope cannot be canonicalized: ${(e as Error).message}`, where);
  }
  if (canonical !== text || Buffer.byteLength(canonical) !== buf.byteLength)
    throw bad('ENVELOPE_NOT_CANONICAL', 'envelope bytes are not in RFC 8785 canonical form', where);
  return { envelope: env, signing: signingBytes(env), signature: Buffer.from(env.sig, 'base64') };
}
