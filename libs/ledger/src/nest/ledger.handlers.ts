import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { CommandHandler, QueryHandler, type ICommandHandler, type IQueryHandler } from '@nestjs/cqrs';
import { CLOCK, ID_GENERATOR, type Clock, type IdGenerator } from '@assay/core';
import { LedgerHome, verifyLedgerFile, verifyLedgerHome, initLedgerHome } from '../home/ledger-home';
import { Ledger } from '../application/ledger';
import {
  AppendEventsBatchCommand,
  AppendEventsCommand,
  InitLedgerCommand,
  ListKeysQuery,
  RegisterKeyCommand,
  RevokeKeyCommand,
  ReadEventsQuery,
  ProveConsistencyQuery,
  ProveInclusionQuery,
  SignCheckpointCommand,
  VerifyLedgerQuery,
} from './ledger.commands';

export const ASSAY_HOME = Symbol('ASSAY_HOME');

/**
 * Opens the ledger under ASSAY_HOME once, on first use, and closes it with the module: `get()` for commands (writes:
 * the database opened for writing and migrated, the private keys loaded), `reader()` for queries (the database
 * opened read-only, no keys), so that no query ever writes or migrates.
 */
@Injectable()
export class LedgerHomeProvider implements OnModuleDestroy {
  private opened: Promise<LedgerHome> | null = null;
  private openedReadOnly: Promise<LedgerHome> | null = null;

  constructor(
    @Inject(ASSAY_HOME) readonly home: string,
    /** The time and the ids events are stamped with (LedgerModule.forHome binds them; systemClock and randomIds by default). */
    @Inject(CLOCK) readonly clock: Clock,
    @Inject(ID_GENERATOR) readonly ids: IdGenerator,
  ) {}

  get(): Promise<LedgerHome> {
    this.opened ??= this.open({ clock: this.clock, ids: this.ids });
    return this.opened;
  }

  reader(): Promise<LedgerHome> {
    // A failed open is not kept: the next query tries again (e.g. once a writer has migrated the database).
    this.openedReadOnly ??= this.open({ clock: this.clock, ids: this.ids, readOnly: true }).catch((e: unknown) => {
      this.openedReadOnly = null;
      throw e;
    });
    return this.openedReadOnly;
  }

  /** Opens the home; a refusal (a missing or damaged ledger) comes back as a rejected promise. */
  private open(o: { clock: Clock; ids: IdGenerator; readOnly?: boolean }): Promise<LedgerHome> {
    return new Promise((resolve) => resolve(new LedgerHome(this.home, o)));
  }

  async onModuleDestroy(): Promise<void> {
    for (const p of [this.opened, this.openedReadOnly]) if (p) await (await p.catch(() => null))?.close();
    this.opened = null;
    this.openedReadOnly = null;
  }
}

@CommandHandler(InitLedgerCommand)
export class InitLedgerHandler implements ICommandHandler<InitLedgerCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  execute(c: InitLedgerCommand) {
    return initLedgerHome(this.p.home, { clock: this.p.clock, ids: this.p.ids, origin: c.origin });
  }
}

@CommandHandler(AppendEventsCommand)
export class AppendEventsHandler implements ICommandHandler<AppendEventsCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(c: AppendEventsCommand) {
    return (await this.p.get()).ledger.appendGeneric(c.stream, c.events, c.expected);
  }
}

@CommandHandler(AppendEventsBatchCommand)
export class AppendEventsBatchHandler implements ICommandHandler<AppendEventsBatchCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(c: AppendEventsBatchCommand) {
    return (await this.p.get()).ledger.appendGenericMany(c.items, c.onProgress);
  }
}

@CommandHandler(RegisterKeyCommand)
export class RegisterKeyHandler implements ICommandHandler<RegisterKeyCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(c: RegisterKeyCommand) {
    return (await this.p.get()).ledger.append(
      Ledger.keyStream(c.key.name),
      [{ type: 'KeyRegistered', data: { keyId: c.key.signer, publicKey: c.key.publicKeyText, role: c.role } }],
      'no_stream',
    );
  }
}

@CommandHandler(RevokeKeyCommand)
export class RevokeKeyHandler implements ICommandHandler<RevokeKeyCommand> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(c: RevokeKeyCommand) {
    const name = c.signer.slice(0, c.signer.lastIndexOf('+'));
    return (await this.p.get()).ledger.append(Ledger.keyStream(name), [{ type: 'KeyRevoked', data: { keyId: c.signer, reason: c.reason } }], 'stream_exists');
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
    // Its own read-only connection (a private copy when the home's directory cannot be written), closed after.
    return verifyLedgerHome(this.p.home, opts);
  }
}

@QueryHandler(ProveInclusionQuery)
export class ProveInclusionHandler implements IQueryHandler<ProveInclusionQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(q: ProveInclusionQuery) {
    if (q.signIfNeeded) return (await this.p.get()).ledger.inclusionProof(q.position, { signIfNeeded: true });
    return (await this.p.reader()).ledger.inclusionProof(q.position);
  }
}

@QueryHandler(ProveConsistencyQuery)
export class ProveConsistencyHandler implements IQueryHandler<ProveConsistencyQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute(q: ProveConsistencyQuery) {
    return (await this.p.reader()).ledger.consistencyProof(q.size1, q.size2);
  }
}

@QueryHandler(ListKeysQuery)
export class ListKeysHandler implements IQueryHandler<ListKeysQuery> {
  constructor(private readonly p: LedgerHomeProvider) {}
  async execute() {
    return (await (await this.p.reader()).keyRegistry()).all().map((k) => ({
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
    return (await this.p.reader()).readEvents(q.options);
  }
}

export const LEDGER_HANDLERS = [
  ReadEventsHandler,
  ListKeysHandler,
  InitLedgerHandler,
  AppendEventsHandler,
  AppendEventsBatchHandler,
  RegisterKeyHandler,
  RevokeKeyHandler,
  SignCheckpointHandler,
  VerifyLedgerHandler,
  ProveInclusionHandler,
  ProveConsistencyHandler,
];
