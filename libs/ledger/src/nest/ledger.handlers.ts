import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { CommandHandler, QueryHandler, type ICommandHandler, type IQueryHandler } from '@nestjs/cqrs';
import { systemClock, randomIds } from '@assay/core';
import { LedgerHome, verifyLedgerFile } from '../home/ledger-home';
import {
  AppendEventsCommand,
  InitLedgerCommand,
  ListKeysQuery,
  ReadEventsQuery,
  ProveConsistencyQuery,
  ProveInclusionQuery,
  SignCheckpointCommand,
  VerifyLedgerQuery,
} from './ledger.commands';

export const ASSAY_HOME = Symbol('ASSAY_HOME');

/** Opens the ledger under ASSAY_HOME once, on first use, and closes it with the module. */
@Injectable()
export class LedgerHomeProvider implements OnModuleDestroy {
  private opened: Promise<LedgerHome> | null = null;

  constructor(@Inject(ASSAY_HOME) readonly home: string) {}

  get(): Promise<LedgerHome> {
    this.opened ??= LedgerHome.open(this.home, { clock: systemClock, ids: randomIds });
    return this.opened;
  }

  async onModuleDestroy(): Promise<void> {
    if (this.opened) await (await this.opened.catch(() => null))?.close();
    this.opened = null;
  }
}

@CommandHandler(InitLedgerCommand)
export class InitLedgerHandler implements ICommandHandler<InitLedgerCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  execute(c: InitLedgerCommand) {
    return LedgerHome.init(this.p.home, { clock: systemClock, ids: randomIds, origin: c.origin });
  }
}

@CommandHandler(AppendEventsCommand)
export class AppendEventsHandler implements ICommandHandler<AppendEventsCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(c: AppendEventsCommand) {
    return (await this.p.get()).ledger.append(c.stream, c.events, c.expected);
  }
}

@CommandHandler(SignCheckpointCommand)
export class SignCheckpointHandler implements ICommandHandler<SignCheckpointCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute() {
    return (await this.p.get()).ledger.checkpoint();
  }
}

@QueryHandler(VerifyLedgerQuery)
export class VerifyLedgerHandler implements IQueryHandler<VerifyLedgerQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(q: VerifyLedgerQuery) {
    const { db, ...opts } = q.options;
    if (db !== undefined) return verifyLedgerFile(db, opts);
    return (await this.p.get()).verify(opts);
  }
}

@QueryHandler(ProveInclusionQuery)
export class ProveInclusionHandler implements IQueryHandler<ProveInclusionQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(q: ProveInclusionQuery) {
    return (await this.p.get()).ledger.inclusionProof(q.position);
  }
}

@QueryHandler(ProveConsistencyQuery)
export class ProveConsistencyHandler implements IQueryHandler<ProveConsistencyQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(q: ProveConsistencyQuery) {
    return (await this.p.get()).ledger.consistencyProof(q.size1, q.size2);
  }
}

@QueryHandler(ListKeysQuery)
export class ListKeysHandler implements IQueryHandler<ListKeysQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute() {
    return (await (await this.p.get()).keyRegistry()).all().map((k) => ({
      keyId: k.keyId,
      role: k.role,
      publicKey: k.publicKeyText,
      registeredAt: k.registeredAt,
      revokedAt: k.revokedAt,
    }));
  }
}

@QueryHandler(ReadEventsQuery)
export class ReadEventsHandler implements IQueryHandler<ReadEventsQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(q: ReadEventsQuery) {
    return (await this.p.get()).readEvents(q.options);
  }
}

export const LEDGER_HANDLERS = [
  ReadEventsHandler,
  ListKeysHandler,
  InitLedgerHandler,
  AppendEventsHandler,
  SignCheckpointHandler,
  VerifyLedgerHandler,
  ProveInclusionHandler,
  ProveConsistencyHandler,
];
