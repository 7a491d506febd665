import type { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { CliContext } from './cli-context';
import { libs } from './libs';

export interface Buses {
  commands: CommandBus;
  queries: QueryBus;
}

/**
 * Boots the ledger's NestJS module for one CLI call, hands over the buses, and closes it afterwards. NestJS is loaded
 * here, on the first command that needs it, not when the program starts.
 */
export async function withBuses<T>(ctx: CliContext, fn: (b: Buses) => Promise<T>): Promise<T> {
  const { NestFactory } = require('@nestjs/core') as typeof import('@nestjs/core');
  const { CommandBus: Commands, QueryBus: Queries } = require('@nestjs/cqrs') as typeof import('@nestjs/cqrs');
  const app = await NestFactory.createApplicationContext(libs.ledger().LedgerModule.forHome(ctx.home), { logger: false, abortOnError: false });
  try {
    return await fn({ commands: app.get(Commands), queries: app.get(Queries) });
  } finally {
    await app.close();
  }
}
