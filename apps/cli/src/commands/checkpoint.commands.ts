import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { AssayError, makeDirectories, writeFileAtomic } from '@assay/core';
import type { NoteVerifier, WitnessState, WitnessStateStore } from '@assay/ledger';
import { clockOf, type CliContext } from '../cli-context';
import { libs } from '../libs';

/**
 * `assay checkpoint`: witnessing checkpoints (docs/operations.md, "Witnesses"). A witness holds its auditor key, the
 * log's public key and a state directory; it cosigns (C2SP tlog-cosignature) only checkpoints consistent with what
 * it cosigned before. `equivocation` checks a report of two signed checkpoints that cannot both hold; `policy` checks a
 * cosigned checkpoint against a witness policy (quorum of named witnesses).
 */
const L = () => libs.ledger();

function usage(message: string): AssayError {
  return new AssayError('CLI_USAGE', 'invalid_input', message);
}

export function readText(file: string, what: string): string {
  try {
    return file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8');
  } catch (e) {
    throw new AssayError(
      'CLI_FILE_UNREADABLE',
      'invalid_input',
      `cannot read ${what} file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
}

/** A key given as verifier key text, or as the path of a file holding it (a .pub file). */
export function keyText(value: string, what: string): string {
  if (/^[^\s+/]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]+={0,2}$/.test(value) && !existsSync(value)) return value;
  const text = readText(value, what).trim();
  if (text === '') throw usage(`${what} file ${value} is empty`);
  return text;
}

/** Note verifiers for the log's key(s): type 0x01 verifier key texts or .pub files. */
export function logVerifiers(values: readonly string[] | undefined): NoteVerifier[] {
  if (!values || values.length === 0) throw usage("--log-key is required: the log's controller key (verifier key text or its .pub file)");
  return values.map((v) => L().noteVerifierOf(L().parseVerifierKey(keyText(v, 'log key'))));
}

/** One JSON file per origin, `<dir>/origin-<SHA-256(origin) hex>.json`, replaced atomically. */
export class FileWitnessStateStore implements WitnessStateStore {
  constructor(private readonly dir: string) {}
  file(origin: string): string {
    return join(this.dir, `origin-${createHash('sha256').update(origin, 'utf8').digest('hex')}.json`);
  }
  load(origin: string): WitnessState | null {
    const f = this.file(origin);
    if (!existsSync(f)) return null;
    let v: unknown;
    try {
      v = JSON.parse(readFileSync(f, 'utf8'));
    } catch (e) {
      throw L().witnessError('WITNESS_STATE_CORRUPT', `${f} is not valid JSON (${(e as Error).message}); the witness state must not be edited`);
    }
    const s = L().parseWitnessState(v, f);
    if (s.origin !== origin) throw L().witnessError('WITNESS_STATE_CORRUPT', `${f} holds the state of origin ${s.origin}, not ${origin}`);
    return s;
  }
  save(state: WitnessState): void {
    makeDirectories(this.dir, 0o700);
    writeFileAtomic(this.file(state.origin), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  }
}

interface CosignOptions {
  key: string;
  state: string;
  logKey?: string[];
  checkpoint?: string;
  proof?: string;
  request?: string;
  trustSize?: string;
  trustRoot?: string;
  equivocationOut?: string;
  json?: boolean;
}

function parseSize(value: string, what: string): number {
  if (!/^(0|[1-9]\d{0,15})$/.test(value) || !Number.isSafeInteger(Number(value))) throw usage(`${what} must be a tree size, got "${value}"`);
  return Number(value);
}

function cosign(o: CosignOptions, ctx: CliContext): void {
  const led = L();
  if ((o.checkpoint === undefined) === (o.request === undefined))
    throw usage('give either --checkpoint FILE (with --proof FILE when needed) or --request FILE|-');
  if (o.request !== undefined && o.proof !== undefined) throw usage('--proof goes with --checkpoint; a --request carries its own proof');
  if ((o.trustSize === undefined) !== (o.trustRoot === undefined)) throw usage('--trust-size and --trust-root go together');
  const trust =
    o.trustSize !== undefined && o.trustRoot !== undefined
      ? (() => {
          if (!/^[A-Za-z0-9+/]{43}=$/.test(o.trustRoot)) throw usage('--trust-root must be the base64 root hash of a checkpoint (its third line)');
          return { treeSize: parseSize(o.trustSize, '--trust-size'), rootHash: o.trustRoot };
        })()
      : undefined;
  const pair = led.readPrivateKey(o.key);
  if (pair.role !== 'auditor')
    throw new AssayError(
      'WITNESS_KEY_NOT_AUDITOR',
      'refused',
      `${o.key} is a ${pair.role} key; a witness cosigns with an auditor key (assay keys generate --role auditor)`,
    );
  const verifiers = logVerifiers(o.logKey);
  let request;
  if (o.request !== undefined) request = led.parseWitnessRequest(readText(o.request, 'witness request'));
  else {
    const note = readText(o.checkpoint as string, 'checkpoint');
    if (o.proof === undefined) request = { oldSize: null, proof: [], note };
    else {
      const p = led.parseConsistencyProofText(readText(o.proof, 'consistency proof'));
      const cp = led.checkpointOfNote(note);
      if (p.newSize !== null && p.newSize !== cp.treeSize)
        throw usage(`the proof in ${o.proof} is to size ${p.newSize}, but the checkpoint has size ${cp.treeSize}`);
      request = { oldSize: p.oldSize, proof: p.proof, note };
    }
  }
  const store = new FileWitnessStateStore(o.state);
  const r = led.cosignAsWitness({
    store,
    cosigner: led.ed25519Cosigner(pair.name, pair.seed),
    logVerifiers: verifiers,
    request,
    ...(trust ? { trust } : {}),
    nowSeconds: Math.floor(clockOf(ctx).now().getTime() / 1000),
  });
  if (!r.ok) {
    const { error, report } = r.refusal;
    let reportPath: string | undefined;
    if (report) {
      reportPath =
        o.equivocationOut ??
        join(
          o.state,
          `equivocation-${createHash('sha256').update(report.origin).digest('hex').slice(0, 16)}-${clockOf(ctx).now().toISOString().replace(/[:.]/g, '-')}.json`,
        );
      makeDirectories(o.state, 0o700);
      writeFileAtomic(reportPath, led.formatEquivocationReport(report));
    }
    // tlog-witness's 409: the witness's recorded size on stdout, for the client to retry from it.
    if (error.code === 'WITNESS_OLD_SIZE_MISMATCH' && o.request !== undefined && !o.json) {
      ctx.out(String(error.details.knownSize));
      ctx.err(`assay: error ${error.code}: ${error.message}`);
      process.exitCode = 4;
      return;
    }
    throw new AssayError(error.code, error.kind, reportPath ? `${error.message}; equivocation report written to ${reportPath}` : error.message, {
      details: { ...error.details, ...(reportPath ? { equivocationReport: reportPath } : {}) },
    });
  }
  const res = r.result;
  if (o.json) return ctx.out(JSON.stringify({ ...res, stateFile: store.file(res.origin) }, null, 2));
  if (res.trustedOnFirstUse && process.stderr.isTTY)
    ctx.err(`assay: note: first checkpoint of ${res.origin} seen by this witness: trusted on first use (pin one with --trust-size/--trust-root)`);
  ctx.out(o.request !== undefined ? res.cosignature : res.note);
}

export function register(program: Command, ctx: CliContext): void {
  const cp = program.command('checkpoint').description('witness checkpoints: cosign them, check equivocation reports and witness policies');

  cp.command('cosign')
    .description(
      'as a witness, cosign a signed checkpoint (C2SP tlog-cosignature) if it is consistent with the last one this witness cosigned for its origin; refuses a rollback (exit 6) or a fork (exit 5, writing an equivocation report)',
    )
    .requiredOption('--key <file>', "the witness's auditor private key file (assay keys generate --role auditor)")
    .requiredOption('--state <dir>', 'the witness state directory: one record per origin (created 0700)')
    .option('--log-key <key...>', "the log's controller key: verifier key text or its .pub file (repeatable)")
    .option('--checkpoint <file>', 'the signed checkpoint note to cosign (prints the note with the cosignature appended)')
    .option('--proof <file>', 'with --checkpoint: consistency proof from the size this witness cosigned (`assay ledger consistency OLD NEW` output)')
    .option(
      '--request <file>',
      "a tlog-witness add-checkpoint request ('-': stdin); prints the cosignature line only (the `ledger checkpoint --witness-cmd` protocol)",
    )
    .option('--trust-size <n>', 'pin the first checkpoint instead of trusting it on first use: its tree size (with --trust-root)')
    .option('--trust-root <base64>', 'pin the first checkpoint: its root hash (with --trust-size)')
    .option('--equivocation-out <file>', 'where to write an equivocation report (default: a new file in --state)')
    .option('--json', 'print JSON')
    .action((o: CosignOptions) => cosign(o, ctx));

  cp.command('witness-key')
    .description("print the witness's cosigner verifier key (type 0x04) for witness policies and --witness-key")
    .requiredOption('--key <file>', "the witness's auditor private key file")
    .option('--json', 'print JSON')
    .action((o: { key: string; json?: boolean }) => {
      const pair = L().readPrivateKey(o.key);
      const text = L().formatVerifierKey(pair.name, pair.publicKey, 0x04);
      const w = L().cosignerFromKeyText(text);
      if (o.json) return ctx.out(JSON.stringify({ name: pair.name, cosigner: w.signer, verifierKey: text }));
      ctx.out(text);
    });

  cp.command('equivocation')
    .description('check an equivocation report: exit 0 when it proves the log signed two checkpoints that cannot both hold, 5 when not')
    .argument('<file>', 'the equivocation report (JSON)')
    .option('--log-key <key...>', "the log's controller key: verifier key text or its .pub file (repeatable)")
    .option('--json', 'print JSON')
    .action((file: string, o: { logKey?: string[]; json?: boolean }) => {
      const verdict = L().verifyEquivocation(readText(file, 'equivocation report'), logVerifiers(o.logKey));
      if (!verdict.proven && !o.json) throw L().witnessError('EQUIVOCATION_NOT_PROVEN', `equivocation not proven: ${verdict.reason}`);
      if (o.json) ctx.out(JSON.stringify(verdict, null, 2));
      else ctx.out(`equivocation PROVEN: ${verdict.reason}`);
      if (!verdict.proven) process.exitCode = 5;
    });

  cp.command('policy')
    .description('check the cosignatures of a checkpoint note against a witness policy: exit 0 when the quorum is met, 5 when not')
    .argument('<note>', 'a cosigned checkpoint note')
    .requiredOption('--policy <file>', 'the witness policy (JSON, docs/formats.md "Witness policies")')
    .option('--log-key <key...>', "also check the log's signature with this key (verifier key text or .pub file)")
    .option('--json', 'print JSON')
    .action((file: string, o: { policy: string; logKey?: string[]; json?: boolean }) => {
      const note = readText(file, 'checkpoint');
      if (o.logKey) L().openCheckpoint(note, logVerifiers(o.logKey));
      const r = L().checkWitnessPolicy(note, L().parseWitnessPolicy(readText(o.policy, 'witness policy')));
      if (o.json) ctx.out(JSON.stringify(r, null, 2));
      else {
        ctx.out(`quorum ${r.met ? 'met' : 'NOT met'}: ${r.cosigned.length} of ${r.quorum} needed`);
        for (const c of r.cosigned) ctx.out(`  ok       ${c.signer} (time ${c.timestamp})`);
        for (const c of r.invalid) ctx.out(`  invalid  ${c.signer}: ${c.code}`);
        for (const c of r.missing) ctx.out(`  missing  ${c}`);
        for (const c of r.outside) ctx.out(`  ignored  ${c} (not in the policy)`);
      }
      if (!r.met) {
        if (!o.json) ctx.err(`assay: error WITNESS_QUORUM_NOT_MET: ${r.cosigned.length} policy witness cosignature(s) verify, ${r.quorum} needed`);
        process.exitCode = 5;
      }
    });
}
