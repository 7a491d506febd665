/**
 * Who may call what (docs/operations.md, "API tokens and roles"). Every route declares its access with one of:
 * - `@Open()`: anyone (liveness, readiness, the OpenAPI document);
 * - `@PublicRead()`: a read of public results: anyone when reads are open (ASSAY_API_READS=open, the default), else
 *   any valid token;
 * - `@Roles(...)`: a token whose role is listed, or `admin` (which may do everything).
 * A route without a declaration is treated as `@Roles('admin')` (deny by default); tests/e2e/api-roles.e2e.spec.ts
 * checks that every route has one and runs the whole role matrix.
 *
 * Tokens come as `Authorization: Bearer <token>`; a role token (`assay tokens create --role R`) or the older
 * operator token (`assay api token create`, role admin). The table is read at each request that presents a token,
 * so a revocation takes effect at once.
 */
import { SetMetadata, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { Reflector } from '@nestjs/core';
import { AssayError } from '@assay/core';
import type { ApiRole, ApiTokensProvider } from '@assay/ledger';
import { pathOf, type ApiRequest } from './http-edge';

export type Access = { readonly kind: 'open' } | { readonly kind: 'read' } | { readonly kind: 'roles'; readonly roles: readonly ApiRole[] };

export const ACCESS_KEY = 'assay:access';
export const Open = () => SetMetadata(ACCESS_KEY, { kind: 'open' } satisfies Access);
export const PublicRead = () => SetMetadata(ACCESS_KEY, { kind: 'read' } satisfies Access);
export const Roles = (...roles: ApiRole[]) => SetMetadata(ACCESS_KEY, { kind: 'roles', roles } satisfies Access);

const DEFAULT_ACCESS: Access = { kind: 'roles', roles: ['admin'] };
const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;

export type ReadPolicy = 'open' | 'token';

/** ASSAY_API_READS: `open` (default; reads of public results need no token) or `token`. Anything else: exit 2. */
export function parseReadPolicy(raw: string | undefined): ReadPolicy {
  if (raw === undefined || raw === '' || raw === 'open') return 'open';
  if (raw === 'token') return 'token';
  throw new AssayError('API_BAD_READ_POLICY', 'invalid_input', `ASSAY_API_READS must be "open" or "token", got ${JSON.stringify(raw)}`);
}

export type WithPrincipal = ApiRequest;

export class AccessGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    /** The token table of the API's home (LedgerModule's provider: opened once it exists, closed with the app). */
    private readonly tokens: ApiTokensProvider,
    private readonly reads: ReadPolicy,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  canActivate(ctx: ExecutionContext): boolean {
    const access = this.reflector.getAllAndOverride<Access | undefined>(ACCESS_KEY, [ctx.getHandler(), ctx.getClass()]) ?? DEFAULT_ACCESS;
    if (access.kind === 'open') return true;
    const req = ctx.switchToHttp().getRequest<WithPrincipal>();
    const header = req.headers.authorization;

    if (header === undefined) {
      if (access.kind === 'read' && this.reads === 'open') return true;
      if (access.kind === 'roles' && !this.anyTokenConfigured())
        throw new AssayError(
          'API_READ_ONLY',
          'refused',
          'this API serves reads only: no API token is configured, so every write is refused. On the server, run `assay tokens create --role operator` (or `assay api token create`) with the API\'s ASSAY_HOME and send the token it prints as "Authorization: Bearer <token>"',
        );
      throw new AssayError(
        'API_UNAUTHENTICATED',
        'unauthenticated',
        `${req.method} ${pathOf(req)} needs a token${access.kind === 'roles' ? ` with the role ${rolesText(access.roles)}` : ''}: send it as "Authorization: Bearer <token>"`,
      );
    }
    if (access.kind === 'roles' && !this.anyTokenConfigured())
      throw new AssayError(
        'API_READ_ONLY',
        'refused',
        'this API serves reads only: no API token is configured, so every write is refused (`assay tokens create --role operator`; send the token as "Authorization: Bearer <token>")',
      );
    const m = typeof header === 'string' ? BEARER.exec(header) : null;
    if (!m) throw new AssayError('API_UNAUTHENTICATED', 'unauthenticated', `${req.method} ${pathOf(req)}: send the token as "Authorization: Bearer <token>"`);
    const principal = this.tokens.principal(m[1] as string, this.env);
    if (!principal) throw new AssayError('API_UNAUTHENTICATED', 'unauthenticated', 'the token is wrong or revoked');
    req.principal = principal;
    if (access.kind === 'read' || principal.role === 'admin' || access.roles.includes(principal.role)) return true;
    throw new AssayError(
      'API_FORBIDDEN_ROLE',
      'refused',
      `${req.method} ${pathOf(req)} needs the role ${rolesText(access.roles)}; this token (${principal.id}) has the role ${principal.role}`,
      {
        details: { role: principal.role, needs: [...new Set([...access.roles, 'admin'])] },
      },
    );
  }

  private anyTokenConfigured(): boolean {
    return this.tokens.anyConfigured(this.env);
  }
}

const rolesText = (roles: readonly ApiRole[]): string => [...new Set([...roles, 'admin'])].join(' or ');
