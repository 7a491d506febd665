/**
 * Read-only views of the runs in this runtime node's ledger (`assay run ls`, `assay run status`, `assay run logs`,
 * `assay baseline ls`):
 * folded from the ledger, opened read-only, with what only this node can know, whether a run's controller is still
 * alive here.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Ledger } from '@assay/ledger';
import { loadTaskPlan } from '@assay/task-format';
import {
  readBaselines,
  readRunHistories,
  recordedJudgeLogs,
  recordedTranscripts,
  runStatusView,
  taskIdOf,
  type Baseline,
  type RunStatusView,
} from '@assay/run';
import { taskDigests } from './task-import';
import { controllerLockState } from './controller-lock';

/**
 * Every run of the ledger, folded. A run the ledger says is running, whose directory is under `home` but whose
 * controller is not (killed, crashed, the machine rebooted), is `interrupted`, to be resumed; without its directory
 * (a copied ledger) it stays `running`.
 */
export async function listRuns(ledger: Ledger, home: string): Promise<RunStatusView[]> {
  const interrupted = (run: string) => {
    const dir = join(home, 'runs', run);
    return existsSync(join(dir, 'run.json')) && ['gone', 'none'].includes(controllerLockState(dir));
  };
  return [...(await readRunHistories(ledger))]
    .map(([run, events]) => runStatusView(run, events))
    .map((v) => (v.state === 'running' && interrupted(v.run) ? { ...v, state: 'interrupted' } : v));
}

/** The digests the ledger recorded of a run's Judge logs (by round) or agent transcripts (by session). */
export async function recordedRunLogs(ledger: Ledger, run: string, of: 'judge' | 'agent'): Promise<Map<number, { digest: string; position: number }>> {
  const m = of === 'judge' ? await recordedJudgeLogs(ledger, run) : await recordedTranscripts(ledger, run);
  return new Map([...m].map(([k, v]) => [k, { digest: v.digest, position: v.position }]));
}

/**
 * The baselines recorded in the ledger; with `taskDir`, only that task's, each marked `current` when it was recorded
 * for the task's present digest (the task directory digested as a dry-run snapshot: nothing is stored). The ledger is
 * opened only after the task directory was read, so a bad task directory is reported first.
 */
export async function listBaselines(ledger: () => Promise<Ledger>, taskDir?: string): Promise<BaselineList> {
  let filter: { task: string; digest: string } | null = null;
  if (taskDir !== undefined) {
    const plan = await loadTaskPlan(taskDir);
    filter = { task: taskIdOf(plan.name), digest: (await taskDigests(taskDir)).task };
  }
  const all = await readBaselines(await ledger()); // after the task directory's own errors, if any
  return {
    task: filter?.task ?? null,
    baselines: (filter ? all.filter((b) => b.task === filter.task) : all).map((b) => ({
      ...b,
      ...(filter ? { current: b.taskDigest === filter.digest } : {}),
    })),
  };
}

export interface BaselineList {
  /** The task id asked for (as RunStarted records it), or null for every task. */
  readonly task: string | null;
  readonly baselines: Array<Baseline & { current?: boolean }>;
}
