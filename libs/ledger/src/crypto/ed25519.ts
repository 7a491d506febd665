/**
 * Ed25519 (RFC 8032) with strict verification, in two independent implementations:
 *
 * - `nodeEd25519`: OpenSSL through node:crypto, the hot path (about 100x faster than tweetnacl). KeyObjects are
 *   imported once per key and cached, so verifying many events by the same signer does not re-import the key.
 * - `naclEd25519`: tweetnacl, the independent second implementation the tests cross-check against. It lives with the
 *   tests (tests/support/nacl-ed25519.ts): nothing that ships loads tweetnacl.
 *
 * Neither library is strict on its own: both accept a signature whose S is not reduced (S >= L, in tweetnacl),
 * a public key whose y coordinate is not canonical (y >= p) and small-order public keys (for which one signature
 * verifies for every message). So both run the same pre-check first, `ed25519Problem`, and the two implementations
 * reject exactly the same inputs:
 *
 *   - public key: 32 bytes; y < p; the point decodes (x^2 = (y^2 - 1) / (d y^2 + 1) has a root); not x = 0 with
 *     the sign bit set (RFC 8032 5.1.3 step 4); not of small order ([8]A != identity);
 *   - signature: 64 bytes; R's y < p (a non-canonical R could never match anyway: both libraries compare R byte for
 *     byte with a re-encoded point); S < L (RFC 8032 5.1.7: "in the range 0 <= s < L").
 *
 * After the pre-check both libraries compute the same cofactorless equation [S]B = R + [k]A over the same bytes.
 * Public-key checks are cached per key (bounded), so on the hot path the pre-check is a map lookup and a 32-byte
 * comparison.
 */
import { createHash, createPrivateKey, createPublicKey, sign as nodeSign, verify as nodeVerify, type KeyObject } from 'node:crypto';
import { AssayError } from '@assay/core';

export const ED25519_SEED_BYTES = 32;
export const ED25519_PUBLIC_KEY_BYTES = 32;
export const ED25519_SIGNATURE_BYTES = 64;

export interface Ed25519 {
  readonly name: string;
  /** Deterministic RFC 8032 signature (64 bytes) with the key derived from a 32-byte seed. */
  sign(seed: Uint8Array, message: Uint8Array): Uint8Array;
  /** Strict verification; false for any malformed, non-canonical, small-order or wrong input; never throws. */
  verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean;
  publicKeyFromSeed(seed: Uint8Array): Uint8Array;
}

// ---- field and group arithmetic for the pre-check (BigInt; only run once per public key) -------------------------

const P = 2n ** 255n - 19n;
const D = mod(-121665n * modPow(121666n, P - 2n));
const SQRT_M1 = modPow(2n, (P - 1n) / 4n);

function mod(a: bigint): bigint {
  const r = a % P;
  return r < 0n ? r + P : r;
}

function modPow(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = mod(base);
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return result;
}

function littleEndian(bytes: Uint8Array, from: number, to: number): bigint {
  let v = 0n;
  for (let i = to - 1; i >= from; i--) v = (v << 8n) | BigInt(bytes[i] as number);
  return v;
}

/** RFC 8032 5.1.3 point decoding, or why the encoding is not a canonical curve point. */
function decodePoint(enc: Uint8Array): { x: bigint; y: bigint } | 'non-canonical' | 'not on curve' {
  const last = enc[31] as number;
  const sign = last >> 7;
  const y = littleEndian(enc, 0, 31) | (BigInt(last & 0x7f) << 248n);
  if (y >= P) return 'non-canonical';
  const y2 = (y * y) % P;
  const u = mod(y2 - 1n);
  const v = mod(D * y2 + 1n);
  const v3 = (((v * v) % P) * v) % P;
  const v7 = (((v3 * v3) % P) * v) % P;
  let x = (((u * v3) % P) * modPow(u * v7, (P - 5n) / 8n)) % P;
  const vx2 = (((v * x) % P) * x) % P;
  if (vx2 === u) {
    // x is a root
  } else if (vx2 === mod(-u)) {
    x = (x * SQRT_M1) % P;
  } else {
    return 'not on curve';
  }
  if (x === 0n && sign === 1) return 'non-canonical';
  if (Number(x & 1n) !== sign) x = P - x;
  return { x, y };
}

/** True when [8]P is the identity (P has order 1, 2, 4 or 8). Projective doubling, exceptionless for a = -1. */
function isSmallOrder(pt: { x: bigint; y: bigint }): boolean {
  let X = pt.x;
  let Y = pt.y;
  let Z = 1n;
  for (let i = 0; i < 3; i++) {
    const B = ((X + Y) * (X + Y)) % P;
    const C = (X * X) % P;
    const Dd = (Y * Y) % P;
    const E = mod(-C);
    const F = (E + Dd) % P;
    const H = (Z * Z) % P;
    const J = mod(F - 2n * H);
    X = (mod(B - C - Dd) * J) % P;
    Y = (F * mod(E - Dd)) % P;
    Z = (F * J) % P;
  }
  return X === 0n;
}

// Little-endian encodings of p (for y < p) and of the group order L (for S < L).
const P_BYTES = Buffer.from('edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f', 'hex');
const L_BYTES = Buffer.from('edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010', 'hex');

/** a < b, both 32-byte little-endian integers starting at the given offsets. */
function lessThan(a: Uint8Array, aOff: number, b: Uint8Array, mask = 0xff): boolean {
  for (let i = 31; i >= 0; i--) {
    const x = i === 31 ? (a[aOff + i] as number) & mask : (a[aOff + i] as number);
    const y = b[i] as number;
    if (x !== y) return x < y;
  }
  return false;
}

const PUBLIC_KEY_CACHE_LIMIT = 4096;
const publicKeyProblems = new Map<string, string | null>();

function computePublicKeyProblem(pub: Uint8Array): string | null {
  const pt = decodePoint(pub);
  if (pt === 'non-canonical') return 'public key is not a canonical encoding';
  if (pt === 'not on curve') return 'public key is not a point on the curve';
  if (isSmallOrder(pt)) return 'public key is a small-order point';
  return null;
}

function isBytes(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array;
}

function toHex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** Why a public key is unacceptable, or null when it is a valid, canonical, not-small-order point. Cached. */
export function ed25519PublicKeyProblem(pub: Uint8Array, hex?: string): string | null {
  if (!isBytes(pub) || pub.byteLength !== ED25519_PUBLIC_KEY_BYTES) return `public key must be ${ED25519_PUBLIC_KEY_BYTES} bytes`;
  const key = hex ?? toHex(pub);
  const cached = publicKeyProblems.get(key);
  if (cached !== undefined) return cached;
  const problem = computePublicKeyProblem(pub);
  if (publicKeyProblems.size >= PUBLIC_KEY_CACHE_LIMIT) publicKeyProblems.clear();
  publicKeyProblems.set(key, problem);
  return problem;
}

/** Why a signature is unacceptable on its own (length, R canonical, S < L), or null. */
export function ed25519SignatureProblem(sig: Uint8Array): string | null {
  if (!isBytes(sig) || sig.byteLength !== ED25519_SIGNATURE_BYTES) return `signature must be ${ED25519_SIGNATURE_BYTES} bytes`;
  if (!lessThan(sig, 0, P_BYTES, 0x7f)) return 'signature R is not a canonical encoding';
  if (!lessThan(sig, 32, L_BYTES)) return 'signature S is not below the group order L';
  return null;
}

/**
 * The strict pre-check both implementations run before verifying: null when the inputs may be verified, else the
 * reason they are rejected.
 */
export function ed25519Problem(pub: Uint8Array, message: Uint8Array, sig: Uint8Array, pubHex?: string): string | null {
  if (!isBytes(message)) return 'message must be bytes';
  return ed25519SignatureProblem(sig) ?? ed25519PublicKeyProblem(pub, pubHex);
}

export function requireSeed(seed: Uint8Array): void {
  if (!isBytes(seed) || seed.byteLength !== ED25519_SEED_BYTES)
    throw new AssayError('ED25519_BAD_SEED', 'invalid_input', `an Ed25519 seed must be ${ED25519_SEED_BYTES} bytes`, {
      details: { length: isBytes(seed) ? seed.byteLength : null },
    });
}

// ---- node:crypto ---------------------------------------------------------------------------------------------------

const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const KEY_OBJECT_CACHE_LIMIT = 1024;
const publicKeyObjects = new Map<string, KeyObject>();
const privateKeyObjects = new Map<string, KeyObject>();

function remember(cache: Map<string, KeyObject>, key: string, value: KeyObject): KeyObject {
  if (cache.size >= KEY_OBJECT_CACHE_LIMIT) {
    const oldest = cache.keys().next();
    if (!oldest.done) cache.delete(oldest.value);
  }
  cache.set(key, value);
  return value;
}

function publicKeyObject(pub: Uint8Array, hex: string): KeyObject {
  return publicKeyObjects.get(hex) ?? remember(publicKeyObjects, hex, createPublicKey({ key: Buffer.concat([SPKI_PREFIX, pub]), format: 'der', type: 'spki' }));
}

function privateKeyObject(seed: Uint8Array): KeyObject {
  // Cached under a hash of the seed, so the cache's keys do not spell the secret out.
  const id = createHash('sha256').update('assay ed25519 key cache\n').update(seed).digest('hex');
  return (
    privateKeyObjects.get(id) ?? remember(privateKeyObjects, id, createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' }))
  );
}

/**
 * Verification hot path: the same key array is passed for every event its signer signed, so the key's pre-check and
 * KeyObject are remembered per array (weakly), saving the hex encoding and two map lookups per signature.
 */
const checkedKeys = new WeakMap<Uint8Array, { bytes: Buffer; object: KeyObject }>();

export const nodeEd25519: Ed25519 = {
  name: 'node:crypto',
  sign(seed, message) {
    requireSeed(seed);
    return new Uint8Array(nodeSign(null, message, privateKeyObject(seed)));
  },
  verify(pub, message, sig) {
    if (!isBytes(pub) || pub.byteLength !== ED25519_PUBLIC_KEY_BYTES) return false;
    if (!isBytes(message) || ed25519SignatureProblem(sig) !== null) return false;
    let key = checkedKeys.get(pub);
    // A cached entry is used only while the array still holds the bytes it was checked with.
    if (key === undefined || !key.bytes.equals(pub)) {
      const hex = toHex(pub);
      if (ed25519PublicKeyProblem(pub, hex) !== null) return false;
      key = { bytes: Buffer.from(pub), object: publicKeyObject(pub, hex) };
      checkedKeys.set(pub, key);
    }
    try {
      return nodeVerify(null, message, key.object, sig);
    } catch {
      return false;
    }
  },
  publicKeyFromSeed(seed) {
    requireSeed(seed);
    const spki = createPublicKey(privateKeyObject(seed)).export({ format: 'der', type: 'spki' });
    return new Uint8Array(spki.subarray(spki.byteLength - ED25519_PUBLIC_KEY_BYTES));
  },
};
