/**
 * Bundle files sent as a request body (POST /bundles, POST /rejudges): `application/octet-stream` only, streamed to a
 * private file and cut off past ASSAY_API_BUNDLE_MAX_BYTES (413 API_BODY_TOO_LARGE) before the rest is read.
 */
import { createWriteStream, openSync } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { AssayError } from '@assay/core';
import { parseVerifierKey } from '@assay/ledger';

export const BUNDLE_MAX_BYTES_DEFAULT = 256 * 1024 * 1024;

/** ASSAY_API_BUNDLE_MAX_BYTES, or 256 MiB. */
export function bundleMaxBytes(env: NodeJS.ProcessEnv): number {
  const raw = env.ASSAY_API_BUNDLE_MAX_BYTES;
  if (raw === undefined || raw === '') return BUNDLE_MAX_BYTES_DEFAULT;
  const n = /^[0-9]{1,12}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1024))
    throw new AssayError('API_BAD_BUNDLE_LIMIT', 'invalid_input', `ASSAY_API_BUNDLE_MAX_BYTES must be an integer of at least 1024, got ${JSON.stringify(raw)}`);
  return n;
}

/** Refuses a body that is not `application/octet-stream` (415), before any of it is read. */
export function requireOctetStream(req: FastifyRequest, what: string): void {
  const type = String(req.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  if (type !== 'application/octet-stream')
    throw new AssayError(
      'API_UNSUPPORTED_MEDIA_TYPE',
      'invalid_input',
      `send ${what} as the body with content-type application/octet-stream (got ${JSON.stringify(type || 'none')})`,
    );
}

/**
 * Streams the body into `dest` (created here, exclusively, mode 0600), failing with API_BODY_TOO_LARGE once it passes
 * `limit` bytes. The file is opened before anything is read: a stream that opened it itself could still be opening
 * it when an early failure lets the caller remove `dest`, and would then leave the file behind.
 */
export async function receiveBody(req: FastifyRequest, dest: string, limit: number, what: string): Promise<void> {
  let seen = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > limit)
        done(
          new AssayError('API_BODY_TOO_LARGE', 'invalid_input', `${what} is over the limit of ${limit} bytes (ASSAY_API_BUNDLE_MAX_BYTES)`, {
            details: { limitBytes: limit },
          }),
        );
      else done(null, chunk);
    },
  });
  const fd = openSync(dest, 'wx', 0o600);
  // The body is still unread: the API's catch-all content-type parser leaves it on the raw request (main.ts).
  await pipeline(req.raw, cap, createWriteStream('', { fd }));
}

/**
 * A verifier key given as a query parameter (a bundle's root or publisher key): its key text, or `code` (422) naming
 * the parameter and what it should be.
 */
export function verifierKeyParam(value: unknown, parameter: string, what: string, code: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 1024)
    throw new AssayError(code, 'invalid_input', `${parameter} (query) must be ${what} (name+hex+base64)`, { details: { parameter } });
  try {
    return parseVerifierKey(value.trim()).text;
  } catch (e) {
    throw new AssayError(code, 'invalid_input', `${parameter} is not a verifier key: ${(e as Error).message}`, { details: { parameter } });
  }
}
