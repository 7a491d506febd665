/** Input checks and the order guard shared by every CheckpointStore adapter. */
import { AssayError } from '@assay/core';
import { parseCheckpointBody } from '../../domain/checkpoint';
import { verifyConsistency } from '../../domain/merkle';
import type { NewCheckpoint, ProveConsistencyFrom, StoredCheckpoint } from '../../ports/checkpoint-store.port';
import {
  LEDGER_CHECKPOINT_INCONSISTENT,
  LEDGER_CHECKPOINT_NOT_NEWER,
  LEDGER_CHECKPOINT_ROLLBACK,
  checkpointOutOfOrder,
  invalidCheckpoint,
} from '../../ports/event-store.errors';

const B64_32 = /^[A-Za-z0-9+/]{43}=$/;
/** Upper bound on a stored signed note (checkpoint body plus a generous number of cosignature lines). */
export const MAX_NOTE_BYTES = 64 * 1024;

/** The tree size and root the note's body states (LEDGER_INVALID_CHECKPOINT when it is not a checkpoint note). */
function noteHead(note: string): { treeSize: number; rootHash: string } {
  const blank = note.indexOf('\n\n');
  try {
    if (blank < 0) throw new Error('no blank line after the body');
    const body = parseCheckpointBody(note.slice(0, blank + 1));
    return { treeSize: body.treeSize, rootHash: Buffer.from(body.rootHash).toString('base64') };
  } catch (e) {
    throw invalidCheckpoint(`checkpoint note is not a checkpoint body followed by signatures: ${(e as Error).message}`, {});
  }
}

export function validateCheckpoint(cp: NewCheckpoint): void {
  if (typeof cp !== 'object' || cp === null) throw invalidCheckpoint('checkpoint must be an object', {});
  if (!Number.isSafeInteger(cp.treeSize) || cp.treeSize < 0)
    throw invalidCheckpoint(`checkpoint tree size ${String(cp.treeSize)} must be an integer >= 0`, {
      treeSize: cp.treeSize,
    });
  if (typeof cp.rootHash !== 'string' || !B64_32.test(cp.rootHash))
    throw invalidCheckpoint('checkpoint root hash must be standard base64 of 32 bytes', { rootHash: cp.rootHash });
  if (typeof cp.note !== 'string' || cp.note.length === 0 || Buffer.byteLength(cp.note, 'utf8') > MAX_NOTE_BYTES)
    throw invalidCheckpoint(`checkpoint note must be a non-empty string of at most ${MAX_NOTE_BYTES} bytes`, {});
  // The columns are an index of the note: they must say what the signed body says.
  const head = noteHead(cp.note);
  if (head.treeSize !== cp.treeSize || head.rootHash !== cp.rootHash)
    throw invalidCheckpoint(
      `checkpoint note states size ${head.treeSize} and root ${head.rootHash}, but the checkpoint to store has size ${cp.treeSize} and root ${cp.rootHash}`,
      {
        treeSize: cp.treeSize,
        noteTreeSize: head.treeSize,
      },
    );
}

/**
 * The order guard: `cp` must be larger than `last` and its tree must extend last's (an RFC 9162 consistency proof
 * from the caller's stored tree, verified against both roots). Throws the store's refusal; pure otherwise.
 */
export function checkCheckpointOrder(last: StoredCheckpoint | null, cp: NewCheckpoint, proveFrom: ProveConsistencyFrom): void {
  if (!last) return;
  // Compare with what the last one's note says, not with columns that could have been edited since.
  let head: { treeSize: number; rootHash: string } | null;
  try {
    head = noteHead(last.note);
  } catch {
    head = null;
  }
  if (!head || head.treeSize !== last.treeSize || head.rootHash !== last.rootHash)
    throw new AssayError(
      'LEDGER_CHECKPOINT_TAMPERED',
      'integrity',
      `the last stored checkpoint (seq ${last.seq}) records size ${last.treeSize} and root ${last.rootHash}, which its signed note does not state: the stored record was edited; run \`assay ledger verify\``,
      { details: { seq: last.seq } },
    );
  if (cp.treeSize < last.treeSize) throw checkpointOutOfOrder(LEDGER_CHECKPOINT_ROLLBACK, cp.treeSize, last.treeSize);
  if (cp.treeSize === last.treeSize) throw checkpointOutOfOrder(LEDGER_CHECKPOINT_NOT_NEWER, cp.treeSize, last.treeSize);
  // Any tree extends the empty one (RFC 9162 defines no proof from size 0).
  if (last.treeSize === 0) return;
  const proof = proveFrom(last.treeSize);
  const ok = verifyConsistency(last.treeSize, cp.treeSize, proof, Buffer.from(last.rootHash, 'base64'), Buffer.from(cp.rootHash, 'base64'));
  if (!ok) throw checkpointOutOfOrder(LEDGER_CHECKPOINT_INCONSISTENT, cp.treeSize, last.treeSize);
}
