/**
 * C2SP tlog-checkpoint v1.0.0 (https://c2sp.org/tlog-checkpoint@v1.0.0): the text of a signed note that states a
 * log's tree head.
 *
 *   <origin>\n                 non-empty; Assay's origin identifies the ledger
 *   <tree size>\n              ASCII decimal, no leading zeros ("0" for the empty tree)
 *   <base64 root hash>\n       standard base64 of the 32-byte RFC 9162 root
 *   [<extension line>\n]*      optional, each non-empty (Assay writes none)
 *
 * Parsing is strict: exact line structure, canonical base64 of exactly 32 bytes, sizes up to 2^53 - 1 (the range of
 * the rest of the ledger), no control characters, bounded size and extension count.
 */
import { AssayError } from '@assay/core';
import { decodeBase64Strict, signNote, verifyNote, parseNote, type NoteKeyRef, type NoteSigner, type NoteVerifier } from './note';

export const CHECKPOINT_HASH_BYTES = 32;
export const MAX_CHECKPOINT_BODY_BYTES = 64 * 1024;
export const MAX_ORIGIN_BYTES = 1024;
export const MAX_CHECKPOINT_EXTENSIONS = 64;

export interface Checkpoint {
  origin: string;
  treeSize: number;
  rootHash: Uint8Array;
}

export interface ParsedCheckpoint extends Checkpoint {
  extensions: string[];
}

const TREE_SIZE_RE = /^(0|[1-9][0-9]*)$/;
const CONTROL = /[\u0000-\u001f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function cpError(code: string, message: string, details: Record<string, unknown> = {}): AssayError {
  return new AssayError(code, 'invalid_input', message, { details });
}

function lineProblem(line: string): string | null {
  if (line.length === 0) return 'is empty';
  if (CONTROL.test(line)) return 'contains a control character';
  if (LONE_SURROGATE.test(line)) return 'is not valid Unicode';
  return null;
}

function checkOrigin(origin: unknown): string {
  if (typeof origin !== 'string') throw cpError('CHECKPOINT_BAD_ORIGIN', 'checkpoint origin must be a string');
  const p = lineProblem(origin);
  if (p) throw cpError('CHECKPOINT_BAD_ORIGIN', `checkpoint origin line ${p}`);
  if (Buffer.byteLength(origin, 'utf8') > MAX_ORIGIN_BYTES)
    throw cpError('CHECKPOINT_BAD_ORIGIN', `checkpoint origin is longer than ${MAX_ORIGIN_BYTES} bytes`);
  return origin;
}

/** The checkpoint note text (body) for a tree head. Extension lines are allowed but not recommended by the spec. */
export function formatCheckpointBody(cp: Checkpoint & { extensions?: readonly string[] }): string {
  const origin = checkOrigin(cp.origin);
  if (!Number.isSafeInteger(cp.treeSize) || cp.treeSize < 0)
    throw cpError('CHECKPOINT_BAD_TREE_SIZE', `checkpoint tree size must be an integer in [0, 2^53), got ${String(cp.treeSize)}`);
  if (!(cp.rootHash instanceof Uint8Array) || cp.rootHash.byteLength !== CHECKPOINT_HASH_BYTES)
    throw cpError('CHECKPOINT_BAD_ROOT_HASH', `checkpoint root hash must be ${CHECKPOINT_HASH_BYTES} bytes`);
  const extensions = cp.extensions ?? [];
  if (extensions.length > MAX_CHECKPOINT_EXTENSIONS)
    throw cpError('CHECKPOINT_TOO_MANY_EXTENSIONS', `a checkpoint takes at most ${MAX_CHECKPOINT_EXTENSIONS} extension lines`);
  extensions.forEach((e, i) => {
    const p = typeof e === 'string' ? lineProblem(e) : 'is not a string';
    if (p) throw cpError('CHECKPOINT_BAD_EXTENSION', `checkpoint extension line ${i + 1} ${p}`, { extension: i + 1 });
  });
  const root = Buffer.from(cp.rootHash.buffer, cp.rootHash.byteOffset, cp.rootHash.byteLength).toString('base64');
  const body = [origin, String(cp.treeSize), root, ...extensions].join('\n') + '\n';
  if (Buffer.byteLength(body, 'utf8') > MAX_CHECKPOINT_BODY_BYTES)
    throw cpError('CHECKPOINT_TOO_LARGE', `checkpoint body would be larger than ${MAX_CHECKPOINT_BODY_BYTES} bytes`);
  return body;
}

/** Strictly parses a checkpoint body (the note text, final newline included, without the signatures). */
export function parseCheckpointBody(text: string): ParsedCheckpoint {
  if (typeof text !== 'string') throw cpError('CHECKPOINT_MALFORMED', 'checkpoint body must be a string');
  if (text.length > MAX_CHECKPOINT_BODY_BYTES || Buffer.byteLength(text, 'utf8') > MAX_CHECKPOINT_BODY_BYTES)
    throw cpError('CHECKPOINT_TOO_LARGE', `checkpoint body is larger than ${MAX_CHECKPOINT_BODY_BYTES} bytes`);
  if (!text.endsWith('\n')) throw cpError('CHECKPOINT_MALFORMED', 'checkpoint body must end with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3)
    throw cpError('CHECKPOINT_MALFORMED', `checkpoint body needs an origin, a tree size and a root hash line; it has ${lines.length} line(s)`);
  if (lines.length - 3 > MAX_CHECKPOINT_EXTENSIONS)
    throw cpError('CHECKPOINT_TOO_MANY_EXTENSIONS', `checkpoint has ${lines.length - 3} extension lines, more than ${MAX_CHECKPOINT_EXTENSIONS}`);
  const [originLine, sizeLine, rootLine, ...extensions] = lines as [string, string, string, ...string[]];
  const origin = checkOrigin(originLine);
  if (!TREE_SIZE_RE.test(sizeLine))
    throw cpError(
      'CHECKPOINT_BAD_TREE_SIZE',
      `checkpoint line 2 must be the tree size in decimal without leading zeros, got ${JSON.stringify(sizeLine.slice(0, 40))}`,
    );
  const treeSize = Number(sizeLine);
  if (!Number.isSafeInteger(treeSize)) throw cpError('CHECKPOINT_BAD_TREE_SIZE', `checkpoint tree size ${sizeLine.slice(0, 40)} is above 2^53 - 1`);
  const rootHash = rootLine.length === 44 ? decodeBase64Strict(rootLine) : null;
  if (!rootHash || rootHash.byteLength !== CHECKPOINT_HASH_BYTES)
    throw cpError('CHECKPOINT_BAD_ROOT_HASH', `checkpoint line 3 must be the standard base64 of a ${CHECKPOINT_HASH_BYTES}-byte root hash`);
  extensions.forEach((e, i) => {
    const p = lineProblem(e);
    if (p) throw cpError('CHECKPOINT_BAD_EXTENSION', `checkpoint line ${i + 4} (extension line ${i + 1}) ${p}`, { line: i + 4 });
  });
  return { origin, treeSize, rootHash, extensions };
}

/** Formats and signs a checkpoint: the complete signed note. */
export function signCheckpoint(cp: Checkpoint & { extensions?: readonly string[] }, signers: readonly NoteSigner[]): string {
  return signNote(formatCheckpointBody(cp), signers);
}

/**
 * Parses a signed checkpoint note, verifies it against known keys and parses its body. Throws
 * CHECKPOINT_NOT_SIGNED (integrity) when no known key signed it, NOTE_BAD_SIGNATURE when a known key's signature
 * is wrong, and the parse errors of note.ts and of parseCheckpointBody.
 */
export function openCheckpoint(
  note: string | Uint8Array,
  verifiers: readonly NoteVerifier[],
): { checkpoint: ParsedCheckpoint; signedBy: NoteKeyRef[]; body: string } {
  const parsed = parseNote(note);
  const checkpoint = parseCheckpointBody(parsed.body);
  const signedBy = verifyNote(parsed, verifiers);
  if (signedBy.length === 0)
    throw new AssayError('CHECKPOINT_NOT_SIGNED', 'integrity', 'the checkpoint is not signed by any of the known keys', {
      details: { known: verifiers.map((v) => v.name) },
    });
  return { checkpoint, signedBy, body: parsed.body };
}
