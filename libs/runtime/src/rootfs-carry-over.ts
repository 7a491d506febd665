/**
 * Resume in full-rootfs mode (docs/run.md, "Full-rootfs mode"): the agent's work is Work's whole file system, so a
 * resumed run must not start Work again from the task image. When the killed controller's Work container is still
 * there, its file system is carried over: `docker export` of the old container streamed into `docker import` (with
 * the work image's Env, WorkingDir, Cmd and User), and the new Work starts from that image. Only the file system
 * crosses over: processes, the old container's mounts and its tmpfs do not. When the old container is gone (removed,
 * a host reboot with cleanup), Work starts from the task image again and the log says what was lost; the run's
 * snapshots in the store still hold what was recorded.
 *
 * Carried images are labelled `org.assay.role=work-carried` with the run and home, and removed when the next one
 * replaces them and when the run's controller ends.
 */
import { systemClock, type Clock } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';

export const CARRIED_ROLE = 'work-carried';
const IMPORT_TIMEOUT_MS = 30 * 60 * 1000;

export interface CarryOver {
  /** Image the new Work starts from. */
  image: string;
  /** The old Work container it was exported from. */
  from: string;
}

export async function carryOverRootfsWork(
  containers: ContainerRuntime,
  labels: { role: string; run: string; home: string },
  o: { run: string; homeTag: string; workImage: string; stop: (id: string) => Promise<void>; log: (line: string) => void; clock?: Clock },
): Promise<CarryOver | null> {
  const old = await containers.listContainers({ [labels.role]: 'work', [labels.run]: o.run, [labels.home]: o.homeTag });
  const from = old[0];
  if (!from) {
    o.log(
      `no Work container of ${o.run} is left: Work starts again from the task image (the agent's file-system changes are lost; its snapshots remain in the store)`,
    );
    return null;
  }
  if (old.length > 1) o.log(`${old.length} Work containers of ${o.run} found; carrying over ${from.id.slice(0, 12)}`);
  // killed, never unpaused: its processes (an orphaned agent) must not run again; its file system is exported as is
  await o.stop(from.id);
  const base = await containers.inspectImage(o.workImage);
  if (!base) throw new Error(`the work image ${o.workImage} is gone`);
  const clock = o.clock ?? systemClock;
  const t = clock.now().getTime();
  const { id } = await containers.importImage(await containers.exportContainer(from.id), {
    tag: `assay/work-carried:${o.run
      .toLowerCase()
      .replace(/[^a-z0-9_.-]/g, '-')
      .slice(0, 100)}-${t}`,
    labels: { [labels.role]: CARRIED_ROLE, [labels.run]: o.run, [labels.home]: o.homeTag, 'org.assay.carried-from': from.id },
    env: base.env ?? [],
    workingDir: base.workingDir,
    cmd: base.cmd ?? null,
    user: base.user,
    timeoutMs: IMPORT_TIMEOUT_MS,
  });
  o.log(`carried Work's file system over from ${from.id.slice(0, 12)} (${((clock.now().getTime() - t) / 1000).toFixed(1)} s)`);
  return { image: id, from: from.id };
}

/** Removes the run's carried images, except `keep`. */
export async function removeCarriedImages(
  containers: ContainerRuntime,
  labels: { role: string; run: string; home: string },
  o: { run: string; homeTag: string; keep?: string },
): Promise<number> {
  const found = await containers.listImages({ [labels.role]: CARRIED_ROLE, [labels.run]: o.run, [labels.home]: o.homeTag });
  let n = 0;
  for (const img of found) {
    if (img.id === o.keep) continue;
    await containers.removeImage(img.id).catch(() => undefined);
    n++;
  }
  return n;
}
