import { join } from 'node:path';
import type { ContainerRuntime } from '@assay/containers';
import { mergeEnv, resolveEnvTemplates, type HostEnv, type TaskPlan } from '@assay/task-format';
import { DEFAULTS, judgeLimits, type JudgeLimits } from '../domain/judge-plan';
import { readJudgeSettings, type JudgeTaskSettings } from '../domain/judge-settings';
import { judgeError } from '../judge.errors';
import type { JudgeSnapshots } from '../ports/judge-snapshots.port';
import { dirTarBuffer } from './dir-tar';
import type { TaskImages } from './task-images';

export interface PreparedTask {
  readonly dir: string;
  readonly plan: TaskPlan;
  readonly settings: JudgeTaskSettings;
  readonly images: TaskImages;
  /** Content digest (CID) of tests/. */
  readonly testsDigest: string;
  /** tests/ as a tar, streamed into each Judge. */
  readonly tests: Buffer;
  readonly workdir: string;
  /** Full-rootfs mode (workdir `/`): the Judge runs from an image made from the snapshot (rootfs-image.ts). */
  readonly rootfs: boolean;
  readonly network: 'none' | 'bridge';
  readonly env: Readonly<Record<string, string>>;
  readonly limits: JudgeLimits;
  readonly requestedMetric: string | null;
}

export interface PrepareOptions {
  /** The primary metric asked for on the command line (over the task's [metadata.assay] primary_metric). */
  readonly metric?: string | null;
  /** Where `${NAME}` templates of the verifier's environment are resolved. */
  readonly hostEnv?: HostEnv;
  /** Bound on the injected output cap (tests use a small one); default 1 MiB. */
  readonly outputCapBytes?: number;
  /**
   * The caller hands each Judge its verifier GPUs (`judge(…, {gpus})`, from a GPU pool such as `assay run --gpus`).
   * Without it a task whose verifier needs GPUs is refused here.
   */
  readonly gpusFromPool?: boolean;
}

/** What preparing a task uses of the runner's dependencies (JudgeRunnerDeps). */
export interface PrepareDeps {
  readonly runtime: ContainerRuntime;
  readonly snapshots: JudgeSnapshots;
  readonly hostCpus: number;
}

/** Everything about a task that does not change between Judges: checked once, reused by `--repeat`. */
export async function prepareTask(d: PrepareDeps, taskDir: string, plan: TaskPlan, images: TaskImages, o: PrepareOptions = {}): Promise<PreparedTask> {
  const settingsParse = readJudgeSettings(plan.metadata);
  if (!settingsParse.ok) throw judgeError('JUDGE_TASK_SETTINGS_INVALID', settingsParse.problems.join('\n'), { problems: settingsParse.problems });
  const settings = settingsParse.value;
  const v = plan.verifier;
  const unsupported = (why: string) => judgeError('JUDGE_TASK_UNSUPPORTED', `${plan.name}: ${why}`, { task: plan.name });
  if (v.network.mode === 'allowlist') {
    throw unsupported(
      `the verifier's network is an allowlist (${v.network.allowedHosts.join(', ')}); Assay cannot yet confine a Judge to named hosts, and will not pretend to by opening the whole network`,
    );
  }
  if (v.gpus > 0 && o.gpusFromPool !== true)
    throw unsupported(
      `the verifier needs ${v.gpus} GPU(s) (metadata.rsi_harness.verifier.gpus); only \`assay run --gpus LIST\` and \`assay task check --gpus LIST\` hand Judges GPUs`,
    );
  if (v.user !== null && !['root', '0', '0:0'].includes(v.user)) {
    throw unsupported(
      `verifier.user = ${JSON.stringify(v.user)}: the Judge runs test.sh as root so that /tests and /logs/verifier stay out of reach of candidate code, which test.sh runs with run-as-candidate`,
    );
  }
  const judgeAssets = plan.assets.filter((a) => a.phase === 'judge');
  if (judgeAssets.length) throw unsupported(`judge-phase assets (${judgeAssets.map((a) => a.path).join(', ')}) are not staged by this runtime yet`);

  let workdir = plan.environment.workdir;
  if (workdir === null) workdir = (await d.runtime.inspectImage(images.judge.id))?.workingDir || null;
  const rootfs = plan.environment.workdir === '/';
  if (rootfs && !d.snapshots.archive) throw unsupported('the workdir is "/" (full-rootfs mode), and this snapshot store cannot stream a snapshot as a tar');
  if (!rootfs && (!workdir || workdir === '/')) {
    throw judgeError(
      'JUDGE_WORKDIR_UNSUPPORTED',
      `${plan.name}: the snapshot would be mounted at "${workdir ?? ''}"; set environment.workdir (e.g. "/workspace") or WORKDIR in the Dockerfile`,
      { task: plan.name },
    );
  }
  const testsDir = join(taskDir, 'tests');
  const { tar, stats } = await dirTarBuffer(testsDir, { maxBytes: DEFAULTS.maxTestsBytes, maxEntries: 100_000, maxDepth: 64 }, (m, details) =>
    judgeError('JUDGE_TESTS_INVALID', `tests/${m}`, details),
  );
  const testsDigest = await d.snapshots.digestDirectory(testsDir);
  const env = resolveEnvTemplates(mergeEnv(plan.environment.env, v.env), o.hostEnv ?? {}, 'verifier.env').env;
  const requested = o.metric ?? plan.runSettings.primaryMetric ?? null;
  const limits = judgeLimits({
    cpus: plan.environment.cpus,
    memoryMb: plan.environment.memoryMb,
    shmSizeBytes: plan.environment.shmSizeBytes,
    verifierTimeoutSec: v.timeoutSec,
    settings,
    hostCpus: d.hostCpus,
    testsBytes: stats.bytes,
    storageMb: plan.environment.storageMb,
    ...(o.outputCapBytes !== undefined ? { outputCapBytes: o.outputCapBytes } : {}),
  });
  return Object.freeze({
    dir: taskDir,
    plan,
    settings,
    images,
    testsDigest,
    tests: tar,
    workdir: workdir ?? '/',
    rootfs,
    network: v.network.mode === 'public' ? 'bridge' : 'none',
    env,
    limits,
    requestedMetric: requested,
  });
}
