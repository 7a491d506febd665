/**
 * Read-only views of the runs in this runtime node's ledger (`assay run ls`, `assay run status`, `assay run logs`):
 * folded from the ledger, opened read-only, with what only this node can know, whether a run's controller is still
 * alive here.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Ledger } from '@assay/ledger';
import { readRunHistories, recordedJudgeLogs, recordedTranscripts, runStatusView, type RunStatusView } from '@assay/run';
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
