import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { AssayError } from '@assay/core';
import type { RejudgeReport } from '@assay/bundles';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withRuntimeBuses } from '../nest-context';
import { onStopSignals } from './stop-signals';
import { trustedKeysOf, witnessPolicyOf } from './trust-options';

/**
 * `assay rejudge FILE --task TASK_DIR [--repeat N] [--tolerance T] [--car FILE] [--json]` (docs/rejudge.md)
 *
 * Verifies a result bundle (as `assay verify` does), checks the task directory is the claimed task, brings the claimed
 * snapshot into this home's store, judges it N times in fresh Judges (as `assay judge --snapshot CID --repeat N`
 * does, through the same JudgeRuntime) and records a RejudgeCompleted event signed by this home's controller key.
 * The orchestration is `rejudge` in @assay/bundles, its ports bound by `rejudgeBundle` in @assay/runtime
 * (RejudgeBundleCommand); this file parses, refuses what it can before anything opens, and prints.
 *
 * Exit codes: 0 reproduced; 5 not reproduced (and a bundle that is invalid, a task that is not the claimed one);
 * 6 a bundle that cannot be checked; 7 could not judge (no Judge completed with a score); 2, 3, 4 as everywhere.
 */
const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);

export const REJUDGE_EXIT = { reproduced: 0, not_reproduced: 5, could_not_judge: 7 } as const;

interface Options {
  task: string;
  repeat: string;
  tolerance?: string;
  car?: string;
  trustedKey?: string[];
  trustedKeys?: string;
  witnessPolicy?: string;
  json?: boolean;
}

export function register(program: Command, ctx: CliContext): void {
  program
    .command('rejudge')
    .description(
      "re-judge a result bundle's selected snapshot with the full task: verify the bundle, check the task digest, judge the snapshot N times in fresh Judges, compare with the recorded score and record RejudgeCompleted (exit 0 reproduced, 5 not reproduced or refused as invalid, 6 cannot check, 7 could not judge; docs/rejudge.md)",
    )
    .argument('<file>', 'the bundle')
    .requiredOption('--task <dir>', "the task directory, hidden tests included (its digest must be the claim's task digest)")
    .option('--repeat <n>', 'number of fresh Judges (their median is compared with the recorded score)', '3')
    .option('--tolerance <t>', "largest |median - recorded| that counts as reproduced (default: the task's [metadata.assay_check] tolerance, else 0: exact)")
    .option('--car <file>', 'a CAR holding the snapshot, for a bundle exported with --snapshots none')
    .option('--trusted-key <key...>', "the ledger's root (controller) key: verifier key text or a .pub file; repeatable")
    .option('--trusted-keys <file>', 'a file of verifier key texts, one per line (# comments)')
    .option('--witness-policy <file>', "require the bundle's checkpoint to be cosigned by a quorum of these witnesses (as assay verify)")
    .option('--json', 'print the report as JSON')
    .action(async (file: string, o: Options) => {
      // Everything that can be refused without a ledger, a store or Docker is refused first.
      if (!/^\d{1,3}$/.test(o.repeat) || Number(o.repeat) < 1 || Number(o.repeat) > 100)
        throw usage(`--repeat must be an integer from 1 to 100, got "${o.repeat}"`);
      let tolerance: number | null = null;
      if (o.tolerance !== undefined) {
        const t = o.tolerance.trim();
        if (!/^(\d{1,20}(\.\d{0,20})?|\.\d{1,20})([eE][-+]?\d{1,3})?$/.test(t) || !Number.isFinite(Number(t)))
          throw usage(`--tolerance must be a finite number >= 0, got "${o.tolerance}"`);
        tolerance = Number(t);
      }
      const trusted = trustedKeysOf(o);
      const witnessPolicy = witnessPolicyOf(o);
      const isFile = (f: string, what: string, code: string) => {
        try {
          if (!statSync(f).isFile()) throw usage(`${what} ${f} is not a file`);
        } catch (e) {
          if (e instanceof AssayError) throw e;
          throw new AssayError(code, 'not_found', `cannot read ${what} ${f}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        }
      };
      isFile(file, 'bundle', 'BUNDLE_UNREADABLE');
      if (o.car !== undefined) isFile(o.car, '--car', 'BUNDLE_UNREADABLE');
      const taskDir = resolve(o.task);
      if (!existsSync(taskDir) || !statSync(taskDir).isDirectory())
        throw new AssayError('TASK_DIR_NOT_FOUND', 'not_found', `--task ${o.task} is not a directory`);

      const abort = new AbortController();
      const offSignals = onStopSignals(ctx, 'stopping the running Judge (again to quit at once)', (sig) => abort.abort(sig));
      const note = (line: string) => {
        if (!o.json) ctx.out(line);
      };
      try {
        const { RejudgeBundleCommand } = libs.runtime();
        const report = await withRuntimeBuses(ctx, ({ commands }) =>
          commands.execute(
            new RejudgeBundleCommand({
              home: ctx.home,
              bundleFile: file,
              taskDir,
              taskArg: o.task,
              carFile: o.car ?? null,
              repeat: Number(o.repeat),
              tolerance,
              trust: { trustedKeys: trusted, ...(witnessPolicy ? { witnessPolicy } : {}) },
              progress: ctx.progress(),
              signal: abort.signal,
              note,
              onSwept: (swept) =>
                ctx.err(
                  `assay: removed what dead judging processes left behind: ${swept.containers.length} container(s), ${swept.volumes.length} volume(s), ${swept.directories.length} work dir(s)`,
                ),
            }),
          ),
        );
        print(ctx, report, o.json === true);
        process.exitCode = REJUDGE_EXIT[report.verdict];
      } finally {
        offSignals();
      }
    });
}

function print(ctx: CliContext, r: RejudgeReport, json: boolean): void {
  if (json) return ctx.out(JSON.stringify(r, null, 2));
  const n = (x: number | null) => (x === null ? 'none' : String(x));
  ctx.out(`recorded  ${n(r.recordedScore)} (run ${r.bundle.run}, round ${n(r.round)}, ${r.metric ?? 'reward'}, ${r.direction ?? 'no direction'})`);
  ctx.out(`rejudged  ${r.scores.map((s) => (s.status === 'completed' ? n(s.primaryScore) : s.status)).join(', ')}`);
  ctx.out(`median    ${n(r.median)}; spread ${n(r.spread)}; delta ${n(r.delta)}; tolerance ${r.tolerance} (${r.toleranceFrom})`);
  ctx.out(`verdict   ${r.verdict.replace(/_/g, ' ')}`);
  ctx.out(`ledger    RejudgeCompleted@${r.event.position} (stream ${r.event.stream})`);
  ctx.out(
    `publish   assay bundle export-rejudge ${r.event.id} -o report.bundle (anyone checks it: assay verify report.bundle --trusted-key <this home's controller public key>)`,
  );
}
