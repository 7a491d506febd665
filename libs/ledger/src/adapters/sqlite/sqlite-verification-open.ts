/**
 * Opens a ledger database for verification: read-only, never migrated, and without leaving files beside a copy.
 *
 * A database in WAL mode is read through two files beside it, `<db>-wal` (committed transactions not yet copied
 * into the main file) and `<db>-shm` (an index of the WAL). SQLite creates both when they are missing, even on a
 * read-only connection, and cannot open the database at all when they are missing and the directory is read-only.
 * Ignoring the WAL (SQLite's `immutable` open) is not an option: it would silently verify an older state of the
 * ledger. So:
 *
 * - `copy` (a database file handed over on its own, `verify --db`): never opened in place. Even a read-only SQLite
 *   connection may create or write `-wal`, `-shm` or `-journal` beside the file (and fails in a read-only directory,
 *   SQLITE_READONLY_DIRECTORY), and SQLite's `immutable` open, which writes nothing, would ignore a `-wal`'s
 *   committed transactions. So the main file and its `-wal` (when there is one; a `-shm` is only an index and is
 *   rebuilt) are copied into a private temporary directory (a reflink where the file system offers one), opened
 *   there, and removed after: the same bytes, the WAL's transactions included, and nothing written beside the
 *   original, which may sit in a read-only directory.
 * - `home` (a ledger home, where a writer may be at work): opened in place, so SQLite's locks keep the reading
 *   consistent with concurrent writers; `-wal` and `-shm` are the ledger's own working files there. Only when that
 *   fails because the directory cannot be written is a private copy made as above.
 */
import { copyFileSync, constants, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AssayError, isAssayError } from '@assay/core';
import { SqliteLedgerDatabase } from './sqlite-ledger-database';
import { dbUnavailable } from './sqlite.errors';

export interface VerificationOpen {
  db: SqliteLedgerDatabase;
  /** The temporary copy verified instead of the file in place, or null. */
  copy: string | null;
  close(): Promise<void>;
}

function readOnlyOpen(path: string): SqliteLedgerDatabase {
  return new SqliteLedgerDatabase(path, { readOnly: true });
}

/** Copies the main file and its WAL into a fresh temporary directory and opens the copy read-only. */
function openCopy(path: string): VerificationOpen {
  const dir = mkdtempSync(join(tmpdir(), 'assay-verify-'));
  const copy = join(dir, 'ledger.db');
  try {
    for (const [from, to] of [[path, copy], ...(existsSync(`${path}-wal`) ? [[`${path}-wal`, `${copy}-wal`]] : [])] as Array<[string, string]>) {
      try {
        copyFileSync(from, to, constants.COPYFILE_FICLONE);
      } catch (e) {
        throw dbUnavailable(path, `cannot copy ${from} for reading (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`, e);
      }
    }
    let db: SqliteLedgerDatabase;
    try {
      db = readOnlyOpen(copy);
    } catch (e) {
      // Name the file the caller gave, not the private copy.
      if (isAssayError(e) && e.message.includes(copy))
        throw new AssayError(e.code, e.kind, e.message.split(copy).join(path), { details: { ...e.details, path }, cause: e });
      throw e;
    }
    return {
      db,
      copy,
      close: async () => {
        try {
          await db.close();
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/** Is this open failure the one of a WAL database whose -wal/-shm cannot be created (a read-only directory)? */
function cannotCreateBesideIt(e: unknown): boolean {
  if (!isAssayError(e) || e.code !== 'LEDGER_DB_UNAVAILABLE') return false;
  const code = (e.cause as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_READONLY'));
}

export function openForVerification(path: string, mode: 'copy' | 'home'): VerificationOpen {
  const abs = resolve(path);
  if (mode === 'copy') {
    // A missing file: the SqliteLedgerDatabase constructor names the problem (nothing is created: read-only, file must exist).
    if (!existsSync(abs)) readOnlyOpen(abs);
    return openCopy(abs);
  }
  try {
    const db = readOnlyOpen(abs);
    return { db, copy: null, close: () => db.close() };
  } catch (e) {
    if (cannotCreateBesideIt(e)) return openCopy(abs);
    throw e;
  }
}
