import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { AssayError, writeFileAtomic } from '@assay/core';
import type { JsonObject, ExpectedRevision, PolicyWitness, VerificationReport, WitnessOutcome, WitnessPolicy, WitnessSource } from '@assay/ledger';
import type { CliContext } from '../cli-context';
import { libs } from '../libs';
import { withBuses } from '../nest-context';
import { keyText } from './checkpoint.commands';

/** The ledger library, loaded when a command runs (apps/cli/src/libs.ts). */
const L = () => libs.ledger();

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
  if (!L().isJsonObject(v)) throw usage('--data must be a JSON object, e.g. \'{"text":"hello"}\'');
  return v;
}

/** Who pinned the root key a verification checked the genesis against: the caller, ASSAY_HOME's ledger.json, or nobody. */
export type RootPinnedBy = 'trusted-root' | 'ledger.json' | null;

export function printVerification(r: VerificationReport, ctx: CliContext, pinnedBy: RootPinnedBy = r.rootPinned ? 'trusted-root' : null): void {
  for (const s of r.steps) {
    const mark = s.status === 'failed' ? 'FAIL' : s.status === 'ok' ? 'ok  ' : 'skip';
    ctx.out(`  ${mark} ${s.name.padEnd(12)} ${s.checked}${s.name === 'claims' ? ` (${r.claims ?? 'not run'})` : ''}`);
  }
  if (pinnedBy === null)
    ctx.out(
      'root key not pinned: the genesis key was not compared with a key you trust, so this shows the ledger is consistent in itself, not who made it; pass --trusted-root <key or .pub file> (--require-pinned-root makes this an error)',
    );
  else if (pinnedBy === 'ledger.json') ctx.out('root key pinned by ledger.json of ASSAY_HOME (pass --trusted-root to pin it independently)');
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
      const r = await withBuses(ctx, (b) => b.commands.execute(new (L().InitLedgerCommand)(o.origin)));
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
    .option(
      '--expected-revision <rev>',
      'any | no_stream | stream_exists | N; with --file: what each stream of the file must be before its first line there (later lines of a stream follow on; N only for a file of one stream)',
      'any',
    )
    .option(
      '--file <events.jsonl>',
      'append each line {"stream","type","data","id"?} in order, all or none, in one transaction; every line is checked before any is written; prints one summary line',
    )
    .option('--json', 'print JSON (with --file: one summary document)')
    .action(async (o: { stream?: string; type?: string; data?: string; id?: string; expectedRevision: string; file?: string; json?: boolean }) => {
      const expected = parseExpected(o.expectedRevision);
      if (o.file !== undefined && (o.stream !== undefined || o.type !== undefined || o.data !== undefined || o.id !== undefined))
        throw usage('--file cannot be combined with --stream, --type, --data or --id (each line of the file names its own)');
      const items = o.file ? readEventsFile(o.file) : [singleEvent(o)];
      for (const it of items) {
        const reserved = L().genericAppendProblem(it.type);
        if (reserved) throw new AssayError(reserved.code, 'refused', `${it.where}: ${reserved.message}`, { details: { type: it.type } });
        const problem = L().eventDataProblem(it.type, it.data);
        if (problem) throw new AssayError(problem.code, 'invalid_input', `${it.where}: ${problem.message}`);
        const stream = L().genericStreamProblem(it.stream);
        if (stream) throw new AssayError(stream.code, 'refused', `${it.where}: ${stream.message}`, { details: { stream: it.stream } });
      }
      if (o.file !== undefined) return appendFile(ctx, o.file, items, expected, o.json === true);
      const one = items[0] as EventLine;
      const results = await withBuses(ctx, async (b) => [
        await b.commands.execute(new (L().AppendEventsCommand)(one.stream, [{ type: one.type, data: one.data, ...(one.id ? { id: one.id } : {}) }], expected)),
      ]);
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
    .option('--require-pinned-root', 'with --db: refuse (exit 2, before verifying) unless --trusted-root pins the root key')
    .option('--db <file>', 'verify this ledger database file read-only, without ASSAY_HOME or any private key (auditors)')
    .option('--origin <origin>', 'with --db: the origin every checkpoint must name')
    .addOption(new Option('--workers <n>', 'threads that check events, this one included (default: cores; 0: this thread only)'))
    .option('--json', 'print JSON')
    .action(async (o: VerifyOptions) => {
      const trustedRoot = o.trustedRoot !== undefined ? parseTrustedRoot(o.trustedRoot) : undefined;
      if (o.requirePinnedRoot && o.db !== undefined && trustedRoot === undefined)
        throw usage(
          "--require-pinned-root: the root key is not pinned; pass --trusted-root with the operator's controller key (verifier key text or its .pub file), obtained independently of the database",
        );
      const externalCheckpoints = (o.checkpoint ?? []).map((f) => readText(f, 'checkpoint'));
      const workers = o.workers === undefined ? undefined : parseCount(o.workers, '--workers');
      const r = await withBuses(ctx, (b) =>
        b.queries.execute(
          new (L().VerifyLedgerQuery)({
            claims: libs.run().runClaimRules(),
            externalCheckpoints,
            ...(trustedRoot ? { trustedRoot } : {}),
            ...(workers !== undefined ? { workers } : {}),
            ...(o.db !== undefined ? { db: o.db } : {}),
            ...(o.origin !== undefined ? { origin: o.origin } : {}),
            progress: ctx.progress(),
          }),
        ),
      );
      const pinnedBy: RootPinnedBy = trustedRoot !== undefined ? 'trusted-root' : o.db === undefined ? 'ledger.json' : null;
      if (o.json) ctx.out(JSON.stringify({ ...r, rootPinnedBy: pinnedBy }, null, 2));
      else printVerification(r, ctx, pinnedBy);
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
        b.queries.execute(new (L().ReadEventsQuery)({ ...(o.stream !== undefined ? { stream: o.stream } : {}), from, limit })),
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
    .description('sign a checkpoint of the whole log (never smaller than, or inconsistent with, the last one), and collect cosignatures from witnesses')
    .option('--witness <file...>', 'merge the verified cosignatures of this cosigned checkpoint note (repeatable)')
    .option(
      '--witness-cmd <command...>',
      'run this witness command (sh -c) with a tlog-witness add-checkpoint request on stdin; it prints cosignature lines (repeatable; e.g. "assay checkpoint cosign --request - ...")',
    )
    .option('--witness-key <key...>', "a witness's cosigner key (verifier key text or .pub file) its cosignatures are verified with")
    .option('--witness-policy <file>', 'witness policy (keys and quorum); exit 5 when fewer policy witnesses cosigned than its quorum')
    .option('--json', 'print JSON')
    .action(async (o: CheckpointOptions) => {
      const witnessed = o.witness !== undefined || o.witnessCmd !== undefined;
      const wk = witnessed ? witnessKeys(o) : null;
      const r = await withBuses(ctx, (b) => b.commands.execute(new (L().SignCheckpointCommand)()));
      if (!wk) {
        if (o.json) return ctx.out(JSON.stringify(r, null, 2));
        return ctx.out(r.note);
      }
      const w = await collectWitnesses(ctx, r.note, o, wk);
      if (o.json) ctx.out(JSON.stringify({ ...r, note: w.note, witnesses: w.witnesses, quorum: w.quorum, quorumMet: w.met, cosignedFile: w.file }, null, 2));
      else {
        ctx.out(w.note);
        for (const x of w.witnesses)
          ctx.err(
            x.ok
              ? `assay: note: witness ${x.witness}: cosigned by ${x.cosigners.join(', ')}`
              : `assay: warning: witness ${x.witness} did not cosign: ${x.error?.code}: ${x.error?.message}`,
          );
      }
      if (!w.met) {
        if (!o.json) ctx.err(`assay: error WITNESS_QUORUM_NOT_MET: ${w.count} witness cosignature(s), ${w.quorum} needed`);
        process.exitCode = 5;
      }
    });

  ledger
    .command('prove')
    .description('inclusion proof of the event at a position, against a signed checkpoint')
    .argument('<position>', 'global position')
    .option('--json', 'print JSON')
    .action(async (position: string, o: { json?: boolean }) => {
      const pos = parseCount(position, 'position');
      const r = await withBuses(ctx, (b) => b.queries.execute(new (L().ProveInclusionQuery)(pos, true)));
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(L().formatInclusionProof(r));
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
      const r = await withBuses(ctx, (b) => b.queries.execute(new (L().ProveConsistencyQuery)(m, n)));
      if (o.json) return ctx.out(JSON.stringify(r, null, 2));
      ctx.out(`consistency ${r.size1} -> ${r.size2}\nroot1 ${r.root1}\nroot2 ${r.root2}`);
      for (const h of r.proof) ctx.out(h);
    });
}

/**
 * `ledger append --file`: every line in one write transaction, all or none. `expected` holds for each stream's first
 * line in the file (later lines of that stream follow on). Progress on a terminal; one summary line (or document).
 */
async function appendFile(ctx: CliContext, file: string, items: EventLine[], expected: ExpectedRevision, json: boolean): Promise<void> {
  const seen = new Set<string>();
  const batch = items.map((it) => {
    const first = !seen.has(it.stream);
    seen.add(it.stream);
    return {
      stream: it.stream,
      events: [{ type: it.type, data: it.data, ...(it.id ? { id: it.id } : {}) }],
      expected: first ? expected : ('any' as const),
      where: it.where,
    };
  });
  if (typeof expected === 'number' && seen.size > 1)
    throw usage(
      `--expected-revision ${expected} names one stream's revision, but ${file} writes ${seen.size} streams; give a file of one stream, or no_stream, stream_exists or any`,
    );
  const progress = ctx.progress();
  progress.start(`appending ${file}`, items.length);
  let results;
  try {
    results = await withBuses(ctx, (b) => b.commands.execute(new (L().AppendEventsBatchCommand)(batch, (done) => progress.tick(done, items.length))));
  } finally {
    progress.end();
  }
  let fresh = 0;
  let first: number | null = null;
  let last: number | null = null;
  const revisions: Record<string, number> = {};
  for (const r of results) {
    revisions[r.stream] = Math.max(revisions[r.stream] ?? -1, r.nextExpectedRevision);
    if (r.idempotent) continue;
    fresh += r.events.length;
    for (const e of r.events) {
      first = first === null ? e.position : Math.min(first, e.position);
      last = last === null ? e.position : Math.max(last, e.position);
    }
  }
  const summary = {
    file,
    events: items.length,
    new: fresh,
    alreadyRecorded: items.length - fresh,
    streams: Object.keys(revisions).length,
    firstPosition: first,
    lastPosition: last,
    revisions,
  };
  if (json) return ctx.out(JSON.stringify(summary, null, 2));
  const plural = (n: number, w: string) => `${n} ${w}${n === 1 ? '' : 's'}`;
  ctx.out(
    `appended ${plural(items.length, 'event')} (${fresh} new, ${summary.alreadyRecorded} already recorded) to ${plural(summary.streams, 'stream')}${first !== null ? `, positions ${first}..${last}` : ', nothing new written'}`,
  );
}

interface CheckpointOptions {
  witness?: string[];
  witnessCmd?: string[];
  witnessKey?: string[];
  witnessPolicy?: string;
  json?: boolean;
}

type WitnessKeys = { policy: WitnessPolicy | null; keys: PolicyWitness[] };

/** The keys witnesses' cosignatures are verified with, read before anything is signed. */
function witnessKeys(o: CheckpointOptions): WitnessKeys {
  const led = L();
  const policy = o.witnessPolicy !== undefined ? led.parseWitnessPolicy(readText(o.witnessPolicy, 'witness policy')) : null;
  const keys = [...(policy?.witnesses ?? []), ...(o.witnessKey ?? []).map((k) => led.cosignerFromKeyText(keyText(k, 'witness key')))];
  if (keys.length === 0) throw usage("--witness and --witness-cmd need the witnesses' keys: --witness-key KEY (repeatable) or --witness-policy FILE");
  return { policy, keys };
}

/**
 * `ledger checkpoint --witness/--witness-cmd`: asks each witness, keeps every verified cosignature with the checkpoint
 * in <home>/ledger/checkpoint.cosigned (merged with the ones already there for the same checkpoint) and each witness
 * command's last cosigned size in <home>/ledger/witnesses.json (docs/operations.md, "Witnesses").
 */
async function collectWitnesses(
  ctx: CliContext,
  signedNote: string,
  o: CheckpointOptions,
  { policy, keys }: WitnessKeys,
): Promise<{ note: string; witnesses: WitnessOutcome[]; quorum: number; count: number; met: boolean; file: string }> {
  const led = L();
  const dir = led.homePaths(ctx.home).ledgerDir;
  const cosignedFile = join(dir, 'checkpoint.cosigned');
  const sizesFile = join(dir, 'witnesses.json');
  const known = readKnownSizes(sizesFile);
  // Start from the cosignatures already kept for this very checkpoint (a checkpoint signed again is the same note).
  let start = signedNote;
  if (existsSync(cosignedFile)) {
    const kept = readText(cosignedFile, 'cosigned checkpoint');
    if (led.parseNote(kept).body === led.parseNote(signedNote).body) start = kept;
  }
  const sources: WitnessSource[] = [
    ...(o.witness ?? []).map((path): WitnessSource => ({ kind: 'file', path })),
    ...(o.witnessCmd ?? []).map((command): WitnessSource => ({ kind: 'command', command })),
  ];
  const r = await led.collectCosignatures({
    note: start,
    sources,
    keys,
    knownSizes: known,
    transport: {
      run: runWitnessCommand,
      readFile: (f) => readText(f, 'cosigned checkpoint'),
      prove: async (m, n) => (await withBuses(ctx, (b) => b.queries.execute(new led.ProveConsistencyQuery(m, n)))).proof,
    },
  });
  writeFileAtomic(cosignedFile, r.note);
  for (const w of r.witnesses) if (w.ok && w.knownSize !== undefined) known[w.witness] = w.knownSize;
  writeFileAtomic(sizesFile, `${JSON.stringify({ format: 'assay-ledger-witnesses/v1', knownSizes: known }, null, 2)}\n`);
  let quorum: number;
  let count: number;
  if (policy) {
    const p = led.checkWitnessPolicy(r.note, policy);
    quorum = p.quorum;
    count = p.cosigned.length;
  } else {
    quorum = sources.length;
    count = r.witnesses.filter((w) => w.ok).length;
  }
  return { note: r.note, witnesses: r.witnesses, quorum, count, met: count >= quorum, file: cosignedFile };
}

function readKnownSizes(file: string): Record<string, number> {
  if (!existsSync(file)) return {};
  try {
    const v = JSON.parse(readFileSync(file, 'utf8')) as { knownSizes?: Record<string, unknown> };
    const out: Record<string, number> = {};
    for (const [k, n] of Object.entries(v.knownSizes ?? {})) if (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0) out[k] = n;
    return out;
  } catch {
    return {}; // a hint only: the witness answers with its real size
  }
}

/** Runs a witness command with `sh -c`, the request on stdin; at most 60 s and 1 MiB of output. */
function runWitnessCommand(command: string, stdin: string): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', command], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (stdout.length < 1024 * 1024) stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < 64 * 1024) stderr += d;
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ exitCode: 127, stdout, stderr: stderr + e.message });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ exitCode: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
}

interface VerifyOptions {
  checkpoint?: string[];
  trustedRoot?: string;
  requirePinnedRoot?: boolean;
  db?: string;
  origin?: string;
  workers?: string;
  json?: boolean;
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
    if (!L().isJsonObject(v)) throw usage(`${where}: each line must be a JSON object`);
    const { stream, type, data, id } = v;
    if (typeof stream !== 'string') throw usage(`${where}: "stream" must be a string`);
    if (typeof type !== 'string') throw usage(`${where}: "type" must be a string`);
    if (!L().isJsonObject(data)) throw usage(`${where}: "data" must be a JSON object`);
    if (id !== undefined && typeof id !== 'string') throw usage(`${where}: "id" must be a string`);
    out.push({ where, stream, type, data, ...(typeof id === 'string' ? { id } : {}) });
  });
  if (out.length === 0) throw usage(`${file}: no events`);
  return out;
}

/**
 * `--trusted-root`: verifier key text (`<name>+<8 hex>+<base64>`) as given, anything else is the path of a key file
 * (a missing or unreadable file is CLI_FILE_UNREADABLE, exit 2, never taken for key text).
 */
function parseTrustedRoot(value: string): string {
  if (/^[^\s+/]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]+={0,2}$/.test(value) && !existsSync(value)) return value;
  const text = readText(value, 'trusted root key').trim();
  if (text === '') throw usage(`trusted root key file ${value} is empty`);
  return text;
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
