/**
 * No anonymous writes: every request that is not a GET or HEAD (appends, checkpoint signing, and any write route
 * added later) needs the operator token, `Authorization: Bearer <token>`. Without a configured token the API
 * serves reads only. The token's hash is read at each write request (libs/ledger operator-token.ts), so creating,
 * rotating or deleting it takes effect at once. GET routes are expected never to write (they open the ledger
 * read-only); they need no token.
 */
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import type { Request } from 'express';
import { AssayError } from '@assay/core';
import { loadOperatorTokenHash, operatorTokenMatches } from '@assay/ledger';

const READS = new Set(['GET', 'HEAD']);
const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;

export class OperatorTokenGuard implements CanActivate {
  constructor(
    private readonly home: string,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<Request>();
    if (READS.has(req.method)) return true;
    const hash = loadOperatorTokenHash(this.home, this.env);
    if (!hash)
      throw new AssayError(
        'API_READ_ONLY',
        'refused',
        'this API serves reads only: no operator token is configured, so every write is refused. On the server, run `assay api token create` (with the API\'s ASSAY_HOME) and send the token it prints as "Authorization: Bearer <token>"',
      );
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? BEARER.exec(header) : null;
    if (!m)
      throw new AssayError(
        'API_UNAUTHENTICATED',
        'unauthenticated',
        `${req.method} ${req.path} writes to the ledger: send the operator token as "Authorization: Bearer <token>"`,
      );
    if (!operatorTokenMatches(m[1] as string, hash)) throw new AssayError('API_UNAUTHENTICATED', 'unauthenticated', 'the operator token is wrong');
    return true;
  }
}
