import { spawn } from 'node:child_process';
import { extname, join } from 'node:path';
import type { Command } from 'commander';
import { AssayError, escapeTerminalText } from '@assay/core';
import type { ApiRole } from '@assay/ledger';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withBuses } from '../nest-context';

const ROLES = ['admin', 'operator', 'auditor', 'reader'];

/**
 * `assay serve`, `assay tokens ...` and `assay api token ...` (docs/operations.md, "HTTP API"): the HTTP API, its
 * role tokens, and the older single operator token (role admin).
 */
export function register(program: Command, ctx: CliContext): void {
  program
    .command('serve')
    .description('serve the HTTP API, its web pages (/ui/) and its OpenAPI document (/api/docs) for this ASSAY_HOME, on the embedded ledger; Ctrl-C stops it')
    .option('--host <host>', 'address to listen on (ASSAY_API_HOST; default 127.0.0.1: loopback only)')
    .option('--port <port>', 'port (ASSAY_API_PORT; default 8080)')
    .option('--reads <policy>', 'open: reads of public results need no token (default); token: every read needs a token (ASSAY_API_READS)')
    .option('--json', 'once listening, print one JSON line {url, ui, docs, home, reads, writes} on stdout (instead of the line on stderr)')
    .action(async (o: { host?: string; port?: string; reads?: string; json?: boolean }) => {
      if (o.reads !== undefined && o.reads !== 'open' && o.reads !== 'token')
        throw new AssayError('CLI_USAGE', 'invalid_input', '--reads must be "open" or "token"');
      if (o.port !== undefined && !(/^[0-9]{1,5}$/.test(o.port) && Number(o.port) >= 1 && Number(o.port) <= 65535))
        throw new AssayError('CLI_USAGE', 'invalid_input', `--port must be an integer 1-65535, got "${escapeTerminalText(o.port)}"`);
      if (o.host !== undefined && !/^[A-Za-z0-9.:[\]%-]{1,253}$/.test(o.host))
        throw new AssayError('CLI_USAGE', 'invalid_input', `--host must be a host name or an IP address, got "${escapeTerminalText(o.host)}"`);
      // The API is its own app (apps/api): started as a child process with the same Node options, so that the CLI
      // stays free of the server's modules and the server of the CLI's.
      const entry = join(__dirname, '..', '..', '..', 'api', 'src', `main${extname(__filename)}`);
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        ASSAY_HOME: ctx.home,
        ...(o.host !== undefined ? { ASSAY_API_HOST: o.host } : {}),
        ...(o.port !== undefined ? { ASSAY_API_PORT: o.port } : {}),
        ...(o.reads !== undefined ? { ASSAY_API_READS: o.reads } : {}),
        ...(o.json ? { ASSAY_API_STARTED_JSON: '1' } : {}),
        // The API ends with this process, however it ends (SIGKILL included): it watches its stdin, a pipe whose
        // writing end only this process holds, and stops at end-of-file.
        ASSAY_API_EXIT_WITH_PARENT: '1',
      };
      const child = spawn(process.execPath, [...process.execArgv, entry], { env, stdio: ['pipe', 'inherit', 'inherit'] });
      child.stdin?.on('error', () => undefined);
      const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
      const onInt = forward('SIGINT');
      const onTerm = forward('SIGTERM');
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
      const code = await new Promise<number>((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 0 : 70))));
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      // The API printed its own error line; this one says that it ended, with the same kind of exit status.
      if (code !== 0) {
        const kinds = { 2: 'invalid_input', 3: 'not_found', 4: 'conflict', 5: 'integrity', 6: 'refused' } as const;
        const kind = kinds[code as keyof typeof kinds] ?? 'unavailable';
        throw new AssayError('API_SERVER_EXITED', kind, `the API process exited with status ${code}`, { details: { status: code } });
      }
    });

  const tokens = program
    .command('tokens')
    .description('API tokens with roles: admin (keys, tasks), operator (runs), auditor (cosign, re-judge), reader; only their SHA-256 is stored');

  tokens
    .command('create')
    .description('create a random token of a role, store its SHA-256 in <home>/api/tokens.db (0600) and print the token once')
    .requiredOption('--role <role>', `one of ${ROLES.join(', ')}`)
    .option('--name <name>', 'what the token is for (1-64 characters: letters, digits, space and . _ @ : -)', 'token')
    .option('--json', 'print JSON')
    .action(async (o: { role: string; name: string; json?: boolean }) => {
      const { CreateApiTokenCommand, isApiRole } = libs.ledger();
      if (!isApiRole(o.role))
        throw new AssayError('CLI_USAGE', 'invalid_input', `--role must be one of ${ROLES.join(', ')}, got "${escapeTerminalText(o.role)}"`);
      const t = await withBuses(ctx, (b) => b.commands.execute(new CreateApiTokenCommand(o.role as ApiRole, o.name)));
      if (o.json) return ctx.out(JSON.stringify({ token: t.token, id: t.id, name: t.name, role: t.role, createdAt: t.createdAt, path: t.path }));
      ctx.out(t.token);
      ctx.err(`created token ${t.id} (${t.role}, "${escapeTerminalText(t.name)}"); only its SHA-256 is kept (${t.path}).`);
      ctx.err('This is the only time the token is shown: keep it secret. Send it as "Authorization: Bearer <token>".');
    });

  tokens
    .command('list')
    .description('list the tokens: id, role, name, created and revoked times (never a token or its hash)')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const { ListApiTokensQuery } = libs.ledger();
      const { tokens: list, path } = await withBuses(ctx, (b) => b.queries.execute(new ListApiTokensQuery()));
      if (o.json) return ctx.out(JSON.stringify({ tokens: list }, null, 2));
      if (list.length === 0) return ctx.out(`no API tokens in ${path}`);
      for (const t of list)
        ctx.out(`${t.id}  ${t.role.padEnd(8)}  ${t.createdAt}  ${t.revokedAt ? `revoked ${t.revokedAt}` : 'active'}  ${escapeTerminalText(t.name)}`);
    });

  tokens
    .command('revoke')
    .description('revoke a token by id: the API refuses it from its next request')
    .argument('<id>', 'the token id (tk_ and 16 hex digits; `assay tokens list`)')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const { RevokeApiTokenCommand } = libs.ledger();
      const t = await withBuses(ctx, (b) => b.commands.execute(new RevokeApiTokenCommand(id)));
      if (o.json) return ctx.out(JSON.stringify(t));
      ctx.out(`revoked ${t.id} (${t.role}) at ${t.revokedAt}`);
    });

  const api = program.command('api').description('the older single operator token of the HTTP API (role admin); see `assay tokens` and `assay serve`');
  const token = api.command('token').description('the operator token the API requires for every write (only its SHA-256 is stored)');

  token
    .command('create')
    .description('create a random operator token (role admin), store its SHA-256 in <home>/api/operator-token.json (0600) and print the token once')
    .option('--rotate', 'replace the existing token (the old one stops working at once)')
    .option('--json', 'print JSON')
    .action(async (o: { rotate?: boolean; json?: boolean }) => {
      const { CreateOperatorTokenCommand } = libs.ledger();
      const r = await withBuses(ctx, (b) => b.commands.execute(new CreateOperatorTokenCommand(o.rotate === true)));
      if (o.json) return ctx.out(JSON.stringify({ token: r.token, path: r.path, replaced: r.replaced }));
      ctx.out(r.token);
      ctx.err(`${r.replaced ? 'replaced the operator token' : 'created an operator token'}; only its SHA-256 is kept (${r.path}).`);
      ctx.err('This is the only time the token is shown: keep it secret. Writes to the API send "Authorization: Bearer <token>".');
    });

  token
    .command('delete')
    .description('remove the operator token: the API then serves reads only and refuses every write')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const { DeleteOperatorTokenCommand } = libs.ledger();
      const { deleted, path } = await withBuses(ctx, (b) => b.commands.execute(new DeleteOperatorTokenCommand()));
      if (o.json) return ctx.out(JSON.stringify({ deleted, path }));
      ctx.out(deleted ? `deleted ${path}: the API now refuses every write` : `no operator token in ${path}: the API already refuses every write`);
    });
}
