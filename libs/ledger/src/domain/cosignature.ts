/**
 * C2SP tlog-cosignature v1.0.1 (https://c2sp.org/tlog-cosignature@v1.0.1), Ed25519 type: an auditor's statement
 * that, as of a time, the checkpoint is the largest consistent tree head it has seen for that log.
 *
 *   key ID          = SHA-256(<name> || 0x0A || 0x04 || 32-byte Ed25519 public key)[:4]
 *   signed message  = "cosignature/v1\n" "time " <decimal seconds, no leading zeros> "\n" <checkpoint body>
 *                     (the whole note text of the checkpoint, extension lines included, signatures excluded)
 *   signature line  = "— " <name> " " base64(key ID (4) || timestamp (8, big-endian) || Ed25519 signature (64)) "\n"
 *
 * A cosignature is an ordinary signed-note signature line, so it can be appended to the checkpoint note
 * (addSignatures in note.ts) and is ignored by verifiers that do not know the cosigner. Timestamps are limited to
 * 2^53 - 1 seconds here (the spec allows up to 2^63 - 1; no real clock gets near either).
 * The Ed25519 message does not commit to the cosigner's name: one cosigner key must serve one cosigner only.
 */
import { AssayError } from '@assay/core';
import { ed25519PublicKeyProblem, nodeEd25519, type Ed25519 } from '../crypto/ed25519';
import { parseCheckpointBody, type ParsedCheckpoint } from './checkpoint';
import {
  assertKeyName,
  formatSignatureLine,
  noteKeyId,
  parseNote,
  SIG_TYPE_COSIGNATURE_ED25519,
  type NoteSigner,
  type NoteVerifier,
  type ParsedNote,
} from './note';

export const COSIGNATURE_HEADER = 'cosignature/v1';
/** timestamp (8) || Ed25519 signature (64): the signature bytes after the key ID. */
export const COSIGNATURE_BYTES = 72;

/** Signs for one cosigner: `sign` is Ed25519 with the key whose public half is `publicKey`. */
export interface Cosigner {
  name: string;
  publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export interface CosignerKey {
  name: string;
  publicKey: Uint8Array;
}

export interface VerifiedCosignature {
  name: string;
  keyIdHex: string;
  /** POSIX seconds the cosigner stated. */
  timestamp: number;
  checkpoint: ParsedCheckpoint;
}

function coError(code: string, kind: 'invalid_input' | 'integrity', message: string, details: Record<string, unknown> = {}): AssayError {
  return new AssayError(code, kind, message, { details });
}

function checkTime(timeSeconds: unknown): number {
  if (typeof timeSeconds !== 'number' || !Number.isSafeInteger(timeSeconds) || timeSeconds < 0)
    throw coError('COSIGNATURE_BAD_TIMESTAMP', 'invalid_input', `cosignature time must be whole POSIX seconds in [0, 2^53), got ${String(timeSeconds)}`);
  return timeSeconds;
}

/** Key ID of an Ed25519 cosigner (signature type 0x04). */
export function cosignatureKeyId(name: string, publicKey: Uint8Array): Buffer {
  return noteKeyId(name, SIG_TYPE_COSIGNATURE_ED25519, publicKey);
}

/** The exact bytes an Ed25519 cosignature signs. `body` must be a checkpoint body (strictly parsed). */
export function cosignedMessage(body: string, timeSeconds: number): Buffer {
  parseCheckpointBody(body);
  return Buffer.from(`${COSIGNATURE_HEADER}\ntime ${checkTime(timeSeconds)}\n${body}`, 'utf8');
}

/** A NoteSigner that cosigns at `timeSeconds`, for signNote / addSignatures. */
export function cosignatureNoteSigner(cosigner: Cosigner, timeSeconds: number): NoteSigner {
  assertKeyName(cosigner.name, 'cosigner name');
  const t = checkTime(timeSeconds);
  const keyId = cosignatureKeyId(cosigner.name, cosigner.publicKey);
  return {
    name: cosigner.name,
    keyId,
    sign(text) {
      const body = Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8');
      const sig = cosigner.sign(cosignedMessage(body, t));
      if (!(sig instanceof Uint8Array) || sig.byteLength !== 64)
        throw coError('COSIGNATURE_MALFORMED', 'invalid_input', `cosigner ${cosigner.name} returned a signature that is not 64 bytes`);
      const out = Buffer.alloc(COSIGNATURE_BYTES);
      out.writeBigUInt64BE(BigInt(t), 0);
      out.set(sig, 8);
      return out;
    },
  };
}

/** The cosignature line ("— <name> <base64>\n") for a checkpoint body, to append to the checkpoint's note. */
export function cosign(body: string, cosigner: Cosigner, timeSeconds: number): string {
  parseCheckpointBody(body);
  const signer = cosignatureNoteSigner(cosigner, timeSeconds);
  return formatSignatureLine(signer.name, signer.keyId, signer.sign(Buffer.from(body, 'utf8')));
}

/** An Ed25519 cosigner from a 32-byte seed. */
export function ed25519Cosigner(name: string, seed: Uint8Array, impl: Ed25519 = nodeEd25519): Cosigner {
  const secret = Buffer.from(seed);
  return { name, publicKey: impl.publicKeyFromSeed(secret), sign: (m) => impl.sign(secret, m) };
}

function decodeTimestamp(sig: Uint8Array): number | null {
  const t = Buffer.from(sig.buffer, sig.byteOffset, 8).readBigUInt64BE(0);
  return t <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(t) : null;
}

/** A NoteVerifier for a cosigner key, for verifyNote. It checks the signature, not the timestamp's plausibility. */
export function cosignatureVerifier(key: CosignerKey, impl: Ed25519 = nodeEd25519): NoteVerifier {
  assertKeyName(key.name, 'cosigner name');
  const problem = ed25519PublicKeyProblem(key.publicKey);
  if (problem) throw coError('COSIGNATURE_BAD_PUBLIC_KEY', 'invalid_input', `public key of cosigner ${key.name}: ${problem}`);
  const pub = Buffer.from(key.publicKey);
  return {
    name: key.name,
    keyId: cosignatureKeyId(key.name, pub),
    verify(text, sig) {
      if (sig.byteLength !== COSIGNATURE_BYTES) return false;
      const t = decodeTimestamp(sig);
      if (t === null) return false;
      let message: Buffer;
      try {
        message = cosignedMessage(Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8'), t);
      } catch {
        return false;
      }
      return impl.verify(pub, message, sig.subarray(8));
    },
  };
}

/**
 * Finds and checks the cosignature of `key` on a checkpoint note. Throws COSIGNATURE_MISSING when the note carries no
 * signature line with the cosigner's name and key ID, COSIGNATURE_MALFORMED when that line is not 72 bytes,
 * COSIGNATURE_BAD_TIMESTAMP when the time is out of range (or later than `notAfterSeconds`, when given), and
 * COSIGNATURE_BAD_SIGNATURE when the signature does not verify.
 */
export function verifyCosignature(
  note: string | Uint8Array | ParsedNote,
  key: CosignerKey,
  opts: { impl?: Ed25519; notAfterSeconds?: number } = {},
): VerifiedCosignature {
  const impl = opts.impl ?? nodeEd25519;
  const parsed = typeof note === 'object' && !(note instanceof Uint8Array) ? note : parseNote(note);
  const checkpoint = parseCheckpointBody(parsed.body);
  const verifier = cosignatureVerifier(key, impl);
  const keyIdHex = Buffer.from(verifier.keyId).toString('hex');
  const line = parsed.signatures.find((s) => s.name === key.name && s.keyIdHex === keyIdHex);
  const who = `${key.name}+${keyIdHex}`;
  if (!line) throw coError('COSIGNATURE_MISSING', 'integrity', `the checkpoint has no cosignature by ${who}`, { cosigner: who });
  if (line.signature.byteLength !== COSIGNATURE_BYTES)
    throw coError(
      'COSIGNATURE_MALFORMED',
      'integrity',
      `the cosignature by ${who} is ${line.signature.byteLength + 4} bytes, expected ${COSIGNATURE_BYTES + 4}`,
      { cosigner: who },
    );
  const timestamp = decodeTimestamp(line.signature);
  if (timestamp === null)
    throw coError('COSIGNATURE_BAD_TIMESTAMP', 'integrity', `the cosignature by ${who} has a timestamp above 2^53 - 1`, { cosigner: who });
  if (opts.notAfterSeconds !== undefined && timestamp > opts.notAfterSeconds)
    throw coError('COSIGNATURE_BAD_TIMESTAMP', 'integrity', `the cosignature by ${who} is dated ${timestamp}, in the future (now ${opts.notAfterSeconds})`, {
      cosigner: who,
      timestamp,
    });
  if (!verifier.verify(parsed.bodyBytes, line.signature))
    throw coError('COSIGNATURE_BAD_SIGNATURE', 'integrity', `the cosignature by ${who} does not verify`, { cosigner: who });
  return { name: key.name, keyIdHex, timestamp, checkpoint };
}
