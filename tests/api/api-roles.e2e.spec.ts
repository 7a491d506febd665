/**
 * The role matrix (docs/operations.md, "API tokens and roles"): every route of the API, every method, under each
 * identity (anonymous, a wrong token, a revoked token, each role, the older operator token) and both read policies.
 * The expected access of each route is written out here, not read from the code; a route the code adds without a
 * row here fails the first test. Requests that pass the guards are built to change nothing (a body the route's
 * checks refuse, an unknown token id), so the whole matrix runs on one ledger.
 */
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod } from '@nestjs/common';
import { systemClock } from '@assay/core';
import { ApiTokenStore, createOperatorToken, type ApiRole } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';
import { ACCESS_KEY, type Access } from '../../apps/api/src/access';
import { AppModule } from '../../apps/api/src/app.module';
import { makeTmpDir } from '../support/ledger-fixtures';
import { homeWith, preamble, sampleVariant } from '../projections/projection-fixtures';

jest.setTimeout(180_000);

type Expect = 'open' | 'read' | ApiRole;

/** Every route: method, path template, a concrete path, the body sent, and who may call it. */
const ROUTES: Array<{ method: string; route: string; path: string; body?: unknown; access: Expect; sse?: boolean }> = [
  { method: 'GET', route: '/', path: '/', access: 'open' },
  { method: 'GET', route: '/ui', path: '/ui', access: 'open' },
  { method: 'GET', route: '/health', path: '/health', access: 'open' },
  { method: 'GET', route: '/health/live', path: '/health/live', access: 'open' },
  { method: 'GET', route: '/health/ready', path: '/health/ready', access: 'open' },
  { method: 'GET', route: '/ledger/events', path: '/ledger/events?limit=2', access: 'read' },
  { method: 'GET', route: '/ledger/checkpoints/latest', path: '/ledger/checkpoints/latest', access: 'read' },
  { method: 'GET', route: '/ledger/live', path: '/ledger/live', access: 'read', sse: true },
  { method: 'GET', route: '/ledger/verify', path: '/ledger/verify', access: 'read' },
  { method: 'GET', route: '/ledger/proofs/inclusion/:position', path: '/ledger/proofs/inclusion/0', access: 'read' },
  { method: 'GET', route: '/ledger/proofs/consistency', path: '/ledger/proofs/consistency?old=1', access: 'read' },
  { method: 'GET', route: '/ledger/keys', path: '/ledger/keys', access: 'read' },
  { method: 'POST', route: '/ledger/keys', path: '/ledger/keys', body: { role: 'nobody' }, access: 'admin' },
  { method: 'POST', route: '/ledger/keys/:signer/revoke', path: '/ledger/keys/x+00000000/revoke', body: {}, access: 'admin' },
  { method: 'POST', route: '/ledger/events', path: '/ledger/events', body: { stream: 'note-x' }, access: 'admin' },
  { method: 'POST', route: '/ledger/checkpoints', path: '/ledger/checkpoints', access: 'operator' },
  { method: 'POST', route: '/ledger/checkpoints/cosignatures', path: '/ledger/checkpoints/cosignatures', body: {}, access: 'auditor' },
  { method: 'GET', route: '/tasks', path: '/tasks', access: 'read' },
  { method: 'GET', route: '/tasks/:task/budget', path: '/tasks/tiny-optimizer/budget', access: 'read' },
  { method: 'GET', route: '/leaderboards/:task', path: '/leaderboards/tiny-optimizer', access: 'read' },
  { method: 'GET', route: '/runs/:id/trajectory', path: '/runs/r-a/trajectory', access: 'read' },
  { method: 'GET', route: '/runs/:id/report', path: '/runs/r-a/report', access: 'read' },
  { method: 'GET', route: '/runs/:id/live', path: '/runs/r-a/live', access: 'read', sse: true },
  { method: 'GET', route: '/runs/:id/rounds/:round/log', path: '/runs/r-a/rounds/1/log', access: 'read' },
  { method: 'GET', route: '/metrics', path: '/metrics', access: 'read' },
  { method: 'POST', route: '/runs', path: '/runs', body: {}, access: 'operator' },
  { method: 'POST', route: '/bundles', path: '/bundles', access: 'operator' },
  { method: 'POST', route: '/rejudges', path: '/rejudges', access: 'auditor' },
  { method: 'GET', route: '/rejudges/:id', path: '/rejudges/rj-20260101-00000000', access: 'auditor' },
  { method: 'POST', route: '/runs/:id/bundle', path: '/runs/r-a/bundle', body: { snapshots: 'every' }, access: 'operator' },
  { method: 'POST', route: '/runs/:id/cancel', path: '/runs/no-such-run/cancel', access: 'operator' },
  { method: 'GET', route: '/tokens', path: '/tokens', access: 'admin' },
  { method: 'POST', route: '/tokens', path: '/tokens', body: { role: 'nobody' }, access: 'admin' },
  { method: 'DELETE', route: '/tokens/:id', path: '/tokens/tk_0000000000000000', access: 'admin' },
];

const IDENTITIES = ['anonymous', 'wrong', 'revoked', 'reader', 'auditor', 'operator', 'admin', 'legacy'] as const;
type Identity = (typeof IDENTITIES)[number];

function allowed(access: Expect, who: Identity, reads: 'open' | 'token'): boolean {
  if (access === 'open') return true;
  if (who === 'anonymous') return access === 'read' && reads === 'open';
  if (who === 'wrong' || who === 'revoked') return false;
  const role: ApiRole = who === 'legacy' ? 'admin' : who;
  if (access === 'read') return true;
  return role === 'admin' || role === access;
}

let tmp: { dir: string; cleanup(): void };
let home: string;
const tokens: Partial<Record<Identity, string>> = {};

beforeAll(async () => {
  tmp = makeTmpDir('assay-api-roles-');
  home = join(tmp.dir, 'home');
  await homeWith(home, [...preamble(), ...sampleVariant({ run: 'r-a' })]);
  const store = new ApiTokenStore(home, { create: true });
  for (const role of ['reader', 'auditor', 'operator', 'admin'] as const)
    tokens[role] = store.create({ role, name: `matrix ${role}`, clock: systemClock }).token;
  const revoked = store.create({ role: 'admin', name: 'revoked admin', clock: systemClock });
  store.revoke(revoked.id, systemClock);
  store.close();
  tokens.revoked = revoked.token;
  tokens.wrong = `assay-tk-${'A'.repeat(43)}`;
  tokens.legacy = createOperatorToken(home, { clock: systemClock }).token;
});
afterAll(() => tmp.cleanup());

describe('API role matrix', () => {
  it('has a row here for every route the API serves, and every route declares its access', () => {
    const served: string[] = [];
    const controllers = (AppModule.forConfig({ home: '/nonexistent', reads: 'open', rateLimitPerMinute: 1, env: {} }).controllers ?? []) as Array<
      new (...a: never[]) => object
    >;
    for (const c of controllers) {
      const prefix = String(Reflect.getMetadata(PATH_METADATA, c) ?? '');
      for (const name of Object.getOwnPropertyNames(c.prototype)) {
        const handler = (c.prototype as Record<string, unknown>)[name];
        if (typeof handler !== 'function' || name === 'constructor') continue;
        const path = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
        if (path === undefined) continue;
        const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number]!;
        const route = ('/' + [prefix, path].filter((p) => p && p !== '/').join('/')).replace(/\/+/g, '/');
        served.push(`${method} ${route}`);
        const access = (Reflect.getMetadata(ACCESS_KEY, handler) ?? Reflect.getMetadata(ACCESS_KEY, c)) as Access | undefined;
        expect({ route: `${method} ${route}`, declared: access !== undefined }).toEqual({ route: `${method} ${route}`, declared: true });
      }
    }
    expect(served.sort()).toEqual(ROUTES.map((r) => `${r.method} ${r.route}`).sort());
  });

  for (const reads of ['open', 'token'] as const)
    it(`runs every route under every identity with ASSAY_API_READS=${reads}`, async () => {
      const app: INestApplication = await createApi(home, { ASSAY_API_READS: reads, ASSAY_API_RATE_LIMIT: '100000' });
      await app.listen(0, '127.0.0.1');
      const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
      const failures: string[] = [];
      try {
        for (const r of ROUTES)
          for (const who of IDENTITIES) {
            const headers: Record<string, string> = { 'content-type': 'application/json' };
            if (who !== 'anonymous') headers.authorization = `Bearer ${tokens[who]}`;
            const ac = new AbortController();
            const res = await fetch(`${base}${r.path}`, {
              method: r.method,
              headers,
              redirect: 'manual',
              signal: ac.signal,
              ...(r.body !== undefined ? { body: JSON.stringify(r.body) } : {}),
            });
            const status = res.status;
            let code: string | null = null;
            if (r.sse && status === 200) ac.abort();
            else if ((res.headers.get('content-type') ?? '').includes('json')) code = ((await res.json()) as { error?: { code: string } }).error?.code ?? null;
            else await res.text();
            const ok = allowed(r.access, who, reads);
            const denied = status === 401 || status === 403;
            if (ok === denied) failures.push(`${r.method} ${r.path} as ${who}: ${status} ${code ?? ''} (expected ${ok ? 'allowed' : 'denied'})`);
            if (!ok && who === 'wrong' && code !== 'API_UNAUTHENTICATED') failures.push(`${r.method} ${r.path} as ${who}: code ${code}`);
            if (!ok && who === 'revoked' && code !== 'API_UNAUTHENTICATED') failures.push(`${r.method} ${r.path} as ${who}: code ${code}`);
            if (!ok && ['reader', 'auditor', 'operator'].includes(who) && code !== 'API_FORBIDDEN_ROLE')
              failures.push(`${r.method} ${r.path} as ${who}: code ${code}`);
          }
      } finally {
        await app.close();
      }
      expect(failures).toEqual([]);
    });

  it('a revoked token stops working at the next request, without restarting the API', async () => {
    const app: INestApplication = await createApi(home, {});
    await app.listen(0, '127.0.0.1');
    const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    try {
      const store = new ApiTokenStore(home);
      const t = store.create({ role: 'admin', name: 'short lived', clock: systemClock });
      const get = () => fetch(`${base}/tokens`, { headers: { authorization: `Bearer ${t.token}` } });
      const before = await get();
      expect(before.status).toBe(200);
      const listed = ((await before.json()) as { tokens: Array<Record<string, unknown>> }).tokens;
      expect(JSON.stringify(listed)).not.toContain(t.token);
      expect(listed.every((x) => !('sha256' in x))).toBe(true);
      store.revoke(t.id, systemClock);
      store.close();
      expect((await get()).status).toBe(401);
    } finally {
      await app.close();
    }
  });
});
