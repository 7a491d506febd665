/**
 * The HTTP API's role tokens as commands and queries of LedgerModule (libs/ledger/src/nest/api-tokens.handlers.ts):
 * what `assay tokens ...` and `/tokens` both dispatch, and the provider the API's access guard asks, against a real
 * token table under a temporary ASSAY_HOME, stamped with the module's clock.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { INestApplicationContext } from '@nestjs/common';
import { ManualClock } from '@assay/core';
import {
  ApiTokenStore,
  ApiTokensProvider,
  CreateApiTokenCommand,
  CreateOperatorTokenCommand,
  DeleteOperatorTokenCommand,
  LedgerModule,
  ListApiTokensQuery,
  RevokeApiTokenCommand,
  apiTokensPath,
  operatorTokenPath,
  type ApiRole,
} from '@assay/ledger';

const T0 = '2026-06-01T08:00:00.000Z';
const NO_ENV: NodeJS.ProcessEnv = {};

describe('LedgerModule: API tokens as commands and queries', () => {
  let home: string;
  let clock: ManualClock;
  let app: INestApplicationContext;

  beforeEach(async () => {
    home = mkdtempSync(join(tmpdir(), 'assay-tokens-module-'));
    clock = new ManualClock(T0);
    app = await NestFactory.createApplicationContext(LedgerModule.forHome(home, { clock }), { logger: false, abortOnError: false });
  });
  afterEach(async () => {
    await app.close();
    rmSync(home, { recursive: true, force: true });
  });

  it('creates, lists and revokes with the module clock; the provider resolves a token until it is revoked', async () => {
    const commands = app.get(CommandBus);
    const queries = app.get(QueryBus);
    const tokens = app.get(ApiTokensProvider);
    expect(tokens.anyConfigured(NO_ENV)).toBe(false);
    await expect(queries.execute(new ListApiTokensQuery())).resolves.toEqual({ tokens: [], path: apiTokensPath(home) });

    const created = await commands.execute(new CreateApiTokenCommand('operator', 'ci runner'));
    expect(created).toMatchObject({ role: 'operator', name: 'ci runner', createdAt: T0, revokedAt: null, path: apiTokensPath(home) });
    expect(created.token).toMatch(/^assay-tk-[A-Za-z0-9_-]{43}$/);
    expect(statSync(apiTokensPath(home)).mode & 0o777).toBe(0o600);
    expect(tokens.anyConfigured(NO_ENV)).toBe(true);
    expect(tokens.principal(created.token, NO_ENV)).toEqual({ id: created.id, name: 'ci runner', role: 'operator' });

    const listed = await queries.execute(new ListApiTokensQuery());
    expect(listed.tokens).toEqual([{ id: created.id, name: 'ci runner', role: 'operator', createdAt: T0, revokedAt: null }]);
    expect(JSON.stringify(listed)).not.toContain(created.token);

    clock.advance(60_000);
    const revoked = await commands.execute(new RevokeApiTokenCommand(created.id));
    expect(revoked.revokedAt).toBe('2026-06-01T08:01:00.000Z');
    expect(tokens.principal(created.token, NO_ENV)).toBeNull();
    expect(tokens.anyConfigured(NO_ENV)).toBe(false);
  });

  it('refuses a bad role, a bad name and an unknown id with their codes, and records nothing for them', async () => {
    const commands = app.get(CommandBus);
    await expect(commands.execute(new CreateApiTokenCommand('root' as ApiRole, 'x'))).rejects.toMatchObject({ code: 'API_TOKEN_BAD_ROLE' });
    await expect(commands.execute(new CreateApiTokenCommand('reader', ' leading space'))).rejects.toMatchObject({ code: 'API_TOKEN_BAD_NAME' });
    await expect(commands.execute(new RevokeApiTokenCommand('tk_0123456789abcdef'))).rejects.toMatchObject({ code: 'API_TOKEN_NOT_FOUND' });
    await expect(app.get(QueryBus).execute(new ListApiTokensQuery())).resolves.toMatchObject({ tokens: [] });
  });

  it('sees a table another process creates after it first looked, and a revocation made by another process', async () => {
    const tokens = app.get(ApiTokensProvider);
    expect(tokens.anyConfigured(NO_ENV)).toBe(false);
    const other = new ApiTokenStore(home, { create: true });
    try {
      const t = other.create({ role: 'auditor', name: 'elsewhere', clock });
      expect(tokens.principal(t.token, NO_ENV)).toMatchObject({ id: t.id, role: 'auditor' });
      other.revoke(t.id, clock);
      expect(tokens.principal(t.token, NO_ENV)).toBeNull();
    } finally {
      other.close();
    }
  });

  it('creates, rotates and deletes the older operator token (role admin) with the module clock', async () => {
    const commands = app.get(CommandBus);
    const tokens = app.get(ApiTokensProvider);
    const first = await commands.execute(new CreateOperatorTokenCommand());
    expect(first).toMatchObject({ path: operatorTokenPath(home), replaced: false });
    expect(JSON.parse(readFileSync(operatorTokenPath(home), 'utf8'))).toMatchObject({ createdAt: T0 });
    expect(statSync(operatorTokenPath(home)).mode & 0o777).toBe(0o600);
    expect(tokens.principal(first.token, NO_ENV)).toEqual({ id: 'operator-token', name: 'operator token', role: 'admin' });
    await expect(commands.execute(new CreateOperatorTokenCommand())).rejects.toMatchObject({ code: 'API_TOKEN_EXISTS' });

    clock.advance(1000);
    const second = await commands.execute(new CreateOperatorTokenCommand(true));
    expect(second.replaced).toBe(true);
    expect(JSON.parse(readFileSync(operatorTokenPath(home), 'utf8'))).toMatchObject({ createdAt: '2026-06-01T08:00:01.000Z' });
    expect(tokens.principal(first.token, NO_ENV)).toBeNull();
    expect(tokens.anyConfigured(NO_ENV)).toBe(true);

    await expect(commands.execute(new DeleteOperatorTokenCommand())).resolves.toEqual({ deleted: true, path: operatorTokenPath(home) });
    expect(tokens.principal(second.token, NO_ENV)).toBeNull();
    expect(tokens.anyConfigured(NO_ENV)).toBe(false);
    await expect(commands.execute(new DeleteOperatorTokenCommand())).resolves.toEqual({ deleted: false, path: operatorTokenPath(home) });
  });

  it('closes the table with the module', async () => {
    const tokens = app.get(ApiTokensProvider);
    await app.get(CommandBus).execute(new CreateApiTokenCommand('reader', 'r'));
    const table = tokens.table();
    expect(table.isOpen()).toBe(true);
    await app.close();
    expect(table.isOpen()).toBe(false);
    app = await NestFactory.createApplicationContext(LedgerModule.forHome(home, { clock }), { logger: false, abortOnError: false });
  });
});
