/**
 * The HTTP API's role tokens (docs/operations.md, "API tokens and roles").
 *
 * Each token has one role:
 * - `admin`: keys and tasks, raw ledger appends; may do everything the other roles may;
 * - `operator`: runs (start, cancel), signing checkpoints, importing bundles;
 * - `auditor`: cosigning and re-judging;
 * - `reader`: reads, where reads are not open to anyone (ASSAY_API_READS=token).
 *
 * Stored in `<home>/api/tokens.db` (SQLite, mode 0600, directory 0700): one row per token with its id, name, role,
 * the SHA-256 of the token (never the token) and its creation and revocation times. A token (`assay-tk-` and 43
 * base64url characters: 256 random bits) is printed once, when it is created. It is random and long, so a plain
 * SHA-256 cannot be searched back to it; a presented token is found by its hash (an index lookup of a digest of a
 * secret reveals nothing about other tokens). Revocation takes effect at the next request: the API reads the table
 * at each request that presents a token.
 *
 * The older single operator token (operator-token.ts) keeps working and has the role `admin`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { AssayError, type Clock } from '@assay/core';
import { loadOperatorTokenHash, operatorTokenMatches } from './operator-token';

export const API_ROLES = ['admin', 'operator', 'auditor', 'reader'] as const;
export type ApiRole = (typeof API_ROLES)[number];

export const API_TOKEN_RE = /^assay-tk-[A-Za-z0-9_-]{43}$/;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9 ._@:-]{0,63}$/;
const ID_RE = /^tk_[0-9a-f]{16}$/;

export interface ApiTokenInfo {
  readonly id: string;
  readonly name: string;
  readonly role: ApiRole;
  readonly createdAt: string;
  readonly revokedAt: string | null;
}

export interface CreatedApiToken extends ApiTokenInfo {
  /** The token: shown once, stored nowhere. */
  readonly token: string;
  readonly path: string;
}

/** Who a presented token is: its id, name and role. */
export interface ApiPrincipal {
  readonly id: string;
  readonly name: string;
  readonly role: ApiRole;
}

export function apiTokensPath(home: string): string {
  return join(resolve(home), 'api', 'tokens.db');
}

export function isApiRole(v: unknown): v is ApiRole {
  return typeof v === 'string' && (API_ROLES as readonly string[]).includes(v);
}

const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

const SCHEMA = `
CREATE TABLE IF NOT EXISTS api_tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'auditor', 'reader')),
  sha256 TEXT NOT NULL UNIQUE CHECK (length(sha256) = 64),
  created_at TEXT NOT NULL,
  revoked_at TEXT
);`;

interface Row {
  id: string;
  name: string;
  role: ApiRole;
  created_at: string;
  revoked_at: string | null;
}

const info = (r: Row): ApiTokenInfo => ({ id: r.id, name: r.name, role: r.role, createdAt: r.created_at, revokedAt: r.revoked_at });

/** Refuses a token database others could read or write, or one that is not a regular file. */
function checkPrivate(path: string): boolean {
  let st;
  try {
    st = lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new AssayError('API_TOKEN_CONFIG_INVALID', 'unavailable', `cannot read ${path}: ${(e as Error).message}`, { details: { path } });
  }
  if (!st.isFile() || (st.mode & 0o077) !== 0)
    throw new AssayError(
      'API_TOKEN_UNSAFE_PERMISSIONS',
      'refused',
      `${path} must be a regular file readable and writable by its owner only (mode 0600): \`chmod 600 ${path}\`, then revoke and recreate the tokens if others could have read it`,
      { details: { path } },
    );
  return true;
}

/** The open token table of `home`, or null when it has none and `create` is not set. */
function openTokenTable(home: string, path: string, o: { create?: boolean }): Database.Database | null {
  if (!checkPrivate(path)) {
    if (!o.create) return null;
    const dir = join(resolve(home), 'api');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    // Created empty with the right mode before SQLite opens it, so it is never readable by others.
    try {
      closeSync(openSync(path, 'wx', 0o600));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    checkPrivate(path);
  }
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: true });
    db.pragma('busy_timeout = 10000');
    db.pragma('journal_mode = WAL');
    db.exec(SCHEMA);
  } catch (e) {
    throw new AssayError('API_TOKEN_CONFIG_INVALID', 'unavailable', `cannot open the API token table ${path}: ${(e as Error).message}`, {
      details: { path },
      cause: e,
    });
  }
  return db;
}

/**
 * The token table of one home. Open it once (the API keeps it open; every lookup reads the current rows, so a
 * token revoked by `assay tokens revoke` in another process stops working at the next request).
 */
export class ApiTokenStore {
  private readonly db: Database.Database | null;
  readonly path: string;

  /** Opens the table of `home`; `create` makes the file (0600) and its directory (0700) when missing. */
  constructor(home: string, o: { create?: boolean } = {}) {
    this.path = apiTokensPath(home);
    this.db = openTokenTable(home, this.path, o);
  }

  /** Creates a token of `role`; the token is in the result only. */
  create(o: { role: ApiRole; name: string; clock: Clock }): CreatedApiToken {
    if (!isApiRole(o.role))
      throw new AssayError('API_TOKEN_BAD_ROLE', 'invalid_input', `the role must be one of ${API_ROLES.join(', ')}; got ${JSON.stringify(o.role)}`);
    if (!NAME_RE.test(o.name))
      throw new AssayError(
        'API_TOKEN_BAD_NAME',
        'invalid_input',
        `a token name is 1-64 characters: letters, digits, space and . _ @ : - (starting with a letter or digit); got ${JSON.stringify(o.name)}`,
      );
    const db = this.required();
    const token = `assay-tk-${randomBytes(32).toString('base64url')}`;
    const row: Row = { id: `tk_${randomBytes(8).toString('hex')}`, name: o.name, role: o.role, created_at: o.clock.now().toISOString(), revoked_at: null };
    db.prepare('INSERT INTO api_tokens (id, name, role, sha256, created_at) VALUES (?, ?, ?, ?, ?)').run(
      row.id,
      row.name,
      row.role,
      sha256Hex(token),
      row.created_at,
    );
    return { ...info(row), token, path: this.path };
  }

  list(): ApiTokenInfo[] {
    if (!this.db) return [];
    return (this.db.prepare('SELECT id, name, role, created_at, revoked_at FROM api_tokens ORDER BY created_at, id').all() as Row[]).map(info);
  }

  /** Revokes a token by id; refuses an unknown id. Returns the token as it now is (revoking twice keeps the first time). */
  revoke(id: string, clock: Clock): ApiTokenInfo {
    if (!ID_RE.test(id))
      throw new AssayError(
        'API_TOKEN_NOT_FOUND',
        'not_found',
        `not a token id: ${JSON.stringify(id)} (ids look like tk_ and 16 hex digits; \`assay tokens list\`)`,
      );
    const db = this.required();
    db.prepare('UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(clock.now().toISOString(), id);
    const row = db.prepare('SELECT id, name, role, created_at, revoked_at FROM api_tokens WHERE id = ?').get(id) as Row | undefined;
    if (!row) throw new AssayError('API_TOKEN_NOT_FOUND', 'not_found', `no token ${id} in ${this.path} (\`assay tokens list\`)`);
    return info(row);
  }

  /** The unrevoked token whose SHA-256 is that of `presented`, or null. */
  find(presented: string): ApiPrincipal | null {
    if (!this.db || !API_TOKEN_RE.test(presented)) return null;
    const row = this.db
      .prepare('SELECT id, name, role, created_at, revoked_at FROM api_tokens WHERE sha256 = ? AND revoked_at IS NULL')
      .get(sha256Hex(presented)) as Row | undefined;
    return row ? { id: row.id, name: row.name, role: row.role } : null;
  }

  /** Whether any unrevoked token exists. */
  any(): boolean {
    return !!this.db && this.db.prepare('SELECT 1 FROM api_tokens WHERE revoked_at IS NULL LIMIT 1').get() !== undefined;
  }

  /** False when there was no table to open (none created yet). */
  isOpen(): boolean {
    return this.db !== null && this.db.open;
  }

  close(): void {
    this.db?.close();
  }

  private required(): Database.Database {
    if (!this.db) throw new AssayError('API_TOKEN_NOT_FOUND', 'not_found', `no API tokens yet: ${this.path} does not exist (\`assay tokens create --role R\`)`);
    return this.db;
  }
}

/**
 * Who presents `token` in `home`: a role token of `store` (the home's open table; ApiTokensProvider holds it), or
 * the older operator token (role admin); null for anything else.
 */
export function resolveApiToken(home: string, token: string, o: { store: ApiTokenStore; env?: NodeJS.ProcessEnv }): ApiPrincipal | null {
  if (API_TOKEN_RE.test(token)) return o.store.find(token);
  const legacy = loadOperatorTokenHash(home, o.env);
  return legacy && operatorTokenMatches(token, legacy) ? { id: 'operator-token', name: 'operator token', role: 'admin' } : null;
}
