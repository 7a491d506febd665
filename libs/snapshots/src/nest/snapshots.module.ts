/**
 * The snapshot store as a NestJS module: the composition root of `assay snapshot ...`. It binds the store under
 * ASSAY_HOME (SnapshotHomeProvider: opened on first use, closed with the module), the Clock (CLOCK; the system's by
 * default) and where SnapshotTaken / WorkspaceEdited go (the sink; none by default: the CLI binds the ledger's, built
 * from LedgerModule's provider, through SNAPSHOT_EVENT_SINK), and
 * registers one handler per command or query of snapshots.commands.ts.
 */
import { Inject, Injectable, Module, Optional, type DynamicModule, type FactoryProvider, type ModuleMetadata, type OnModuleDestroy } from '@nestjs/common';
import { CommandHandler, CqrsModule, QueryHandler, type ICommandHandler, type IQueryHandler } from '@nestjs/cqrs';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AssayError, CLOCK, systemClock, type Clock } from '@assay/core';
import { SnapshotHome } from '../home/snapshot-home';
import type { SnapshotEventSink } from '../domain/events';
import {
  CheckoutSnapshotCommand,
  CollectSnapshotGarbageCommand,
  CreateSnapshotCommand,
  DiffSnapshotsQuery,
  ExportSnapshotsCommand,
  ImportSnapshotsCommand,
  ListPinsQuery,
  ListSnapshotQuery,
  UnpinSnapshotCommand,
  VerifySnapshotQuery,
} from './snapshots.commands';

const SNAPSHOTS_OPTIONS = Symbol('SNAPSHOTS_OPTIONS');

/**
 * Where SnapshotTaken / WorkspaceEdited go, as a provider of the application: the CLI binds the ledger's sink here,
 * built from the ledger module's own provider (one ledger opened per call, stamped with the module's clock and ids).
 */
export const SNAPSHOT_EVENT_SINK = Symbol('SNAPSHOT_EVENT_SINK');

/** How SnapshotsModule.forHome binds the sink from other modules' providers (`imports` must provide what it injects). */
export interface SnapshotSinkBinding {
  readonly imports: NonNullable<ModuleMetadata['imports']>;
  readonly inject: NonNullable<FactoryProvider['inject']>;
  readonly useFactory: (...deps: never[]) => SnapshotEventSink | null;
}

export interface SnapshotsModuleOptions {
  readonly home: string;
  /** Where SnapshotTaken / WorkspaceEdited go, asked for when the store is first opened for writing; none by default. */
  readonly sink?: () => SnapshotEventSink | null | Promise<SnapshotEventSink | null>;
}

/**
 * The store under ASSAY_HOME, opened once on first use: `writer()` for what may add to it (a snapshot, an import;
 * the sink attached), `reader()` for everything else, which never creates a store: a missing one is
 * SNAPSHOT_STORE_NOT_FOUND, saying where Assay looked.
 */
@Injectable()
export class SnapshotHomeProvider implements OnModuleDestroy {
  private opened: Promise<SnapshotHome> | null = null;

  constructor(
    @Inject(SNAPSHOTS_OPTIONS) private readonly o: SnapshotsModuleOptions,
    @Inject(CLOCK) private readonly clock: Clock,
    @Optional() @Inject(SNAPSHOT_EVENT_SINK) private readonly boundSink: SnapshotEventSink | null = null,
  ) {}

  writer(): Promise<SnapshotHome> {
    this.opened ??= (async () => new SnapshotHome(this.o.home, { clock: this.clock, sink: this.boundSink ?? (await this.o.sink?.()) ?? null }))();
    return this.opened;
  }

  reader(): Promise<SnapshotHome> {
    const blobs = join(this.o.home, 'blobs');
    if (!existsSync(blobs))
      return Promise.reject(
        new AssayError(
          'SNAPSHOT_STORE_NOT_FOUND',
          'not_found',
          `no snapshot store in ${blobs}: nothing was snapshotted under this ASSAY_HOME (ASSAY_HOME selects the directory)`,
        ),
      );
    return this.writer();
  }

  async onModuleDestroy(): Promise<void> {
    const p = this.opened;
    this.opened = null;
    if (p) await (await p.catch(() => null))?.close();
  }
}

@CommandHandler(CreateSnapshotCommand)
export class CreateSnapshotHandler implements ICommandHandler<CreateSnapshotCommand> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(c: CreateSnapshotCommand) {
    return (await this.store.writer()).create(c.dir, c.options);
  }
}

@CommandHandler(ImportSnapshotsCommand)
export class ImportSnapshotsHandler implements ICommandHandler<ImportSnapshotsCommand> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(c: ImportSnapshotsCommand) {
    return (await this.store.writer()).importCar(c.file, c.progress);
  }
}

@CommandHandler(CheckoutSnapshotCommand)
export class CheckoutSnapshotHandler implements ICommandHandler<CheckoutSnapshotCommand> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(c: CheckoutSnapshotCommand) {
    return (await this.store.reader()).checkout(c.root, c.dir, c.progress ? { progress: c.progress } : {});
  }
}

@CommandHandler(ExportSnapshotsCommand)
export class ExportSnapshotsHandler implements ICommandHandler<ExportSnapshotsCommand> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(c: ExportSnapshotsCommand) {
    return (await this.store.reader()).exportCar(c.roots, c.file, c.progress);
  }
}

@CommandHandler(CollectSnapshotGarbageCommand)
export class CollectSnapshotGarbageHandler implements ICommandHandler<CollectSnapshotGarbageCommand> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(c: CollectSnapshotGarbageCommand) {
    return (await this.store.reader()).gc(c.options);
  }
}

@CommandHandler(UnpinSnapshotCommand)
export class UnpinSnapshotHandler implements ICommandHandler<UnpinSnapshotCommand> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(c: UnpinSnapshotCommand) {
    return (await this.store.reader()).unpin(c.root);
  }
}

@QueryHandler(VerifySnapshotQuery)
export class VerifySnapshotHandler implements IQueryHandler<VerifySnapshotQuery> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(q: VerifySnapshotQuery) {
    return (await this.store.reader()).verify(q.root, q.progress);
  }
}

@QueryHandler(ListSnapshotQuery)
export class ListSnapshotHandler implements IQueryHandler<ListSnapshotQuery> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(q: ListSnapshotQuery) {
    return (await this.store.reader()).ls(q.root, q.path);
  }
}

@QueryHandler(DiffSnapshotsQuery)
export class DiffSnapshotsHandler implements IQueryHandler<DiffSnapshotsQuery> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute(q: DiffSnapshotsQuery): Promise<number> {
    let n = 0;
    for await (const c of (await this.store.reader()).diff(q.from, q.to)) {
      q.onChange(c);
      n += 1;
    }
    return n;
  }
}

@QueryHandler(ListPinsQuery)
export class ListPinsHandler implements IQueryHandler<ListPinsQuery> {
  constructor(private readonly store: SnapshotHomeProvider) {}
  async execute() {
    return (await this.store.reader()).pins();
  }
}

export const SNAPSHOT_HANDLERS = [
  CreateSnapshotHandler,
  ImportSnapshotsHandler,
  CheckoutSnapshotHandler,
  ExportSnapshotsHandler,
  CollectSnapshotGarbageHandler,
  UnpinSnapshotHandler,
  VerifySnapshotHandler,
  ListSnapshotHandler,
  DiffSnapshotsHandler,
  ListPinsHandler,
];

@Module({})
export class SnapshotsModule {
  /**
   * The store under `home`. The sink is either a function (`sink`) or a binding to other modules' providers
   * (`bindSink`); without either, nothing is recorded.
   */
  static forHome(home: string, o: { clock?: Clock; sink?: SnapshotsModuleOptions['sink']; bindSink?: SnapshotSinkBinding } = {}): DynamicModule {
    return {
      module: SnapshotsModule,
      imports: [CqrsModule, ...(o.bindSink?.imports ?? [])],
      providers: [
        { provide: SNAPSHOTS_OPTIONS, useValue: { home, ...(o.sink ? { sink: o.sink } : {}) } satisfies SnapshotsModuleOptions },
        { provide: CLOCK, useValue: o.clock ?? systemClock },
        ...(o.bindSink ? [{ provide: SNAPSHOT_EVENT_SINK, inject: o.bindSink.inject, useFactory: o.bindSink.useFactory }] : []),
        SnapshotHomeProvider,
        ...SNAPSHOT_HANDLERS,
      ],
      exports: [SnapshotHomeProvider, CqrsModule],
    };
  }
}
