import type { Command } from 'commander';
import { systemClock } from '@assay/core';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';

/** `assay api token ...`: the operator token that the HTTP API requires for every write. */
export function register(program: Command, ctx: CliContext): void {
  const api = program.command('api').description('the HTTP API (`node dist/apps/api/src/main.js`)');
  const token = api.command('token').description('the operator token the API requires for every write (only its SHA-256 is stored)');

  token
    .command('create')
    .description('create a random operator token, store its SHA-256 in <home>/api/operator-token.json (0600) and print the token once')
    .option('--rotate', 'replace the existing token (the old one stops working at once)')
    .option('--json', 'print JSON')
    .action((o: { rotate?: boolean; json?: boolean }) => {
      const { createOperatorToken } = libs.ledger();
      const r = createOperatorToken(ctx.home, { clock: systemClock, ...(o.rotate ? { rotate: true } : {}) });
      if (o.json) return ctx.out(JSON.stringify({ token: r.token, path: r.path, replaced: r.replaced }));
      ctx.out(r.token);
      ctx.err(`${r.replaced ? 'replaced the operator token' : 'created an operator token'}; only its SHA-256 is kept (${r.path}).`);
      ctx.err('This is the only time the token is shown: keep it secret. Writes to the API send "Authorization: Bearer <token>".');
    });

  token
    .command('delete')
    .description('remove the operator token: the API then serves reads only and refuses every write')
    .option('--json', 'print JSON')
    .action((o: { json?: boolean }) => {
      const { deleteOperatorToken, operatorTokenPath } = libs.ledger();
      const had = deleteOperatorToken(ctx.home);
      if (o.json) return ctx.out(JSON.stringify({ deleted: had, path: operatorTokenPath(ctx.home) }));
      ctx.out(
        had
          ? `deleted ${operatorTokenPath(ctx.home)}: the API now refuses every write`
          : `no operator token in ${operatorTokenPath(ctx.home)}: the API already refuses every write`,
      );
    });
}
