/**
 * The HTTP API's role tokens (home/api-tokens.ts) and its older operator token (home/operator-token.ts) as a provider
 * and @nestjs/cqrs handlers: `assay tokens ...` and `/tokens` dispatch the same commands, and the API's access guard
 * asks the same provider who presents a token.
 */
import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { CommandHandler, QueryHandler, type ICommandHandler, type IQueryHandler } from '@nestjs/cqrs';
import { CLOCK, type Clock } from '@assay/core';
import { ApiTokenStore, resolveApiToken, type ApiPrincipal } from '../home/api-tokens';
import { createOperatorToken, deleteOperatorToken, loadOperatorTokenHash, operatorTokenPath } from '../home/operator-token';
import { CreateApiTokenCommand, CreateOperatorTokenCommand, DeleteOperatorTokenCommand, ListApiTokensQuery, RevokeApiTokenCommand } from './ledger.commands';
import { ASSAY_HOME } from './ledger.handlers';

/**
 * The token table under ASSAY_HOME, kept open once it exists (it may be created after the process starts: until
 * then each use looks again), closed with the module. Every lookup reads the current rows, so a token revoked by
 * another process stops working at the next request.
 */
@Injectable()
export class ApiTokensProvider implements OnModuleDestroy {
  private store: ApiTokenStore | null = null;

  constructor(@Inject(ASSAY_HOME) readonly home: string) {}

  /** The table; `create` makes the file (0600) and its directory (0700) when missing. */
  table(o: { create?: boolean } = {}): ApiTokenStore {
    if (this.store?.isOpen()) return this.store;
    this.store?.close();
    this.store = new ApiTokenStore(this.home, o);
    return this.store;
  }

  /** Who presents `token`: a role token of the table, the older operator token (role admin), or null. */
  principal(token: string, env: NodeJS.ProcessEnv = process.env): ApiPrincipal | null {
    return resolveApiToken(this.home, token, { store: this.table(), env });
  }

  /** Whether any token would be accepted: an unrevoked role token or the older operator token. */
  anyConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
    return loadOperatorTokenHash(this.home, env) !== null || this.table().any();
  }

  onModuleDestroy(): void {
    this.store?.close();
    this.store = null;
  }
}

@CommandHandler(CreateApiTokenCommand)
export class CreateApiTokenHandler implements ICommandHandler<CreateApiTokenCommand> {
  constructor(
    private readonly tokens: ApiTokensProvider,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}
  async execute(c: CreateApiTokenCommand) {
    return this.tokens.table({ create: true }).create({ role: c.role, name: c.name, clock: this.clock });
  }
}

@CommandHandler(RevokeApiTokenCommand)
export class RevokeApiTokenHandler implements ICommandHandler<RevokeApiTokenCommand> {
  constructor(
    private readonly tokens: ApiTokensProvider,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}
  async execute(c: RevokeApiTokenCommand) {
    return this.tokens.table().revoke(c.id, this.clock);
  }
}

@QueryHandler(ListApiTokensQuery)
export class ListApiTokensHandler implements IQueryHandler<ListApiTokensQuery> {
  constructor(private readonly tokens: ApiTokensProvider) {}
  async execute() {
    const table = this.tokens.table();
    return { tokens: table.list(), path: table.path };
  }
}

@CommandHandler(CreateOperatorTokenCommand)
export class CreateOperatorTokenHandler implements ICommandHandler<CreateOperatorTokenCommand> {
  constructor(
    private readonly tokens: ApiTokensProvider,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}
  async execute(c: CreateOperatorTokenCommand) {
    return createOperatorToken(this.tokens.home, { clock: this.clock, ...(c.rotate ? { rotate: true } : {}) });
  }
}

@CommandHandler(DeleteOperatorTokenCommand)
export class DeleteOperatorTokenHandler implements ICommandHandler<DeleteOperatorTokenCommand> {
  constructor(private readonly tokens: ApiTokensProvider) {}
  async execute() {
    return { deleted: deleteOperatorToken(this.tokens.home), path: operatorTokenPath(this.tokens.home) };
  }
}

export const API_TOKEN_HANDLERS = [CreateApiTokenHandler, RevokeApiTokenHandler, ListApiTokensHandler, CreateOperatorTokenHandler, DeleteOperatorTokenHandler];
