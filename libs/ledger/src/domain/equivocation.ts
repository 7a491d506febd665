/**
 * Equivocation reports: a small portable JSON file holding two signed checkpoint notes of one log that cannot both
 * hold. Anyone with the log's public key checks one offline with verifyEquivocation (docs/formats.md, "Equivocation
 * reports"):
 *
 *   {"format": "assay-equivocation/v1", "origin": "<origin>", "checkpoints": ["<note A>", "<note B>"],
 *    "consistency"?: {"size1": n1, "size2": n2, "proof": ["<base64>", ...]},
 *    "witness"?: "<cosigner name>", "detectedAt"?: "<ISO time>", "reason"?: "<text>"}
 *
 * Proven (and only this): both notes verify under a log key, name the same origin (the report's), state the same tree
 * size and different root hashes. A Merkle tree has one root per size, so the log signed two histories.
 * Two sizes are evidence, never proof: a consistency proof that fails to verify may just be a wrong proof. For them the
 * answer says what to do (ask the log for a proof between the two sizes; a log that cannot give one that verifies
 * has forked), and a proof in the report that does verify shows the two are consistent.
 */
import { openCheckpoint } from './checkpoint';
import { verifyConsistency } from './merkle';
import type { NoteVerifier } from './note';
import { witnessError } from './witness-errors';

export const EQUIVOCATION_FORMAT = 'assay-equivocation/v1';
const MAX_REPORT_BYTES = 256 * 1024;

export interface EquivocationReport {
  format: typeof EQUIVOCATION_FORMAT;
  origin: string;
  checkpoints: [string, string];
  consistency?: { size1: number; size2: number; proof: string[] };
  witness?: string;
  detectedAt?: string;
  reason?: string;
}

export interface EquivocationVerdict {
  proven: boolean;
  reason: string;
  origin?: string;
  /** The two checkpoints' sizes and roots, in report order, when both verified. */
  checkpoints?: Array<{ treeSize: number; rootHash: string }>;
}

export function makeEquivocationReport(r: Omit<EquivocationReport, 'format'>): EquivocationReport {
  return { format: EQUIVOCATION_FORMAT, ...r };
}

export function formatEquivocationReport(r: EquivocationReport): string {
  return `${JSON.stringify(r, null, 2)}\n`;
}

/** Parses a report's text strictly (shape only; verifyEquivocation checks the signatures). */
export function parseEquivocationReport(text: string): EquivocationReport {
  const bad = (m: string) => witnessError('EQUIVOCATION_MALFORMED', `equivocation report: ${m}`);
  if (typeof text !== 'string' || text.length > MAX_REPORT_BYTES) throw bad(`must be JSON text of at most ${MAX_REPORT_BYTES} bytes`);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw bad(`not valid JSON: ${(e as Error).message}`);
  }
  const o = v as Partial<EquivocationReport> | null;
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw bad('must be a JSON object');
  if (o.format !== EQUIVOCATION_FORMAT) throw bad(`"format" must be "${EQUIVOCATION_FORMAT}"`);
  if (typeof o.origin !== 'string' || o.origin.length === 0) throw bad('"origin" must be a non-empty string');
  if (!Array.isArray(o.checkpoints) || o.checkpoints.length !== 2 || !o.checkpoints.every((n) => typeof n === 'string'))
    throw bad('"checkpoints" must be an array of two signed checkpoint notes (strings)');
  const c = o.consistency;
  if (c !== undefined) {
    const ok =
      c !== null &&
      typeof c === 'object' &&
      Number.isSafeInteger(c.size1) &&
      Number.isSafeInteger(c.size2) &&
      Array.isArray(c.proof) &&
      c.proof.length <= 64 &&
      c.proof.every((h) => typeof h === 'string' && /^[A-Za-z0-9+/]{43}=$/.test(h));
    if (!ok) throw bad('"consistency" must be {"size1": n, "size2": n, "proof": [base64 SHA-256 hashes]}');
  }
  for (const k of ['witness', 'detectedAt', 'reason'] as const)
    if (o[k] !== undefined && typeof o[k] !== 'string') throw bad(`"${k}" must be a string when present`);
  return o as EquivocationReport;
}

/**
 * Checks a report against the log's note key(s). Never throws for a bad report: an unparsable one, a note that does
 * not verify, two origins, or two consistent checkpoints are `proven: false` with the reason.
 */
export function verifyEquivocation(report: string | EquivocationReport, logVerifiers: readonly NoteVerifier[]): EquivocationVerdict {
  let r: EquivocationReport;
  try {
    r = typeof report === 'string' ? parseEquivocationReport(report) : parseEquivocationReport(JSON.stringify(report));
  } catch (e) {
    return { proven: false, reason: (e as Error).message };
  }
  const opened = [];
  for (const [i, note] of r.checkpoints.entries()) {
    try {
      opened.push(openCheckpoint(note, logVerifiers).checkpoint);
    } catch (e) {
      return { proven: false, reason: `checkpoint ${i + 1} does not verify under the log key: ${(e as Error).message}` };
    }
  }
  const [a, b] = opened as [(typeof opened)[0], (typeof opened)[0]];
  const checkpoints = [a, b].map((c) => ({ treeSize: c.treeSize, rootHash: Buffer.from(c.rootHash).toString('base64') }));
  const base = { origin: r.origin, checkpoints };
  if (a.origin !== r.origin || b.origin !== r.origin)
    return { proven: false, reason: `the checkpoints name origins ${a.origin} and ${b.origin}, not both the report's ${r.origin}`, ...base };
  const ra = checkpoints[0] as { rootHash: string };
  const rb = checkpoints[1] as { rootHash: string };
  if (a.treeSize === b.treeSize) {
    if (ra.rootHash === rb.rootHash) return { proven: false, reason: `both checkpoints state the same tree of size ${a.treeSize}: no equivocation`, ...base };
    return {
      proven: true,
      reason: `the log key signed two different roots for tree size ${a.treeSize} of ${r.origin} (${ra.rootHash} and ${rb.rootHash}): the log equivocated`,
      ...base,
    };
  }
  const [small, large] = a.treeSize < b.treeSize ? [a, b] : [b, a];
  const c = r.consistency;
  if (c && c.size1 === small.treeSize && c.size2 === large.treeSize && small.treeSize > 0) {
    const ok = verifyConsistency(
      c.size1,
      c.size2,
      c.proof.map((h) => Buffer.from(h, 'base64')),
      small.rootHash,
      large.rootHash,
    );
    if (ok) return { proven: false, reason: `the consistency proof from ${c.size1} to ${c.size2} verifies: the two checkpoints are consistent`, ...base };
  }
  return {
    proven: false,
    reason: `the checkpoints have different sizes (${small.treeSize} and ${large.treeSize}); a consistency proof that fails to verify does not prove a fork by itself. Ask the log for one (\`assay ledger consistency ${small.treeSize} ${large.treeSize}\`): a log that cannot give one that verifies has forked`,
    ...base,
  };
}
