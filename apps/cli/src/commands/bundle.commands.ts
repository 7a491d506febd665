import { closeSync, createReadStream, existsSync, openSync, readSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { AssayError, escapeTerminalText } from '@assay/core';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withModule, withRuntimeBuses } from '../nest-context';
import { trustedKeysOf, witnessPolicyOf } from './trust-options';
import { readText } from './checkpoint.commands';

/**
 * `assay bundle export` (a run's result bundle, from this home's ledger) and `assay verify` (a bundle, offline: no
 * ledger, no ASSAY_HOME, no Docker, no network). docs/bundle-format.md specifies the file.
 */
const usage = (message: string) => new AssayError('CLI_USAGE', 'invalid_input', message);

/** A bundle starts with a tar header (its first entry's name); an equivocation report is a JSON object. */
function startsLikeJson(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(64);
    const n = readSync(fd, b, 0, b.length, 0);
    return /^\s*\{/.test(b.subarray(0, n).toString('latin1'));
  } finally {
    closeSync(fd);
  }
}

/**
 * `assay verify REPORT --trusted-key LOG_KEY`: an equivocation report (docs/formats.md, "Equivocation reports") is
 * checked with the log's keys: valid (exit 0) when it proves the log signed two checkpoints that cannot both hold,
 * invalid (exit 5) when it does not, could not check (exit 6) without a key.
 */
function verifyEquivocationFile(ctx: CliContext, file: string, trusted: string[], json: boolean): void {
  const L = libs.ledger();
  // a JSON file that is not an equivocation report is a clean error (exit 2), whatever the keys
  const report = L.parseEquivocationReport(readText(file, 'equivocation report'));
  if (trusted.length === 0) {
    const reason = "no trusted key given: the log's controller key (--trusted-key)";
    ctx.out(json ? JSON.stringify({ file, kind: 'equivocation', verdict: 'cannot_check', reason }, null, 2) : `could not check: step trust: ${reason}`);
    process.exitCode = 6;
    return;
  }
  const verdict = L.verifyEquivocation(
    report,
    trusted.map((k) => L.noteVerifierOf(L.parseVerifierKey(k))),
  );
  if (json) ctx.out(JSON.stringify({ file, kind: 'equivocation', verdict: verdict.proven ? 'valid' : 'invalid', ...verdict }, null, 2));
  else ctx.out(verdict.proven ? `valid: equivocation PROVEN: ${verdict.reason}` : `INVALID: step equivocation: not proven: ${verdict.reason}`);
  if (!verdict.proven) process.exitCode = 5;
}

/** This machine's host name and its first label (`build-7.example.org` and `build-7`), for the `host` redaction rule. */
function hostnamesOfThisMachine(): string[] {
  const h = hostname();
  return [h, h.split('.')[0] as string];
}

/** `-o FILE` resolved; a directory is refused. */
function outputFile(output: string): string {
  const out = resolve(output);
  if (existsSync(out) && statSync(out).isDirectory()) throw usage(`--output ${output} is a directory; give a file name`);
  return out;
}

/** One line for a valid report bundle's claim (RejudgeCompleted data). */
function reportLine(id: string | null, r: Record<string, unknown>): string {
  const n = (x: unknown) => (x === null || x === undefined ? 'none' : String(x));
  const judges = Array.isArray(r.scores) ? r.scores.length : 0;
  return `valid: re-judge report ${n(id)} of run ${n(r.run)}: ${String(r.verdict).replace(/_/g, ' ')}, median ${n(r.median)} against the recorded ${n(r.recordedScore)} (delta ${n(r.delta)}, tolerance ${n(r.tolerance)}, ${judges} Judge${judges === 1 ? '' : 's'}; re-judged bundle ${n(r.bundleDigest)})`;
}

export function register(program: Command, ctx: CliContext): void {
  const bundle = program.command('bundle').description('signed result bundles: a run and its claim, for auditors and publishers');
  bundle
    .command('export')
    .description("write a run's result bundle: its events with inclusion proofs against one signed checkpoint, and the claim they support, signed (DSSE)")
    .argument('<run-id>', 'the run (it must have ended)')
    .requiredOption('-o, --output <file>', 'the bundle file to write (written whole, then renamed into place)')
    .option('--snapshots <which>', "the snapshots whose blocks the bundle carries: best (the selected round's), all (every round's) or none", 'best')
    .option('--key <file>', "sign the claim with this private key (role publisher or controller, registered in the ledger); default: the home's controller key")
    .option(
      '--logs <which>',
      "the run's logs the bundle carries: none (their digests are in the events), redacted (copies under assay-redact/1, each recorded as a LogRedacted event) or full",
      'none',
    )
    .option(
      '--cosigned',
      'prove against the checkpoint witnesses cosigned (<home>/ledger/checkpoint.cosigned, from `assay ledger checkpoint --witness...`), carrying their cosignatures; it must have been signed after the run ended',
    )
    .option(
      '--task <dir>',
      "carry the task's public files (task.car: everything but tests/ and solution/, which appear only by digest); the directory's digest must be the run's task digest",
    )
    .option('--json', 'print a JSON summary')
    .action(async (run: string, o: { output: string; snapshots: string; logs: string; key?: string; cosigned?: boolean; task?: string; json?: boolean }) => {
      if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(run)) throw usage(`the run id "${run}" is not a run id`);
      const { SNAPSHOT_MODES } = libs.bundles();
      if (!(SNAPSHOT_MODES as readonly string[]).includes(o.snapshots))
        throw usage(`--snapshots must be one of ${SNAPSHOT_MODES.join(', ')}, got "${o.snapshots}"`);
      const mode = o.snapshots as (typeof SNAPSHOT_MODES)[number];
      const { LOG_MODES } = libs.bundles();
      if (!(LOG_MODES as readonly string[]).includes(o.logs)) throw usage(`--logs must be one of ${LOG_MODES.join(', ')}, got "${o.logs}"`);
      const logs = o.logs as (typeof LOG_MODES)[number];
      const out = outputFile(o.output);
      const { ExportRunBundleCommand } = libs.runtime();
      const taskDir = o.task;
      const progress = ctx.progress();
      progress.start('exporting events');
      const r = await withRuntimeBuses(ctx, ({ commands }) =>
        commands.execute(
          new ExportRunBundleCommand({
            run,
            out,
            snapshots: mode,
            logs,
            ...(o.key !== undefined ? { keyFile: o.key } : {}),
            ...(o.cosigned ? { cosigned: true } : {}),
            ...(taskDir !== undefined ? { taskDir } : {}),
            hostnames: hostnamesOfThisMachine(),
            progress: (d, t) => progress.tick(d, t),
          }),
        ),
      ).finally(() => progress.end());
      if (o.json)
        return ctx.out(
          JSON.stringify(
            { path: r.path, run, events: r.events, treeSize: r.treeSize, bytes: r.bytes, contentDigest: r.contentDigest, claim: r.claim },
            null,
            2,
          ),
        );
      const c = r.claim;
      ctx.out(`bundle    ${r.path} (${r.bytes} bytes)`);
      ctx.out(
        `run       ${run}: ${c.status}, ${c.round !== null ? `round ${c.round}, score ${c.claimedScore} (${c.metric ?? 'reward'}, ${c.direction})` : 'no valid submission'}`,
      );
      ctx.out(`events    ${r.events}, proved against a checkpoint of ${r.treeSize}; signed by ${r.signer}`);
      ctx.out(`snapshots ${r.snapshotRoots.length === 0 ? 'none carried' : r.snapshotRoots.join(', ')}`);
      ctx.out(`logs      ${logs === 'none' ? 'none carried (their digests are in the events)' : `${r.logs} carried, ${logs}`}`);
      ctx.out(
        `task      ${taskDir === undefined ? 'no files carried (its digest is in the events)' : `public files of ${taskDir} (tests/ and solution/ withheld)`}`,
      );
      ctx.out(`check it  assay verify ${o.output} --trusted-key <the ledger's controller public key>`);
    });

  bundle
    .command('export-rejudge')
    .description(
      "write a re-judge report's own bundle (assay rejudge's RejudgeCompleted with this ledger's keys, proved against one signed checkpoint, the report as a signed statement): anyone with this ledger's root key checks it with assay verify",
    )
    .argument('<rejudge-id>', 'the re-judging (assay rejudge prints it: stream rejudge-<id>)')
    .requiredOption('-o, --output <file>', 'the bundle file to write (written whole, then renamed into place)')
    .option(
      '--key <file>',
      "sign the report with this private key (role publisher or controller, registered in the ledger); default: the home's controller key",
    )
    .option('--cosigned', 'prove against the checkpoint witnesses cosigned (<home>/ledger/checkpoint.cosigned), carrying their cosignatures')
    .option('--json', 'print a JSON summary')
    .action(async (id: string, o: { output: string; key?: string; cosigned?: boolean; json?: boolean }) => {
      if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(id)) throw usage(`"${id}" is not a re-judging id`);
      const out = outputFile(o.output);
      const { ExportRejudgeBundleCommand } = libs.runtime();
      const r = await withRuntimeBuses(ctx, ({ commands }) =>
        commands.execute(
          new ExportRejudgeBundleCommand({ rejudge: id, out, ...(o.key !== undefined ? { keyFile: o.key } : {}), ...(o.cosigned ? { cosigned: true } : {}) }),
        ),
      );
      if (o.json)
        return ctx.out(
          JSON.stringify(
            { path: r.path, rejudge: id, events: r.events, treeSize: r.treeSize, bytes: r.bytes, contentDigest: r.contentDigest, report: r.report },
            null,
            2,
          ),
        );
      const rep = r.report as Record<string, unknown>;
      ctx.out(`bundle    ${r.path} (${r.bytes} bytes)`);
      ctx.out(
        `report    ${id}: run ${String(rep.run)}, ${String(rep.verdict).replace(/_/g, ' ')} (median ${String(rep.median)}, recorded ${String(rep.recordedScore)})`,
      );
      ctx.out(`events    ${r.events}, proved against a checkpoint of ${r.treeSize}; signed by ${r.signer}`);
      ctx.out(`check it  assay verify ${o.output} --trusted-key <this ledger's controller public key>`);
    });

  bundle
    .command('import')
    .description(
      "import someone else's result bundle into this home's leaderboards: verified against the publisher's root key first (refused, exit 5, when it does not verify), kept under <home>/imports/, and shown as an imported row, never mixed into this ledger's streams (docs/projections.md, \"Imported bundles\")",
    )
    .argument('<file>', "a run's result bundle (assay-bundle/v1 or v2)")
    .requiredOption('--trusted-key <key>', "the publisher's root (controller) key: verifier key text or a .pub file; the row names it")
    .option('--witness-policy <file>', 'also require its checkpoint to be cosigned by a quorum of these witnesses (as assay verify)')
    .option('--json', 'print JSON')
    .action(async (file: string, o: { trustedKey: string; witnessPolicy?: string; json?: boolean }) => {
      const [publisherKey] = trustedKeysOf({ trustedKey: [o.trustedKey] });
      const witnessPolicy = witnessPolicyOf({ ...(o.witnessPolicy !== undefined ? { witnessPolicy: o.witnessPolicy } : {}) });
      const p = require('@assay/projections') as typeof import('@assay/projections');
      try {
        if (!statSync(file).isFile()) throw usage(`${file} is not a file`);
      } catch (e) {
        if (e instanceof AssayError) throw e;
        throw new AssayError('BUNDLE_UNREADABLE', 'not_found', `cannot read bundle ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
      const key = libs.ledger().parseVerifierKey(publisherKey!).text;
      const progress = ctx.progress();
      const verify = async (path: string) => {
        progress.start(`verifying ${file}`);
        try {
          return await libs.bundles().verifyBundle(createReadStream(path), {
            trustedKeys: [publisherKey!],
            claims: libs.run().runClaimRules(),
            witnessPolicy,
            progress: (d, t) => progress.tick(d, t),
          });
        } finally {
          progress.end();
        }
      };
      const r = await withModule(p.ProjectionsModule.forLedger(libs.ledger().LedgerModule.forHome(ctx.home)), ({ commands }) =>
        commands.execute(new p.ImportBundleCommand(file, file, key, verify)),
      );
      const { added, row } = r;
      if (o.json) return ctx.out(JSON.stringify({ imported: added, row }, null, 2));
      const score = row.best ? `best ${row.best.score} (round ${row.best.round})` : 'no valid submission';
      ctx.out(
        `${added ? 'imported' : 'already imported'}: run ${escapeTerminalText(row.run)} of task ${escapeTerminalText(row.task)}, ${score}, published by ${escapeTerminalText(row.imported!.publisherKey.split('+')[0]!)}; bundle ${row.imported!.bundleDigest}`,
      );
      ctx.out(`see it     assay leaderboard ${escapeTerminalText(row.task)}`);
    });

  program
    .command('verify')
    .description(
      "verify a result bundle or a re-judge report's bundle offline against the keys you trust: signatures, roles, chains, proofs, checkpoint, and that the claim (or the report's arithmetic) follows from the events; or an equivocation report (a JSON file) against the log key",
    )
    .argument('<file>', "the bundle (a run's or a re-judge report's), or an equivocation report")
    .option('--trusted-key <key...>', "the ledger's root (controller) key: verifier key text or a .pub file; repeatable")
    .option('--trusted-keys <file>', 'a file of verifier key texts, one per line (# comments)')
    .option(
      '--witness-policy <file>',
      'require the checkpoint to be cosigned by a quorum of these witnesses (assay-witness-policy/v1 JSON; docs/operations.md, "Witnesses")',
    )
    .option('--json', 'print the verdict as JSON')
    .action(async (file: string, o: { trustedKey?: string[]; trustedKeys?: string; witnessPolicy?: string; json?: boolean }) => {
      const trusted = trustedKeysOf(o);
      const witnessPolicy = witnessPolicyOf(o);
      let size: number;
      try {
        const st = statSync(file);
        if (!st.isFile()) throw usage(`${file} is not a file`);
        size = st.size;
      } catch (e) {
        if (e instanceof AssayError) throw e;
        throw new AssayError('BUNDLE_UNREADABLE', 'not_found', `cannot read bundle ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
      if (startsLikeJson(file)) return verifyEquivocationFile(ctx, file, trusted, o.json === true);
      const progress = ctx.progress();
      progress.start(`verifying ${size} bytes`);
      const v = await libs.bundles().verifyBundle(createReadStream(file), {
        trustedKeys: trusted,
        claims: libs.run().runClaimRules(),
        witnessPolicy,
        progress: (d, t) => progress.tick(d, t),
      });
      progress.end();
      if (o.json) ctx.out(JSON.stringify({ file, ...v }, null, 2));
      else {
        for (const s of v.steps) ctx.out(`${s.status.padEnd(7)} ${s.name.padEnd(11)} ${s.checked}`);
        if (v.witnesses && v.witnesses.met) ctx.out(`witnesses: the checkpoint ${libs.bundles().witnessSummary(v.witnesses)}`);
        if (v.failure)
          ctx.out(`${v.verdict === 'cannot_check' ? 'could not check' : 'INVALID'}: step ${v.failure.step}: ${v.failure.code}: ${v.failure.message}`);
        else if (v.kind === 'rejudge') ctx.out(reportLine(v.rejudge, v.claim as Record<string, unknown>));
        else {
          const c = v.claim as {
            run: string;
            status: string;
            round: number | null;
            claimedScore: number | null;
            metric: string | null;
            direction: string | null;
          };
          ctx.out(
            `valid: run ${c.run} ${c.status}, ${c.round !== null ? `round ${c.round}, score ${c.claimedScore} (${c.metric ?? 'reward'}, ${c.direction})` : 'no valid submission'}`,
          );
        }
      }
      if (v.verdict === 'invalid') process.exitCode = 5;
      else if (v.verdict === 'cannot_check') process.exitCode = 6;
    });
}
