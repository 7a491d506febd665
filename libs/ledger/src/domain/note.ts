/**
 * C2SP signed-note v1.0.0 (https://c2sp.org/signed-note@v1.0.0).
 *
 *   note      = text "\n" 1*signature
 *   text      = the body: non-empty, ends with "\n"; it may contain empty lines (the text ends at the LAST empty line)
 *   signature = "— " key-name " " base64(key ID (4 bytes, big-endian) || signature bytes) "\n"     ("—" is U+2014)
 *
 * The whole note is UTF-8 without ASCII control characters other than newline. Key names are non-empty and contain
 * no Unicode space and no "+". Signatures cover the text's UTF-8 bytes (final newline included, blank line not).
 * Ed25519 note keys (signature type 0x01): key ID = SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4].
 *
 * Parsing is strict and bounded (hostile input): at most MAX_NOTE_BYTES, MAX_NOTE_TEXT_LINES text lines and
 * MAX_NOTE_SIGNATURES signature lines (the spec asks verifiers to accept at least 16); base64 must be canonical
 * standard base64 with padding; the same key name and ID may sign only once.
 *
 * Verification follows the spec: signatures by unknown keys (name and ID not both known) are ignored; a known key
 * whose signature does not verify rejects the whole note (NOTE_BAD_SIGNATURE). verifyNote returns the known keys
 * that signed; an empty list means no trusted signature, and the caller MUST then reject the note.
 */
import { createHash } from 'node:crypto';
import { AssayError } from '@assay/core';
import { ed25519PublicKeyProblem, nodeEd25519, type Ed25519 } from '../crypto/ed25519';

export const MAX_NOTE_BYTES = 1024 * 1024;
export const MAX_NOTE_TEXT_LINES = 65536;
export const MAX_NOTE_SIGNATURES = 100;
/** Longest key name accepted, in UTF-8 bytes (the envelope `signer` allows the same). */
export const MAX_KEY_NAME_LENGTH = 128;
/** Largest decoded signature (key ID included): leaves room for post-quantum signatures of other key types. */
export const MAX_NOTE_SIGNATURE_BYTES = 8192;

/** Signature type identifier bytes (signed-note "Signature types"). */
export const SIG_TYPE_ED25519 = 0x01;
export const SIG_TYPE_COSIGNATURE_ED25519 = 0x04;

const SIG_PREFIX = '\u2014 ';
const CONTROL = /[\u0000-\u0009\u000b-\u001f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// JavaScript's \s is Unicode White_Space plus U+FEFF, except U+0085 (NEL), which Go's unicode.IsSpace includes.
const SPACE_OR_PLUS = /[\s\u0085+]/u;
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Produces the signature bytes (without the key ID) over the note text. */
export interface NoteSigner {
  name: string;
  /** 4-byte key ID. */
  keyId: Uint8Array;
  sign(text: Uint8Array): Uint8Array;
}

/** Checks the signature bytes (without the key ID) over the note text. */
export interface NoteVerifier {
  name: string;
  /** 4-byte key ID. */
  keyId: Uint8Array;
  verify(text: Uint8Array, signature: Uint8Array): boolean;
}

export interface NoteSignature {
  name: string;
  keyId: Uint8Array;
  /** 8 lowercase hex digits. */
  keyIdHex: string;
  /** The signature bytes after the 4-byte key ID. */
  signature: Uint8Array;
}

export interface ParsedNote {
  /** The signed text: everything before the last blank line, final newline included. */
  body: string;
  /** UTF-8 bytes of `body`: what the signatures cover. */
  bodyBytes: Buffer;
  signatures: NoteSignature[];
}

export interface NoteKeyRef {
  name: string;
  keyId: Uint8Array;
  keyIdHex: string;
}

function noteError(code: string, message: string, details: Record<string, unknown> = {}): AssayError {
  return new AssayError(code, 'invalid_input', message, { details });
}

function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

// ---- key names, key IDs, base64 --------------------------------------------------------------------------------------

/** Why `name` is not a valid signed-note key name, or null. */
export function keyNameProblem(name: unknown): string | null {
  if (typeof name !== 'string' || name.length === 0) return 'a key name must be a non-empty string';
  if (name.length > MAX_KEY_NAME_LENGTH) return `a key name must be at most ${MAX_KEY_NAME_LENGTH} bytes (UTF-8)`;
  if (LONE_SURROGATE.test(name)) return 'a key name must be valid Unicode';
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_KEY_NAME_LENGTH) return `a key name must be at most ${MAX_KEY_NAME_LENGTH} bytes (UTF-8); this one is ${bytes}`;
  if (CONTROL.test(name) || name.includes('\n')) return 'a key name must not contain control characters';
  if (SPACE_OR_PLUS.test(name)) return 'a key name must not contain spaces or "+"';
  return null;
}

export function isValidKeyName(name: unknown): name is string {
  return keyNameProblem(name) === null;
}

/** Throws NOTE_BAD_KEY_NAME naming `what` when the name is invalid. */
export function assertKeyName(name: unknown, what = 'key name'): asserts name is string {
  const problem = keyNameProblem(name);
  if (problem) throw noteError('NOTE_BAD_KEY_NAME', `${what} ${JSON.stringify(name)}: ${problem}`, { name });
}

/** C2SP key ID: SHA-256(name || 0x0A || signature type || public key)[:4]. */
export function noteKeyId(name: string, signatureType: number, publicKey: Uint8Array): Buffer {
  assertKeyName(name);
  if (!Number.isInteger(signatureType) || signatureType < 0 || signatureType > 0xff)
    throw noteError('NOTE_BAD_KEY_TYPE', `signature type must be a byte, got ${String(signatureType)}`);
  return createHash('sha256')
    .update(name, 'utf8')
    .update(Buffer.from([0x0a, signatureType]))
    .update(publicKey)
    .digest()
    .subarray(0, 4);
}

/** Strict standard base64 (RFC 4648 section 4, padded, canonical): null when `s` is not exactly that. */
export function decodeBase64Strict(s: string): Buffer | null {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !BASE64_RE.test(s)) return null;
  const b = Buffer.from(s, 'base64');
  return b.toString('base64') === s ? b : null;
}

// ---- text checks ---------------------------------------------------------------------------------------------------

function utf8Text(input: string | Uint8Array, what: string): string {
  if (typeof input === 'string') {
    if (input.length > MAX_NOTE_BYTES || Buffer.byteLength(input, 'utf8') > MAX_NOTE_BYTES)
      throw noteError('NOTE_TOO_LARGE', `${what} is larger than ${MAX_NOTE_BYTES} bytes`);
    if (LONE_SURROGATE.test(input)) throw noteError('NOTE_BAD_UTF8', `${what} contains a lone UTF-16 surrogate (not UTF-8 encodable)`);
    return input;
  }
  if (!(input instanceof Uint8Array)) throw noteError('NOTE_MALFORMED', `${what} must be a string or bytes`);
  if (input.byteLength > MAX_NOTE_BYTES) throw noteError('NOTE_TOO_LARGE', `${what} is ${input.byteLength} bytes, above the limit of ${MAX_NOTE_BYTES}`);
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input);
  } catch {
    throw noteError('NOTE_BAD_UTF8', `${what} is not valid UTF-8`);
  }
}

function checkControl(text: string, what: string): void {
  const m = CONTROL.exec(text);
  if (m) {
    const line = text.slice(0, m.index).split('\n').length;
    throw noteError(
      'NOTE_CONTROL_CHARACTER',
      `${what} line ${line} contains control character U+${(m[0].codePointAt(0) as number).toString(16).padStart(4, '0').toUpperCase()}; only newline is allowed`,
      { line },
    );
  }
}

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

function checkBody(body: unknown, what: string): string {
  if (typeof body !== 'string') throw noteError('NOTE_MALFORMED', `${what} must be a string`);
  const text = utf8Text(body, what);
  if (text.length === 0 || !text.endsWith('\n')) throw noteError('NOTE_MISSING_FINAL_NEWLINE', `${what} must be non-empty and end with a newline`);
  checkControl(text, what);
  if (countLines(text) > MAX_NOTE_TEXT_LINES) throw noteError('NOTE_TOO_MANY_LINES', `${what} has more than ${MAX_NOTE_TEXT_LINES} lines`);
  return text;
}

// ---- signing -------------------------------------------------------------------------------------------------------

export function formatSignatureLine(name: string, keyId: Uint8Array, signature: Uint8Array): string {
  assertKeyName(name, 'signer name');
  if (!(keyId instanceof Uint8Array) || keyId.byteLength !== 4) throw noteError('NOTE_BAD_KEY_ID', `key ID of ${name} must be 4 bytes`, { name });
  if (!(signature instanceof Uint8Array) || signature.byteLength === 0 || signature.byteLength + 4 > MAX_NOTE_SIGNATURE_BYTES)
    throw noteError('NOTE_BAD_SIGNATURE_LENGTH', `signature by ${name} must be 1..${MAX_NOTE_SIGNATURE_BYTES - 4} bytes`, { name });
  return `${SIG_PREFIX}${name} ${Buffer.concat([keyId, signature]).toString('base64')}\n`;
}

/** Signs `body` (non-empty, ends with a newline) with every signer, in order: the complete note text. */
export function signNote(body: string, signers: readonly NoteSigner[]): string {
  const text = checkBody(body, 'note text');
  if (!Array.isArray(signers) || signers.length === 0) throw noteError('NOTE_NO_SIGNATURES', 'a note needs at least one signer');
  if (signers.length > MAX_NOTE_SIGNATURES) throw noteError('NOTE_TOO_MANY_SIGNATURES', `a note takes at most ${MAX_NOTE_SIGNATURES} signatures`);
  const bytes = Buffer.from(text, 'utf8');
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const s of signers) {
    assertKeyName(s.name, 'signer name');
    if (!(s.keyId instanceof Uint8Array) || s.keyId.byteLength !== 4)
      throw noteError('NOTE_BAD_KEY_ID', `key ID of signer ${s.name} must be 4 bytes`, { name: s.name });
    const id = `${s.name}+${hex(s.keyId)}`;
    if (seen.has(id)) throw noteError('NOTE_DUPLICATE_SIGNATURE', `signer ${id} is given twice`, { signer: id });
    seen.add(id);
    lines.push(formatSignatureLine(s.name, s.keyId, s.sign(bytes)));
  }
  const note = `${text}\n${lines.join('')}`;
  if (Buffer.byteLength(note, 'utf8') > MAX_NOTE_BYTES) throw noteError('NOTE_TOO_LARGE', `the signed note would be larger than ${MAX_NOTE_BYTES} bytes`);
  return note;
}

/** Adds signature lines (for example a cosignature, see cosignature.ts) to an already signed note. */
export function addSignatures(note: string | Uint8Array, signers: readonly NoteSigner[]): string {
  const parsed = parseNote(note);
  const extra = signNote(parsed.body, signers).slice(parsed.body.length + 1);
  const merged = `${parsed.body}\n${parsed.signatures.map((s) => formatSignatureLine(s.name, s.keyId, s.signature)).join('')}${extra}`;
  parseNote(merged); // duplicate and count checks over the whole set
  return merged;
}

// ---- parsing -------------------------------------------------------------------------------------------------------

/** Strictly parses a signed note (string or UTF-8 bytes). Does not verify anything. */
export function parseNote(note: string | Uint8Array): ParsedNote {
  const text = utf8Text(note, 'note');
  checkControl(text, 'note');
  const split = text.lastIndexOf('\n\n');
  if (split === -1) throw noteError('NOTE_MISSING_BLANK_LINE', 'note has no blank line between the text and the signatures');
  const body = text.slice(0, split + 1);
  const sigBlock = text.slice(split + 2);
  if (countLines(body) > MAX_NOTE_TEXT_LINES) throw noteError('NOTE_TOO_MANY_LINES', `note text has more than ${MAX_NOTE_TEXT_LINES} lines`);
  if (sigBlock.length === 0) throw noteError('NOTE_NO_SIGNATURES', 'note has no signature lines after the blank line');
  if (!sigBlock.endsWith('\n')) throw noteError('NOTE_MISSING_FINAL_NEWLINE', 'the last signature line of the note does not end with a newline');
  const lines = sigBlock.slice(0, -1).split('\n');
  if (lines.length > MAX_NOTE_SIGNATURES)
    throw noteError('NOTE_TOO_MANY_SIGNATURES', `note has ${lines.length} signature lines, more than ${MAX_NOTE_SIGNATURES}`);
  const seen = new Set<string>();
  const signatures: NoteSignature[] = [];
  lines.forEach((line, i) => {
    const where = `signature line ${i + 1}`;
    const bad = (what: string): never => {
      throw noteError('NOTE_MALFORMED_SIGNATURE', `${where}: ${what}`, { line: i + 1 });
    };
    if (!line.startsWith(SIG_PREFIX)) bad('must start with an em dash (U+2014) and a space');
    const rest = line.slice(SIG_PREFIX.length);
    const space = rest.indexOf(' ');
    if (space === -1) bad('must be "— <key name> <base64 signature>"');
    const name = rest.slice(0, space);
    const b64 = rest.slice(space + 1);
    const nameProblem = keyNameProblem(name);
    if (nameProblem) bad(`key name ${JSON.stringify(name)}: ${nameProblem}`);
    if (b64.length > Math.ceil(MAX_NOTE_SIGNATURE_BYTES / 3) * 4) bad(`signature is longer than ${MAX_NOTE_SIGNATURE_BYTES} bytes`);
    const raw = decodeBase64Strict(b64);
    if (!raw) bad('signature is not canonical standard base64');
    const bytes = raw as Buffer;
    if (bytes.byteLength < 5) bad('signature must hold a 4-byte key ID and at least one signature byte');
    const keyId = Buffer.from(bytes.subarray(0, 4));
    const keyIdHex = keyId.toString('hex');
    const id = `${name}+${keyIdHex}`;
    if (seen.has(id)) throw noteError('NOTE_DUPLICATE_SIGNATURE', `${where}: key ${id} signs the note more than once`, { line: i + 1, signer: id });
    seen.add(id);
    signatures.push({ name, keyId, keyIdHex, signature: Buffer.from(bytes.subarray(4)) });
  });
  return { body, bodyBytes: Buffer.from(body, 'utf8'), signatures };
}

// ---- verification --------------------------------------------------------------------------------------------------

/**
 * Verifies a note against known keys: every signature whose key name and ID both match a verifier is checked
 * (a failure throws NOTE_BAD_SIGNATURE, kind integrity); others are ignored. Returns the keys that signed, in note
 * order. An empty result means no trusted key signed: reject the note.
 */
export function verifyNote(note: string | Uint8Array | ParsedNote, verifiers: readonly NoteVerifier[]): NoteKeyRef[] {
  const parsed = typeof note === 'object' && !(note instanceof Uint8Array) ? note : parseNote(note);
  const known = new Map<string, NoteVerifier>();
  for (const v of verifiers) {
    assertKeyName(v.name, 'verifier name');
    if (!(v.keyId instanceof Uint8Array) || v.keyId.byteLength !== 4)
      throw noteError('NOTE_BAD_KEY_ID', `key ID of verifier ${v.name} must be 4 bytes`, { name: v.name });
    const id = `${v.name}+${hex(v.keyId)}`;
    if (known.has(id)) throw noteError('NOTE_DUPLICATE_VERIFIER', `verifier ${id} is given twice`, { signer: id });
    known.set(id, v);
  }
  const signedBy: NoteKeyRef[] = [];
  for (const s of parsed.signatures) {
    const id = `${s.name}+${s.keyIdHex}`;
    const v = known.get(id);
    if (!v) continue;
    let ok = false;
    try {
      ok = v.verify(parsed.bodyBytes, s.signature) === true;
    } catch {
      ok = false;
    }
    if (!ok)
      throw new AssayError('NOTE_BAD_SIGNATURE', 'integrity', `the signature by known key ${id} does not verify`, {
        details: { signer: id },
      });
    signedBy.push({ name: s.name, keyId: Buffer.from(s.keyId), keyIdHex: s.keyIdHex });
  }
  return signedBy;
}

// ---- Ed25519 note keys (signature type 0x01) ------------------------------------------------------------------------

/** A signer for an Ed25519 note key. The seed stays inside the closure. */
export function ed25519NoteSigner(name: string, seed: Uint8Array, impl: Ed25519 = nodeEd25519): NoteSigner {
  const publicKey = impl.publicKeyFromSeed(seed);
  const secret = Buffer.from(seed);
  return { name, keyId: noteKeyId(name, SIG_TYPE_ED25519, publicKey), sign: (text) => impl.sign(secret, text) };
}

/** A verifier for an Ed25519 note key (strict RFC 8032 verification; the signature must be 64 bytes). */
export function ed25519NoteVerifier(name: string, publicKey: Uint8Array, impl: Ed25519 = nodeEd25519): NoteVerifier {
  const problem = ed25519PublicKeyProblem(publicKey);
  if (problem) throw noteError('NOTE_BAD_PUBLIC_KEY', `public key of ${JSON.stringify(name)}: ${problem}`, { name });
  const pub = Buffer.from(publicKey);
  return {
    name,
    keyId: noteKeyId(name, SIG_TYPE_ED25519, pub),
    verify: (text, signature) => signature.byteLength === 64 && impl.verify(pub, text, signature),
  };
}
