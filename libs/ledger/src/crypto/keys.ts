/**
 * Signing keys: names, key IDs, the C2SP signed-note key texts, and key files.
 *
 * - Name: `assay-<role>-<8 random hex>` unless given; any C2SP key name is accepted (non-empty, no space, no "+").
 * - Key ID: SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4]; the envelope `signer` is `<name>+<8 hex key ID>`.
 * - Verifier key text (golang.org/x/mod/sumdb/note): `<name>+<8 hex key ID>+<base64(0x01 || public key)>`
 *   (type 0x04, a tlog-cosignature key, is also understood; its key ID uses 0x04).
 * - Private key text: `PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x01 || 32-byte seed)>` (the ID is of the public key).
 *   Key texts are parsed strictly: lowercase hex, canonical padded base64, exact lengths, a key ID that matches.
 *
 * Files, for key pair `<name>`:
 * - `<name>.key`, mode 0600, created exclusively (never overwritten): one JSON object and a newline,
 *     {"format":"assay-signing-key/v1","role":"<role>","name":"<name>","privateKey":"PRIVATE+KEY+..."}
 *   JSON so that the role travels with the key; the private key itself is the standard note text, so other
 *   signed-note tools can use it.
 * - `<name>.pub`, mode 0644: the verifier key text and a newline.
 * readPrivateKey refuses a symlink, anything but a regular file, and a file that group or others may read or write.
 */
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { AssayError, type ErrorKind } from '@assay/core';
import { ROLES, isRole, type Role } from '../domain/roles';
import type { SigningKey } from '../domain/signing-key';
import {
  assertKeyName,
  decodeBase64Strict,
  ed25519NoteSigner,
  ed25519NoteVerifier,
  keyNameProblem,
  noteKeyId,
  SIG_TYPE_COSIGNATURE_ED25519,
  SIG_TYPE_ED25519,
  type NoteSigner,
  type NoteVerifier,
} from '../domain/note';
import { ed25519PublicKeyProblem, nodeEd25519, type Ed25519 } from './ed25519';

export { ROLES, isRole, type Role };

export const PRIVATE_KEY_PREFIX = 'PRIVATE+KEY+';
export const KEY_FILE_FORMAT = 'assay-signing-key/v1';
export const MAX_KEY_TEXT_LENGTH = 512;
export const MAX_KEY_FILE_BYTES = 4096;

export type KeyType = typeof SIG_TYPE_ED25519 | typeof SIG_TYPE_COSIGNATURE_ED25519;

export interface VerifierKey {
  name: string;
  /** Signature type byte: 0x01 (note signatures) or 0x04 (tlog cosignatures). */
  type: KeyType;
  keyId: Uint8Array;
  keyIdHex: string;
  /** `<name>+<keyIdHex>` */
  signer: string;
  publicKey: Uint8Array;
  /** The verifier key text. */
  text: string;
}

export interface PrivateKey {
  name: string;
  keyId: Uint8Array;
  keyIdHex: string;
  signer: string;
  seed: Uint8Array;
  publicKey: Uint8Array;
}

export interface KeyPair extends PrivateKey {
  role: Role;
  /** Verifier key text. */
  publicKeyText: string;
  /** Private key text (secret). */
  privateKeyText: string;
}

/** Random bytes source, injectable for tests. */
export type RandomBytes = (n: number) => Uint8Array;

function keyError(code: string, message: string, details: Record<string, unknown> = {}, kind: ErrorKind = 'invalid_input', cause?: unknown): AssayError {
  return new AssayError(code, kind, message, cause === undefined ? { details } : { details, cause });
}

const HEX8_RE = /^[0-9a-f]{8}$/;

function toHex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** C2SP key ID of an Ed25519 note key (type 0x01) or cosigner key (type 0x04). */
export function keyIdOf(name: string, publicKey: Uint8Array, type: KeyType = SIG_TYPE_ED25519): Buffer {
  return noteKeyId(name, type, publicKey);
}

/** The envelope `signer`: `<name>+<8 hex key ID>`. */
export function signerOf(name: string, keyId: Uint8Array): string {
  return `${name}+${toHex(keyId)}`;
}

function checkPublicKey(publicKey: Uint8Array, what: string): void {
  const problem = ed25519PublicKeyProblem(publicKey);
  if (problem) throw keyError('KEY_BAD_PUBLIC_KEY', `${what}: ${problem}`);
}

export function formatVerifierKey(name: string, publicKey: Uint8Array, type: KeyType = SIG_TYPE_ED25519): string {
  assertKeyName(name);
  checkPublicKey(publicKey, `public key of ${name}`);
  const id = keyIdOf(name, publicKey, type);
  return `${name}+${toHex(id)}+${Buffer.concat([Buffer.from([type]), publicKey]).toString('base64')}`;
}

export function formatPrivateKey(name: string, seed: Uint8Array, impl: Ed25519 = nodeEd25519): string {
  assertKeyName(name);
  if (!(seed instanceof Uint8Array) || seed.byteLength !== 32) throw keyError('KEY_BAD_SEED', 'an Ed25519 seed must be 32 bytes');
  const id = keyIdOf(name, impl.publicKeyFromSeed(seed));
  return `${PRIVATE_KEY_PREFIX}${name}+${toHex(id)}+${Buffer.concat([Buffer.from([SIG_TYPE_ED25519]), seed]).toString('base64')}`;
}

/** Splits `<name>+<hex8>+<base64>` (the base64 may itself contain "+"). */
function splitKeyText(text: string, what: string): { name: string; idHex: string; b64: string } {
  const bad = (code: string, msg: string): never => {
    throw keyError(code, `${what}: ${msg}`);
  };
  const first = text.indexOf('+');
  if (first === -1) bad('KEY_TEXT_MALFORMED', 'expected <name>+<8 hex key id>+<base64 key>');
  const second = text.indexOf('+', first + 1);
  if (second === -1) bad('KEY_TEXT_MALFORMED', 'expected <name>+<8 hex key id>+<base64 key>');
  const name = text.slice(0, first);
  const idHex = text.slice(first + 1, second);
  const b64 = text.slice(second + 1);
  const problem = keyNameProblem(name);
  if (problem) bad('KEY_BAD_NAME', `key name ${JSON.stringify(name.slice(0, 140))}: ${problem}`);
  if (!HEX8_RE.test(idHex)) bad('KEY_TEXT_MALFORMED', `key id ${JSON.stringify(idHex.slice(0, 20))} must be 8 lowercase hex digits`);
  return { name, idHex, b64 };
}

function checkText(text: unknown, what: string): string {
  if (typeof text !== 'string') throw keyError('KEY_TEXT_MALFORMED', `${what} must be a string`);
  if (text.length === 0) throw keyError('KEY_TEXT_MALFORMED', `${what} is empty`);
  if (text.length > MAX_KEY_TEXT_LENGTH) throw keyError('KEY_TEXT_MALFORMED', `${what} is longer than ${MAX_KEY_TEXT_LENGTH} characters`);
  return text;
}

/** Parses a verifier key text strictly (types 0x01 and 0x04). */
export function parseVerifierKey(text: string): VerifierKey {
  const what = 'verifier key';
  checkText(text, what);
  if (text.startsWith(PRIVATE_KEY_PREFIX))
    throw keyError('KEY_NOT_PUBLIC', `${what}: this is a PRIVATE key; give the verifier (public) key text instead, and keep the private key secret`);
  const { name, idHex, b64 } = splitKeyText(text, what);
  const raw = decodeBase64Strict(b64);
  if (!raw) throw keyError('KEY_TEXT_MALFORMED', `${what} ${name}: the key is not canonical standard base64`);
  const type = raw[0];
  if (type !== SIG_TYPE_ED25519 && type !== SIG_TYPE_COSIGNATURE_ED25519)
    throw keyError(
      'KEY_UNSUPPORTED_TYPE',
      `${what} ${name}: signature type ${type === undefined ? 'missing' : `0x${type.toString(16).padStart(2, '0')}`} is not supported (0x01 Ed25519 or 0x04 Ed25519 cosignature)`,
    );
  if (raw.byteLength !== 33) throw keyError('KEY_BAD_LENGTH', `${what} ${name}: an Ed25519 key is 1 type byte and 32 key bytes, got ${raw.byteLength} bytes`);
  const publicKey = Buffer.from(raw.subarray(1));
  checkPublicKey(publicKey, `${what} ${name}`);
  const keyId = keyIdOf(name, publicKey, type);
  if (toHex(keyId) !== idHex) throw keyError('KEY_ID_MISMATCH', `${what} ${name}: key id ${idHex} does not match the key (expected ${toHex(keyId)})`);
  return { name, type, keyId, keyIdHex: idHex, signer: `${name}+${idHex}`, publicKey, text };
}

/** Parses a private key text strictly (type 0x01). The key id must match the public key derived from the seed. */
export function parsePrivateKey(text: string, impl: Ed25519 = nodeEd25519): PrivateKey {
  const what = 'private key';
  checkText(text, what);
  if (!text.startsWith(PRIVATE_KEY_PREFIX)) {
    let isPublic = false;
    try {
      parseVerifierKey(text);
      isPublic = true;
    } catch {
      isPublic = false;
    }
    if (isPublic) throw keyError('KEY_NOT_PRIVATE', `${what}: this is a verifier (public) key; a private key starts with ${PRIVATE_KEY_PREFIX}`);
    throw keyError('KEY_TEXT_MALFORMED', `${what} must start with ${PRIVATE_KEY_PREFIX}`);
  }
  const { name, idHex, b64 } = splitKeyText(text.slice(PRIVATE_KEY_PREFIX.length), what);
  const raw = decodeBase64Strict(b64);
  if (!raw) throw keyError('KEY_TEXT_MALFORMED', `${what} ${name}: the key is not canonical standard base64`);
  if (raw[0] !== SIG_TYPE_ED25519) throw keyError('KEY_UNSUPPORTED_TYPE', `${what} ${name}: signature type must be 0x01 (Ed25519)`);
  if (raw.byteLength !== 33)
    throw keyError('KEY_BAD_LENGTH', `${what} ${name}: an Ed25519 private key is 1 type byte and a 32-byte seed, got ${raw.byteLength} bytes`);
  const seed = Buffer.from(raw.subarray(1));
  raw.fill(0);
  const publicKey = Buffer.from(impl.publicKeyFromSeed(seed));
  const keyId = keyIdOf(name, publicKey);
  if (toHex(keyId) !== idHex) throw keyError('KEY_ID_MISMATCH', `${what} ${name}: key id ${idHex} does not match the key (expected ${toHex(keyId)})`);
  return { name, keyId, keyIdHex: idHex, signer: `${name}+${idHex}`, seed, publicKey };
}

function pairFrom(role: Role, priv: PrivateKey, impl: Ed25519): KeyPair {
  return {
    ...priv,
    role,
    publicKeyText: formatVerifierKey(priv.name, priv.publicKey),
    privateKeyText: formatPrivateKey(priv.name, priv.seed, impl),
  };
}

function checkRole(role: unknown): Role {
  if (!isRole(role)) throw keyError('KEY_BAD_ROLE', `role ${JSON.stringify(role)} is not one of ${ROLES.join(', ')}`);
  return role;
}

/** A fresh key pair for `role`. `random` (default: node:crypto randomBytes) is injectable for tests. */
export function generateKeyPair(role: Role, name?: string, random: RandomBytes = randomBytes, impl: Ed25519 = nodeEd25519): KeyPair {
  checkRole(role);
  const take = (n: number): Buffer => {
    const b = random(n);
    if (!(b instanceof Uint8Array) || b.byteLength !== n) throw keyError('KEY_BAD_RANDOM', `the random source must return ${n} bytes`, {}, 'internal');
    return Buffer.from(b);
  };
  const keyName = name ?? `assay-${role}-${take(4).toString('hex')}`;
  assertKeyName(keyName);
  const seed = take(32);
  const publicKey = Buffer.from(impl.publicKeyFromSeed(seed));
  const keyId = keyIdOf(keyName, publicKey);
  return pairFrom(role, { name: keyName, keyId, keyIdHex: toHex(keyId), signer: signerOf(keyName, keyId), seed, publicKey }, impl);
}

/** The note signer of a key (Ed25519, type 0x01). */
export function noteSignerOf(key: PrivateKey, impl: Ed25519 = nodeEd25519): NoteSigner {
  return ed25519NoteSigner(key.name, key.seed, impl);
}

/** The note verifier of a verifier key (type 0x01 only; use cosignatureVerifier for 0x04 keys). */
export function noteVerifierOf(key: VerifierKey, impl: Ed25519 = nodeEd25519): NoteVerifier {
  if (key.type !== SIG_TYPE_ED25519) throw keyError('KEY_UNSUPPORTED_TYPE', `verifier key ${key.signer} is a cosignature key (type 0x04), not a note key`);
  return ed25519NoteVerifier(key.name, key.publicKey, impl);
}

/** A key in use: signs exact bytes, never exposes the seed. */
export function toSigningKey(pair: KeyPair, impl: Ed25519 = nodeEd25519): SigningKey {
  const seed = Buffer.from(pair.seed);
  return {
    name: pair.name,
    signer: pair.signer,
    keyId: Buffer.from(pair.keyId),
    role: pair.role,
    publicKeyText: pair.publicKeyText,
    publicKey: Buffer.from(pair.publicKey),
    sign: (message) => impl.sign(seed, message),
  };
}

// ---- files ---------------------------------------------------------------------------------------------------------

function fsError(e: unknown, file: string, action: string): AssayError {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === 'ENOENT') return keyError('KEY_FILE_NOT_FOUND', `${file} does not exist`, { path: file }, 'not_found', e);
  if (code === 'EEXIST') return keyError('KEY_FILE_EXISTS', `${file} already exists; refusing to overwrite a key file`, { path: file }, 'conflict', e);
  if (code === 'ELOOP')
    return keyError(
      'KEY_FILE_SYMLINK',
      `${file} is a symbolic link; refusing to ${action} a key through a link (give the real path)`,
      { path: file },
      'refused',
      e,
    );
  if (code === 'EACCES' || code === 'EPERM')
    return keyError('KEY_FILE_UNREADABLE', `cannot ${action} ${file}: permission denied`, { path: file }, 'refused', e);
  return keyError('KEY_FILE_IO', `cannot ${action} ${file}: ${(e as Error)?.message ?? String(e)}`, { path: file }, 'unavailable', e);
}

function writeNew(file: string, content: string, mode: number): void {
  let fd: number;
  try {
    fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  } catch (e) {
    throw fsError(e, file, 'write');
  }
  try {
    fchmodSync(fd, mode); // the umask may have narrowed it; never wider than asked
    const buf = Buffer.from(content, 'utf8');
    let off = 0;
    while (off < buf.byteLength) off += writeSync(fd, buf, off, buf.byteLength - off);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    try {
      unlinkSync(file);
    } catch {
      // best effort: it was ours
    }
    throw fsError(e, file, 'write');
  }
  closeSync(fd);
}

/** Writes `<name>.key` (0600) and `<name>.pub` (0644) in `dir`; never overwrites either. */
export function writeKeyPair(dir: string, pair: KeyPair): { privateKeyPath: string; publicKeyPath: string } {
  assertKeyName(pair.name);
  if (pair.name.includes('/') || pair.name.includes('\\') || pair.name === '.' || pair.name === '..')
    throw keyError('KEY_BAD_NAME', `key name ${JSON.stringify(pair.name)} cannot be used as a file name`);
  checkRole(pair.role);
  const privateKeyPath = path.join(dir, `${pair.name}.key`);
  const publicKeyPath = path.join(dir, `${pair.name}.pub`);
  const json = JSON.stringify({ format: KEY_FILE_FORMAT, role: pair.role, name: pair.name, privateKey: pair.privateKeyText });
  writeNew(privateKeyPath, `${json}\n`, 0o600);
  try {
    writeNew(publicKeyPath, `${pair.publicKeyText}\n`, 0o644);
  } catch (e) {
    try {
      unlinkSync(privateKeyPath);
    } catch {
      // best effort
    }
    throw e;
  }
  // Make the new directory entries durable too (best effort: not every platform can fsync a directory).
  try {
    const dfd = openSync(dir, constants.O_RDONLY);
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    // the files themselves are synced
  }
  return { privateKeyPath, publicKeyPath };
}

/** Opens without following a final symlink, checks it is a small regular file, returns its text and mode. */
function readKeyFile(file: string): { text: string; mode: number } {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    throw fsError(e, file, 'read');
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw keyError('KEY_FILE_NOT_REGULAR', `${file} is not a regular file`, { path: file }, 'refused');
    if (st.size > MAX_KEY_FILE_BYTES)
      throw keyError('KEY_FILE_MALFORMED', `${file} is ${st.size} bytes; a key file is at most ${MAX_KEY_FILE_BYTES}`, { path: file });
    const buf = Buffer.alloc(MAX_KEY_FILE_BYTES + 1);
    try {
      let len = 0;
      for (;;) {
        const n = readSync(fd, buf, len, buf.byteLength - len, null);
        if (n === 0) break;
        len += n;
        if (len > MAX_KEY_FILE_BYTES) throw keyError('KEY_FILE_MALFORMED', `${file} is larger than ${MAX_KEY_FILE_BYTES} bytes`, { path: file });
      }
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, len));
      } catch {
        throw keyError('KEY_FILE_MALFORMED', `${file} is not UTF-8 text`, { path: file });
      }
      return { text, mode: st.mode & 0o7777 };
    } finally {
      buf.fill(0);
    }
  } catch (e) {
    if (e instanceof AssayError) throw e;
    throw fsError(e, file, 'read');
  } finally {
    closeSync(fd);
  }
}

function looksLikeVerifierKey(text: string): boolean {
  try {
    parseVerifierKey(text);
    return true;
  } catch {
    return false;
  }
}

/** Reads a `<name>.key` file written by writeKeyPair. */
export function readPrivateKey(file: string, impl: Ed25519 = nodeEd25519): KeyPair {
  const { text, mode } = readKeyFile(file);
  const malformed = (msg: string): never => {
    throw keyError('KEY_FILE_MALFORMED', `${file}: ${msg}`, { path: file });
  };
  const trimmed = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (looksLikeVerifierKey(trimmed))
    throw keyError('KEY_NOT_PRIVATE', `${file} holds a verifier (public) key; give the private key file (<name>.key)`, { path: file });
  if ((mode & 0o077) !== 0) {
    const octal = (mode & 0o777).toString(8).padStart(4, '0');
    throw keyError(
      'KEY_FILE_UNSAFE_PERMISSIONS',
      `private key file ${file} has mode ${octal}: group or others may access it. Restrict it with: chmod 600 ${file}`,
      { path: file, mode: octal },
      'refused',
    );
  }
  if (!trimmed.startsWith('{')) {
    if (trimmed.startsWith(PRIVATE_KEY_PREFIX))
      malformed(`holds a bare private key text without its role; expected the JSON written by writeKeyPair ({"format":"${KEY_FILE_FORMAT}","role":…})`);
    malformed(`is not an Assay private key file (expected a JSON object with format "${KEY_FILE_FORMAT}")`);
  }
  let obj: unknown;
  try {
    obj = JSON.parse(trimmed);
  } catch (e) {
    return malformed(`is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return malformed('is not a JSON object');
  const rec = obj as Record<string, unknown>;
  const fields = ['format', 'name', 'privateKey', 'role'];
  const keys = Object.keys(rec).sort();
  if (keys.join() !== fields.join()) malformed(`must have exactly the fields ${fields.join(', ')}; it has ${keys.join(', ') || 'none'}`);
  if (rec.format !== KEY_FILE_FORMAT) malformed(`format must be "${KEY_FILE_FORMAT}"`);
  if (!isRole(rec.role)) malformed(`role ${JSON.stringify(rec.role)} is not one of ${ROLES.join(', ')}`);
  if (typeof rec.privateKey !== 'string') malformed('privateKey must be a string');
  let priv: PrivateKey;
  try {
    priv = parsePrivateKey(rec.privateKey as string, impl);
  } catch (e) {
    if (e instanceof AssayError) throw new AssayError(e.code, e.kind, `${file}: ${e.message}`, { details: { ...e.details, path: file }, cause: e });
    throw e;
  }
  if (rec.name !== priv.name) malformed(`name ${JSON.stringify(rec.name)} does not match the key's name ${JSON.stringify(priv.name)}`);
  return pairFrom(rec.role as Role, priv, impl);
}

/** Reads a `<name>.pub` file: the verifier key text and one optional final newline. */
export function readPublicKey(file: string): VerifierKey {
  const { text } = readKeyFile(file);
  const trimmed = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (trimmed.startsWith('{') || trimmed.startsWith(PRIVATE_KEY_PREFIX))
    throw keyError('KEY_NOT_PUBLIC', `${file} holds a private key; give the verifier key file (<name>.pub)`, { path: file });
  try {
    return parseVerifierKey(trimmed);
  } catch (e) {
    if (e instanceof AssayError) throw new AssayError(e.code, e.kind, `${file}: ${e.message}`, { details: { ...e.details, path: file }, cause: e });
    throw e;
  }
}
