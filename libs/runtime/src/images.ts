/**
 * `assay images`' use cases: the Debian base image and a task's work and judge images, built or reused and recorded
 * as ImageBuilt (docs/judge.md, "Images"). Each takes the runtime node's JudgeRuntime (Docker, the ledger: the
 * module's, or one opened for the call), checks the daemon answers first, and releases it.
 */
import { systemClock } from '@assay/core';
import type { TaskImages } from '@assay/judge';
import { loadTaskPlan } from '@assay/task-format';
import { buildBaseImage, type BaseImageResult } from './base-image';
import { judgeRuntimeFor, type JudgeRuntime, type RuntimeUseCaseOptions } from './judge-runtime';

export interface ImagesOptions extends RuntimeUseCaseOptions {
  /** Rebuild even when an image of the same recipe exists. */
  readonly force?: boolean;
}

async function withJudgeRuntime<T>(o: ImagesOptions, fn: (rt: JudgeRuntime) => Promise<T>): Promise<T> {
  const rt = await judgeRuntimeFor(o);
  try {
    await rt.containers.ping();
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

/** `assay images base`: assay/base:bookworm from Debian packages (scripts/build-base-image.sh). */
export function ensureBaseImage(o: ImagesOptions): Promise<BaseImageResult> {
  return withJudgeRuntime(o, (rt) =>
    buildBaseImage({
      home: rt.home,
      runtime: rt.containers,
      recorder: rt.recorder,
      clock: o.clock ?? systemClock,
      force: o.force === true,
      ...(o.progress ? { progress: o.progress } : {}),
    }),
  );
}

/** `assay images build TASK_DIR`: the task's work and judge images; the task's name with them. */
export async function ensureTaskImages(taskDir: string, o: ImagesOptions): Promise<TaskImages & { task: string }> {
  const plan = await loadTaskPlan(taskDir);
  return withJudgeRuntime(o, async (rt) => ({ task: plan.name, ...(await rt.images.ensure(taskDir, plan, { force: o.force === true })) }));
}
