import 'reflect-metadata';
import { resolve } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AssayError, EXIT_CODES } from '@assay/core';
import { loadOperatorTokenHash } from '@assay/ledger';
import { AppModule } from './app.module';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AssayErrorFilter } from './assay-error.filter';
import { API_LIMITS, BodyValidationPipe, bodyParserErrorHandler, requestIdMiddleware } from './http-edge';
import { OperatorTokenGuard } from './operator-token.guard';

/**
 * Builds the HTTP API for one ASSAY_HOME. Listens on loopback unless told otherwise. Writes need the operator token
 * (`assay api token create`, or ASSAY_API_TOKEN_SHA256 in `env`); without one the API serves reads only.
 */
export async function createApi(home: string, env: NodeJS.ProcessEnv = process.env): Promise<INestApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forHome(home), { logger: ['error', 'warn'], bodyParser: false });
  // Order matters: the request id first (so every answer has one), then the bounded JSON parser, its errors in the
  // API's shape (413, 400). The depth and key checks (422) run in BodyValidationPipe, after the token guard.
  app.use(requestIdMiddleware);
  app.useBodyParser('json', { limit: API_LIMITS.bodyLimitText });
  app.use(bodyParserErrorHandler);
  app.useGlobalGuards(new OperatorTokenGuard(home, env));
  app.useGlobalPipes(new BodyValidationPipe());
  app.useGlobalFilters(new AssayErrorFilter());
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

export async function main(): Promise<void> {
  const home = resolve(process.env.ASSAY_HOME || '.assay');
  const host = process.env.ASSAY_API_HOST || '127.0.0.1';
  const port = parsePort(process.env.ASSAY_API_PORT);
  // A broken token configuration stops the start here rather than at the first write.
  const writes = loadOperatorTokenHash(home) !== null ? 'writes need the operator token' : 'reads only (no operator token: `assay api token create`)';
  const app = await createApi(home);
  try {
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
  process.stderr.write(`assay api on http://${host}:${port} (ASSAY_HOME ${home}); ${writes}\n`);
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
