/**
 * `assay rejudge`'s composition (docs/rejudge.md): the orchestration `rejudge` of @assay/bundles with its ports bound
 * to this runtime node: the bundle file, the verifier with the run's claim rules, the task directory digested as a
 * dry-run snapshot, this home's snapshot store and Judges (JudgeRuntime, opened only once the bundle and the task
 * were accepted), and this home's ledger for RejudgeCompleted (signed with the controller key).
 */
import { createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { AssayError, randomIds } from '@assay/core';
import { rejudge, verifyBundle, type RejudgeReport, type VerifyBundleOptions } from '@assay/bundles';
import { judgeError } from '@assay/judge';
import { runClaimRules } from '@assay/run';
import { checkTolerance, loadTaskPlan } from '@assay/task-format';
import { judgeRuntimeFor, type JudgeRuntime, type JudgeSweep, type RuntimeUseCaseOptions } from './judge-runtime';
import { taskDigests } from './task-import';

export interface RejudgeBundleOptions extends RuntimeUseCaseOptions {
  readonly bundleFile: string;
  /** The task directory, hidden tests included (resolved). */
  readonly taskDir: string;
  /** The task directory as the user named it, for messages. */
  readonly taskArg?: string;
  /** `--car FILE`: the snapshot's blocks when the bundle carries none. */
  readonly carFile: string | null;
  readonly repeat: number;
  /** null: the task's tolerance, else 0. */
  readonly tolerance: number | null;
  /** The auditor's trust: root keys and, optionally, a witness policy (as `assay verify`). */
  readonly trust: Pick<VerifyBundleOptions, 'trustedKeys' | 'witnessPolicy'>;
  /** Aborting kills the running Judge (recorded) and starts no other; no RejudgeCompleted is recorded. */
  readonly signal?: AbortSignal;
  /** Progress lines of the re-judge (each step, each Judge). */
  note?(line: string): void;
  /** What dead judging processes left behind was removed. */
  onSwept?(swept: JudgeSweep): void;
}

export async function rejudgeBundle(o: RejudgeBundleOptions): Promise<RejudgeReport> {
  const taskArg = o.taskArg ?? o.taskDir;
  let rt: JudgeRuntime | null = null;
  const runtime = (): JudgeRuntime => {
    if (!rt) throw new Error('rejudge: the Judges were asked for before they were prepared');
    return rt;
  };
  const onAbort = () => void rt?.runner.cancel(String(o.signal?.reason ?? 'cancelled'));
  o.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await rejudge(
      {
        readBundle: () => createReadStream(o.bundleFile),
        verify: (source) => verifyBundle(source, { ...o.trust, claims: runClaimRules() }),
        compileTask: async () => {
          const plan = await loadTaskPlan(o.taskDir);
          // dry run, no stat cache: nothing is written to the home while the task is only being checked
          const digest = (await taskDigests(o.taskDir)).task;
          const t = checkTolerance(plan.metadata);
          if (typeof t === 'string') throw new AssayError('TASK_INVALID', 'invalid_input', `--task ${taskArg}: ${t}`);
          const stated = (plan.metadata['assay_check'] as Record<string, unknown> | undefined)?.['tolerance'] !== undefined;
          return { name: plan.name, digest, tolerance: stated ? t : null };
        },
        prepare: async () => {
          rt = await judgeRuntimeFor(o);
          if (o.signal?.aborted) onAbort();
          if (!rt.ledgerHome.ledger.key('controller'))
            throw new AssayError('LEDGER_NO_KEY_FOR_ROLE', 'refused', `recording RejudgeCompleted needs this home's controller key (in ${o.home}/keys)`);
        },
        hasSnapshot: (cid) => runtime().snapshots.has(cid),
        importCar: (f) => runtime().snapshotHome.importCar(f, o.progress),
        judge: async (cid, n, metric) => {
          const r = runtime();
          await r.containers.ping();
          const swept = await r.runner.sweep();
          if (swept.containers.length + swept.volumes.length + swept.directories.length > 0) o.onSwept?.(swept);
          const task = await r.loadTask(o.taskDir, { metric, hostEnv: process.env });
          const rep = await r.runner.judgeRepeated(task.prepared, cid, n, {}, (j, i) =>
            o.note?.(
              `judge ${i + 1}/${n} ${j.judge}: ${j.status}${j.status === 'completed' ? `, ${j.primaryMetric ?? 'score'} = ${j.primaryScore}` : j.detail ? `: ${j.detail.split('\n')[0]}` : ''}`,
            ),
          );
          if (r.runner.isCancelled)
            throw judgeError('JUDGE_CANCELLED', `cancelled after ${rep.results.length} of ${n} Judge(s); each was recorded, no RejudgeCompleted`);
          return rep.results.map((j) => ({ judge: j.judge, status: j.status, primaryScore: j.status === 'completed' ? j.primaryScore : null }));
        },
        record: async (stream, id, type, data) => {
          const r = await runtime().ledgerHome.ledger.appendGeneric(stream, [{ id, type, data }], 'no_stream');
          return { position: r.lastPosition };
        },
        ids: o.ids ?? randomIds,
        tempDir: tmpdir(),
        ...(o.note ? { note: (line: string) => o.note?.(line) } : {}),
      },
      { repeat: o.repeat, tolerance: o.tolerance, carFile: o.carFile },
    );
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    await (rt as JudgeRuntime | null)?.close();
  }
}
