/**
 * `assay task show` and `assay task import`'s use cases (docs/task-format.md, "Importing a published task"): a task
 * directory's digests by the snapshot rules (nothing stored), and taking a published task in as it is: validated,
 * digested, every image it needs looked up in the local Docker daemon (Assay never pulls), and, only when all are
 * there, TaskRegistered recorded once per task digest.
 */
import { join, resolve } from 'node:path';
import type { ContainerRuntime } from '@assay/containers';
import type { Ledger } from '@assay/ledger';
import { imageHint, readSmallFile, requiredImages, taskEventId } from '@assay/judge';
import { recordOf } from '@assay/run';
import { digestDirectory } from '@assay/snapshots';
import { computeTaskDigests, loadTaskPlan, type TaskDigests, type TaskPlan } from '@assay/task-format';
import { AssayError } from '@assay/core';

/** A task directory's digests, by the snapshot rules (content addressing, docs/snapshots-format.md); nothing is stored. */
export function taskDigests(dir: string): Promise<TaskDigests> {
  return computeTaskDigests(dir, { digest: (d: string) => digestDirectory(d) });
}

export interface TaskImport {
  readonly dir: string;
  readonly name: string;
  readonly digests: TaskDigests;
  /** Every image the task needs beyond what it builds, and whether the local daemon has it. */
  readonly images: ReadonlyArray<{ ref: string; why: string; present: boolean; id: string | null; hint: string | null }>;
  /** TaskRegistered: where it is, and whether it was recorded before; null when an image is missing (nothing recorded). */
  readonly recorded: { stream: string; position: number; already: boolean } | null;
}

/**
 * Takes the task in: the report, with `recorded` null when an image is missing (the caller says which, from
 * `images`). `ledger` is opened only when there is something to record.
 */
export async function importTask(o: { taskDir: string; containers: ContainerRuntime; ledger: () => Promise<Ledger> }): Promise<TaskImport> {
  const dir = o.taskDir;
  const plan: TaskPlan = await loadTaskPlan(dir);
  let dockerfile: string | null = null;
  if (plan.environment.image.kind !== 'image')
    dockerfile = readSmallFile(join(dir, 'environment', 'Dockerfile'), 256 * 1024, 'environment/Dockerfile').toString('utf8');
  const { images: needed, problems } = requiredImages(plan.environment.image, dockerfile);
  if (problems.length > 0) throw new AssayError('IMAGE_DOCKERFILE_UNSUPPORTED', 'invalid_input', `${dir}: ${problems.join('; ')}`);
  const digests = await taskDigests(dir);
  await o.containers.ping();
  const images = [];
  for (const n of needed) {
    const found = await o.containers.inspectImage(n.ref);
    images.push({ ref: n.ref, why: n.why, present: found !== null, id: found?.id ?? null, hint: found ? null : imageHint(n.ref) });
  }
  let recorded: TaskImport['recorded'] = null;
  if (images.every((i) => i.present)) {
    const ledger = await o.ledger();
    const id = taskEventId(plan.name);
    const stream = `task-${id}`;
    let already: number | null = null;
    for await (const e of ledger.store.readStream(stream))
      if (e.type === 'TaskRegistered' && (recordOf(e).data as { digest?: unknown }).digest === digests.task) already = e.position;
    if (already !== null) recorded = { stream, position: already, already: true };
    else {
      const r = await ledger.append(stream, [
        {
          type: 'TaskRegistered',
          data: {
            task: id,
            name: plan.name,
            digest: digests.task,
            instructionDigest: digests.instruction,
            testsDigest: digests.tests,
            environmentDigest: digests.environment,
          },
        },
      ]);
      recorded = { stream, position: r.lastPosition, already: false };
    }
  }
  return { dir: resolve(dir), name: plan.name, digests, images, recorded };
}
