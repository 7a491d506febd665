import type { DynamicModule } from '@nestjs/common';
import type { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { CliContext } from './cli-context';
import { libs } from './libs';

export interface Buses {
  commands: CommandBus;
  queries: QueryBus;
}

/**
 * Boots `module` for one CLI call, hands over its buses, and closes it afterwards. NestJS is loaded here, on the first
 * command that needs it, not when the program starts.
 */
export async function withModule<T>(module: DynamicModule, fn: (b: Buses) => Promise<T>): Promise<T> {
  const { NestFactory } = require('@nestjs/core') as typeof import('@nestjs/core');
  const { CommandBus: Commands, QueryBus: Queries } = require('@nestjs/cqrs') as typeof import('@nestjs/cqrs');
  const app = await NestFactory.createApplicationContext(module, { logger: false, abortOnError: false });
  try {
    return await fn({ commands: app.get(Commands), queries: app.get(Queries) });
  } finally {
    await app.close();
  }
}

/** The ledger's module (LedgerModule): the ledger's commands and queries. */
export function withBuses<T>(ctx: CliContext, fn: (b: Buses) => Promise<T>): Promise<T> {
  return withModule(libs.ledger().LedgerModule.forHome(ctx.home), fn);
}

/**
 * The runtime node's module (@assay/runtime's RuntimeModule: the container runtime bound, the ledger's module
 * imported): for the commands that start containers (`assay run`, `assay task check`, `assay baseline`).
 */
export function withRuntimeBuses<T>(ctx: CliContext, fn: (b: Buses) => Promise<T>): Promise<T> {
  return withModule(libs.runtime().RuntimeModule.forHome(ctx.home), fn);
}

/**
 * The snapshot store's module (@assay/snapshots' SnapshotsModule): for `assay snapshot ...`. `sink` is where
 * SnapshotTaken / WorkspaceEdited go: `'ledger'` binds the ledger's (LedgerSnapshotSink over LedgerModule's
 * provider), a function gives another (tests give an in-memory one), asked for when the store is first opened.
 */
export function withSnapshotBuses<T>(
  ctx: CliContext,
  sink: 'ledger' | (() => Promise<import('@assay/snapshots').SnapshotEventSink | null>),
  fn: (b: Buses) => Promise<T>,
): Promise<T> {
  const module =
    sink === 'ledger'
      ? (require('./snapshot-ledger-sink') as typeof import('./snapshot-ledger-sink')).snapshotsRecordedInLedger(ctx.home, (line) => ctx.err(line))
      : libs.snapshots().SnapshotsModule.forHome(ctx.home, { sink });
  return withModule(module, fn);
}
