import type { Command } from 'commander';
import type { JudgeResult } from '@assay/judge';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';
import { onStopSignals } from './stop-signals';

/**
 * `assay judge TASK_DIR --snapshot CID|DIR [--repeat N] [--metric KEY] [--json]`
 *
 * Builds the task's images when needed, snapshots DIR into the store (so a Judge always runs on a CID), then runs N
 * fresh Judges one after the other and prints each result (status, rewards, primary score, output log, ledger
 * positions) and, for N > 1, the median primary score of the completed ones. Exit 0 whatever the statuses, except
 * 7 (JUDGE_INFRASTRUCTURE) when any Judge ended in infrastructure_error. Leftovers of a killed `assay judge` are
 * removed first.
 */
export function register(program: Command, ctx: CliContext): void {
  program
    .command('judge')
    .description('score a snapshot with fresh, isolated Judge containers and record the results in the ledger')
    .argument('<task-dir>', 'task directory (Harbor / OpenRSI Index format)')
    .requiredOption('--snapshot <cid|dir>', 'a snapshot CID in ASSAY_HOME/blobs, or a directory to snapshot first')
    .option('--repeat <n>', 'number of fresh Judges (median of their primary scores)', '1')
    .option('--metric <key>', "primary metric (over the task's [metadata.assay] primary_metric)")
    .option('--json', 'print one JSON document')
    .action(async (taskDir: string, o: { snapshot: string; repeat: string; metric?: string; json?: boolean }) => {
      const { judgeError } = libs.judge();
      if (!/^\d{1,3}$/.test(o.repeat) || Number(o.repeat) < 1 || Number(o.repeat) > 100) {
        throw judgeError('JUDGE_BAD_REQUEST', `--repeat must be an integer from 1 to 100, got "${o.repeat}"`);
      }
      const n = Number(o.repeat);
      // Ctrl-C / SIGTERM: kill the running Judge, record it (infrastructure_error), start no other. A second one
      // ends the process at once; the next `assay judge` sweeps what is left.
      const abort = new AbortController();
      const offSignals = onStopSignals(ctx, 'stopping the running Judge (again to quit at once)', (sig) => abort.abort(sig));
      try {
        const { JudgeSnapshotCommand } = libs.runtime();
        const rep = await withRuntimeBuses(ctx, ({ commands }) =>
          commands.execute(
            new JudgeSnapshotCommand({
              home: ctx.home,
              taskDir,
              snapshot: o.snapshot,
              repeat: n,
              metric: o.metric ?? null,
              progress: ctx.progress(),
              signal: abort.signal,
              onSwept: (swept) =>
                ctx.err(
                  `assay: removed what dead judging processes left behind: ${swept.containers.length} container(s), ${swept.volumes.length} volume(s), ${swept.directories.length} work dir(s)` +
                    (swept.completed.length ? `; recorded infrastructure_error for ${swept.completed.join(', ')}` : ''),
                ),
              onReady: ({ task, snapshot, from }) => {
                if (o.json) return;
                const p = task.prepared;
                ctx.out(`task      ${task.plan.name} (${p.dir})`);
                ctx.out(`snapshot  ${snapshot}${from === 'directory' ? ` (snapshot of ${o.snapshot})` : ''}`);
                ctx.out(`image     ${task.images.judge.id} (${task.images.judge.tag}${task.images.judge.built ? ', built now' : ''})`);
                ctx.out(`tests     ${p.testsDigest}`);
                ctx.out(
                  `limits    ${p.limits.cpus} cpu, ${p.limits.memoryBytes / 1048576} MiB, ${p.limits.pidsLimit} pids, ${p.limits.verifierTimeoutSec} s, network ${p.network}`,
                );
              },
              onResult: (r, i) => {
                if (!o.json) printResult(ctx, r, i, n);
              },
            }),
          ),
        );
        if (o.json) {
          const { cancelled: _cancelled, ...doc } = rep;
          ctx.out(JSON.stringify(doc, null, 2));
        } else if (n > 1) {
          ctx.out(
            `median    ${rep.median === null ? 'none' : rep.median} (primary scores of ${rep.results.filter((r) => r.status === 'completed' && r.primaryScore !== null).length} completed of ${rep.results.length} Judges)`,
          );
        }
        const infra = rep.results.filter((r) => r.status === 'infrastructure_error');
        if (rep.cancelled) {
          throw judgeError('JUDGE_CANCELLED', `cancelled after ${rep.results.length} of ${n} Judge(s); each was recorded`);
        }
        if (infra.length) {
          throw judgeError(
            'JUDGE_INFRASTRUCTURE',
            `${infra.length} of ${n} Judge(s) ended in infrastructure_error (no score): ${infra.map((r) => `${r.judge}: ${r.detail ?? ''}`).join('; ')}`,
          );
        }
      } finally {
        offSignals();
      }
    });
}

function printResult(ctx: CliContext, r: JudgeResult, i: number, n: number): void {
  ctx.out(`judge${n > 1 ? ` ${i + 1}/${n}` : ''} ${r.judge}: ${r.status}${r.exitCode !== null ? `, exit ${r.exitCode}` : ''}, ${r.durationMs} ms`);
  if (r.rewards)
    ctx.out(
      `  rewards   ${Object.entries(r.rewards)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
  if (r.status === 'completed') ctx.out(`  primary   ${r.primaryMetric ?? '(none)'} = ${r.primaryScore === null ? 'none' : r.primaryScore}`);
  if (r.rule) ctx.out(`  rule      ${r.rule.rule} (score 0)`);
  if (r.detail) ctx.out(`  detail    ${r.detail.split('\n')[0]}`);
  ctx.out(`  output    ${r.output.path} (${r.output.totalBytes} bytes${r.output.truncated ? `, first ${r.output.keptBytes} kept` : ''}, ${r.output.digest})`);
  ctx.out(`  ledger    ${r.events.map((e) => `${e.type}@${e.position}`).join(' ')} (stream ${r.stream})`);
}
