/**
 * Task images, built locally through the container runtime (never pulled):
 *
 *   work image   `assay/task-<slug>:work-<16 hex>`, built from the task's environment/ (a tar streamed to the daemon,
 *                RUN steps without network). Its tag and the label `org.assay.recipe-digest` name the recipe: the
 *                environment/ digest plus the id of every base image the Dockerfile names, so a rebuilt base image
 *                gives a new work image and an unchanged recipe reuses the existing one.
 *   judge image  `assay/task-<slug>:judge-<16 hex>`: the work image plus one layer holding the Judge entrypoint and
 *                run-as-candidate (task-runtime/judge/). Judges start from it; its id is the image digest recorded
 *                in JudgeLaunched and the protocol fingerprint, and it covers the harness's own scripts.
 *
 * Each image built (or found, and not yet in the ledger) gets one ImageBuilt event, on the stream
 * `image-<image id>`; recording is idempotent. Build logs are kept under `<home>/images/logs/`.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { AssayError, isAssayError, silentProgress, type Clock, type Progress } from '@assay/core';
import { TAR_END, tarHeader, tarPadding, type ContainerRuntime } from '@assay/containers';
import { canonicalJson } from '@assay/ledger';
import type { TaskPlan } from '@assay/task-format';
import { dockerfileRefs } from '../domain/dockerfile';
import { imageHint } from '../domain/image-guidance';
import { JUDGE_DIR_IN_IMAGE } from '../domain/judge-plan';
import { judgeError } from '../judge.errors';
import type { JudgeRecorder, RecordedPosition } from '../ports/judge-recorder.port';
import type { JudgeSnapshots } from '../ports/judge-snapshots.port';
import { dirTar } from './dir-tar';

export type ImagePurpose = 'base' | 'work' | 'judge';

export interface BuiltImage {
  readonly purpose: ImagePurpose;
  readonly tag: string;
  /** Image id, `sha256:<hex>`: the digest Assay records. */
  readonly id: string;
  readonly recipeDigest: string | null;
  /** False when an image from the same recipe already existed and was reused. */
  readonly built: boolean;
  readonly durationMs: number;
  readonly logPath: string | null;
  readonly logDigest: string | null;
  /** The ImageBuilt event appended now, or null when the ledger already had one for this image. */
  readonly recorded: RecordedPosition | null;
}

export interface TaskImages {
  readonly work: BuiltImage;
  readonly judge: BuiltImage;
}

export interface TaskImageDeps {
  readonly runtime: ContainerRuntime;
  readonly snapshots: Pick<JudgeSnapshots, 'digestDirectory'>;
  readonly recorder: JudgeRecorder;
  readonly clock: Clock;
  /** `<home>/images/logs`. */
  readonly logsDir: string;
  /** task-runtime/judge: the entrypoint and run-as-candidate baked into judge images. */
  readonly judgeRuntimeDir: string;
  readonly progress?: Progress;
}

export const LABEL_RECIPE = 'org.assay.recipe-digest';
export const LABEL_PURPOSE = 'org.assay.purpose';
export const LABEL_TASK = 'org.assay.task';

export const JUDGE_RUNTIME_FILES = ['entrypoint', 'judge-setup', 'run-as-candidate'] as const;
const MAX_DOCKERFILE_BYTES = 1024 * 1024;
const CONTEXT_LIMITS = { maxBytes: 64 * 2 ** 30, maxEntries: 1_000_000, maxDepth: 128 };

const sha256 = (b: Buffer | string): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const hex16 = (digest: string): string => digest.replace(/^[a-z0-9]+:/, '').slice(0, 16);

/** `org/name` → a Docker repository component. */
export function taskSlug(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 100) || 'task'
  );
}

/** The `task` field of ImageBuilt: the task name with `/` as `.` (event ids may not contain `/`). */
export function taskEventId(name: string): string {
  const id = name
    .replace(/\//g, '.')
    .replace(/[^A-Za-z0-9._:-]/g, '-')
    .slice(0, 128);
  return /^[A-Za-z0-9]/.test(id) ? id : `t${id}`.slice(0, 128);
}

export function imageStream(imageId: string): string {
  return `image-${imageId}`;
}

/** Reads a small file without following links. */
export function readSmallFile(path: string, max: number, what: string): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    throw judgeError('IMAGE_CONTEXT_INVALID', `cannot read ${what} (${path}): ${(e as NodeJS.ErrnoException).code ?? String(e)}`, { path });
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw judgeError('IMAGE_CONTEXT_INVALID', `${what} (${path}) is not a regular file`, { path });
    if (st.size > max) throw judgeError('IMAGE_CONTEXT_INVALID', `${what} (${path}) is ${st.size} bytes, over ${max}`, { path });
    const buf = Buffer.alloc(st.size);
    let off = 0;
    while (off < buf.length) {
      const n = fs.readSync(fd, buf, off, buf.length - off, off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off);
  } finally {
    fs.closeSync(fd);
  }
}

/** Appends ImageBuilt unless the ledger already holds one for this image id. */
export async function recordImageBuilt(
  recorder: JudgeRecorder,
  d: { image: string; digest: string; purpose: ImagePurpose; task?: string; recipeDigest?: string | null; buildLogDigest?: string | null; durationMs: number },
): Promise<RecordedPosition | null> {
  const stream = imageStream(d.digest);
  if ((await recorder.streamTypes(stream)).includes('ImageBuilt')) return null;
  const data: Record<string, unknown> = {
    image: d.image,
    digest: d.digest,
    purpose: d.purpose,
    ...(d.task ? { task: d.task } : {}),
    ...(d.recipeDigest ? { recipeDigest: d.recipeDigest } : {}),
    ...(d.buildLogDigest ? { buildLogDigest: d.buildLogDigest } : {}),
    durationMs: Math.max(0, Math.round(d.durationMs)),
  };
  try {
    const [p] = await recorder.append(stream, [{ type: 'ImageBuilt', data }], 'no_stream');
    return p ?? null;
  } catch (e) {
    if (isAssayError(e) && e.code === 'LEDGER_WRONG_EXPECTED_REVISION') return null; // a concurrent writer recorded it
    throw e;
  }
}

export class TaskImageBuilder {
  private readonly progress: Progress;

  constructor(private readonly d: TaskImageDeps) {
    this.progress = d.progress ?? silentProgress;
  }

  /** The digest of the judge runtime files, part of every judge image's recipe. */
  judgeRuntimeFiles(): Array<{ name: string; content: Buffer }> {
    return JUDGE_RUNTIME_FILES.map((name) => ({ name, content: readSmallFile(join(this.d.judgeRuntimeDir, name), 1024 * 1024, `the Judge's ${name}`) }));
  }

  /** Builds what is missing (or everything, with `force`) and records it. */
  async ensure(taskDir: string, plan: TaskPlan, o: { force?: boolean } = {}): Promise<TaskImages> {
    const work = await this.ensureWork(taskDir, plan, o.force === true);
    const judge = await this.ensureJudge(plan, work, o.force === true);
    return { work, judge };
  }

  private async ensureWork(taskDir: string, plan: TaskPlan, force: boolean): Promise<BuiltImage> {
    const img = plan.environment.image;
    if (img.kind === 'image') {
      const found = await this.d.runtime.inspectImage(img.ref);
      if (!found) {
        throw judgeError('IMAGE_NOT_FOUND', `the task's environment.docker_image ${img.ref} is not in the local Docker daemon; ${imageHint(img.ref)}`, {
          image: img.ref,
        });
      }
      return { purpose: 'work', tag: img.ref, id: found.id, recipeDigest: null, built: false, durationMs: 0, logPath: null, logDigest: null, recorded: null };
    }
    const envDir = join(taskDir, 'environment');
    const dockerfile = readSmallFile(join(envDir, 'Dockerfile'), MAX_DOCKERFILE_BYTES, 'environment/Dockerfile').toString('utf8');
    const refs = dockerfileRefs(dockerfile);
    if (refs.problems.length) throw judgeError('IMAGE_DOCKERFILE_UNSUPPORTED', refs.problems.join('\n'), { problems: refs.problems });
    const bases: Record<string, string> = {};
    for (const ref of refs.images) {
      const found = await this.d.runtime.inspectImage(ref);
      if (!found) {
        throw judgeError('IMAGE_BASE_MISSING', `environment/Dockerfile needs ${ref}, which is not in the local Docker daemon; ${imageHint(ref)}`, {
          image: ref,
        });
      }
      bases[ref] = found.id;
    }
    const envDigest = await this.d.snapshots.digestDirectory(envDir);
    const recipe = sha256(canonicalJson({ scheme: 'assay.work-image/1', environment: envDigest, bases }));
    const tag = `assay/task-${taskSlug(plan.name)}:work-${hex16(recipe)}`;
    const labels = { [LABEL_RECIPE]: recipe, [LABEL_PURPOSE]: 'work', [LABEL_TASK]: plan.name };
    const context = () => dirTar(envDir, CONTEXT_LIMITS, (message, details) => judgeError('IMAGE_CONTEXT_INVALID', `environment/${message}`, details));
    return this.buildOrReuse('work', tag, recipe, labels, context, plan, force);
  }

  private async ensureJudge(plan: TaskPlan, work: BuiltImage, force: boolean): Promise<BuiltImage> {
    const files = this.judgeRuntimeFiles();
    const filesDigest = sha256(canonicalJson(Object.fromEntries(files.map((f) => [f.name, sha256(f.content)]))));
    const recipe = sha256(canonicalJson({ scheme: 'assay.judge-image/1', workImage: work.id, judgeFiles: filesDigest }));
    const tag = `assay/task-${taskSlug(plan.name)}:judge-${hex16(recipe)}`;
    const labels = { [LABEL_RECIPE]: recipe, [LABEL_PURPOSE]: 'judge', [LABEL_TASK]: plan.name };
    const dockerfile = Buffer.from(
      [
        '# Generated by Assay: the clean task image plus the Judge entrypoint, judge-setup and run-as-candidate (task-runtime/judge/).',
        `FROM ${work.id}`,
        `COPY ${JUDGE_RUNTIME_FILES.join(' ')} ${JUDGE_DIR_IN_IMAGE}/`,
        'COPY run-as-candidate /usr/local/bin/run-as-candidate',
        '',
      ].join('\n'),
    );
    const context = () =>
      (async function* () {
        const entries = [{ name: 'Dockerfile', content: dockerfile, mode: 0o644 }, ...files.map((f) => ({ ...f, mode: 0o755 }))];
        for (const e of entries) {
          yield tarHeader({ path: e.name, type: 'file', mode: e.mode, size: e.content.length });
          yield e.content;
          yield tarPadding(e.content.length);
        }
        yield TAR_END;
      })();
    return this.buildOrReuse('judge', tag, recipe, labels, context, plan, force);
  }

  private async buildOrReuse(
    purpose: 'work' | 'judge',
    tag: string,
    recipe: string,
    labels: Record<string, string>,
    context: () => AsyncIterable<Uint8Array>,
    plan: TaskPlan,
    force: boolean,
  ): Promise<BuiltImage> {
    const existing = await this.d.runtime.inspectImage(tag);
    const task = taskEventId(plan.name);
    if (existing && existing.labels[LABEL_RECIPE] === recipe && !force) {
      const recorded = await recordImageBuilt(this.d.recorder, { image: tag, digest: existing.id, purpose, task, recipeDigest: recipe, durationMs: 0 });
      return { purpose, tag, id: existing.id, recipeDigest: recipe, built: false, durationMs: 0, logPath: null, logDigest: null, recorded };
    }
    fs.mkdirSync(this.d.logsDir, { recursive: true });
    const stamp = this.d.clock.now().toISOString().replace(/[:.]/g, '-');
    const logPath = join(this.d.logsDir, `${tag.replace(/[^A-Za-z0-9._-]+/g, '_')}.${stamp}.log`);
    const fd = fs.openSync(logPath, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW, 0o644);
    const hash = createHash('sha256');
    const started = this.d.clock.now().getTime();
    this.progress.start(`building ${tag}`);
    let id: string;
    try {
      const r = await this.d.runtime.buildImage(context(), {
        tag,
        labels,
        networkMode: 'none',
        timeoutMs: plan.environment.buildTimeoutSec * 1000,
        onLog: (line) => {
          const b = Buffer.from(`${line}\n`);
          fs.writeSync(fd, b);
          hash.update(b);
          const m = /^Step (\d+)\/(\d+)/.exec(line);
          if (m) this.progress.tick(Number(m[1]), Number(m[2]));
        },
      });
      id = r.id;
    } catch (e) {
      this.progress.end();
      if (isAssayError(e)) throw new AssayError(e.code, e.kind, `${e.message}\n(build log: ${logPath})`, { details: { ...e.details, log: logPath }, cause: e });
      throw e;
    } finally {
      fs.closeSync(fd);
    }
    const durationMs = this.d.clock.now().getTime() - started;
    this.progress.end(`${id.slice(0, 19)} in ${(durationMs / 1000).toFixed(1)} s`);
    const logDigest = `sha256:${hash.digest('hex')}`;
    const recorded = await recordImageBuilt(this.d.recorder, {
      image: tag,
      digest: id,
      purpose,
      task,
      recipeDigest: recipe,
      buildLogDigest: logDigest,
      durationMs,
    });
    return { purpose, tag, id, recipeDigest: recipe, built: true, durationMs, logPath, logDigest, recorded };
  }
}
