import { existsSync, readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { AssayError } from '@assay/core';
import {
  AppendEventsCommand,
  InitLedgerCommand,
  ProveConsistencyQuery,
  ProveInclusionQuery,
  ReadEventsQuery,
  SignCheckpointCommand,
  VerifyLedgerQuery,
  formatInclusionProof,
  eventDataProblem,
  genericAppendProblem,
  genericStreamProblem,
  isJsonObject,
  type JsonObject,
  type ExpectedRevision,
  type VerificationReport,
} from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import type { CliContext } from '../cli-context';
import { withBuses } from '../nest-context';

function usage(message: string): AssayError {
  return new AssayError('CLI_USAGE', 'invalid_input', message);
}

export function parseCount(value: string, what: string): number {
  if (!/^\d{1,15}$/.test(value)) throw usage(`${what} must be a non-negative integer, got "${value}"`);
  return Number(value);
}

export function parseExpected(value: string): ExpectedRevision {
  if (value === 'any' || value === 'no_stream' || value === 'stream_exists') return value;
  if (/^\d{1,15}$/.test(value)) return Number(value);
  throw usage(`--expected-revision must be any, no_stream, stream_exists or a revision number, got "${value}"`);
}

/** Parses --data, naming the offset of a syntax error. */
export function parseDataJson(text: string): JsonObject {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw usage(`--data is not valid JSON: ${(e as Error).message}`);
  }
  if (!isJsonObject(v)) throw usage('--data must be a JSON object, e.g. \'{"text":"hello"}\'');
  return v;
}

export function printVerification(r: VerificationReport, ctx: CliContext): void {
  for (const s of r.steps) {
    const failed = r.failure?.step === s.name;
    const mark = failed ? 'FAIL' : s.ok ? 'ok  ' : 'skip';
    ctx.out(`  ${mark} ${s.name.padEnd(12)} ${s.checked}${s.name === 'claims' ? ` (${r.claims ?? 'not run'})` : ''}`);
  }
  if (r.failure) {
    const f = r.failure;
    const where = f.position !== undefined ? ` at position ${f.position}` : f.checkpoint ? ` in checkpoint of size ${f.checkpoint.treeSize}` : '';
    ctx.out(`ledger verification FAILED in step "${f.step}"${where}: ${f.code}: ${f.message}`);
    if (f.rule !== undefined) ctx.out(`  stream ${f.stream ?? '-'}, rule ${f.rule}${r.claims ? ` (${r.claims})` : ''}`);
    if (f.evidence) {
      ctx.out('evidence (two signed checkpoints that cannot both be true):');
      for (const n of f.evidence) ctx.out(n.replace(/^/gm, '    '));
    }
  } else {
    ctx.out(`ledger verified: ${r.events} events in ${r.streams} streams, ${r.keys} keys, ${r.checkpoints} checkpoints, root ${r.root} (${r.durationMs} ms)`);
    ctx.out(r.claims ? `claims follow from the events under ${r.claims}` : 'claims not checked');
  }
}

export function register(program: Command, ctx: CliContext): void {
  const ledger = program.command('ledger').description('the signed, append-only event ledger under ASSAY_HOME');

  ledger
    .command('init')
    .description('create a ledger (and, when none exist, the controller, runtime and judge keys)')
    .option('--origin <origin>', 'checkpoint origin line (default: assay.ledger/<random id>)')
    .option('--json', 'print JSON')
    .action(async (o: { origin?: string; json?: boolean }) => {
      const r = await withBuses(ctx, (b) => b.commands.execute(new InitLedgerCommand(o.origin)));
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(`ledger created in ${r.home} (origin ${r.origin})`);
      for (const k of r.keys) ctx.out(`  ${k.role.padEnd(10)} ${k.signer}${k.created ? ' (new key)' : ''}`);
      ctx.out(`checkpoint:\n${r.checkpoint.note}`);
    });

  ledger
    .command('append')
    .description(
      'append one event, or every event of a JSON-lines file (operators: TaskRegistered, RejudgeCompleted, Note; the types of runs, Judges, images and keys are refused)',
    )
    .option('--stream <stream>', 'stream, <category>-<id>')
    .option('--type <type>', 'event type from the catalogue')
    .option('--data <json>', 'event data as a JSON object')
    .option('--id <uuid>', 'event id (idempotency key); random when absent')
    .option('--expected-revision <rev>', 'any | no_stream | stream_exists | N', 'any')
    .option('--file <events.jsonl>', 'append each line {"stream","type","data","id"?} in order; every line is checked before any is written')
    .option('--json', 'print JSON')
    .action(async (o: { stream?: string; type?: string; data?: string; id?: string; expectedRevision: string; file?: string; json?: boolean }) => {
      const expected = parseExpected(o.expectedRevision);
      const items = o.file ? readEventsFile(o.file) : [singleEvent(o)];
      for (const it of items) {
        const reserved = genericAppendProblem(it.type);
        if (reserved) throw new AssayError(reserved.code, 'refused', `${it.where}: ${reserved.message}`, { details: { type: it.type } });
        const problem = eventDataProblem(it.type, it.data);
        if (problem) throw new AssayError(problem.code, 'invalid_input', `${it.where}: ${problem.message}`);
        const stream = genericStreamProblem(it.stream);
        if (stream) throw new AssayError(stream.code, 'refused', `${it.where}: ${stream.message}`, { details: { stream: it.stream } });
      }
      const results = await withBuses(ctx, async (b) => {
        const out = [];
        for (const it of items)
          out.push(
            await b.commands.execute(
              new AppendEventsCommand(it.stream, [{ type: it.type, data: it.data, ...(it.id ? { id: it.id } : {}) }], o.file ? 'any' : expected),
            ),
          );
        return out;
      });
      for (const [i, r] of results.entries()) {
        const it = items[i] as EventLine;
        if (o.json)
          ctx.out(
            JSON.stringify({
              stream: r.stream,
              type: it.type,
              position: r.lastPosition,
              revision: r.nextExpectedRevision,
              id: r.events[0]?.id,
              idempotent: r.idempotent,
            }),
          );
        else ctx.out(`${r.idempotent ? 'already recorded' : 'appended'} ${it.type} to ${r.stream}@${r.nextExpectedRevision} at position ${r.lastPosition}`);
      }
    });

  ledger
    .command('verify')
    .description('verify every signature, role, chain, the Merkle root, every checkpoint, and that the claims follow from the events')
    .option('--checkpoint <file...>', 'also check these signed checkpoints (e.g. published ones) against this ledger')
    .option('--trusted-root <key>', "the controller key (verifier key text or a .pub file) the ledger's genesis must use")
    .option('--db <file>', 'verify this ledger database file read-only, without ASSAY_HOME or any private key (auditors)')
    .option('--origin <origin>', 'with --db: the origin every checkpoint must name')
    .addOption(new Option('--workers <n>', 'threads that check events, this one included (default: cores; 0: this thread only)'))
    .option('--json', 'print JSON')
    .action(async (o: { checkpoint?: string[]; trustedRoot?: string; db?: string; origin?: string; workers?: string; json?: boolean }) => {
      const externalCheckpoints = (o.checkpoint ?? []).map((f) => readText(f, 'checkpoint'));
      const trustedRoot = o.trustedRoot ? (existsSync(o.trustedRoot) ? readText(o.trustedRoot, 'trusted root key').trim() : o.trustedRoot) : undefined;
      const workers = o.workers === undefined ? undefined : parseCount(o.workers, '--workers');
      const r = await withBuses(ctx, (b) =>
        b.queries.execute(
          new VerifyLedgerQuery({
            claims: runClaimRules(),
            externalCheckpoints,
            ...(trustedRoot ? { trustedRoot } : {}),
            ...(workers !== undefined ? { workers } : {}),
            ...(o.db !== undefined ? { db: o.db } : {}),
            ...(o.origin !== undefined ? { origin: o.origin } : {}),
            progress: ctx.progress(),
          }),
        ),
      );
      if (o.json) ctx.out(JSON.stringify(r, null, 2));
      else printVerification(r, ctx);
      if (!r.ok) process.exitCode = 5;
    });

  ledger
    .command('events')
    .description('print stored events (one line each, or their envelopes with --json)')
    .option('--stream <stream>', 'only this stream (then --from is a revision)')
    .option('--from <n>', 'first position (or revision with --stream)', '0')
    .option('--limit <n>', 'at most this many events', '100')
    .option('--json', 'print the envelopes as JSON lines')
    .action(async (o: { stream?: string; from: string; limit: string; json?: boolean }) => {
      const from = parseCount(o.from, '--from');
      const limit = parseCount(o.limit, '--limit');
      const events = await withBuses(ctx, (b) =>
        b.queries.execute(new ReadEventsQuery({ ...(o.stream !== undefined ? { stream: o.stream } : {}), from, limit })),
      );
      for (const { envelope: e } of events) {
        if (o.json) ctx.out(JSON.stringify(e));
        else
          ctx.out(
            `${String(e.position).padStart(6)}  ${e.time}  ${`${e.stream}@${e.revision}`.padEnd(34)} ${e.type.padEnd(18)} ${e.signer.split('+')[0]}  ${JSON.stringify(e.data).slice(0, 80)}`,
          );
      }
    });

  ledger
    .command('checkpoint')
    .description('sign a checkpoint of the whole log (never smaller than, or inconsistent with, the last one)')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const r = await withBuses(ctx, (b) => b.commands.execute(new SignCheckpointCommand()));
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(r.note);
    });

  ledger
    .command('prove')
    .description('inclusion proof of the event at a position, against a signed checkpoint')
    .argument('<position>', 'global position')
    .option('--json', 'print JSON')
    .action(async (position: string, o: { json?: boolean }) => {
      const pos = parseCount(position, 'position');
      const r = await withBuses(ctx, (b) => b.queries.execute(new ProveInclusionQuery(pos, true)));
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(formatInclusionProof(r));
    });

  ledger
    .command('consistency')
    .description('consistency proof between two tree sizes')
    .argument('<old>', 'older tree size')
    .argument('[new]', 'newer tree size (default: the whole log)')
    .option('--json', 'print JSON')
    .action(async (oldSize: string, newSize: string | undefined, o: { json?: boolean }) => {
      const m = parseCount(oldSize, 'old');
      const n = newSize === undefined ? undefined : parseCount(newSize, 'new');
      const r = await withBuses(ctx, (b) => b.queries.execute(new ProveConsistencyQuery(m, n)));
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(`consistency ${r.size1} -> ${r.size2}\nroot1 ${r.root1}\nroot2 ${r.root2}`);
      for (const h of r.proof) ctx.out(h);
    });
}

interface EventLine {
  where: string;
  stream: string;
  type: string;
  data: JsonObject;
  id?: string;
}

function singleEvent(o: { stream?: string; type?: string; data?: string; id?: string }): EventLine {
  if (!o.stream || !o.type || o.data === undefined) throw usage('append needs --stream, --type and --data (or --file)');
  return { where: '--data', stream: o.stream, type: o.type, data: parseDataJson(o.data), ...(o.id ? { id: o.id } : {}) };
}

/** Reads a JSON-lines file of events, naming the line of the first problem. */
function readEventsFile(file: string): EventLine[] {
  const text = readText(file, 'events');
  const out: EventLine[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${file}:${i + 1}`;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw usage(`${where}: not valid JSON: ${(e as Error).message}`);
    }
    if (!isJsonObject(v)) throw usage(`${where}: each line must be a JSON object`);
    const { stream, type, data, id } = v;
    if (typeof stream !== 'string') throw usage(`${where}: "stream" must be a string`);
    if (typeof type !== 'string') throw usage(`${where}: "type" must be a string`);
    if (!isJsonObject(data)) throw usage(`${where}: "data" must be a JSON object`);
    if (id !== undefined && typeof id !== 'string') throw usage(`${where}: "id" must be a string`);
    out.push({ where, stream, type, data, ...(typeof id === 'string' ? { id } : {}) });
  });
  if (out.length === 0) throw usage(`${file}: no events`);
  return out;
}

function readText(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new AssayError(
      'CLI_FILE_UNREADABLE',
      'invalid_input',
      `cannot read ${what} file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
}
