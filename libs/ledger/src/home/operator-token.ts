/**
 * The HTTP API's operator token: the one secret that lets a caller write (append, sign) through the API.
 *
 * Only its SHA-256 is stored, in `<home>/api/operator-token.json` (mode 0600, directory 0700):
 *   {"format":"assay-api-token/v1","sha256":"<64 hex>","createdAt":"<RFC 3339>"}
 * or given to the API process as ASSAY_API_TOKEN_SHA256=<64 hex> (which then wins over the file). The token itself
 * (`assay-op-` and 43 base64url characters: 256 random bits) is printed once, when it is created, and kept nowhere.
 * A plain SHA-256 is enough: the token is random and long, so the hash cannot be searched back to it. Presented
 * tokens are hashed and compared with the stored hash in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AssayError, type Clock } from '@assay/core';
import { writeFileAtomic } from '@assay/core';

export const OPERATOR_TOKEN_FORMAT = 'assay-api-token/v1';
/** Environment variable that gives the API the token's SHA-256 (hex) instead of the file. */
export const OPERATOR_TOKEN_ENV = 'ASSAY_API_TOKEN_SHA256';
const TOKEN_RE = /^assay-op-[A-Za-z0-9_-]{43}$/;
const HEX64 = /^[0-9a-f]{64}$/;

export function operatorTokenPath(home: string): string {
  return join(resolve(home), 'api', 'operator-token.json');
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

export interface CreatedOperatorToken {
  /** The token: shown once, stored nowhere. */
  token: string;
  path: string;
  /** True when an existing token was replaced (rotation). */
  replaced: boolean;
}

/** Creates a new random token and stores its hash; refuses to replace an existing one unless `rotate`. */
export function createOperatorToken(home: string, o: { clock: Clock; rotate?: boolean }): CreatedOperatorToken {
  const path = operatorTokenPath(home);
  const exists = existsSync(path);
  if (exists && !o.rotate)
    throw new AssayError(
      'API_TOKEN_EXISTS',
      'conflict',
      `an operator token already exists (${path}); \`assay api token create --rotate\` replaces it (the old token stops working at once)`,
      { details: { path } },
    );
  const dir = join(resolve(home), 'api');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const token = `assay-op-${randomBytes(32).toString('base64url')}`;
  const record = { format: OPERATOR_TOKEN_FORMAT, sha256: sha256(token).toString('hex'), createdAt: o.clock.now().toISOString() };
  writeFileAtomic(path, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  return { token, path, replaced: exists };
}

/** Removes the stored token: the API then serves reads only. Returns whether there was one. */
export function deleteOperatorToken(home: string): boolean {
  const path = operatorTokenPath(home);
  if (!existsSync(path)) return false;
  rmSync(path);
  return true;
}

/**
 * The configured token's SHA-256, or null when none is configured (the API then refuses every write). Read at each
 * call, so creating, rotating or deleting the file takes effect at once. Refuses a file others could have written.
 */
export function loadOperatorTokenHash(home: string, env: NodeJS.ProcessEnv = process.env): Buffer | null {
  const fromEnv = env[OPERATOR_TOKEN_ENV];
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!HEX64.test(fromEnv))
      throw new AssayError(
        'API_TOKEN_CONFIG_INVALID',
        'unavailable',
        `${OPERATOR_TOKEN_ENV} must be the SHA-256 of the operator token as 64 lowercase hex digits`,
      );
    return Buffer.from(fromEnv, 'hex');
  }
  const path = operatorTokenPath(home);
  let st;
  try {
    st = lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new AssayError('API_TOKEN_CONFIG_INVALID', 'unavailable', `cannot read ${path}: ${(e as Error).message}`);
  }
  if (!st.isFile() || (st.mode & 0o077) !== 0)
    throw new AssayError(
      'API_TOKEN_UNSAFE_PERMISSIONS',
      'refused',
      `${path} must be a regular file readable and writable by its owner only (mode 0600); recreate it with \`assay api token create --rotate\``,
      { details: { path } },
    );
  let v: { format?: unknown; sha256?: unknown };
  try {
    v = JSON.parse(readFileSync(path, 'utf8')) as typeof v;
  } catch (e) {
    throw new AssayError('API_TOKEN_CONFIG_INVALID', 'unavailable', `${path} is not valid JSON: ${(e as Error).message}`, { details: { path } });
  }
  if (v === null || typeof v !== 'object' || v.format !== OPERATOR_TOKEN_FORMAT || typeof v.sha256 !== 'string' || !HEX64.test(v.sha256))
    throw new AssayError('API_TOKEN_CONFIG_INVALID', 'unavailable', `${path} must hold {format: "${OPERATOR_TOKEN_FORMAT}", sha256: <64 hex>, createdAt}`, {
      details: { path },
    });
  return Buffer.from(v.sha256, 'hex');
}

/** Whether `presented` is the token whose SHA-256 is `hash`. Constant time in the token's content. */
export function operatorTokenMatches(presented: string, hash: Buffer): boolean {
  // Hash first: the comparison is then always of 32 bytes, whatever was presented.
  const ok = timingSafeEqual(sha256(presented), hash);
  return ok && TOKEN_RE.test(presented);
}
