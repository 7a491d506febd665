/**
 * Full-rootfs Judges (docs/judge.md, "Full-rootfs tasks"): for a task whose workdir is `/`, the snapshot is Work's
 * whole file system, and the Judge runs from an image made from it:
 *
 *   1. the snapshot is streamed as a tar (every block checked against its CID as it is read), leaving out the
 *      harness's own paths (/opt/assay, /usr/local/bin/run-as-candidate), and the Judge entrypoint and
 *      run-as-candidate are appended fresh from task-runtime/judge/;
 *   2. `docker import` makes an image of it, with the judge image's Env, WorkingDir, Cmd and User carried over and
 *      labels `org.assay.role=judge-rootfs`, the Judge id, owner and home (so a sweep finds it when its process
 *      died);
 *   3. the Judge container runs from that image exactly as in split mode (hidden tests on a fresh tmpfs, a fresh
 *      /logs/verifier volume, network off, limits), with no snapshot bind mount;
 *   4. the image is removed with the container.
 *
 * Who caused a failed import: when the daemon read the stream and refused it (a name the image layer format
 * reserves, such as `.wh.etc` next to `etc`, is enough), a probe imports the harness files alone. If that works the
 * daemon is sound and the refusal came from what the agent left in its file system: JUDGE_SNAPSHOT_UNIMPORTABLE,
 * which the runner records as the rule `snapshot.refused` (counted, score 0), never a refund. If the probe fails
 * too, the daemon is at fault and the original failure stands (infrastructure_error).
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import { TAR_END, tarHeader, tarPadding, type ContainerRuntime } from '@assay/containers';
import { JUDGE_DIR_IN_IMAGE } from '../domain/judge-plan';
import { judgeError } from '../judge.errors';
import type { JudgeSnapshots } from '../ports/judge-snapshots.port';
import { JUDGE_RUNTIME_FILES } from './task-images';

export const ROOTFS_IMAGE_ROLE = 'judge-rootfs';
/** Paths of the snapshot the harness replaces (relative to `/`): never taken from what the agent left. */
export const ROOTFS_HARNESS_PATHS: readonly string[] = Object.freeze(['opt/assay', 'usr/local/bin/run-as-candidate']);
const MAX_HARNESS_FILE_BYTES = 1024 * 1024;
const IMPORT_TIMEOUT_MS = 30 * 60 * 1000;

export function rootfsImageTag(judgeId: string): string {
  return `assay/judge-rootfs:${judgeId
    .toLowerCase()
    .replace(/[^a-z0-9_.-]/g, '-')
    .slice(0, 120)}`;
}

function harnessFiles(dir: string): Array<{ name: string; content: Buffer }> {
  return JUDGE_RUNTIME_FILES.map((name) => {
    const p = join(dir, name);
    const st = fs.lstatSync(p, { throwIfNoEntry: false });
    if (!st || !st.isFile() || st.size > MAX_HARNESS_FILE_BYTES) {
      throw judgeError('JUDGE_TASK_UNSUPPORTED', `the Judge's ${name} (${p}) is missing or not a small regular file`, { path: p });
    }
    return { name, content: fs.readFileSync(p) };
  });
}

function skipped(path: string): boolean {
  return ROOTFS_HARNESS_PATHS.some((h) => path === h || path.startsWith(`${h}/`));
}

/**
 * The import stream: the snapshot without the harness's paths, then the harness files (with whichever parent
 * directories the snapshot did not have: `docker import` refuses a path given twice), then the end marker.
 */
async function* importStream(snapshots: JudgeSnapshots | null, cid: string, files: Array<{ name: string; content: Buffer }>): AsyncGenerator<Uint8Array> {
  const seen = new Set<string>();
  if (snapshots) {
    if (!snapshots.archive) throw new Error('internal: this snapshot store cannot stream a snapshot as a tar');
    yield* snapshots.archive(cid, (path) => {
      if (skipped(path)) return true;
      seen.add(path);
      return false;
    });
  }
  const parents = function* (path: string): Generator<Buffer> {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (seen.has(dir)) continue;
      seen.add(dir);
      yield tarHeader({ path: dir, type: 'dir', mode: 0o755 });
    }
  };
  const put = function* (path: string, content: Buffer): Generator<Buffer> {
    yield* parents(path);
    yield tarHeader({ path, type: 'file', mode: 0o755, size: content.length });
    yield content;
    yield tarPadding(content.length);
  };
  const dir = JUDGE_DIR_IN_IMAGE.replace(/^\/+/, '');
  for (const f of files) yield* put(`${dir}/${f.name}`, f.content);
  const rac = files.find((f) => f.name === 'run-as-candidate');
  if (rac) yield* put('usr/local/bin/run-as-candidate', rac.content);
  yield TAR_END;
}

/** Makes the per-Judge image of a full-rootfs snapshot; returns its id (the caller removes it). */
export async function importRootfsImage(
  d: { runtime: ContainerRuntime; snapshots: JudgeSnapshots; judgeRuntimeDir: string | undefined },
  judgeImage: string,
  snapshot: string,
  judgeId: string,
  labels: Readonly<Record<string, string>>,
): Promise<string> {
  if (!d.judgeRuntimeDir) throw new Error('internal: full-rootfs Judges need the Judge runtime directory (JudgeRunnerDeps.judgeRuntimeDir)');
  const files = harnessFiles(d.judgeRuntimeDir);
  const base = await d.runtime.inspectImage(judgeImage);
  if (!base) throw new Error(`the judge image ${judgeImage} is gone`);
  const options = (tag: string) => ({
    tag,
    labels: { ...labels, 'org.assay.role': ROOTFS_IMAGE_ROLE, 'org.assay.snapshot': snapshot },
    env: base.env ?? [],
    workingDir: base.workingDir,
    cmd: base.cmd ?? null,
    user: base.user,
    timeoutMs: IMPORT_TIMEOUT_MS,
  });
  try {
    return (await d.runtime.importImage(importStream(d.snapshots, snapshot, files), options(rootfsImageTag(judgeId)))).id;
  } catch (e) {
    if (!refusedByDaemon(e)) throw e;
    // The daemon read the stream and refused it: the snapshot's content, or the daemon? The harness files alone tell.
    const probeTag = `${rootfsImageTag(judgeId)}-probe`;
    let probe: string;
    try {
      probe = (await d.runtime.importImage(importStream(null, snapshot, files), options(probeTag))).id;
    } catch {
      throw e;
    }
    await d.runtime.removeImage(probe).catch(() => undefined);
    throw judgeError(
      'JUDGE_SNAPSHOT_UNIMPORTABLE',
      `the snapshot's file system cannot be made into an image (the daemon imports the harness alone, so what the agent left is the cause): ${(e as Error).message}`,
      { snapshot },
    );
  }
}

/**
 * The daemon read the import stream and answered with an error (not a transport failure or a timeout), and not for
 * want of space: the host's disk being full is never the agent's doing (its file system is bounded by the task).
 */
function refusedByDaemon(e: unknown): boolean {
  const details = (e as { details?: Record<string, unknown> } | null)?.details;
  if (details === undefined || details === null || details.refusedByDaemon !== true) return false;
  return !/no space left on device|disk quota exceeded/i.test((e as Error).message);
}
