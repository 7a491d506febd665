/**
 * The read models as a NestJS module (docs/projections.md): queries for leaderboards, trajectories and reports, and
 * the import of someone else's result bundle, dispatched by the API and the CLI through @nestjs/cqrs. Every query first catches the read models up with the ledger (verified,
 * up to its latest signed checkpoint); concurrent queries share one catch-up.
 */
import { Inject, Injectable, Module, type DynamicModule, type OnModuleDestroy } from '@nestjs/common';
import { Command, CommandHandler, CqrsModule, IQueryHandler, Query, QueryHandler, type ICommandHandler } from '@nestjs/cqrs';
import { AssayError, CLOCK, type Clock, type Progress } from '@assay/core';
import { LedgerHomeProvider } from '@assay/ledger';
import { existsSync } from 'node:fs';
import { SqliteReadModelStore, readModelsPath } from '../adapters/sqlite-read-model-store';
import { SqliteImportStore, importsDbPath, importsDir } from '../adapters/sqlite-import-store';
import { catchUpRetrying, leaderboardOf, runReportOf, taskBudgetReportOf, tasksOf, type CatchUpResult } from '../application/projector';
import type { ImportStore } from '../ports/import-store.port';
import { importBundle, type BundleCheck, type ImportBundleResult } from '../application/import-bundle';
import type { LeaderboardGroup } from '../domain/leaderboard';
import type { RunReport, TaskBudgetReport } from '../domain/reports';
import type { Trajectory } from '../domain/trajectory';
import type { ReadModelStore } from '../ports/read-model-store.port';

const READ_MODELS_CATCH_UP = Symbol('READ_MODELS_CATCH_UP');

/** How the read models catch up with the ledger: verifying threads, and progress (the CLI's, on a terminal). */
export interface ReadModelsCatchUp {
  /** Verifying threads; default 1 (a server answers reads meanwhile); null: the verifier's own default. */
  readonly workers?: number | null;
  readonly progress?: Progress;
}

/** Opens `<home>/projections/read-models.db` once and catches it up before each read. */
@Injectable()
export class ReadModelsProvider implements OnModuleDestroy {
  private store: ReadModelStore | null = null;
  private importStore: ImportStore | null = null;
  private running: Promise<CatchUpResult> | null = null;
  /** The last catch-up's result (the API's projection-lag metric reads it). */
  last: CatchUpResult | null = null;

  constructor(
    private readonly ledger: LedgerHomeProvider,
    @Inject(READ_MODELS_CATCH_UP) private readonly catchUp: ReadModelsCatchUp,
  ) {}

  /**
   * The position the read models were last seen at, with the ledger's checkpoint size then. Read models only move up
   * to the latest signed checkpoint, so while that size is unchanged they are still where they were seen: a read then
   * costs one indexed query of the ledger, not a second one of the read models.
   */
  private seen: { treeSize: number; position: number } | null = null;

  /** The read models, caught up with the ledger's latest signed checkpoint. */
  async fresh(): Promise<ReadModelStore> {
    const home = await this.ledger.reader();
    const store = this.open();
    const treeSize = home.committedCheckpoint()?.treeSize ?? 0;
    if (!this.running && this.seen?.treeSize === treeSize && this.seen.position === treeSize) return store;
    // Nothing signed since the last catch-up (another projector may have caught up meanwhile): no work at all.
    if (!this.running && treeSize === store.checkpoint().position) {
      this.seen = { treeSize, position: treeSize };
      return store;
    }
    // Another projector (a CLI `assay leaderboard`) may commit first: catchUpRetrying starts again from there.
    const workers = this.catchUp.workers === undefined ? 1 : this.catchUp.workers;
    this.running ??= catchUpRetrying(home, store, {
      ...(workers !== null ? { workers } : {}),
      ...(this.catchUp.progress ? { progress: this.catchUp.progress } : {}),
    }).finally(() => {
      this.running = null;
    });
    this.last = await this.running;
    const position = store.checkpoint().position;
    this.seen = { treeSize: Math.max(treeSize, position), position };
    return store;
  }

  /**
   * What the read side answers from, as one string: the projected position and the number of imported rows. Equal
   * versions give equal answers, so answers can be kept by version (the API's results cache).
   */
  async version(): Promise<string> {
    await this.fresh();
    return `${this.seen!.position}.${this.imports()?.count() ?? 0}`;
  }

  /** The imported bundles' rows, once `assay bundle import` has made their table (a read never creates it). */
  imports(): ImportStore | undefined {
    if (!this.importStore) {
      const path = importsDbPath(this.ledger.home);
      if (!existsSync(path)) return undefined;
      this.importStore = new SqliteImportStore(path);
    }
    return this.importStore;
  }

  /** Another handle wrote the imports: reopened at the next read (SQLite shows committed rows anyway; this also picks up a table made meanwhile). */
  importsChanged(): void {
    this.importStore?.close();
    this.importStore = null;
  }

  private open(): ReadModelStore {
    if (this.store) return this.store;
    const path = readModelsPath(this.ledger.home);
    try {
      this.store = new SqliteReadModelStore(path);
    } catch (e) {
      if (e instanceof AssayError) throw e;
      throw new AssayError('PROJECTIONS_UNAVAILABLE', 'unavailable', `cannot open the read models at ${path}: ${(e as Error).message}`, { cause: e });
    }
    return this.store;
  }

  onModuleDestroy(): void {
    this.store?.close();
    this.store = null;
    this.importStore?.close();
    this.importStore = null;
  }
}

export class ListTasksQuery extends Query<Array<{ task: string; runs: number; imported: number }>> {}

export class LeaderboardQuery extends Query<LeaderboardGroup[]> {
  constructor(readonly task: string) {
    super();
  }
}

export class TrajectoryQuery extends Query<Trajectory | null> {
  constructor(readonly run: string) {
    super();
  }
}

export class RunReportQuery extends Query<RunReport | null> {
  constructor(readonly run: string) {
    super();
  }
}

export class TaskBudgetQuery extends Query<TaskBudgetReport> {
  constructor(readonly task: string) {
    super();
  }
}

@QueryHandler(ListTasksQuery)
export class ListTasksHandler implements IQueryHandler<ListTasksQuery> {
  constructor(private readonly p: ReadModelsProvider) {}
  async execute() {
    return tasksOf(await this.p.fresh(), this.p.imports());
  }
}

@QueryHandler(LeaderboardQuery)
export class LeaderboardHandler implements IQueryHandler<LeaderboardQuery> {
  constructor(private readonly p: ReadModelsProvider) {}
  async execute(q: LeaderboardQuery) {
    return leaderboardOf(await this.p.fresh(), q.task, this.p.imports());
  }
}

@QueryHandler(TrajectoryQuery)
export class TrajectoryHandler implements IQueryHandler<TrajectoryQuery> {
  constructor(private readonly p: ReadModelsProvider) {}
  async execute(q: TrajectoryQuery) {
    return (await this.p.fresh()).trajectory(q.run);
  }
}

@QueryHandler(RunReportQuery)
export class RunReportHandler implements IQueryHandler<RunReportQuery> {
  constructor(private readonly p: ReadModelsProvider) {}
  async execute(q: RunReportQuery) {
    return runReportOf(await this.p.fresh(), q.run);
  }
}

@QueryHandler(TaskBudgetQuery)
export class TaskBudgetHandler implements IQueryHandler<TaskBudgetQuery> {
  constructor(private readonly p: ReadModelsProvider) {}
  async execute(q: TaskBudgetQuery) {
    return taskBudgetReportOf(await this.p.fresh(), q.task);
  }
}

/**
 * `assay bundle import FILE` and `POST /bundles`: someone else's result bundle as an imported leaderboard row
 * (docs/projections.md, "Imported bundles"). `verify` is the offline verifier against the publisher's key (the app
 * composes it from @assay/bundles: this lib does not import it); nothing is kept when it does not verify.
 */
export class ImportBundleCommand extends Command<ImportBundleResult> {
  constructor(
    readonly file: string,
    /** How the file is named in messages (the caller's path, or "the request body"). */
    readonly label: string,
    /** The publisher's verifier key text, as parsed (`name+hex+base64`). */
    readonly publisherKey: string,
    readonly verify: (path: string) => Promise<BundleCheck>,
  ) {
    super();
  }
}

/** Imports into `<home>/imports` (its own SQLite file, opened per import), stamped with the module's clock. */
@CommandHandler(ImportBundleCommand)
export class ImportBundleHandler implements ICommandHandler<ImportBundleCommand> {
  constructor(
    private readonly p: ReadModelsProvider,
    private readonly ledger: LedgerHomeProvider,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}
  async execute(c: ImportBundleCommand): Promise<ImportBundleResult> {
    const store = new SqliteImportStore(importsDbPath(this.ledger.home));
    try {
      return await importBundle({
        dir: importsDir(this.ledger.home),
        file: c.file,
        label: c.label,
        publisherKey: c.publisherKey,
        store,
        now: () => this.clock.now(),
        verify: c.verify,
      });
    } finally {
      store.close();
      this.p.importsChanged();
    }
  }
}

const HANDLERS = [ListTasksHandler, LeaderboardHandler, TrajectoryHandler, RunReportHandler, TaskBudgetHandler, ImportBundleHandler];

@Module({})
export class ProjectionsModule {
  /**
   * `ledger`: the application's LedgerModule.forHome(...) module, the same object it imports itself (one ledger).
   * `catchUp`: the API keeps the default (one verifying thread); the CLI passes its progress and the verifier's default.
   */
  static forLedger(ledger: DynamicModule, catchUp: ReadModelsCatchUp = {}): DynamicModule {
    return {
      module: ProjectionsModule,
      imports: [CqrsModule, ledger],
      providers: [{ provide: READ_MODELS_CATCH_UP, useValue: catchUp }, ReadModelsProvider, ...HANDLERS],
      exports: [ReadModelsProvider],
    };
  }
}
