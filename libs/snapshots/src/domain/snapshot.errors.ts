import { AssayError, type ErrorKind } from '@assay/core';

/**
 * Every error this library raises: a stable code, the kind (which decides the CLI exit code and HTTP status),
 * and a message naming the offending path (relative to the snapshot root, `.` for the root itself) and the
 * limit or the expected thing.
 */
export const SNAPSHOT_ERROR_KINDS = {
  SNAPSHOT_ROOT_INVALID: 'invalid_input',
  SNAPSHOT_POLICY_INVALID: 'invalid_input',
  SNAPSHOT_CID_INVALID: 'invalid_input',
  SNAPSHOT_NAME_NOT_UTF8: 'refused',
  SNAPSHOT_NAME_INVALID: 'refused',
  SNAPSHOT_NAME_COLLISION: 'refused',
  SNAPSHOT_SYMLINK_TARGET_INVALID: 'refused',
  SNAPSHOT_SYMLINK_OUTSIDE: 'refused',
  SNAPSHOT_SPECIAL_FILE: 'refused',
  SNAPSHOT_TOO_MANY_FILES: 'refused',
  SNAPSHOT_FILE_TOO_LARGE: 'refused',
  SNAPSHOT_TOO_LARGE: 'refused',
  SNAPSHOT_TOO_DEEP: 'refused',
  SNAPSHOT_PATH_ESCAPE: 'refused',
  SNAPSHOT_TAR_INVALID: 'integrity',
  SNAPSHOT_FILE_CHANGED: 'conflict',
  SNAPSHOT_TREE_CHANGED: 'conflict',
  SNAPSHOT_NOT_FOUND: 'not_found',
  SNAPSHOT_PATH_NOT_FOUND: 'not_found',
  SNAPSHOT_BLOB_MISSING: 'integrity',
  SNAPSHOT_BLOB_CORRUPT: 'integrity',
  SNAPSHOT_MANIFEST_INVALID: 'integrity',
  SNAPSHOT_TARGET_NOT_EMPTY: 'conflict',
  SNAPSHOT_CAR_MALFORMED: 'integrity',
  SNAPSHOT_CAR_TRUNCATED: 'integrity',
  SNAPSHOT_CAR_UNSUPPORTED: 'integrity',
  SNAPSHOT_CAR_BLOCK_MISMATCH: 'integrity',
  SNAPSHOT_CAR_DUPLICATE_BLOCK: 'integrity',
  SNAPSHOT_CAR_MISSING_ROOT: 'integrity',
  SNAPSHOT_CAR_MISSING_BLOCK: 'integrity',
  SNAPSHOT_CAR_UNREFERENCED_BLOCK: 'integrity',
  SNAPSHOT_CAR_BAD_ROOT: 'integrity',
  SNAPSHOT_STORE_BUSY: 'conflict',
  SNAPSHOT_GC_MARK_FAILED: 'integrity',
  SNAPSHOT_IO: 'unavailable',
} as const satisfies Record<string, ErrorKind>;

export type SnapshotErrorCode = keyof typeof SNAPSHOT_ERROR_KINDS;

export function snapshotError(code: SnapshotErrorCode, message: string, details: Record<string, unknown> = {}, cause?: unknown): AssayError {
  return new AssayError(code, SNAPSHOT_ERROR_KINDS[code], message, cause === undefined ? { details } : { details, cause });
}

/** A path for messages: relative, `/`-separated, `.` for the root. */
export function showPath(rel: string): string {
  return rel === '' ? '.' : rel;
}

/** Re-raises a store error with the snapshot path it concerns prefixed to the message (same code and kind). */
export function atPath(e: unknown, path: string): unknown {
  if (e instanceof AssayError && e.code.startsWith('SNAPSHOT_') && !(e.details as { path?: unknown }).path) {
    return new AssayError(e.code, e.kind, `${showPath(path)}: ${e.message}`, { details: { ...e.details, path }, cause: e });
  }
  return e;
}

/** Joins a relative directory path and a name. */
export function joinRel(dir: string, name: string): string {
  return dir === '' ? name : `${dir}/${name}`;
}

/** Wraps an unexpected I/O error with the path it concerns. */
export function ioError(op: string, path: string, e: unknown): AssayError {
  const code = (e as NodeJS.ErrnoException | undefined)?.code ?? 'EIO';
  const msg = e instanceof Error ? e.message : String(e);
  return snapshotError('SNAPSHOT_IO', `${op} ${path} failed: ${msg}`, { path, errno: code }, e);
}
