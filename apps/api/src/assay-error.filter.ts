import { Catch, HttpException, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { AssayError, HTTP_STATUS } from '@assay/core';
import { bodyTooLarge, logServerError, requestIdOf, type ApiReply } from './http-edge';

/**
 * Translates errors once, at the HTTP edge: AssayError kinds to statuses, a body with the code, message and the
 * request id. Every 5xx is logged as one JSON line on stderr with the request id.
 */
/** Codes whose HTTP status is more precise than their kind's. */
const STATUS_OF_CODE: Readonly<Record<string, number>> = { API_BODY_TOO_LARGE: 413, API_UNSUPPORTED_MEDIA_TYPE: 415, API_MALFORMED_JSON: 400 };

@Catch()
export class AssayErrorFilter implements ExceptionFilter {
  catch(thrown: unknown, host: ArgumentsHost): void {
    const req = host.switchToHttp().getRequest<unknown>();
    const res = host.switchToHttp().getResponse<ApiReply>();
    const e = bodyTooLarge(thrown) ?? thrown;
    const requestId = requestIdOf(req);
    const withId = (error: Record<string, unknown>) => ({ error: { ...error, ...(requestId ? { requestId } : {}) } });
    // A route that answers text (a proof, a note) has set its content type already: errors are JSON regardless.
    res.header('content-type', 'application/json; charset=utf-8');
    if (e instanceof AssayError) {
      const status = STATUS_OF_CODE[e.code] ?? HTTP_STATUS[e.kind];
      if (status >= 500) logServerError(req, status, e);
      if (e.kind === 'unauthenticated') res.header('www-authenticate', 'Bearer realm="assay"');
      res.status(status).send(withId(e.toJSON()));
      return;
    }
    if (e instanceof HttpException) {
      const status = e.getStatus();
      if (status >= 500) logServerError(req, status, e);
      const body = e.getResponse() as string | { message?: unknown; status?: unknown; details?: unknown };
      // Readiness (@nestjs/terminus) answers 503 with each check's state: kept as the details.
      const health = typeof body === 'object' && body.status === 'error';
      const message = health ? 'not ready: a readiness check failed (see details.checks)' : typeof body === 'string' ? body : (body.message ?? e.message);
      if (status === 429) res.header('retry-after', '60');
      res.status(status).send(
        withId({
          // Nest's own 404 is a path no route matches (routes' own not-found answers are AssayErrors).
          code: status === 429 ? 'API_RATE_LIMITED' : health ? 'API_NOT_READY' : status === 404 ? 'API_NO_SUCH_ROUTE' : 'HTTP_' + status,
          kind: status === 429 ? 'refused' : health ? 'unavailable' : status === 404 ? 'not_found' : status >= 500 ? 'internal' : 'invalid_input',
          message: Array.isArray(message) ? message.join('; ') : String(message),
          details: health ? { checks: (body as { details?: unknown }).details ?? {} } : {},
        }),
      );
      return;
    }
    logServerError(req, 500, e);
    res.status(500).send(withId({ code: 'INTERNAL', kind: 'internal', message: 'internal error', details: {} }));
  }
}
