import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { AssayError, type ErrorKind } from './errors';

/**
 * Errors the operating system or SQLite raise about the caller's environment (a path that does not exist, a directory
 * that cannot be written, a database file that is locked), turned into one-line AssayErrors at the edges. Anything
 * else stays what it is: an internal error with its stack.
 *
 * Codes: `IO_<errno>` (e.g. IO_EACCES) and `SQLITE_<result>` (e.g. SQLITE_READONLY). Kinds, and so exit codes:
 *   not found (ENOENT)                                         -> not_found (3)
 *   not allowed (EACCES, EPERM, EROFS, SQLITE_READONLY*)       -> refused (6)
 *   busy, full or failing (EBUSY, ENOSPC, EIO, SQLITE_BUSY...) -> unavailable (7)
 *   the wrong kind of path (ENOTDIR, EISDIR, EEXIST, ...)      -> invalid_input (2)
 */
const ERRNO_TEXT: Readonly<Record<string, [string, ErrorKind]>> = {
  ENOENT: ['no such file or directory', 'not_found'],
  EACCES: ['permission denied', 'refused'],
  EPERM: ['operation not permitted', 'refused'],
  EROFS: ['read-only file system', 'refused'],
  ENOTDIR: ['a path component is not a directory', 'invalid_input'],
  EISDIR: ['is a directory', 'invalid_input'],
  EEXIST: ['already exists', 'invalid_input'],
  ENOTEMPTY: ['directory not empty', 'invalid_input'],
  ENAMETOOLONG: ['name too long', 'invalid_input'],
  ELOOP: ['too many levels of symbolic links', 'invalid_input'],
  EXDEV: ['crosses file systems', 'invalid_input'],
  EINVAL: ['invalid argument for this file system', 'invalid_input'],
  ENOSPC: ['no space left on device', 'unavailable'],
  EDQUOT: ['disk quota exceeded', 'unavailable'],
  EIO: ['input/output error', 'unavailable'],
  EBUSY: ['device or resource busy', 'unavailable'],
  EMFILE: ['too many open files', 'unavailable'],
  EADDRINUSE: ['address already in use', 'unavailable'],
  EADDRNOTAVAIL: ['address not available', 'unavailable'],
};

const SQLITE_KIND: Readonly<Record<string, ErrorKind>> = {
  SQLITE_READONLY: 'refused',
  SQLITE_CANTOPEN: 'unavailable',
  SQLITE_BUSY: 'unavailable',
  SQLITE_LOCKED: 'unavailable',
  SQLITE_FULL: 'unavailable',
  SQLITE_IOERR: 'unavailable',
  SQLITE_NOTADB: 'invalid_input',
  SQLITE_CORRUPT: 'integrity',
  SQLITE_PERM: 'refused',
  SQLITE_AUTH: 'refused',
};

interface SystemErrorShape {
  code?: unknown;
  syscall?: unknown;
  path?: unknown;
  dest?: unknown;
  message?: unknown;
}

/** The AssayError for an operating-system or SQLite error about the environment, or null for anything else. */
export function systemErrorToAssay(e: unknown): AssayError | null {
  if (e instanceof AssayError || typeof e !== 'object' || e === null) return null;
  const x = e as SystemErrorShape;
  if (typeof x.code !== 'string') return null;
  if (/^E[A-Z]+$/.test(x.code) && typeof x.syscall === 'string') {
    const known = ERRNO_TEXT[x.code];
    const what = known ? known[0] : x.code;
    const path = typeof x.path === 'string' ? ` ${x.path}${typeof x.dest === 'string' ? ` -> ${x.dest}` : ''}` : '';
    return new AssayError(`IO_${x.code}`, known ? known[1] : 'unavailable', `${describeSyscall(x.syscall)}${path}: ${what} (${x.code})`, {
      cause: e,
      details: { errno: x.code, syscall: x.syscall, ...(typeof x.path === 'string' ? { path: x.path } : {}) },
    });
  }
  const sqlite = /^SQLITE_[A-Z]+/.exec(x.code);
  if (sqlite && e instanceof Error) {
    const base = Object.keys(SQLITE_KIND).find((k) => x.code === k || (x.code as string).startsWith(`${k}_`));
    if (!base) return null;
    return new AssayError(x.code, SQLITE_KIND[base] as ErrorKind, `the database: ${e.message} (${x.code})`, { cause: e });
  }
  return null;
}

function describeSyscall(syscall: string): string {
  switch (syscall) {
    case 'mkdir':
      return 'cannot create directory';
    case 'open':
      return 'cannot open';
    case 'rename':
      return 'cannot rename';
    case 'unlink':
    case 'rmdir':
    case 'rm':
      return 'cannot remove';
    case 'scandir':
    case 'opendir':
      return 'cannot list';
    case 'stat':
    case 'lstat':
      return 'cannot read';
    case 'listen':
      return 'cannot listen on';
    default:
      return `cannot ${syscall}`;
  }
}

/**
 * Creates a directory and its missing parents, one level at a time from the deepest existing ancestor. Unlike
 * `mkdirSync(..., { recursive: true })` it cannot loop on pseudo file systems (/proc, /sys), and every failure is an
 * errno error naming the level that failed.
 */
export function makeDirectories(path: string, mode = 0o777): void {
  const target = resolve(path);
  const missing: string[] = [];
  let cur = target;
  for (;;) {
    try {
      const st = statSync(cur);
      if (!st.isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${cur}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: cur });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      missing.push(cur);
      const up = dirname(cur);
      if (up === cur) break;
      cur = up;
    }
  }
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir, { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(dir).isDirectory()) throw e;
    }
  }
}
