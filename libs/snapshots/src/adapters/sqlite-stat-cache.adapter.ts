import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { CachedEntry, DirCacheRecord } from '../domain/stat-cache';
import { ioError } from '../domain/snapshot.errors';
import type { StatCache, StatCacheUpdate } from '../ports/stat-cache.port';

/**
 * One row per (tree, directory). `entries` is a JSON array of
 * `[name, kind ("f" | "d" | "l"), sig ("dev:ino:size:mode:mtimeNs:ctimeNs"), cid, mode, size, clean (0 | 1), target]`.
 * A row per directory (rather than per file) keeps the lookups of a 20,000-file re-snapshot to a few hundred
 * indexed reads and lets an unchanged directory reuse its manifest CID.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS snapshot_dirs (
  scope TEXT NOT NULL,
  dir TEXT NOT NULL,
  manifest TEXT NOT NULL,
  size INTEGER NOT NULL,
  stored INTEGER NOT NULL,
  all_clean INTEGER NOT NULL,
  files_key TEXT NOT NULL,
  dirs_key TEXT NOT NULL,
  entries TEXT NOT NULL,
  PRIMARY KEY (scope, dir)
) WITHOUT ROWID;
`;

interface Row {
  manifest: string;
  size: number;
  stored: number;
  all_clean: number;
  files_key: string;
  dirs_key: string;
  entries: string;
}

type Packed = [string, 'f' | 'd' | 'l', string, string, number, number, 0 | 1, string];

const KIND_OUT = { f: 'file', d: 'dir', l: 'symlink' } as const;
const KIND_IN = { file: 'f', dir: 'd', symlink: 'l' } as const;

function openCacheDb(file: string): Database.Database {
  try {
    mkdirSync(dirname(file), { recursive: true });
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 10000');
    db.exec(SCHEMA);
    return db;
  } catch (e) {
    throw ioError('opening the stat cache', file, e);
  }
}

/**
 * The stat cache in SQLite (one file under the Assay home). It is only a cache: losing it costs a rehash, never
 * a wrong CID (every entry is checked against a fresh lstat), so it runs with WAL and synchronous=NORMAL.
 */
export class SqliteStatCache implements StatCache {
  private readonly all: Database.Statement<[string], Omit<Row, 'entries'> & { dir: string }>;
  private readonly getEntries: Database.Statement<[string, string], { entries: string }>;
  private readonly put: Database.Statement;
  private readonly dirs: Database.Statement<[string], { dir: string }>;
  private readonly drop: Database.Statement;
  private readonly unstore: Database.Statement;

  private readonly db: Database.Database;

  /** Opens (creating when absent) the cache file; SNAPSHOT_IO when it cannot be opened. */
  constructor(file: string) {
    this.db = openCacheDb(file);
    const db = this.db;
    // The entries (kilobytes per directory) are only read when a directory changed.
    this.getEntries = db.prepare('SELECT entries FROM snapshot_dirs WHERE scope = ? AND dir = ?');
    this.all = db.prepare('SELECT dir, manifest, size, stored, all_clean, files_key, dirs_key FROM snapshot_dirs WHERE scope = ?');
    this.put = db.prepare(
      `INSERT INTO snapshot_dirs (scope, dir, manifest, size, stored, all_clean, files_key, dirs_key, entries)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (scope, dir) DO UPDATE SET manifest = excluded.manifest, size = excluded.size,
         stored = excluded.stored, all_clean = excluded.all_clean, files_key = excluded.files_key,
         dirs_key = excluded.dirs_key, entries = excluded.entries`,
    );
    this.dirs = db.prepare('SELECT dir FROM snapshot_dirs WHERE scope = ?');
    this.drop = db.prepare('DELETE FROM snapshot_dirs WHERE scope = ? AND dir = ?');
    this.unstore = db.prepare('UPDATE snapshot_dirs SET stored = 0 WHERE stored <> 0');
  }

  /**
   * The rows of one scope (entries aside), read in one query when a walk starts (its first lookup is the root,
   * `''`): a few hundred indexed reads become one scan. Read again at every root lookup and dropped on commit.
   */
  private preloaded: { scope: string; rows: Map<string, Omit<Row, 'entries'>> } | null = null;

  async lookupDir(scope: string, dir: string): Promise<DirCacheRecord | null> {
    if (dir === '' || this.preloaded?.scope !== scope) {
      const rows = new Map<string, Omit<Row, 'entries'>>();
      for (const r of this.all.all(scope)) rows.set(r.dir, r);
      this.preloaded = { scope, rows };
    }
    const row = this.preloaded.rows.get(dir);
    if (!row) return null;
    let parsed: Map<string, CachedEntry> | null = null;
    return {
      manifest: row.manifest,
      size: row.size,
      stored: row.stored !== 0,
      allClean: row.all_clean !== 0,
      filesKey: row.files_key,
      dirsKey: row.dirs_key,
      entries: () => (parsed ??= parseEntries(this.getEntries.get(scope, dir)?.entries ?? '[]')),
    };
  }

  async commit(scope: string, update: StatCacheUpdate): Promise<void> {
    this.preloaded = null;
    this.db.transaction(() => {
      for (const { dir } of this.dirs.all(scope)) if (!update.visitedDirs.has(dir)) this.drop.run(scope, dir);
      for (const { dir, record } of update.upserts) {
        const packed: Packed[] = [];
        for (const [name, e] of record.entries()) packed.push([name, KIND_IN[e.kind], e.sig, e.cid, e.mode, e.size, e.clean ? 1 : 0, e.target]);
        this.put.run(
          scope,
          dir,
          record.manifest,
          record.size,
          record.stored ? 1 : 0,
          record.allClean ? 1 : 0,
          record.filesKey,
          record.dirsKey,
          JSON.stringify(packed),
        );
      }
    })();
  }

  async forgetStored(): Promise<void> {
    this.preloaded = null;
    this.unstore.run();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

/** A damaged row parses to no entries: every file is then a miss, never a wrong hit. */
function parseEntries(json: string): Map<string, CachedEntry> {
  const entries = new Map<string, CachedEntry>();
  let packed: unknown;
  try {
    packed = JSON.parse(json);
  } catch {
    return entries;
  }
  if (!Array.isArray(packed)) return entries;
  for (const p of packed as Packed[]) {
    if (!Array.isArray(p) || p.length !== 8) return new Map();
    const kind = KIND_OUT[p[1]];
    if (!kind) return new Map();
    entries.set(p[0], { kind, sig: p[2], cid: p[3], mode: p[4], size: p[5], clean: p[6] === 1, target: p[7] });
  }
  return entries;
}
