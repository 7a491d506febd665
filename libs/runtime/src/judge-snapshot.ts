/**
 * `assay judge`'s use case: N fresh Judges on one snapshot of a task, recorded in the ledger (docs/judge.md).
 *
 *   1. leftovers of dead judging processes are swept (their Judges recorded as infrastructure_error);
 *   2. the task is loaded and its images built or reused;
 *   3. the snapshot is resolved: a CID in the store, or a directory snapshotted into it first;
 *   4. the Judges run one after the other (JudgeRunner.judgeRepeated); an abort of `signal` kills the running one
 *      (recorded) and starts no other.
 *
 * The caller (the CLI through JudgeSnapshotCommand) presents what it is told at each step and decides the exit status.
 */
import type { JudgeResult, RepeatedResult } from '@assay/judge';
import { judgeRuntimeFor, type JudgeSweep, type LoadedTask, type RuntimeUseCaseOptions } from './judge-runtime';

type JudgeLimits = LoadedTask['prepared']['limits'];

export interface JudgeSnapshotOptions extends RuntimeUseCaseOptions {
  readonly taskDir: string;
  /** A snapshot CID in the store, or a directory to snapshot first. */
  readonly snapshot: string;
  /** Fresh Judges, one after the other (1 to 100). */
  readonly repeat: number;
  /** The primary metric, over the task's [metadata.assay] primary_metric. */
  readonly metric?: string | null;
  /** Aborting kills the running Judge (recorded as infrastructure_error) and starts no other. */
  readonly signal?: AbortSignal;
  /** What dead judging processes left behind was removed (called only when there was something). */
  onSwept?(swept: JudgeSweep): void;
  /** The task, its images and the snapshot are ready; the first Judge starts next. */
  onReady?(ready: JudgeSnapshotReady): void;
  /** Each Judge's result as it ends. */
  onResult?(result: JudgeResult, index: number): void;
}

export interface JudgeSnapshotReady {
  readonly task: LoadedTask;
  readonly snapshot: string;
  /** Whether the snapshot was taken of a directory now, or named by its CID. */
  readonly from: 'directory' | 'cid';
}

export interface JudgeSnapshotReport {
  readonly task: {
    readonly name: string;
    readonly dir: string;
    readonly testsDigest: string;
    readonly workdir: string;
    readonly network: string;
    readonly limits: JudgeLimits;
  };
  readonly snapshot: string;
  readonly images: { readonly work: { readonly tag: string; readonly id: string }; readonly judge: { readonly tag: string; readonly id: string } };
  readonly results: RepeatedResult['results'];
  readonly completed: RepeatedResult['completed'];
  readonly median: RepeatedResult['median'];
  /** The signal was aborted: fewer Judges than asked may have run. */
  readonly cancelled: boolean;
}

export async function judgeSnapshot(o: JudgeSnapshotOptions): Promise<JudgeSnapshotReport> {
  const rt = await judgeRuntimeFor(o);
  const onAbort = () => void rt.runner.cancel(String(o.signal?.reason ?? 'cancelled'));
  o.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await rt.containers.ping();
    const swept = await rt.runner.sweep();
    if (swept.containers.length + swept.volumes.length + swept.directories.length > 0) o.onSwept?.(swept);
    const task = await rt.loadTask(o.taskDir, { metric: o.metric ?? null, hostEnv: process.env });
    const snap = await rt.resolveSnapshot(o.snapshot);
    o.onReady?.({ task, snapshot: snap.cid, from: snap.from });
    if (o.signal?.aborted) onAbort();
    const p = task.prepared;
    const rep = await rt.runner.judgeRepeated(p, snap.cid, o.repeat, {}, (r, i) => o.onResult?.(r, i));
    return {
      task: { name: task.plan.name, dir: p.dir, testsDigest: p.testsDigest, workdir: p.workdir, network: p.network, limits: p.limits },
      snapshot: snap.cid,
      images: { work: { tag: task.images.work.tag, id: task.images.work.id }, judge: { tag: task.images.judge.tag, id: task.images.judge.id } },
      results: rep.results,
      completed: rep.completed,
      median: rep.median,
      cancelled: rt.runner.isCancelled,
    };
  } finally {
    o.signal?.removeEventListener('abort', onAbort);
    await rt.close();
  }
}
