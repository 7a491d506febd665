import { NestFactory } from '@nestjs/core';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { LedgerModule } from '@assay/ledger';
import type { CliContext } from './cli-context';

export interface Buses {
  commands: CommandBus;
  queries: QueryBus;
}

/** Boots the ledger's NestJS module for one CLI call, hands over the buses, and closes it afterwards. */
export async function withBuses<T>(ctx: CliContext, fn: (b: Buses) => Promise<T>): Promise<T> {
  const app = await NestFactory.createApplicationContext(LedgerModule.forHome(ctx.home), { logger: false, abortOnError: false });
  try {
    return await fn({ commands: app.get(CommandBus), queries: app.get(QueryBus) });
  } finally {
    await app.close();
  }
}
