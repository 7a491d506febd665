/**
 * Errors of the embedded SQLite ledger database, and the one place where better-sqlite3's errors are translated
 * into AssayErrors (so no caller ever sees a raw SqliteError or its stack).
 */
import { AssayError, isAssayError } from '@assay/core';

export const LEDGER_DB_CORRUPT = 'LEDGER_DB_CORRUPT';
export const LEDGER_DB_UNAVAILABLE = 'LEDGER_DB_UNAVAILABLE';
export const LEDGER_DB_ERROR = 'LEDGER_DB_ERROR';
export const LEDGER_DB_NOT_A_LEDGER = 'LEDGER_DB_NOT_A_LEDGER';
export const LEDGER_SCHEMA_TOO_NEW = 'LEDGER_SCHEMA_TOO_NEW';
export const LEDGER_MIGRATIONS_INVALID = 'LEDGER_MIGRATIONS_INVALID';

export function dbCorrupt(path: string, why: string, cause?: unknown): AssayError {
  return new AssayError(LEDGER_DB_CORRUPT, 'integrity', `ledger database ${path} is not a SQLite database or is corrupted (${why}); it was left untouched`, {
    details: { path },
    cause,
  });
}

export function dbUnavailable(path: string, why: string, cause?: unknown): AssayError {
  return new AssayError(LEDGER_DB_UNAVAILABLE, 'unavailable', `ledger database ${path} cannot be used: ${why}`, {
    details: { path },
    cause,
  });
}

export function notALedger(path: string, tables: string[]): AssayError {
  return new AssayError(
    LEDGER_DB_NOT_A_LEDGER,
    'refused',
    `${path} is a SQLite database but not an Assay ledger (it has tables ${tables.join(', ')} and no schema_version); refusing to add ledger tables to it`,
    { details: { path, tables } },
  );
}

export function schemaTooNew(path: string, version: number, known: number): AssayError {
  return new AssayError(
    LEDGER_SCHEMA_TOO_NEW,
    'refused',
    `ledger database ${path} has schema version ${version}, this Assay knows up to ${known}; upgrade Assay`,
    { details: { path, version, known } },
  );
}

export const LEDGER_SCHEMA_VERSION_INVALID = 'LEDGER_SCHEMA_VERSION_INVALID';

/** schema_version says nothing (or nonsense) about a database that holds ledger tables: it was edited. */
export function schemaVersionInvalid(path: string, why: string): AssayError {
  return new AssayError(LEDGER_SCHEMA_VERSION_INVALID, 'integrity', `ledger database ${path}: ${why}; it was left untouched (no migration is run on it)`, {
    details: { path },
  });
}

export function migrationsInvalid(dir: string, why: string): AssayError {
  return new AssayError(LEDGER_MIGRATIONS_INVALID, 'internal', `migrations in ${dir}: ${why}`, { details: { dir } });
}

const CORRUPT_CODES = new Set(['SQLITE_CORRUPT', 'SQLITE_NOTADB']);
const UNAVAILABLE_PREFIXES = [
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_IOERR',
  'SQLITE_FULL',
  'SQLITE_CANTOPEN',
  'SQLITE_READONLY',
  'SQLITE_PERM',
  'SQLITE_AUTH',
  'SQLITE_PROTOCOL',
  'SQLITE_NOLFS',
];

function sqliteCode(e: unknown): string | undefined {
  if (typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string') {
    const code = (e as { code: string }).code;
    if (code.startsWith('SQLITE_')) return code;
  }
  return undefined;
}

/** Is this a better-sqlite3 error saying the file is damaged (not a database, malformed image)? */
export function isCorruption(e: unknown): boolean {
  const code = sqliteCode(e);
  return code !== undefined && [...CORRUPT_CODES].some((c) => code === c || code.startsWith(c + '_'));
}

/** Translates whatever a database call threw; AssayErrors and errors not from SQLite (a seal's) pass unchanged. */
export function translateDbError(path: string, e: unknown): unknown {
  if (isAssayError(e)) return e;
  const code = sqliteCode(e);
  if (code === undefined) {
    if (e instanceof TypeError && /database connection is not open/i.test(e.message)) return dbUnavailable(path, 'the database is closed', e);
    return e;
  }
  const msg = (e as Error).message;
  if (isCorruption(e)) return dbCorrupt(path, msg, e);
  if (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'))
    return dbUnavailable(
      path,
      `it is busy: another process held its write lock for longer than this one waits (busy timeout); try again when that writer is done (${code})`,
      e,
    );
  if (UNAVAILABLE_PREFIXES.some((p) => code === p || code.startsWith(p + '_'))) return dbUnavailable(path, `${msg} (${code})`, e);
  return new AssayError(LEDGER_DB_ERROR, 'internal', `ledger database ${path}: ${msg} (${code})`, {
    details: { path, sqliteCode: code },
    cause: e,
  });
}
