import { Catch, HttpException, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import { AssayError, HTTP_STATUS } from '@assay/core';

/** Translates errors once, at the HTTP edge: AssayError kinds to statuses, a body with the code and message. */
@Catch()
export class AssayErrorFilter implements ExceptionFilter {
  catch(e: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    // A route that answers text (a proof, a note) has set its content type already: errors are JSON regardless.
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    if (e instanceof AssayError) {
      if (e.kind === 'unauthenticated') res.setHeader('WWW-Authenticate', 'Bearer realm="assay"');
      res.status(HTTP_STATUS[e.kind]).json({ error: e.toJSON() });
      return;
    }
    if (e instanceof HttpException) {
      const body = e.getResponse();
      const message = typeof body === 'string' ? body : ((body as { message?: unknown }).message ?? e.message);
      res.status(e.getStatus()).json({
        error: { code: 'HTTP_' + e.getStatus(), kind: 'invalid_input', message: Array.isArray(message) ? message.join('; ') : String(message), details: {} },
      });
      return;
    }
    res.status(500).json({ error: { code: 'INTERNAL', kind: 'internal', message: 'internal error', details: {} } });
  }
}
