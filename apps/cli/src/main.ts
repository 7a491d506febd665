import 'reflect-metadata';
import { Command, CommanderError } from 'commander';
import { AssayError, EXIT_CODES, escapeTerminalText } from '@assay/core';
import { defaultContext, type CliContext } from './cli-context';
import { registerCommands } from './commands';

/**
 * Translates errors once, at the edge: a code and a message for user mistakes, a stack only for bugs. Messages may
 * quote what an agent or a candidate chose (a path, a name): control characters are shown as escapes.
 */
export function reportError(e: unknown, ctx: CliContext): number {
  if (e instanceof AssayError) {
    ctx.err(`assay: error ${e.code}: ${escapeTerminalText(e.message)}`);
    return EXIT_CODES[e.kind];
  }
  if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : EXIT_CODES.invalid_input;
  ctx.err(`assay: internal error: ${escapeTerminalText(e instanceof Error ? (e.stack ?? e.message) : String(e))}`);
  return EXIT_CODES.internal;
}

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('assay')
    .description('Assay: signed, checkable evaluation of research agents')
    .exitOverride()
    .configureOutput({ writeOut: (s) => process.stdout.write(s), writeErr: (s) => process.stderr.write(s) });
  registerCommands(program, ctx);
  return program;
}

export async function runCli(argv: string[], ctx: CliContext = defaultContext()): Promise<number> {
  try {
    await buildProgram(ctx).parseAsync(argv, { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    return reportError(e, ctx);
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
