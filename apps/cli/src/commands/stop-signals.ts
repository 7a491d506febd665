import type { CliContext } from '../cli-context';

/**
 * Ctrl-C / SIGTERM during long work (a run, Judges, a baseline, a task check): the first one says what stops and
 * calls `stop` (kill the running Judge, cancel the run); a second one ends the process at once (Node's default, as
 * the handler is registered once). Returns the function that removes the handlers, for a `finally`.
 */
export function onStopSignals(ctx: CliContext, doing: string, stop: (sig: NodeJS.Signals) => void): () => void {
  const onSignal = (sig: NodeJS.Signals) => {
    ctx.err(`assay: ${sig}: ${doing}`);
    stop(sig);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}
