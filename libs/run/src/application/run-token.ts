/**
 * The per-run bearer token of the submission endpoint: 32 random bytes as 64 lowercase hex digits, handed to the
 * agent inside Work as the file /run/assay/token (rsi-submit also honours ASSAY_SUBMIT_TOKEN when someone sets it;
 * Assay does not); only its SHA-256 is recorded (RunStarted.protocol).
 * Requests are checked by hashing the presented token and comparing digests in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AuthVerdict } from '../domain/decide';
import { SHA256_HEX_RE } from '../domain/run-events';

export const TOKEN_RE = /^[0-9a-f]{64}$/;
/** Longest Authorization header value looked at. */
const MAX_AUTH_CHARS = 1024;

export interface RunToken {
  /** The secret: give it to the agent only. */
  readonly token: string;
  /** SHA-256 of the token's ASCII bytes, lowercase hex: what is recorded. */
  readonly sha256: string;
}

export function tokenSha256(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function generateRunToken(random: (n: number) => Uint8Array = randomBytes): RunToken {
  const bytes = random(32);
  if (bytes.byteLength !== 32) throw new RangeError('a run token needs 32 random bytes');
  const token = Buffer.from(bytes).toString('hex');
  return { token, sha256: tokenSha256(token) };
}

/**
 * Checks an Authorization header (as node:http hands it over: undefined, one value, or every value when the
 * header was repeated) against the recorded SHA-256. Exactly one `Bearer <token>`, scheme case-insensitive.
 */
export function checkBearer(header: string | readonly string[] | undefined, expectedSha256: string): AuthVerdict {
  if (!SHA256_HEX_RE.test(expectedSha256)) throw new RangeError('the expected token digest must be 64 lowercase hex digits');
  const values = header === undefined ? [] : typeof header === 'string' ? [header] : [...header];
  if (values.length === 0 || (values.length === 1 && (values[0] as string).trim() === '')) return 'missing';
  if (values.length > 1) return 'malformed';
  const v = values[0] as string;
  if (v.length > MAX_AUTH_CHARS) return 'malformed';
  const m = /^Bearer +([\x21-\x7e]+) *$/i.exec(v);
  if (!m) return 'malformed';
  const presented = createHash('sha256')
    .update(m[1] as string, 'utf8')
    .digest();
  const expected = Buffer.from(expectedSha256, 'hex');
  return timingSafeEqual(presented, expected) ? 'ok' : 'wrong';
}
