import type { DirCacheRecord } from '../domain/stat-cache';
import type { StatCache, StatCacheUpdate } from '../ports/stat-cache.port';

/** The in-memory fake of the stat cache. */
export class MemoryStatCache implements StatCache {
  private readonly rows = new Map<string, Map<string, DirCacheRecord>>();

  async lookupDir(scope: string, dir: string): Promise<DirCacheRecord | null> {
    return this.rows.get(scope)?.get(dir) ?? null;
  }

  async commit(scope: string, update: StatCacheUpdate): Promise<void> {
    const dirs = this.rows.get(scope) ?? new Map<string, DirCacheRecord>();
    for (const dir of [...dirs.keys()]) if (!update.visitedDirs.has(dir)) dirs.delete(dir);
    for (const { dir, record } of update.upserts) dirs.set(dir, record);
    this.rows.set(scope, dirs);
  }

  async forgetStored(): Promise<void> {
    for (const dirs of this.rows.values()) for (const [d, r] of dirs) dirs.set(d, { ...r, stored: false });
  }

  /** Number of file entries remembered (tests). */
  size(): number {
    let n = 0;
    for (const dirs of this.rows.values()) for (const r of dirs.values()) for (const e of r.entries().values()) if (e.kind === 'file') n += 1;
    return n;
  }

  async close(): Promise<void> {}
}
