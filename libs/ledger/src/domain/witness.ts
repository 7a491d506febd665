/**
 * A checkpoint witness (C2SP tlog-witness, tlog-cosignature v1.0.1), as pure decisions over its recorded state.
 *
 * The witness holds its own cosigner key, the log's note key(s) and, per origin, the record of what it cosigned: the
 * latest checkpoint and a bounded history of earlier ones (so that a rollback to a size it has already seen with
 * another root is a proven equivocation). It cosigns a checkpoint only when:
 * - the log key signed it;
 * - it has no record for the origin (trust on first use) or the pinned trust anchor, or
 * - the new size equals the recorded one with the same root (cosigned again), or
 * - the new size is larger and an RFC 9162 consistency proof from the recorded size verifies against both roots.
 * It refuses a smaller size (WITNESS_ROLLBACK), a same-size different root and a failing proof (WITNESS_FORK), and a
 * larger size without a proof (WITNESS_PROOF_REQUIRED). The errors carry the equivocation evidence in `details`.
 *
 * The request the witness answers is the body of tlog-witness's add-checkpoint (see docs/formats.md, "Witnesses"):
 *
 *   old <size the client believes the witness has cosigned>\n
 *   <base64 consistency proof hash>\n ...       (none when old is 0 or equal to the checkpoint's size)
 *   \n
 *   <the signed checkpoint note>
 */
import type { AssayError } from '@assay/core';
import { witnessError } from './witness-errors';
import { openCheckpoint, parseCheckpointBody, type ParsedCheckpoint } from './checkpoint';
import { verifyConsistency } from './merkle';
import type { NoteVerifier } from './note';
import { makeEquivocationReport, type EquivocationReport } from './equivocation';

export { WITNESS_ERROR_KINDS, witnessError } from './witness-errors';

export const WITNESS_STATE_FORMAT = 'assay-witness-state/v1';
/** Earlier cosigned checkpoints kept per origin, besides the latest. */
export const WITNESS_HISTORY = 256;
const B64_HASH_RE = /^[A-Za-z0-9+/]{43}=$/;

export interface WitnessRecord {
  treeSize: number;
  /** Standard base64 of the root. */
  rootHash: string;
  /** The signed checkpoint note (log signature(s) included), or null for a pinned trust anchor. */
  note: string | null;
}

/** What a witness keeps per origin (one JSON file per origin). */
export interface WitnessState {
  format: typeof WITNESS_STATE_FORMAT;
  origin: string;
  latest: WitnessRecord;
  /** Earlier records, oldest first, at most WITNESS_HISTORY. */
  history: WitnessRecord[];
}

export interface WitnessRequest {
  /** The size the client says the witness cosigned last; null when not stated (a checkpoint given on its own). */
  oldSize: number | null;
  proof: Buffer[];
  note: string;
}

export type WitnessDecision =
  | { action: 'cosign'; checkpoint: ParsedCheckpoint; body: string; trustedOnFirstUse: boolean; state: WitnessState; repeated: boolean }
  | { action: 'refuse'; error: AssayError; report: EquivocationReport | null };

/** Parses the add-checkpoint request body (see the module comment). */
export function parseWitnessRequest(text: string): WitnessRequest {
  const bad = (m: string) => witnessError('WITNESS_REQUEST_MALFORMED', `witness request: ${m}`);
  if (typeof text !== 'string' || text.length > 1024 * 1024) throw bad('must be text of at most 1 MiB');
  const split = text.indexOf('\n\n');
  if (split < 0) throw bad('no blank line before the checkpoint');
  const lines = text.slice(0, split).split('\n');
  const m = /^old (0|[1-9]\d{0,15})$/.exec(lines[0] ?? '');
  if (!m) throw bad('the first line must be "old <decimal size>"');
  const oldSize = Number(m[1]);
  if (!Number.isSafeInteger(oldSize)) throw bad('old size is above 2^53 - 1');
  return { oldSize, proof: parseProofLines(lines.slice(1), 2), note: text.slice(split + 2) };
}

export function formatWitnessRequest(oldSize: number, proof: readonly string[], note: string): string {
  return `old ${oldSize}\n${proof.map((h) => `${h}\n`).join('')}\n${note}`;
}

function parseProofLines(lines: string[], firstLine: number): Buffer[] {
  if (lines.length > 64) throw witnessError('WITNESS_PROOF_MALFORMED', `a consistency proof has at most 64 hashes, got ${lines.length}`);
  return lines.map((l, i) => {
    if (!B64_HASH_RE.test(l)) throw witnessError('WITNESS_PROOF_MALFORMED', `line ${firstLine + i} is not a base64 SHA-256 hash`);
    return Buffer.from(l, 'base64');
  });
}

/**
 * A consistency proof file: either the text `assay ledger consistency` prints
 * ("consistency <m> -> <n>", "root1 <b64>", "root2 <b64>", one hash per line) or a request head ("old <m>", hashes).
 * Returns the old size, the new size when stated, and the hashes (the roots are not trusted: the witness uses its own
 * record and the checkpoint's root).
 */
export function parseConsistencyProofText(text: string): { oldSize: number; newSize: number | null; proof: Buffer[] } {
  const lines = text.split('\n').filter((l, i, all) => !(l === '' && i === all.length - 1));
  const head = /^consistency (\d{1,16}) -> (\d{1,16})$/.exec(lines[0] ?? '');
  if (head) {
    if (!/^root1 \S+$/.test(lines[1] ?? '') || !/^root2 \S+$/.test(lines[2] ?? ''))
      throw witnessError('WITNESS_PROOF_MALFORMED', 'consistency proof: lines 2 and 3 must be "root1 <base64>" and "root2 <base64>"');
    return { oldSize: Number(head[1]), newSize: Number(head[2]), proof: parseProofLines(lines.slice(3), 4) };
  }
  const old = /^old (\d{1,16})$/.exec(lines[0] ?? '');
  if (old) return { oldSize: Number(old[1]), newSize: null, proof: parseProofLines(lines.slice(1), 2) };
  throw witnessError(
    'WITNESS_PROOF_MALFORMED',
    'consistency proof: the first line must be "consistency <old> -> <new>" (as `assay ledger consistency` prints) or "old <size>"',
  );
}

/** Checks a state file's parsed JSON. */
export function parseWitnessState(v: unknown, where: string): WitnessState {
  const bad = (m: string) => witnessError('WITNESS_STATE_CORRUPT', `${where}: ${m}; the witness state must not be edited`);
  const rec = (r: unknown, what: string): WitnessRecord => {
    const o = r as Partial<WitnessRecord> | null;
    if (!o || typeof o !== 'object' || !Number.isSafeInteger(o.treeSize) || (o.treeSize as number) < 0) throw bad(`${what}.treeSize must be a size`);
    if (typeof o.rootHash !== 'string' || !B64_HASH_RE.test(o.rootHash)) throw bad(`${what}.rootHash must be a base64 SHA-256 hash`);
    if (o.note !== null && typeof o.note !== 'string') throw bad(`${what}.note must be a string or null`);
    return { treeSize: o.treeSize as number, rootHash: o.rootHash, note: o.note };
  };
  const s = v as Partial<WitnessState> | null;
  if (!s || typeof s !== 'object' || s.format !== WITNESS_STATE_FORMAT) throw bad(`format must be "${WITNESS_STATE_FORMAT}"`);
  if (typeof s.origin !== 'string' || s.origin.length === 0) throw bad('origin must be a string');
  if (!Array.isArray(s.history)) throw bad('history must be an array');
  return { format: WITNESS_STATE_FORMAT, origin: s.origin, latest: rec(s.latest, 'latest'), history: s.history.map((r, i) => rec(r, `history[${i}]`)) };
}

function withRecord(prev: WitnessState | null, origin: string, rec: WitnessRecord): WitnessState {
  if (!prev) return { format: WITNESS_STATE_FORMAT, origin, latest: rec, history: [] };
  if (prev.latest.treeSize === rec.treeSize) return { ...prev, latest: rec.note ? rec : prev.latest };
  return { ...prev, latest: rec, history: [...prev.history, prev.latest].slice(-WITNESS_HISTORY) };
}

export interface WitnessInput {
  /** The witness's record for the checkpoint's origin (null: none yet). */
  state: WitnessState | null;
  request: WitnessRequest;
  logVerifiers: readonly NoteVerifier[];
  /** Pins the first checkpoint instead of trusting it on first use (only read when `state` is null). */
  trust?: { treeSize: number; rootHash: string };
  /** For the equivocation report. */
  witnessName?: string;
  nowIso?: string;
}

/**
 * Decides whether to cosign (and the state to record afterwards) or to refuse, with the equivocation report when the
 * refusal rests on two signed checkpoints of the log.
 */
export function decideCosign(input: WitnessInput): WitnessDecision {
  const { request } = input;
  const { checkpoint, body } = openCheckpoint(request.note, input.logVerifiers);
  const note = request.note;
  const root = Buffer.from(checkpoint.rootHash).toString('base64');
  if (input.state && input.state.origin !== checkpoint.origin)
    throw witnessError('WITNESS_ORIGIN_MISMATCH', `the checkpoint's origin ${checkpoint.origin} is not the state's origin ${input.state.origin}`);
  const anchor: WitnessRecord | null =
    input.state?.latest ?? (input.trust ? { treeSize: input.trust.treeSize, rootHash: input.trust.rootHash, note: null } : null);
  const record: WitnessRecord = { treeSize: checkpoint.treeSize, rootHash: root, note };
  const report = (other: WitnessRecord, proof: Buffer[] | null, reason: string): EquivocationReport | null =>
    other.note === null
      ? null
      : makeEquivocationReport({
          origin: checkpoint.origin,
          checkpoints: [other.note, note],
          ...(proof ? { consistency: { size1: other.treeSize, size2: checkpoint.treeSize, proof: proof.map((h) => h.toString('base64')) } } : {}),
          ...(input.witnessName ? { witness: input.witnessName } : {}),
          ...(input.nowIso ? { detectedAt: input.nowIso } : {}),
          reason,
        });
  const cosign = (trustedOnFirstUse: boolean, repeated: boolean): WitnessDecision => ({
    action: 'cosign',
    checkpoint,
    body,
    trustedOnFirstUse,
    repeated,
    state: withRecord(input.state, checkpoint.origin, record),
  });
  if (!anchor) {
    if (request.oldSize !== null && request.oldSize !== 0)
      return refuse(witnessError('WITNESS_OLD_SIZE_MISMATCH', `the witness has cosigned nothing for ${checkpoint.origin}; send old 0`, { knownSize: 0 }));
    return cosign(true, false);
  }
  const pinned = anchor.note === null;
  const known = anchor.treeSize;
  if (checkpoint.treeSize < known) {
    const seen = (input.state?.history ?? []).find((r) => r.treeSize === checkpoint.treeSize);
    const forked = seen && seen.rootHash !== root;
    const rep = forked ? report(seen, null, `two signed checkpoints of size ${checkpoint.treeSize} with different roots`) : null;
    return refuse(
      witnessError(
        'WITNESS_ROLLBACK',
        `the checkpoint has size ${checkpoint.treeSize}, smaller than the size ${known} this witness ${pinned ? 'was pinned to' : 'cosigned'}; refusing to go backwards${forked ? ' (and the witness cosigned another root at that size: equivocation)' : ''}`,
        { size: checkpoint.treeSize, knownSize: known, equivocation: forked === true },
      ),
      rep,
    );
  }
  if (checkpoint.treeSize === known) {
    if (anchor.rootHash !== root)
      return refuse(
        witnessError(
          pinned ? 'WITNESS_TRUST_MISMATCH' : 'WITNESS_FORK',
          `the checkpoint of size ${known} has root ${root}, but the ${pinned ? 'pinned' : 'cosigned'} checkpoint of that size has root ${anchor.rootHash}: the log forked`,
          { size: known, root, knownRoot: anchor.rootHash },
        ),
        report(anchor, null, `two signed checkpoints of size ${known} with different roots`),
      );
    if (request.oldSize !== null && request.oldSize !== known && request.oldSize !== 0) return refuse(oldMismatch(known, request.oldSize));
    return cosign(false, true);
  }
  if (request.oldSize !== null && request.oldSize !== known) return refuse(oldMismatch(known, request.oldSize));
  if (known === 0) return cosign(false, false);
  if (request.proof.length === 0)
    return refuse(
      witnessError(
        'WITNESS_PROOF_REQUIRED',
        `the witness cosigned size ${known}; a consistency proof from ${known} to ${checkpoint.treeSize} is needed (\`assay ledger consistency ${known} ${checkpoint.treeSize}\`)`,
        { knownSize: known, size: checkpoint.treeSize },
      ),
    );
  if (!verifyConsistency(known, checkpoint.treeSize, request.proof, Buffer.from(anchor.rootHash, 'base64'), checkpoint.rootHash))
    return refuse(
      witnessError(
        'WITNESS_FORK',
        `the consistency proof from size ${known} to ${checkpoint.treeSize} does not verify against the ${pinned ? 'pinned' : 'cosigned'} root and the new one: the log may have forked; refusing to cosign`,
        { knownSize: known, size: checkpoint.treeSize },
      ),
      report(anchor, request.proof, `the consistency proof from ${known} to ${checkpoint.treeSize} does not verify`),
    );
  return cosign(false, false);
}

function oldMismatch(known: number, said: number): AssayError {
  return witnessError(
    'WITNESS_OLD_SIZE_MISMATCH',
    `the request says old ${said}, but this witness cosigned size ${known}; send old ${known} and a proof from it`,
    {
      knownSize: known,
    },
  );
}

function refuse(error: AssayError, report: EquivocationReport | null = null): WitnessDecision {
  return { action: 'refuse', error, report };
}

/** The checkpoint body of a note (text before the last blank line), strictly parsed. */
export function checkpointOfNote(note: string): ParsedCheckpoint {
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw witnessError('WITNESS_REQUEST_MALFORMED', 'the checkpoint note has no blank line before its signatures');
  return parseCheckpointBody(note.slice(0, split + 1));
}
