import { resolve } from 'node:path';
import { TerminalProgress, systemClock, type Clock, type Progress } from '@assay/core';

/** What every CLI command gets: where state lives, how to print, how to show progress. */
export interface CliContext {
  /** ASSAY_HOME (default `.assay` in the working directory): keys, ledger database, blobs, read models. */
  home: string;
  /** Writes one line (or a JSON document) to stdout. */
  out(text: string): void;
  /** Writes a line to stderr (diagnostics, never data). */
  err(text: string): void;
  /** A progress display on stderr when it is a terminal; silent otherwise. */
  progress(): Progress;
  /** The time a command stamps what it writes outside a module (a witness's cosignature); the system's by default. */
  clock?: Clock;
}

/** The context's clock, or the system's. */
export function clockOf(ctx: CliContext): Clock {
  return ctx.clock ?? systemClock;
}

export function defaultContext(env: NodeJS.ProcessEnv = process.env): CliContext {
  return {
    home: resolve(env.ASSAY_HOME && env.ASSAY_HOME.length > 0 ? env.ASSAY_HOME : '.assay'),
    out: (t) => process.stdout.write(t.endsWith('\n') ? t : `${t}\n`),
    err: (t) => process.stderr.write(t.endsWith('\n') ? t : `${t}\n`),
    progress: () => TerminalProgress.forStderr(),
  };
}
