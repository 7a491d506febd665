import 'reflect-metadata';
import { resolve } from 'node:path';
import { ValidationPipe, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AssayError, EXIT_CODES } from '@assay/core';
import { loadOperatorTokenHash } from '@assay/ledger';
import { AppModule } from './app.module';
import { AssayErrorFilter } from './assay-error.filter';
import { OperatorTokenGuard } from './operator-token.guard';

/**
 * Builds the HTTP API for one ASSAY_HOME. Listens on loopback unless told otherwise. Writes need the operator token
 * (`assay api token create`, or ASSAY_API_TOKEN_SHA256 in `env`); without one the API serves reads only.
 */
export async function createApi(home: string, env: NodeJS.ProcessEnv = process.env): Promise<INestApplication> {
  const app = await NestFactory.create(AppModule.forHome(home), { logger: ['error', 'warn'] });
  app.useGlobalGuards(new OperatorTokenGuard(home, env));
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  app.useGlobalFilters(new AssayErrorFilter());
  app.enableShutdownHooks();
  return app;
}

async function main(): Promise<void> {
  const home = resolve(process.env.ASSAY_HOME || '.assay');
  const host = process.env.ASSAY_API_HOST || '127.0.0.1';
  const port = Number(process.env.ASSAY_API_PORT || 8080);
  // A broken token configuration stops the start here rather than at the first write.
  const writes = loadOperatorTokenHash(home) !== null ? 'writes need the operator token' : 'reads only (no operator token: `assay api token create`)';
  const app = await createApi(home);
  await app.listen(port, host);
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
