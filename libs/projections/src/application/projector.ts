/**
 * The projector: catches the read models up with the ledger, from their checkpointed position to the tree size of
 * the ledger's latest signed checkpoint, never further.
 *
 * Verify before project: when there is anything new to project, the whole ledger is first verified exactly as
 * `assay ledger verify` does (every signature and role, chains, the Merkle root, every checkpoint against the log,
 * the runs' claims); a ledger that fails is refused (LEDGER_VERIFICATION_FAILED, integrity) and nothing is
 * projected. Events past the latest signed checkpoint are not projected: verification checks the log against that
 * checkpoint, so everything up to it is exactly what the verifier accepted. The cost is one full verification per
 * catch-up that has new events (none when nothing is new); docs/projections.md.
 *
 * Each batch (its run slots, rows, trajectories) is written with its new checkpoint in one SQLite transaction, so
 * a projector killed at any point resumes from the last committed batch without skipping or applying one twice.
 */
import { AssayError, silentProgress, type Progress } from '@assay/core';
import { parseEnvelope, type LedgerHome, type RecordedEvent } from '@assay/ledger';
import { runClaimRules } from '@assay/run';
import { leaderboardRow, rankLeaderboard, type LeaderboardGroup, type LeaderboardRow } from '../domain/leaderboard';
import { projectRunEvent, runOfEvent, type ProjectionEvent, type RunSlot } from '../domain/run-projection';
import { baselineOfEvent } from '../domain/baselines';
import type { Baseline } from '@assay/run';
import { trajectoryOf, type Trajectory } from '../domain/trajectory';
import { rejudgeOfEvent, runReport, taskBudgetReport, type RejudgeView, type RunReport, type TaskBudgetReport } from '../domain/reports';
import type { ReadModelStore } from '../ports/read-model-store.port';
import type { ImportStore } from '../ports/import-store.port';

export interface CatchUpOptions {
  /** Events per transaction (default 1000). */
  batchSize?: number;
  progress?: Progress;
  /** Skip the verification (tests of the fold only); the CLI always verifies. */
  verify?: boolean;
  /** Verification threads (as `assay ledger verify --workers`). */
  workers?: number;
  /** Called after each committed batch with the new position (tests stop a projector mid-way with it). */
  afterBatch?: (position: number) => void | Promise<void>;
}

export interface CatchUpResult {
  from: number;
  to: number;
  /** Tree size of the latest signed checkpoint (the projection's limit). */
  checkpointSize: number;
  verified: boolean;
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

function projectionEvent(e: RecordedEvent): ProjectionEvent {
  const env = parseEnvelope(e.bytes, { position: e.position }).envelope;
  return { position: e.position, stream: env.stream, revision: env.revision, id: env.id, type: env.type, time: env.time, data: env.data };
}

async function eventAt(home: LedgerHome, position: number): Promise<RecordedEvent | null> {
  for await (const batch of home.db.events.readAll({ fromPosition: position, toPosition: position + 1, batchSize: 1 })) return batch[0] ?? null;
  return null;
}

export async function catchUp(home: LedgerHome, store: ReadModelStore, o: CatchUpOptions = {}): Promise<CatchUpResult> {
  const batchSize = Math.max(1, o.batchSize ?? 1000);
  const progress = o.progress ?? silentProgress;
  const target = home.committedCheckpoint()?.treeSize ?? 0;
  const start = store.checkpoint();
  if (start.position > 0) {
    const last = await eventAt(home, start.position - 1);
    if (start.position > target || !last || hex(last.hash) !== start.lastHash)
      throw new AssayError(
        'PROJECTIONS_LEDGER_MISMATCH',
        'conflict',
        `the read models were projected from another ledger (or a longer one) than this home's (position ${start.position}, ledger checkpoint at ${target}); delete <ASSAY_HOME>/projections/read-models.db to rebuild them`,
      );
  }
  if (start.position >= target) return { from: start.position, to: start.position, checkpointSize: target, verified: false };

  const verified = o.verify !== false;
  if (verified) {
    const report = await home.verify({ claims: runClaimRules(), progress, ...(o.workers !== undefined ? { workers: o.workers } : {}) });
    if (!report.ok)
      throw new AssayError(
        'LEDGER_VERIFICATION_FAILED',
        'integrity',
        `the ledger does not verify (${report.failure?.step ?? 'unknown step'}: ${report.failure?.message ?? ''}); nothing was projected: run \`assay ledger verify\``,
      );
  }

  progress.start('projecting', target - start.position);
  let position = start.position;
  for await (const batch of home.db.events.readAll({ fromPosition: start.position, toPosition: target, batchSize })) {
    if (batch.length === 0) continue;
    const slots = new Map<string, RunSlot | null>();
    const baselines: Baseline[] = [];
    const rejudges: RejudgeView[] = [];
    for (const rec of batch) {
      const e = projectionEvent(rec);
      const baseline = baselineOfEvent(e);
      if (baseline) baselines.push(baseline);
      const rejudge = rejudgeOfEvent(e);
      if (rejudge) rejudges.push(rejudge);
      const run = runOfEvent(e);
      if (run === null) continue;
      const before = slots.has(run) ? slots.get(run)! : store.slot(run);
      const after = projectRunEvent(before, e);
      if (after !== before) slots.set(run, after);
    }
    const changed = [...slots.values()].filter((s): s is RunSlot => s !== null).sort((a, b) => (a.run < b.run ? -1 : a.run > b.run ? 1 : 0));
    const rows = changed.map(leaderboardRow).filter((r): r is LeaderboardRow => r !== null);
    const trajectories = changed.map(trajectoryOf).filter((t): t is Trajectory => t !== null);
    const last = batch[batch.length - 1]!;
    store.apply({ slots: changed, rows, trajectories, baselines, rejudges, checkpoint: { position: last.position + 1, lastHash: hex(last.hash) } }, position);
    position = last.position + 1;
    progress.tick(position - start.position, target - start.position);
    if (o.afterBatch) await o.afterBatch(position);
  }
  progress.end(`projected ${position - start.position} event(s)`);
  return { from: start.position, to: position, checkpointSize: target, verified };
}

/**
 * catchUp, started again from where another projector left the read models when it committed first
 * (PROJECTIONS_CONFLICT), up to `attempts` times: what every reader of the read models calls.
 */
export async function catchUpRetrying(home: LedgerHome, store: ReadModelStore, o: CatchUpOptions = {}, attempts = 3): Promise<CatchUpResult> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await catchUp(home, store, o);
    } catch (e) {
      if (!(e instanceof AssayError && e.code === 'PROJECTIONS_CONFLICT') || attempt >= attempts) throw e;
    }
  }
}

/**
 * The leaderboard of a task (as RunStarted.task records it): its groups, ranked, with their baselines; with `imports`,
 * the imported bundles' rows too (marked `imported`, ranked in the group of their protocol like any other row).
 */
export function leaderboardOf(store: ReadModelStore, task: string, imports?: ImportStore): LeaderboardGroup[] {
  const rows = store.rowsOfTask(task);
  const all = imports ? [...rows, ...imports.rowsOfTask(task)] : rows;
  return rankLeaderboard(
    all,
    store.baselinesOfTask(task),
    rows.flatMap((r) => store.rejudgesOfRun(r.run)),
  );
}

/** Tasks with runs in this ledger or imported rows, and how many of each. */
export function tasksOf(store: ReadModelStore, imports?: ImportStore): Array<{ task: string; runs: number; imported: number }> {
  const out = new Map<string, { task: string; runs: number; imported: number }>();
  for (const t of store.tasks()) out.set(t.task, { task: t.task, runs: t.runs, imported: 0 });
  for (const t of imports?.tasks() ?? []) out.set(t.task, { task: t.task, runs: out.get(t.task)?.runs ?? 0, imported: t.runs });
  return [...out.values()].sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : 0));
}

/** A run's reproducibility and budget report; null when the run is not in the read models. */
export function runReportOf(store: ReadModelStore, run: string): RunReport | null {
  const slot = store.slot(run);
  if (!slot || !slot.state.started) return null;
  const status = slot.error !== null ? 'invalid' : (slot.state.completed?.status ?? 'running');
  return runReport(slot, store.rejudgesOfRun(run), status);
}

/** A task's budget report: its runs' budgets summed. */
export function taskBudgetReportOf(store: ReadModelStore, task: string): TaskBudgetReport {
  const slots = store.rowsOfTask(task).flatMap((r) => {
    const s = store.slot(r.run);
    return s ? [s] : [];
  });
  return taskBudgetReport(task, slots);
}
