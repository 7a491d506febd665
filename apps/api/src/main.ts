import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AssayError, EXIT_CODES, type Clock, type IdGenerator } from '@assay/core';
import { ApiTokensProvider } from '@assay/ledger';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { securityHeaders } from './security-headers';
import { AppModule, type ApiConfig } from './app.module';
import { parseReadPolicy } from './access';
import { ApiMetrics } from './metrics';
import { accessLogHook, metricsHook } from './access-log';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AssayErrorFilter } from './assay-error.filter';
import { API_LIMITS, BodyValidationPipe, MAX_PARAM_LENGTH, frameworkErrorHandler, parseJsonBody, requestIdHook } from './http-edge';

export interface CreateApiOptions {
  /** One JSON line per request on stderr (pino); `assay serve` and main() turn it on. */
  accessLog?: boolean;
  /** The Clock and IdGenerator the application's providers bind (the system's by default; tests bind their own). */
  clock?: Clock;
  ids?: IdGenerator;
}

/** ASSAY_API_RATE_LIMIT: requests per minute per client address, decimal 1-1000000 (default 600). */
export function parseRateLimit(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 600;
  const n = /^[0-9]{1,7}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= 1_000_000))
    throw new AssayError(
      'API_BAD_RATE_LIMIT',
      'invalid_input',
      `ASSAY_API_RATE_LIMIT must be an integer 1-1000000 (requests per minute per address), got ${JSON.stringify(raw)}`,
    );
  return n;
}

/** Walks up from `start` to the directory holding apps/api/web (src under jest, dist/ after a build). */
export function findWebDir(start: string = __dirname): string | null {
  for (let dir = start; ; dir = dirname(dir)) {
    const candidate = join(dir, 'apps', 'api', 'web');
    if (existsSync(join(candidate, 'index.html'))) return candidate;
    if (dirname(dir) === dir) return null;
  }
}

/**
 * Builds the HTTP API for one ASSAY_HOME (docs/operations.md, "HTTP API"). Listens on loopback unless told otherwise.
 * Writes need a token of the route's role (`assay tokens create --role R`, or the older operator token, role admin);
 * reads of public results are open unless ASSAY_API_READS=token.
 */
export async function createApi(home: string, env: NodeJS.ProcessEnv = process.env, o: CreateApiOptions = {}): Promise<INestApplication> {
  const config: ApiConfig = {
    home,
    reads: parseReadPolicy(env.ASSAY_API_READS),
    rateLimitPerMinute: parseRateLimit(env.ASSAY_API_RATE_LIMIT),
    env,
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.ids ? { ids: o.ids } : {}),
  };
  const headers = securityHeaders({
    contentSecurityPolicy: {
      useDefaults: true,
      // The OpenAPI page (swagger-ui) sets inline styles; scripts stay same-origin only.
      // No upgrade-insecure-requests: on plain HTTP (loopback or a private network) it would send the pages' own
      // requests to https and break them; put TLS in front for anything else.
      directives: {
        'default-src': ["'self'"],
        'script-src': ["'self'"],
        'style-src': ["'self'", "'unsafe-inline'"],
        'img-src': ["'self'", 'data:'],
        'upgrade-insecure-requests': null,
      },
    },
  });
  // Fastify under NestJS: on Express the framework alone used half of what a bare node:http server answers on
  // this kind of machine, more than the API's reads may cost in all (docs/benchmarks.md, "HTTP API reads").
  const adapter = new FastifyAdapter({
    bodyLimit: API_LIMITS.bodyBytes,
    trustProxy: false,
    // Closing the API ends every connection, server-sent event streams included (they never end by themselves): a
    // stopped `assay serve` must not wait for an open page.
    forceCloseConnections: true,
    // Ids are checked by the routes, with messages naming what was expected: the router must not 404 a long one first.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A path the router cannot decode gets the API's 400, with the request id and the security headers.
    frameworkErrors: frameworkErrorHandler([requestIdHook, headers]),
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forConfig(config), adapter, { logger: ['error', 'warn'], bodyParser: false });
  const fastify = app.getHttpAdapter().getInstance();
  // Declared once, so that every request object has the same shape (Fastify's decorateRequest).
  fastify.decorateRequest('requestId', null);
  fastify.decorateRequest('principal', null);
  // Hooks before Nest registers its routes (at init). Order matters: the request id first (so every answer has one),
  // then the security headers; the metrics (and access log) when the response is done.
  fastify.addHook('onRequest', requestIdHook);
  fastify.addHook('onRequest', headers);
  fastify.addHook('onResponse', o.accessLog ? accessLogHook(app.get(ApiMetrics)) : metricsHook(app.get(ApiMetrics)));
  // Bodies: JSON (bounded, errors in the API's shape: 413, 400), and anything else left unread for the route (a
  // bundle upload streams it to a file; a JSON route sees no body, and its DTO check says what is missing). The
  // guards run before any route reads a stream, and the depth and key checks (422) run in BodyValidationPipe, after them.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: API_LIMITS.bodyBytes }, parseJsonBody);
  fastify.addContentTypeParser('*', (_req, _payload, done) => done(null));
  app.useGlobalPipes(new BodyValidationPipe());
  app.useGlobalFilters(new AssayErrorFilter());
  const web = findWebDir();
  // A missing file is the API's 404 (`/ui` itself is a redirect to `/ui/`, app.module.ts).
  if (web) app.useStaticAssets({ root: web, prefix: '/ui/', index: 'index.html' });
  app.useStaticAssets({ root: dirname(require.resolve('uplot/dist/uPlot.iife.min.js')), prefix: '/ui/vendor/', decorateReply: false });
  const doc = SwaggerModule.createDocument(
    app,
    new DocumentBuilder()
      .setTitle('Assay API')
      .setDescription('Signed ledger, leaderboards, run trajectories and reports of Assay research runs (docs/operations.md, "HTTP API").')
      .setVersion('1')
      .addBearerAuth()
      .build(),
  );
  SwaggerModule.setup('api/docs', app, doc, { jsonDocumentUrl: 'api/docs/openapi.json' });
  app.enableShutdownHooks();
  return app;
}

/** ASSAY_API_PORT: decimal 1-65535 (default 8080); anything else is a configuration mistake (exit 2). */
export function parsePort(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 8080;
  const n = /^[0-9]{1,5}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= 65535)) throw new AssayError('API_BAD_PORT', 'invalid_input', `ASSAY_API_PORT must be an integer 1-65535, got ${JSON.stringify(raw)}`);
  return n;
}

/** Starts the API and listens; resolves once it listens. Errors are AssayErrors naming the port or host. */
export async function serve(o: { home: string; host: string; port: number; env?: NodeJS.ProcessEnv; log?: (line: string) => void }): Promise<INestApplication> {
  const { home, host, port } = o;
  const env = o.env ?? process.env;
  const reads = parseReadPolicy(env.ASSAY_API_READS);
  const app = await createApi(home, env, { accessLog: true });
  let anyToken: boolean;
  try {
    // A broken token configuration stops the start here rather than at the first write.
    anyToken = app.get(ApiTokensProvider).anyConfigured(env);
    await app.listen(port, host);
  } catch (e) {
    await app.close().catch(() => undefined);
    const code = (e as { code?: string }).code;
    if (code === 'EADDRINUSE') throw new AssayError('API_PORT_IN_USE', 'unavailable', `port ${port} is in use`);
    if (code === 'EACCES') throw new AssayError('API_PORT_DENIED', 'unavailable', `port ${port} on ${host} is not allowed for this user`);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
      throw new AssayError('API_HOST_UNAVAILABLE', 'unavailable', `cannot listen on host ${JSON.stringify(host)}`);
    throw e;
  }
  const writes = anyToken ? 'writes need a token of their role' : 'reads only (no API token: `assay tokens create --role operator`)';
  const url = `http://${host}:${port}`;
  // ASSAY_API_STARTED_JSON=1 (`assay serve --json`): one JSON line on stdout for whatever started the server.
  if (env.ASSAY_API_STARTED_JSON === '1')
    process.stdout.write(
      `${JSON.stringify({ url, ui: `${url}/ui/`, docs: `${url}/api/docs`, home, reads, writes: anyToken ? 'tokens' : 'none (no API token)' })}\n`,
    );
  else
    (o.log ?? ((l: string) => process.stderr.write(l + '\n')))(
      `assay api on ${url} (ASSAY_HOME ${home}); ${writes}; reads ${reads === 'open' ? 'open to anyone' : 'need a token'}; web pages at ${url}/ui/, OpenAPI at ${url}/api/docs`,
    );
  return app;
}

export async function main(): Promise<void> {
  const app = await serve({
    home: resolve(process.env.ASSAY_HOME || '.assay'),
    host: process.env.ASSAY_API_HOST || '127.0.0.1',
    port: parsePort(process.env.ASSAY_API_PORT),
  });
  // Started by `assay serve`: stdin is a pipe from it, and its end-of-file means `assay serve` is gone (even
  // SIGKILLed): the API stops too rather than serving on, orphaned.
  if (process.env.ASSAY_API_EXIT_WITH_PARENT === '1') {
    process.stdin.on('data', () => undefined);
    process.stdin.on('error', () => undefined);
    process.stdin.once('close', () => {
      void app
        .close()
        .catch(() => undefined)
        .finally(() => process.exit(0));
    });
    process.stdin.resume();
  }
}

if (require.main === module)
  main().catch((e: unknown) => {
    process.stderr.write(
      e instanceof AssayError
        ? `assay api: error ${e.code}: ${e.message}\n`
        : `assay api: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    );
    process.exitCode = e instanceof AssayError ? EXIT_CODES[e.kind] : EXIT_CODES.internal;
  });
