/**
 * Opens a ledger database for verification: read-only, never migrated, and without leaving files beside a copy.
 *
 * A database in WAL mode is read through two files beside it, `<db>-wal` (committed transactions not yet copied
 * into the main file) and `<db>-shm` (an index of the WAL). SQLite creates both when they are missing, even on a
 * read-only connection, and cannot open the database at all when they are missing and the directory is read-only.
 * Ignoring the WAL (SQLite's `immutable` open) is not an option: it would silently verify an older state of the
 * ledger. So:
 *
 * - `copy` (a database file handed over on its own, `verify --db`): opened in place when that creates no file: the
 *   file is not in WAL mode, or both `-wal` and `-shm` are there. Otherwise the main file and its `-wal` (when there is
 *   one) are copied into a private temporary directory, opened there, and removed after: the same bytes, the WAL
 *   included, and nothing written beside the original, which may sit in a read-only directory.
 * - `home` (a ledger home, where a writer may be at work): opened in place, so SQLite's locks keep the reading
 *   consistent with concurrent writers; `-wal` and `-shm` are the ledger's own working files there. Only when that
 *   fails because the directory cannot be written is a private copy made as above.
 */
import { closeSync, copyFileSync, constants, existsSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { isAssayError } from '@assay/core';
import { SqliteLedgerDatabase } from './sqlite-ledger-database';

export interface VerificationOpen {
  db: SqliteLedgerDatabase;
  /** The temporary copy verified instead of the file in place, or null. */
  copy: string | null;
  close(): Promise<void>;
}

/** Whether the database header says WAL mode (file format read and write versions 2). */
function inWalMode(path: string): boolean {
  const head = Buffer.alloc(20);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return true; // SqliteLedgerDatabase.open names the problem
  }
  try {
    return readSync(fd, head, 0, 20, 0) === 20 && (head[18] === 2 || head[19] === 2);
  } finally {
    closeSync(fd);
  }
}

function readOnlyOpen(path: string): SqliteLedgerDatabase {
  return SqliteLedgerDatabase.open(path, { readOnly: true });
}

/** Copies the main file and its WAL into a fresh temporary directory and opens the copy read-only. */
function openCopy(path: string): VerificationOpen {
  const dir = mkdtempSync(join(tmpdir(), 'assay-verify-'));
  const copy = join(dir, 'ledger.db');
  try {
    copyFileSync(path, copy, constants.COPYFILE_FICLONE);
    if (existsSync(`${path}-wal`)) copyFileSync(`${path}-wal`, `${copy}-wal`, constants.COPYFILE_FICLONE);
    const db = readOnlyOpen(copy);
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
    const clean = !existsSync(abs) || !inWalMode(abs) || (existsSync(`${abs}-wal`) && existsSync(`${abs}-shm`));
    if (!clean) return openCopy(abs);
  }
  try {
    const db = readOnlyOpen(abs);
    return { db, copy: null, close: () => db.close() };
  } catch (e) {
    if (cannotCreateBesideIt(e)) return openCopy(abs);
    throw e;
  }
}
