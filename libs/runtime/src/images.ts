/**
 * `assay images`' use cases: the Debian base image and a task's work and judge images, built or reused and recorded
 * as ImageBuilt (docs/judge.md, "Images"). Each opens the runtime node's JudgeRuntime (Docker, the ledger) for the
 * call, checks the daemon answers first, and closes it.
 */
import { systemClock, type Clock, type IdGenerator, type Progress } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import type { TaskImages } from '@assay/judge';
import { loadTaskPlan } from '@assay/task-format';
import { buildBaseImage, type BaseImageResult } from './base-image';
import { JudgeRuntime } from './judge-runtime';

export interface ImagesOptions {
  readonly home: string;
  /** Rebuild even when an image of the same recipe exists. */
  readonly force?: boolean;
  readonly clock?: Clock;
  readonly ids?: IdGenerator;
  readonly containers?: ContainerRuntime;
  readonly progress?: Progress;
}

async function withJudgeRuntime<T>(o: ImagesOptions, fn: (rt: JudgeRuntime) => Promise<T>): Promise<T> {
  const rt = await JudgeRuntime.open({
    home: o.home,
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.ids ? { ids: o.ids } : {}),
    ...(o.containers ? { containers: o.containers } : {}),
    ...(o.progress ? { progress: o.progress } : {}),
  });
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
