/**
 * Errors of the ledger's storage ports (EventStore, CheckpointStore, MerkleNodeStore), shared by every adapter so
 * that callers and the contract suites see the same codes whatever the backend.
 */
import { AssayError } from '@assay/core';
import type { ExpectedRevision } from './event-store.port';

export const LEDGER_WRONG_EXPECTED_REVISION = 'LEDGER_WRONG_EXPECTED_REVISION';
export const LEDGER_DUPLICATE_EVENT_ID = 'LEDGER_DUPLICATE_EVENT_ID';
export const LEDGER_INVALID_APPEND = 'LEDGER_INVALID_APPEND';
export const LEDGER_STORE_CLOSED = 'LEDGER_STORE_CLOSED';
export const LEDGER_SUBSCRIPTION_STOPPED = 'LEDGER_SUBSCRIPTION_STOPPED';
export const LEDGER_INVALID_CHECKPOINT = 'LEDGER_INVALID_CHECKPOINT';
export const LEDGER_CHECKPOINT_ROLLBACK = 'LEDGER_CHECKPOINT_ROLLBACK';
export const LEDGER_CHECKPOINT_NOT_NEWER = 'LEDGER_CHECKPOINT_NOT_NEWER';
export const LEDGER_CHECKPOINT_INCONSISTENT = 'LEDGER_CHECKPOINT_INCONSISTENT';
export const LEDGER_LOCK_REENTERED = 'LEDGER_LOCK_REENTERED';
/** Same code as the memory Merkle node store and domain/merkle.ts use. */
export const MERKLE_NODE_MISSING = 'MERKLE_NODE_MISSING';

export const LEDGER_EVENT_ID_CONFLICT = 'LEDGER_EVENT_ID_CONFLICT';

/** What the writer expected, as words: `it not to exist`, `it to be at revision 4`. */
function describeExpected(e: ExpectedRevision): string {
  return e === 'no_stream' ? 'it not to exist' : e === 'stream_exists' ? 'it to exist' : e === 'any' ? 'any state' : `it to be at revision ${e}`;
}

/** The stream is not where the writer expected it (also: a retry that only partly matches stored events). */
export function wrongExpectedRevision(stream: string, expected: ExpectedRevision, actual: number | null): AssayError {
  const now =
    actual === null
      ? `stream "${stream}" does not exist`
      : expected === 'no_stream'
        ? `stream "${stream}" already exists, at revision ${actual}`
        : `stream "${stream}" is at revision ${actual}`;
  return new AssayError(LEDGER_WRONG_EXPECTED_REVISION, 'conflict', `${now} (expected ${describeExpected(expected)})`, {
    details: { stream, expected, actual },
  });
}

/**
 * An event id (the idempotency key) is already stored, in this stream, with a different type or data: a retry must
 * send the same event; new data needs a new id.
 */
export function eventIdConflict(id: string, stream: string, revision: number, position: number, what: 'type' | 'data'): AssayError {
  return new AssayError(
    LEDGER_EVENT_ID_CONFLICT,
    'conflict',
    `event id ${id} is already recorded (stream "${stream}" revision ${revision}, position ${position}) with ${what === 'type' ? 'a different type' : 'different data'}; an id names one event: re-send the same event, or give new data a new id`,
    { details: { id, stream, revision, position, differs: what } },
  );
}

/** An event id (the idempotency key) is already stored in a different stream. */
export function duplicateEventId(id: string, stream: string, storedIn: string): AssayError {
  return new AssayError(
    LEDGER_DUPLICATE_EVENT_ID,
    'conflict',
    `event id ${id} cannot be appended to stream ${stream}: it is already stored in stream ${storedIn}`,
    { details: { id, stream, storedIn } },
  );
}

/** A malformed append request (bad stream name, id, expected revision, empty or self-duplicating event list). */
export function invalidAppend(message: string, details: Record<string, unknown>): AssayError {
  return new AssayError(LEDGER_INVALID_APPEND, 'invalid_input', message, { details });
}

export function storeClosed(what: string): AssayError {
  return new AssayError(LEDGER_STORE_CLOSED, 'unavailable', `${what} is closed`, { details: { store: what } });
}

export function subscriptionStopped(): AssayError {
  return new AssayError(LEDGER_SUBSCRIPTION_STOPPED, 'unavailable', 'the subscription was stopped before it caught up');
}

export function invalidCheckpoint(message: string, details: Record<string, unknown>): AssayError {
  return new AssayError(LEDGER_INVALID_CHECKPOINT, 'invalid_input', message, { details });
}

/** The checkpoint store's order guard: a checkpoint must be larger than, and consistent with, the last one stored. */
export function checkpointOutOfOrder(
  code: typeof LEDGER_CHECKPOINT_ROLLBACK | typeof LEDGER_CHECKPOINT_NOT_NEWER | typeof LEDGER_CHECKPOINT_INCONSISTENT,
  size: number,
  last: number,
): AssayError {
  const why =
    code === LEDGER_CHECKPOINT_ROLLBACK
      ? `it is smaller than the last stored checkpoint (size ${last})`
      : code === LEDGER_CHECKPOINT_NOT_NEWER
        ? `the last stored checkpoint already has this size`
        : `its tree does not extend the last stored checkpoint's (size ${last}): the RFC 9162 consistency proof does not verify`;
  return new AssayError(code, 'refused', `refusing to store a checkpoint of size ${size}: ${why}`, { details: { size, last } });
}

/** LedgerLock.exclusive called from inside its own work. */
export function lockReentered(): AssayError {
  return new AssayError(LEDGER_LOCK_REENTERED, 'internal', 'the ledger write lock is already held by this caller (exclusive() is not reentrant)');
}

export function merkleNodeMissing(level: number, index: number, leafCount: number): AssayError {
  return new AssayError(MERKLE_NODE_MISSING, 'not_found', `Merkle node (level ${level}, index ${index}) is not complete: the tree has ${leafCount} leaves`, {
    details: { level, index, leafCount },
  });
}

/** The error of request `index` of an `appendMany`: the same error, its details naming the request. */
export function atRequest(e: unknown, index: number): unknown {
  if (!(e instanceof AssayError)) return e;
  return new AssayError(e.code, e.kind, e.message, { details: { ...e.details, index }, cause: e });
}
