import 'reflect-metadata';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { AssayError, EXIT_CODES, escapeTerminalText, systemErrorToAssay } from '@assay/core';
import { defaultContext, type CliContext } from './cli-context';
import { registerCommands } from './commands';

/** How a command's failure is reported: one line on stderr, or one JSON document on stdout when `--json` was asked. */
export interface ReportOptions {
  json?: boolean;
}

/**
 * Translates errors once, at the edge: a code and a message for user mistakes (usage errors from the argument
 * parser and errors the operating system or SQLite raise about the caller's paths included), a stack only for bugs.
 * Messages may quote what an agent or a candidate chose (a path, a name): control characters are shown as escapes.
 * With `--json` the error is one JSON document on stdout, `{"error": {code, kind, message, exitCode, details}}`.
 */
export function reportError(e: unknown, ctx: CliContext, options: ReportOptions = {}): number {
  if (e instanceof CommanderError) {
    if (e.exitCode === 0 || e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return 0;
    return reportError(new AssayError('CLI_USAGE', 'invalid_input', e.message.replace(/^error: /, '')), ctx, options);
  }
  const known = e instanceof AssayError ? e : systemErrorToAssay(e);
  if (known) {
    const exitCode = EXIT_CODES[known.kind];
    if (options.json) ctx.out(JSON.stringify({ error: { code: known.code, kind: known.kind, message: known.message, exitCode, details: known.details } }));
    // one line whatever the message holds: several problems are joined with "; "
    else
      ctx.err(
        `assay: error ${known.code}: ${escapeTerminalText(
          known.message
            .split(/\r?\n/)
            .filter((l) => l.trim() !== '')
            .join('; '),
        )}`,
      );
    return exitCode;
  }
  const text = e instanceof Error ? (e.stack ?? e.message) : String(e);
  if (options.json)
    ctx.out(
      JSON.stringify({
        error: { code: 'INTERNAL', kind: 'internal', message: e instanceof Error ? e.message : String(e), exitCode: EXIT_CODES.internal, details: {} },
      }),
    );
  ctx.err(`assay: internal error (a bug in Assay; please report it with this text): ${escapeTerminalText(text)}`);
  return EXIT_CODES.internal;
}

/** Assay's version, from the package.json this build belongs to. */
export function assayVersion(): string {
  for (let dir = __dirname, i = 0; i < 6; i++, dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'assay' && typeof pkg.version === 'string') return pkg.version;
  }
  return 'unknown';
}

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('assay')
    .description('Assay: signed, checkable evaluation of research agents')
    .version(`assay ${assayVersion()} (node ${process.version})`, '-V, --version', 'print the version and exit')
    .exitOverride()
    // usage errors are printed by reportError, in the same one-line form (or JSON) as every other error
    .configureOutput({ writeOut: (s) => ctx.out(s), writeErr: (s) => ctx.err(s), outputError: () => undefined })
    .showSuggestionAfterError(true);
  registerCommands(program, ctx);
  return program;
}

/** `--json` anywhere before a `--` asks for JSON output, errors included. */
export function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

export async function runCli(argv: string[], ctx: CliContext = defaultContext()): Promise<number> {
  process.exitCode = undefined;
  try {
    await buildProgram(ctx).parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    return reportError(e, ctx, { json: wantsJson(argv) });
  }
}

if (require.main === module || process.argv[1]?.endsWith('assay.js') || process.argv[1]?.endsWith('assay')) {
  // `assay ... | head` closes the pipe early: that is not an error.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
  void runCli(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
