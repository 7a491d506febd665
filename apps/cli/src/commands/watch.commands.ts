import type { Command } from 'commander';
import { AssayError, escapeTerminalText } from '@assay/core';
import type { RunEventRecord, RunStatusView } from '@assay/run';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';

/**
 * `assay watch RUN_ID [--interval MS] [--json]` (docs/projections.md, "Watching a run"): follows a run in the ledger
 * as it goes, printing each round once it is judged, and a best-so-far line whenever the best changes, until the run
 * ends. It reads the ledger as stored (read-only, like `assay run status`), every `--interval` milliseconds, only the
 * events appended since its last read; `assay report` is the verified view. `--json` prints one JSON line per round
 * and per best change.
 */
const one = (t: string | null): string => escapeTerminalText(t ?? '-', { newlines: true });

export function register(program: Command, ctx: CliContext): void {
  program
    .command('watch')
    .description(
      'follow a run as it goes: each round as it is judged and the best so far, until the run ends (from the ledger as stored, as `assay run status`)',
    )
    .argument('<run-id>', 'the run id')
    .option('--interval <ms>', 'milliseconds between reads of the ledger (100-60000)', '1000')
    .option('--json', 'one JSON document per line: {round, status, score, rule} per round, {best} per change, {ended} at the end')
    .action(async (id: string, o: { interval: string; json?: boolean }) => {
      if (!libs.run().RUN_ID_RE.test(id)) throw new AssayError('CLI_USAGE', 'invalid_input', `not a run id: "${escapeTerminalText(id)}"`);
      const interval = /^[0-9]{1,5}$/.test(o.interval) ? Number(o.interval) : NaN;
      if (!(interval >= 100 && interval <= 60_000))
        throw new AssayError('CLI_USAGE', 'invalid_input', '--interval must be an integer 100-60000 (milliseconds)');
      const { runStatusView } = libs.run();
      const { RunEventsSinceQuery } = libs.runtime();
      let stop = false;
      const onSignal = () => {
        stop = true;
      };
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      // one module for the whole watch: the ledger opened read-only once, read again every interval
      await withRuntimeBuses(ctx, async ({ queries }) => {
        const events: RunEventRecord[] = [];
        let position = 0;
        let printed = 0;
        let best: { round: number; score: number } | null = null;
        let header = false;
        for (let first = true; !stop; first = false) {
          const r = await queries.execute(new RunEventsSinceQuery(id, position, events.length > 0));
          position = r.next;
          events.push(...r.events);
          if (events.length === 0) {
            if (first) throw new AssayError('RUN_NOT_FOUND', 'not_found', `no run ${id} in the ledger at ${ctx.home}`);
          } else {
            const v = runStatusView(id, events);
            if (!header && !o.json) {
              ctx.out(`watching run ${one(v.run)}  task ${one(v.task)}  agent ${one(v.agent)}  ${one(v.metric ?? 'reward')} (${v.direction ?? '-'})`);
              header = true;
            }
            // rounds are printed in order, each once it is settled (a round being judged holds back those after it)
            while (printed < v.rounds.length && v.rounds[printed]!.status !== 'judging') {
              const round = v.rounds[printed]!;
              if (o.json) ctx.out(JSON.stringify({ round: round.round, status: round.status, score: round.score, rule: round.rule }));
              else
                ctx.out(
                  `round ${round.round}  ${round.status}${round.score !== null ? `  score ${round.score}` : ''}${round.rule ? `  rule ${one(round.rule)}` : ''}`,
                );
              printed++;
              // the best so far after this round, by the run's selection rule: completed rounds with a score, the
              // better in the run's direction, ties to the earlier round
              if (round.status === 'completed' && round.score !== null) {
                const better = best === null || (v.direction === 'minimize' ? round.score < best.score : round.score > best.score);
                if (better) {
                  best = { round: round.round, score: round.score };
                  if (o.json) ctx.out(JSON.stringify({ best }));
                  else ctx.out(`best so far: ${best.score} (round ${best.round})`);
                }
              }
            }
            if (v.ended) {
              if (o.json) ctx.out(JSON.stringify({ ended: v.state, best: v.best }));
              else ctx.out(`run ${one(v.run)} ended: ${one(v.state)}${v.best ? `, best ${bestText(v)}` : ', no valid submission'}`);
              return;
            }
          }
          await new Promise((res) => setTimeout(res, interval));
        }
      }).finally(() => {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      });
    });
}

const bestText = (v: RunStatusView): string | null => (v.best ? `${v.best.score} (round ${v.best.round})` : null);
