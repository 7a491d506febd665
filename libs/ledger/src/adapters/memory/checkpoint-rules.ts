/** Input checks shared by every CheckpointStore adapter. */
import { invalidCheckpoint } from '../../ports/event-store.errors';

const B64_32 = /^[A-Za-z0-9+/]{43}=$/;
/** Upper bound on a stored signed note (checkpoint body plus a generous number of cosignature lines). */
export const MAX_NOTE_BYTES = 64 * 1024;

export function validateCheckpoint(cp: { treeSize: number; rootHash: string; note: string }): void {
  if (typeof cp !== 'object' || cp === null) throw invalidCheckpoint('checkpoint must be an object', {});
  if (!Number.isSafeInteger(cp.treeSize) || cp.treeSize < 0)
    throw invalidCheckpoint(`checkpoint tree size ${String(cp.treeSize)} must be an integer >= 0`, {
      treeSize: cp.treeSize,
    });
  if (typeof cp.rootHash !== 'string' || !B64_32.test(cp.rootHash))
    throw invalidCheckpoint('checkpoint root hash must be standard base64 of 32 bytes', { rootHash: cp.rootHash });
  if (typeof cp.note !== 'string' || cp.note.length === 0 || Buffer.byteLength(cp.note, 'utf8') > MAX_NOTE_BYTES)
    throw invalidCheckpoint(`checkpoint note must be a non-empty string of at most ${MAX_NOTE_BYTES} bytes`, {});
}
