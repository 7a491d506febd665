import 'reflect-metadata';
import { resolve } from 'node:path';
import { ValidationPipe, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { AssayErrorFilter } from './assay-error.filter';

/** Builds the HTTP API for one ASSAY_HOME. Listens on loopback unless told otherwise. */
export async function createApi(home: string): Promise<INestApplication> {
  const app = await NestFactory.create(AppModule.forHome(home), { logger: ['error', 'warn'] });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  app.useGlobalFilters(new AssayErrorFilter());
  app.enableShutdownHooks();
  return app;
}

async function main(): Promise<void> {
  const home = resolve(process.env.ASSAY_HOME || '.assay');
  const host = process.env.ASSAY_API_HOST || '127.0.0.1';
  const port = Number(process.env.ASSAY_API_PORT || 8080);
  const app = await createApi(home);
  await app.listen(port, host);
  process.stderr.write(`assay api on http://${host}:${port} (ASSAY_HOME ${home})\n`);
}

if (require.main === module) void main();
