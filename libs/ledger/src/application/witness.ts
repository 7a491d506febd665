/**
 * Witnessed checkpoints, application side: the witness that cosigns (cosignAsWitness) and the log side that collects
 * cosignatures (collectCosignatures). File system and processes stay behind the small interfaces below; the CLI
 * supplies them (apps/cli/src/commands/checkpoint.commands.ts, ledger.commands.ts).
 */
import type { AssayError } from '@assay/core';
import { cosign, verifyCosignature, type Cosigner } from '../domain/cosignature';
import { checkpointOfNote, decideCosign, formatWitnessRequest, witnessError, type WitnessRequest, type WitnessState } from '../domain/witness';
import type { EquivocationReport } from '../domain/equivocation';
import { addSignatures, formatSignatureLine, parseNote, type NoteVerifier } from '../domain/note';
import type { PolicyWitness } from '../domain/witness-policy';

/** Where a witness keeps its record, one per origin; `save` must replace the record atomically. */
export interface WitnessStateStore {
  load(origin: string): WitnessState | null;
  save(state: WitnessState): void;
}

export interface CosignResult {
  origin: string;
  treeSize: number;
  rootHash: string;
  /** The cosignature line ("— <name> <base64>\n"). */
  cosignature: string;
  /** The checkpoint note with the cosignature line appended. */
  note: string;
  cosigner: string;
  timestamp: number;
  trustedOnFirstUse: boolean;
  /** True when the witness had already cosigned this checkpoint's size and root. */
  repeated: boolean;
  previousSize: number | null;
}

export interface CosignRefusal {
  error: AssayError;
  report: EquivocationReport | null;
}

/**
 * Checks a checkpoint as a witness and cosigns it, recording it first (the record is saved before the cosignature is
 * returned, so a witness never cosigns a checkpoint it has not recorded). Refusals come back with their equivocation
 * report, for the caller to write before it raises the error.
 */
export function cosignAsWitness(o: {
  store: WitnessStateStore;
  cosigner: Cosigner;
  logVerifiers: readonly NoteVerifier[];
  request: WitnessRequest;
  trust?: { treeSize: number; rootHash: string };
  nowSeconds: number;
}): { ok: true; result: CosignResult } | { ok: false; refusal: CosignRefusal } {
  const origin = checkpointOfNote(o.request.note).origin;
  const state = o.store.load(origin);
  const d = decideCosign({
    state,
    request: o.request,
    logVerifiers: o.logVerifiers,
    ...(o.trust ? { trust: o.trust } : {}),
    witnessName: o.cosigner.name,
    nowIso: new Date(o.nowSeconds * 1000).toISOString(),
  });
  if (d.action === 'refuse') return { ok: false, refusal: { error: d.error, report: d.report } };
  o.store.save(d.state);
  const line = cosign(d.body, o.cosigner, o.nowSeconds);
  const parsed = parseNote(o.request.note);
  const signer = `${o.cosigner.name}+${line ? cosignerIdHex(line) : ''}`;
  // Drop an older cosignature of this witness from the note (a repeated cosign), then append the new one.
  const others = parsed.signatures.filter((s) => `${s.name}+${s.keyIdHex}` !== signer);
  const note = `${parsed.body}\n${others.map((s) => formatSignatureLine(s.name, s.keyId, s.signature)).join('')}${line}`;
  return {
    ok: true,
    result: {
      origin: d.checkpoint.origin,
      treeSize: d.checkpoint.treeSize,
      rootHash: Buffer.from(d.checkpoint.rootHash).toString('base64'),
      cosignature: line,
      note,
      cosigner: signer,
      timestamp: o.nowSeconds,
      trustedOnFirstUse: d.trustedOnFirstUse,
      repeated: d.repeated,
      previousSize: state?.latest.treeSize ?? null,
    },
  };
}

function cosignerIdHex(line: string): string {
  const b64 = line.trim().split(' ').pop() ?? '';
  return Buffer.from(b64, 'base64').subarray(0, 4).toString('hex');
}

// ---- the log side ----------------------------------------------------------------------------------------------------

/** One witness to ask: a command (run with the request on stdin) or a file holding a cosigned note. */
export type WitnessSource = { kind: 'command'; command: string } | { kind: 'file'; path: string };

export interface WitnessRunOutput {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface WitnessTransport {
  run(command: string, stdin: string): Promise<WitnessRunOutput>;
  readFile(path: string): string;
  /** RFC 9162 consistency proof hashes (base64) from `oldSize` to the checkpoint's size. */
  prove(oldSize: number, newSize: number): Promise<string[]>;
}

export interface WitnessOutcome {
  witness: string;
  ok: boolean;
  /** The cosigners (`<name>+<key id>`) whose verified cosignature was added from this witness. */
  cosigners: string[];
  /** The witness's size before this request, when it said so (for the next request). */
  knownSize?: number;
  error?: { code: string; message: string };
}

export interface CollectResult {
  /** The checkpoint note with every verified cosignature added. */
  note: string;
  witnesses: WitnessOutcome[];
}

/** The exit status a witness command uses for "my recorded size is another one" (tlog-witness 409); stdout: the size. */
export const WITNESS_CONFLICT_EXIT = 4;

/**
 * Asks each witness for a cosignature of `note` (a checkpoint note the log signed) and adds each one that verifies
 * under a key in `keys`. A command gets the tlog-witness add-checkpoint request on stdin, with `old` = the size it
 * last cosigned as far as this log knows (`knownSizes`, 0 when unknown) and the consistency proof from it; when the
 * witness answers WITNESS_CONFLICT_EXIT with its size on stdout, the request is sent once more from that size.
 * A witness's failure is reported in its outcome, never thrown.
 */
export async function collectCosignatures(o: {
  note: string;
  sources: readonly WitnessSource[];
  keys: readonly PolicyWitness[];
  knownSizes: Readonly<Record<string, number>>;
  transport: WitnessTransport;
}): Promise<CollectResult> {
  const checkpoint = checkpointOfNote(o.note);
  const body = parseNote(o.note).body;
  let merged = o.note;
  const outcomes: WitnessOutcome[] = [];
  for (const src of o.sources) {
    const name = src.kind === 'command' ? src.command : src.path;
    try {
      let text: string;
      let knownSize: number | undefined;
      if (src.kind === 'file') text = o.transport.readFile(src.path);
      else {
        const ask = async (old: number): Promise<WitnessRunOutput> => {
          const proof = old > 0 && old < checkpoint.treeSize ? await o.transport.prove(old, checkpoint.treeSize) : [];
          return o.transport.run(src.command, formatWitnessRequest(old, proof, o.note));
        };
        const first = o.knownSizes[name] ?? 0;
        let out = await ask(first);
        if (out.exitCode === WITNESS_CONFLICT_EXIT) {
          const size = conflictSize(out.stdout);
          if (size === null || size === first) throw failed(name, out);
          if (size > checkpoint.treeSize)
            throw witnessError(
              'WITNESS_FAILED',
              `witness ${name} has cosigned size ${size}, larger than this checkpoint (${checkpoint.treeSize}): this log is behind it`,
              {
                knownSize: size,
              },
            );
          out = await ask(size);
        }
        if (out.exitCode !== 0) throw failed(name, out);
        text = out.stdout;
        knownSize = checkpoint.treeSize;
      }
      const lines = signatureLines(text, body, name);
      const cosigners: string[] = [];
      const candidate = parseNote(`${body}\n${lines}`);
      for (const s of candidate.signatures) {
        const key = o.keys.find((k) => k.signer === `${s.name}+${s.keyIdHex}`);
        if (!key) continue;
        verifyCosignature(candidate, key);
        cosigners.push(key.signer);
      }
      if (cosigners.length === 0)
        throw witnessError(
          'WITNESS_BAD_COSIGNATURE',
          `witness ${name} returned no cosignature by a known witness key (give its key with --witness-key or --witness-policy)`,
        );
      const add = candidate.signatures.filter((s) => cosigners.includes(`${s.name}+${s.keyIdHex}`));
      const current = parseNote(merged);
      const fresh = add.filter((s) => !current.signatures.some((c) => c.name === s.name && c.keyIdHex === s.keyIdHex));
      if (fresh.length > 0)
        merged = addSignatures(
          merged,
          fresh.map((s) => ({ name: s.name, keyId: s.keyId, sign: () => s.signature })),
        );
      outcomes.push({ witness: name, ok: true, cosigners, ...(knownSize !== undefined ? { knownSize } : {}) });
    } catch (e) {
      const err = e as { code?: string; message?: string };
      outcomes.push({ witness: name, ok: false, cosigners: [], error: { code: err.code ?? 'WITNESS_FAILED', message: err.message ?? String(e) } });
    }
  }
  return { note: merged, witnesses: outcomes };
}

function conflictSize(stdout: string): number | null {
  const t = stdout.trim();
  if (/^\d{1,16}$/.test(t)) return Number(t);
  try {
    const v = JSON.parse(t) as { error?: { details?: { knownSize?: unknown } } };
    const k = v.error?.details?.knownSize;
    return typeof k === 'number' && Number.isSafeInteger(k) ? k : null;
  } catch {
    return null;
  }
}

function failed(name: string, out: WitnessRunOutput): AssayError {
  const why = (out.stderr.trim().split('\n').pop() ?? '').slice(0, 300) || `exit status ${out.exitCode}`;
  return witnessError('WITNESS_FAILED', `witness ${name} failed (exit ${out.exitCode}): ${why}`, { exitCode: out.exitCode });
}

/** The signature lines of a witness's answer: cosignature lines alone, or a cosigned note of this very checkpoint. */
function signatureLines(text: string, body: string, name: string): string {
  if (text.includes('\n\n')) {
    const n = parseNote(text);
    if (n.body !== body) throw witnessError('WITNESS_BAD_COSIGNATURE', `witness ${name} returned a note of another checkpoint`);
    return text.slice(text.lastIndexOf('\n\n') + 2);
  }
  const t = text.endsWith('\n') ? text : `${text}\n`;
  if (t.trim() === '') throw witnessError('WITNESS_BAD_COSIGNATURE', `witness ${name} returned nothing`);
  return t;
}
