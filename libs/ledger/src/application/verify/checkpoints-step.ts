/**
 * The checkpoints step: every stored and supplied checkpoint, and the home's witness file, against the key registry
 * the ordered pass built and the roots it recomputed at their sizes (see verifyCheckpoints).
 */
import type { KeyRecord, KeyRegistry } from '../../domain/key-registry';
import type { RootAccumulator } from '../../domain/root-accumulator';
import { parseCheckpointBody } from '../../domain/checkpoint';
import { ed25519NoteVerifier, parseNote, SIG_TYPE_COSIGNATURE_ED25519, SIG_TYPE_ED25519, type ParsedNote } from '../../domain/note';
import { cosignatureVerifier } from '../../domain/cosignature';
import type { StoredCheckpoint } from '../../ports/checkpoint-store.port';
import type { StepName } from './check-chunk';
import { Failed } from './verify-failure';

/** What the checkpoints step reads of the verification's options. */
export interface CheckpointInputs {
  checkpoints: StoredCheckpoint[];
  externalCheckpoints?: string[];
  origin?: string;
}

interface CheckedCheckpoint {
  seq: number | null;
  source: CheckpointSource;
  treeSize: number;
  root: Buffer;
  note: string;
  matches: boolean | null;
}

/** Where a checkpoint came from: a row of the database, supplied by the caller, or the home's witness file. */
type CheckpointSource = 'stored' | 'supplied' | 'witness';

const sourceName = (source: CheckpointSource, seq: number | null): string =>
  source === 'stored' ? `checkpoint #${String(seq)}` : source === 'witness' ? 'checkpoint.last' : 'a supplied checkpoint';

/** The tree size a note states, or null when it does not parse (the checkpoints step reports that). */
export function noteTreeSize(note: unknown): number | null {
  try {
    return typeof note === 'string' ? parseCheckpointBody(parseNote(note).body).treeSize : null;
  } catch {
    return null;
  }
}

/** The witness file, read and checked against the note it holds (its signature and contents are checked later). */
export interface WitnessFile {
  path: string;
  /** null: the file does not exist. */
  note: string | null;
  problem: { code: string; message: string } | null;
}

const WITNESS_MEMBERS = ['note', 'rootHash', 'treeSize'];

/**
 * Reads `checkpoint.last`: a JSON object with exactly the members `treeSize` (an integer >= 0), `rootHash` (a
 * string) and `note` (a string, a signed checkpoint), where `treeSize` and `rootHash` equal the tree size and the
 * base64 root the note's body states.
 */
export function readWitnessFile(w: { path: string; text: string | null }): WitnessFile {
  const bad = (code: string, message: string): WitnessFile => ({ path: w.path, note: null, problem: { code, message: `${w.path}: ${message}` } });
  if (w.text === null) return { path: w.path, note: null, problem: null };
  let v: unknown;
  try {
    v = JSON.parse(w.text);
  } catch (e) {
    return bad('VERIFY_WITNESS_MALFORMED', `not valid JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('VERIFY_WITNESS_MALFORMED', 'not a JSON object');
  const rec = v as Record<string, unknown>;
  const members = Object.keys(rec).sort();
  if (members.join() !== WITNESS_MEMBERS.join())
    return bad('VERIFY_WITNESS_MALFORMED', `must have exactly the members ${WITNESS_MEMBERS.join(', ')}; it has ${members.join(', ') || 'none'}`);
  const { treeSize, rootHash, note } = rec;
  if (typeof treeSize !== 'number' || !Number.isSafeInteger(treeSize) || treeSize < 0)
    return bad('VERIFY_WITNESS_MALFORMED', 'treeSize must be an integer >= 0');
  if (typeof rootHash !== 'string') return bad('VERIFY_WITNESS_MALFORMED', 'rootHash must be a string');
  if (typeof note !== 'string') return bad('VERIFY_WITNESS_MALFORMED', 'note must be a string');
  let body;
  try {
    body = parseCheckpointBody(parseNote(note).body);
  } catch (e) {
    return bad('VERIFY_WITNESS_MALFORMED', `the note is not a signed checkpoint: ${(e as Error).message}`);
  }
  const noteRoot = Buffer.from(body.rootHash).toString('base64');
  if (body.treeSize !== treeSize || noteRoot !== rootHash)
    return bad(
      'VERIFY_WITNESS_MISMATCH',
      `records size ${treeSize} and root ${rootHash}, but the note it holds says size ${body.treeSize} and root ${noteRoot}: the file was edited`,
    );
  return { path: w.path, note, problem: null };
}

/** A registered key as a signer of checkpoint lines: by its note key id (type 0x01) and its cosigner key id (0x04). */
interface LineKey {
  record: KeyRecord;
  type: typeof SIG_TYPE_ED25519 | typeof SIG_TYPE_COSIGNATURE_ED25519;
  verify(body: Uint8Array, signature: Uint8Array): boolean;
}

function lineKeys(registry: KeyRegistry): Map<string, LineKey> {
  const out = new Map<string, LineKey>();
  for (const record of registry.all()) {
    const name = record.keyId.slice(0, record.keyId.lastIndexOf('+'));
    try {
      const note = ed25519NoteVerifier(name, record.publicKey);
      out.set(`${name}+${Buffer.from(note.keyId).toString('hex')}`, { record, type: SIG_TYPE_ED25519, verify: (b, sig) => note.verify(b, sig) });
      const co = cosignatureVerifier({ name, publicKey: record.publicKey });
      out.set(`${name}+${Buffer.from(co.keyId).toString('hex')}`, { record, type: SIG_TYPE_COSIGNATURE_ED25519, verify: (b, sig) => co.verify(b, sig) });
    } catch {
      // a key the registry accepted always decodes; one that does not cannot have signed anything
    }
  }
  return out;
}

/**
 * The checkpoints step. Every checkpoint (each stored row in `seq` order, each supplied one, the witness file's) is
 * checked in turn, and the first problem fails the step:
 *   - the note parses as a C2SP signed note whose body is a tlog-checkpoint (`*_MALFORMED`);
 *   - a stored row: `seq` is its index in issue order (0, 1, 2, ...), its `note` is TEXT, and its `tree_size` and
 *     `root_hash` are exactly the note body's size and base64 root (VERIFY_CHECKPOINT_COLUMN_MISMATCH);
 *   - signature lines: a line whose key name and key id are those of a key registered in the ledger, as a note key
 *     (type 0x01) or a cosigner key (type 0x04), must verify (`*_SIGNATURE`), and its key must not have been revoked
 *     at a position before the tree size n (`*_REVOKED_SIGNER`); a type 0x01 line by a controller key must come from a
 *     key registered at a position before n (`*_UNREGISTERED_SIGNER`); lines by keys the ledger never registered are
 *     ignored, as signed-note prescribes; at least one type 0x01 line by a controller key must be there (`*_SIGNATURE`);
 *   - the origin is the ledger's (`*_ORIGIN`); stored checkpoints never shrink in issue order (_ROLLBACK);
 *   - the root at its size, recomputed from the stored events, equals the signed one, and the log holds at least its
 *     size (`*_ROOT_MISMATCH`, VERIFY_TRUNCATED / VERIFY_WITNESS_TRUNCATED); two that cannot both be true:
 *     VERIFY_EQUIVOCATION.
 * (`*` is VERIFY_CHECKPOINT for stored and supplied checkpoints and VERIFY_WITNESS for the witness file.)
 */
export function verifyCheckpoints(
  o: CheckpointInputs,
  registry: KeyRegistry,
  rootsAt: Map<number, Buffer>,
  acc: RootAccumulator,
  bump: (s: StepName) => void,
  witness: WitnessFile | null,
): void {
  const keys = lineKeys(registry);
  const notes: Array<{ seq: number | null; source: CheckpointSource; note: unknown; row?: StoredCheckpoint; index?: number }> = [
    ...o.checkpoints.map((row, index) => ({ seq: row.seq, source: 'stored' as const, note: row.note as unknown, row, index })),
    ...(o.externalCheckpoints ?? []).map((note) => ({ seq: null, source: 'supplied' as const, note: note as unknown })),
    ...(witness ? [{ seq: null, source: 'witness' as const, note: witness.note as unknown }] : []),
  ];
  let origin = o.origin;
  const checked: CheckedCheckpoint[] = [];
  let lastStored: CheckedCheckpoint | null = null;
  let columnProblem: Failed | null = null;
  for (const { seq, source, note: rawNote, row, index } of notes) {
    if (source === 'witness' && witness) {
      if (witness.problem)
        throw new Failed({ step: 'checkpoints', code: witness.problem.code, message: witness.problem.message, checkpoint: { seq: null, treeSize: 0 } });
      if (witness.note === null) {
        if (o.checkpoints.length === 0) continue; // nothing signed yet
        throw new Failed({
          step: 'checkpoints',
          code: 'VERIFY_WITNESS_MISSING',
          message: `${witness.path} is missing, but the database holds ${o.checkpoints.length} signed checkpoints: the file that remembers the last signed checkpoint outside the database was deleted (restore it, or write the latest checkpoint's {treeSize, rootHash, note} into it)`,
          checkpoint: { seq: null, treeSize: 0 },
        });
      }
    }
    const label = sourceName(source, seq);
    const prefix = source === 'witness' ? 'VERIFY_WITNESS_' : 'VERIFY_CHECKPOINT_';
    const noteText = typeof rawNote === 'string' ? rawNote : '';
    const fail = (what: string, message: string, treeSize = 0): never => {
      throw new Failed({ step: 'checkpoints', code: `${prefix}${what}`, message: `${label}: ${message}`, checkpoint: { seq, treeSize, note: noteText } });
    };
    if (typeof rawNote !== 'string')
      fail(
        source === 'stored' ? 'COLUMN_MISMATCH' : 'MALFORMED',
        `the note is ${rawNote === null ? 'NULL' : rawNote instanceof Uint8Array ? 'a BLOB' : typeof rawNote}, not text`,
      );
    let parsed: ParsedNote;
    let body;
    try {
      parsed = parseNote(noteText);
      body = parseCheckpointBody(parsed.body);
    } catch (e) {
      return fail('MALFORMED', (e as Error).message);
    }
    const n = body.treeSize;
    const root = Buffer.from(body.rootHash);
    if (row && !columnProblem) {
      // The row's other columns are an index of its note: each must say exactly what the note says. Reported after
      // the equivocation check, which, with both notes as evidence, says more about a planted row.
      const r = row as unknown as Record<'seq' | 'treeSize' | 'rootHash', unknown>;
      try {
        if (r.seq !== index)
          fail(
            'COLUMN_MISMATCH',
            `seq is ${String(r.seq)} where ${String(index)} was expected: rows are numbered 0, 1, 2, ... in issue order, and one is missing or was renumbered`,
            n,
          );
        if (r.treeSize !== n) fail('COLUMN_MISMATCH', `tree_size is ${JSON.stringify(r.treeSize) ?? String(r.treeSize)}, but the signed note says ${n}`, n);
        if (r.rootHash !== root.toString('base64'))
          fail('COLUMN_MISMATCH', `root_hash is ${JSON.stringify(r.rootHash) ?? String(r.rootHash)}, but the signed note says ${root.toString('base64')}`, n);
      } catch (e) {
        columnProblem = e as Failed;
      }
    }
    // Lines of known keys: every one must verify, then none may be outside its key's window; unknown keys are ignored.
    const known = parsed.signatures.flatMap((line) => {
      const k = keys.get(`${line.name}+${line.keyIdHex}`);
      return k
        ? [{ line, k, who: `${k.record.keyId} (a registered ${k.record.role} key, ${k.type === SIG_TYPE_ED25519 ? 'signature' : 'cosignature'} line)` }]
        : [];
    });
    for (const { line, k, who } of known) {
      let ok = false;
      try {
        ok = k.verify(parsed.bodyBytes, line.signature);
      } catch {
        ok = false;
      }
      if (!ok) fail('SIGNATURE', `the line by ${who} does not verify`, n);
    }
    let byController = false;
    for (const { k, who } of known) {
      if (k.record.revokedAt !== null && k.record.revokedAt < n)
        fail(
          'REVOKED_SIGNER',
          `${who} was revoked at position ${k.record.revokedAt}, inside the tree of ${n} events it signs: a revoked key signs nothing after its revocation`,
          n,
        );
      if (k.type === SIG_TYPE_ED25519 && k.record.role === 'controller') {
        if (k.record.registeredAt >= n)
          fail('UNREGISTERED_SIGNER', `${who} was registered at position ${k.record.registeredAt}, outside the tree of ${n} events it signs`, n);
        byController = true;
      }
    }
    if (!byController) fail('SIGNATURE', 'not signed by any controller key of this ledger', n);
    origin ??= body.origin;
    if (body.origin !== origin) fail('ORIGIN', `origin "${body.origin}" is not this ledger's "${origin}"`, n);
    const actual = n <= acc.size ? (rootsAt.get(n) ?? null) : null;
    const c: CheckedCheckpoint = { seq, source, treeSize: n, root, note: noteText, matches: actual === null ? null : actual.equals(root) };
    if (source === 'stored' && lastStored && c.treeSize < lastStored.treeSize)
      fail('ROLLBACK', `size ${c.treeSize} is smaller than the size ${lastStored.treeSize} of the checkpoint before it`, c.treeSize);
    if (source === 'stored') lastStored = c;
    checked.push(c);
    if (source !== 'witness') bump('checkpoints'); // the witness repeats a checkpoint; it is not counted twice
  }
  // merkle: the log must not be shorter than what was signed
  const largest = checked.filter((c) => c.source === 'stored').reduce((m, c) => Math.max(m, c.treeSize), 0);
  if (largest > acc.size)
    throw new Failed({
      step: 'merkle',
      code: 'VERIFY_TRUNCATED',
      message: `a signed checkpoint covers ${largest} events but only ${acc.size} are stored: events from position ${acc.size} on were removed`,
      position: acc.size,
    });
  // Equivocation: two validly signed checkpoints that cannot both be true.
  for (const a of checked) {
    for (const b of checked) {
      if (a === b) continue;
      const sameSizeFork = a.treeSize === b.treeSize && !a.root.equals(b.root);
      const forkAgainstLog = a.matches === false && b.matches === true && b.treeSize >= a.treeSize;
      if (sameSizeFork || forkAgainstLog) {
        throw new Failed({
          step: 'checkpoints',
          code: 'VERIFY_EQUIVOCATION',
          message: `${sourceName(a.source, a.seq)} (size ${a.treeSize}) and ${sourceName(b.source, b.seq)} (size ${b.treeSize}) are both validly signed but cannot both be true: the ledger signed two different histories`,
          checkpoint: { seq: a.seq, treeSize: a.treeSize, note: a.note },
          evidence: [a.note, b.note],
        });
      }
    }
  }
  if (columnProblem) throw columnProblem;
  for (const c of checked) {
    const prefix = c.source === 'witness' ? 'VERIFY_WITNESS_' : 'VERIFY_CHECKPOINT_';
    if (c.matches === false)
      throw new Failed({
        step: 'checkpoints',
        code: `${prefix}ROOT_MISMATCH`,
        message: `${sourceName(c.source, c.seq)} signs root ${c.root.toString('base64')} for size ${c.treeSize}, but the stored events give ${rootsAt.get(c.treeSize)?.toString('base64')}`,
        checkpoint: { seq: c.seq, treeSize: c.treeSize, note: c.note },
      });
    if (c.matches === null && c.source !== 'stored')
      throw new Failed({
        step: 'checkpoints',
        code: c.source === 'witness' ? 'VERIFY_WITNESS_TRUNCATED' : 'VERIFY_TRUNCATED',
        message:
          c.source === 'witness'
            ? `${witness?.path ?? 'checkpoint.last'} records a signed checkpoint of ${c.treeSize} events, but the database holds ${acc.size}: events a signed checkpoint covered are missing (an older database restored, or a deleted or damaged WAL)`
            : `a supplied checkpoint covers ${c.treeSize} events but only ${acc.size} are stored`,
        position: acc.size,
        checkpoint: { seq: null, treeSize: c.treeSize, note: c.note },
      });
  }
}
