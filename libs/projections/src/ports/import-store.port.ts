import type { LeaderboardRow } from '../domain/leaderboard';

/** Rows of imported bundles (source `imported`), by the bundle file's digest. */
export interface ImportStore {
  /** Records an imported row; false when that bundle was imported already. */
  put(row: LeaderboardRow): boolean;
  get(bundleDigest: string): LeaderboardRow | null;
  rowsOfTask(task: string): LeaderboardRow[];
  /** Every task with an imported row, and how many. */
  tasks(): Array<{ task: string; runs: number }>;
  /** How many bundles were imported (rows are only ever added). */
  count(): number;
  close(): void;
}
