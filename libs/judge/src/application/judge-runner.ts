/**
 * Runs Judges: one fresh container per judging, from the task's clean judge image, on a snapshot CID.
 *
 *   1. rules       the snapshot's manifests are checked against the task's snapshot rules; a broken rule is a
 *                  RuleViolation (score 0) and submission_error, and nothing runs
 *   2. materialise the snapshot is written into a fresh private directory outside ASSAY_HOME (its host path shows in
 *                  the container's mount table), every block checked against its CID
 *   3. create      a labelled volume for /logs/verifier and the container (see judge-plan.ts); what the daemon
 *                  applied is read back and checked, then JudgeLaunched is recorded (runtime key)
 *   4. run         the container starts, the hidden tests are streamed to the entrypoint's stdin (into the /tests
 *                  tmpfs), output is captured with a cap; past the verifier timeout the container is killed
 *   5. collect     reward files are read from the stopped container's volume through the archive API
 *   6. tear down   container, volume and materialised snapshot are removed
 *   7. record      JudgeCompleted (+ RewardRecorded when completed), judge key, in one append
 *
 * Anything Docker fails at becomes infrastructure_error (no score), still recorded. Leftovers of a process that
 * died mid-judging are found by label and owner at the next start (`sweep`).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, isAbsolute, join } from 'node:path';
import { escapeTerminalText, isAssayError, silentProgress, type Clock, type IdGenerator, type Progress } from '@assay/core';
import type { ContainerInfo, ContainerRuntime } from '@assay/containers';
import { mergeEnv, resolveEnvTemplates, type HostEnv, type TaskPlan } from '@assay/task-format';
import {
  EMPTY_OUTPUT_DIGEST,
  judgeCompletedData,
  judgeLaunchedData,
  judgeStream,
  launchedLimits,
  rewardRecordedData,
  ruleViolationData,
  type LaunchedLimits,
  type RunRef,
} from '../domain/judge-events';
import {
  DEFAULTS,
  ENTRYPOINT_SETUP_FAILED_MARK,
  ENTRYPOINT_SETUP_FAILED_STATUS,
  JUDGE_SYSCTLS,
  judgeContainerSpec,
  judgeLimits,
  judgeVolumeName,
  type JudgeLimits,
} from '../domain/judge-plan';
import { readJudgeSettings, SnapshotRuleChecker, type JudgeTaskSettings, type RuleFinding, type SnapshotRules } from '../domain/judge-settings';
import type { RewardParse, Rewards } from '../domain/reward';
import { decideVerdict, median, type JudgeRun, type JudgeStatus } from '../domain/verdict';
import { judgeError } from '../judge.errors';
import type { JudgeRecorder, RecordedPosition } from '../ports/judge-recorder.port';
import type { JudgeSnapshots } from '../ports/judge-snapshots.port';
import type { OwnerRegistry } from '../ports/owner.port';
import { dirTarBuffer } from './dir-tar';
import { OutputCapture, type CapturedOutput } from './output-capture';
import { readRewardFiles } from './reward-files';
import type { TaskImages } from './task-images';
import { importRootfsImage, ROOTFS_IMAGE_ROLE } from './rootfs-image';

/**
 * Text from a Judge (its output, a setup failure, a rule's detail) as it goes into a signed, one-line `detail`: every
 * control, bidi and invisible character shown as an escape, never executed where it is later printed. Idempotent,
 * so the recorded detail and the one returned are the same text.
 */
const oneLine = (text: string): string => escapeTerminalText(text, { newlines: true });

export const LABELS = {
  role: 'org.assay.role',
  judge: 'org.assay.judge',
  owner: 'org.assay.owner',
  home: 'org.assay.home',
} as const;

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

export interface JudgeResult {
  readonly judge: string;
  readonly stream: string;
  readonly status: JudgeStatus;
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly rewards: Rewards | null;
  readonly primaryMetric: string | null;
  readonly primaryScore: number | null;
  readonly detail: string | null;
  readonly snapshot: string;
  readonly image: string;
  readonly testsDigest: string;
  /** The network mode Docker applied; null when no container was created. */
  readonly network: string | null;
  readonly limits: LaunchedLimits | null;
  readonly rule: { readonly rule: string; readonly detail: string } | null;
  readonly output: CapturedOutput;
  readonly events: readonly RecordedPosition[];
  /** `<home>/judges/<id>`: output.log and result.json. */
  readonly dir: string;
}

export interface RepeatedResult {
  readonly results: readonly JudgeResult[];
  /** Median of the primary scores of the completed Judges; null when none has one. */
  readonly median: number | null;
  readonly completed: number;
}

export interface SweepReport {
  readonly containers: string[];
  readonly volumes: string[];
  /** Full-rootfs Judge images (made from a snapshot) whose owner is gone. */
  readonly images: string[];
  readonly directories: string[];
  /** Judges whose process died after JudgeLaunched: JudgeCompleted (infrastructure_error) recorded now. */
  readonly completed: string[];
}

export interface JudgeRunnerDeps {
  readonly runtime: ContainerRuntime;
  readonly snapshots: JudgeSnapshots;
  readonly recorder: JudgeRecorder;
  readonly owners: OwnerRegistry;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  /** `<home>/judges`. */
  readonly judgesDir: string;
  /** Short, stable tag of this ASSAY_HOME (labels), so a sweep records completions only in its own ledger. */
  readonly homeTag: string;
  readonly hostCpus: number;
  readonly progress?: Progress;
  /** Bound on waiting for the output stream to drain after the container exits (ms). */
  readonly drainMs?: number;
  /** task-runtime/judge (entrypoint, run-as-candidate): injected fresh into full-rootfs Judge images. */
  readonly judgeRuntimeDir?: string;
  /**
   * Where snapshots are materialised for their bind mount, each in a fresh private directory
   * (`assay-judge-XXXXXX`, mode 0700). It lies outside ASSAY_HOME on purpose: a bind mount's host path is visible
   * inside the container (/proc/self/mountinfo). Default: /var/tmp (on disk, unlike /tmp on many hosts), else the
   * system's temporary directory.
   */
  readonly stagingDir?: string;
}

/** A staging directory made by `stagingFor` (the only kind the sweep removes). */
const STAGING_NAME = /^assay-judge-[A-Za-z0-9]{6}$/;

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

/** Per-Judge options. */
export interface JudgeOptions {
  /** Host GPU device ids for this Judge: exactly `verifier.gpus` of them when the verifier needs GPUs. */
  readonly gpus?: readonly string[];
}

const SNAPSHOT_LIMIT_CODES = new Set(['SNAPSHOT_TOO_MANY_FILES', 'SNAPSHOT_FILE_TOO_LARGE', 'SNAPSHOT_TOO_LARGE', 'SNAPSHOT_TOO_DEEP']);

function message(e: unknown): string {
  if (isAssayError(e)) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

async function bounded<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

export class JudgeRunner {
  private readonly progress: Progress;
  private readonly active = new Set<string>();
  private cancelled: string | null = null;

  constructor(private readonly d: JudgeRunnerDeps) {
    this.progress = d.progress ?? silentProgress;
  }

  /** Everything about a task that does not change between Judges: checked once, reused by `--repeat`. */
  async prepare(taskDir: string, plan: TaskPlan, images: TaskImages, o: PrepareOptions = {}): Promise<PreparedTask> {
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
      throw unsupported(`the verifier needs ${v.gpus} GPU(s) (metadata.rsi_harness.verifier.gpus); only \`assay run --gpus LIST\` hands Judges GPUs`);
    if (v.user !== null && !['root', '0', '0:0'].includes(v.user)) {
      throw unsupported(
        `verifier.user = ${JSON.stringify(v.user)}: the Judge runs test.sh as root so that /tests and /logs/verifier stay out of reach of candidate code, which test.sh runs with run-as-candidate`,
      );
    }
    const judgeAssets = plan.assets.filter((a) => a.phase === 'judge');
    if (judgeAssets.length) throw unsupported(`judge-phase assets (${judgeAssets.map((a) => a.path).join(', ')}) are not staged by this runtime yet`);

    let workdir = plan.environment.workdir;
    if (workdir === null) workdir = (await this.d.runtime.inspectImage(images.judge.id))?.workingDir || null;
    const rootfs = plan.environment.workdir === '/';
    if (rootfs && !this.d.snapshots.archive)
      throw unsupported('the workdir is "/" (full-rootfs mode), and this snapshot store cannot stream a snapshot as a tar');
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
    const testsDigest = await this.d.snapshots.digestDirectory(testsDir);
    const env = resolveEnvTemplates(mergeEnv(plan.environment.env, v.env), o.hostEnv ?? {}, 'verifier.env').env;
    const requested = o.metric ?? plan.runSettings.primaryMetric ?? null;
    const limits = judgeLimits({
      cpus: plan.environment.cpus,
      memoryMb: plan.environment.memoryMb,
      shmSizeBytes: plan.environment.shmSizeBytes,
      verifierTimeoutSec: v.timeoutSec,
      settings,
      hostCpus: this.d.hostCpus,
      testsBytes: stats.bytes,
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

  /** A fresh private staging directory for one Judge's snapshot, written into its owner file first. */
  private stagingFor(ownerFile: string, judgeId: string, startedAt: Date): string {
    let made: string;
    try {
      made = fs.mkdtempSync(join(this.d.stagingDir ?? '/var/tmp', 'assay-judge-'));
    } catch (e) {
      if (this.d.stagingDir !== undefined) throw e;
      made = fs.mkdtempSync(join(tmpdir(), 'assay-judge-'));
    }
    fs.chmodSync(made, 0o700);
    fs.writeFileSync(
      ownerFile,
      `${JSON.stringify({ owner: this.d.owners.self, judge: judgeId, home: this.d.homeTag, startedAt: startedAt.toISOString(), staging: made })}\n`,
      { mode: 0o600 },
    );
    return made;
  }

  private labels(judgeId: string): Record<string, string> {
    return { [LABELS.role]: 'judge', [LABELS.judge]: judgeId, [LABELS.owner]: this.d.owners.self, [LABELS.home]: this.d.homeTag };
  }

  private async checkRules(cid: string, rules: SnapshotRules): Promise<RuleFinding | null> {
    const checker = new SnapshotRuleChecker(rules);
    for await (const e of this.d.snapshots.walk(cid)) {
      const f = checker.visit(e);
      if (f) return f;
    }
    return checker.finish();
  }

  /** Checks that the daemon applied what was asked; a Judge never runs with weaker isolation than planned. */
  private appliedProblems(info: ContainerInfo, t: PreparedTask, gpus: readonly string[]): string[] {
    const p: string[] = [];
    const appliedGpus = (info.deviceRequests ?? []).flatMap((r) => r.deviceIds);
    if (appliedGpus.join(',') !== gpus.join(',')) p.push(`GPUs [${appliedGpus.join(',')}], expected [${gpus.join(',')}]`);
    if (info.networkMode !== t.network) p.push(`network mode ${info.networkMode}, expected ${t.network}`);
    if (info.readOnlyRootfs !== t.limits.readOnlyRootfs) p.push(`read-only root file system ${String(info.readOnlyRootfs)}`);
    if (!info.capDrop.map((c) => c.toUpperCase()).some((c) => c === 'ALL' || c === 'CAP_ALL')) p.push('capabilities not dropped');
    if (!info.securityOpt.some((o) => o.startsWith('no-new-privileges'))) p.push('no-new-privileges not set');
    if (info.pidsLimit !== t.limits.pidsLimit) p.push(`pids limit ${String(info.pidsLimit)}, expected ${t.limits.pidsLimit}`);
    if (info.memoryBytes !== t.limits.memoryBytes) p.push(`memory limit ${String(info.memoryBytes)}, expected ${t.limits.memoryBytes}`);
    if (info.sysctls !== undefined) {
      for (const [k, v] of Object.entries(JUDGE_SYSCTLS)) if (info.sysctls[k] !== v) p.push(`sysctl ${k} = ${String(info.sysctls[k])}, expected ${v}`);
    }
    return p;
  }

  /**
   * Stops what is running (SIGINT, shutdown): running Judge containers are killed, and each ends as
   * infrastructure_error (no score) with the reason, recorded as usual; no further Judge starts.
   */
  async cancel(reason: string): Promise<void> {
    this.cancelled = reason;
    await Promise.all([...this.active].map((id) => this.d.runtime.kill(id).catch(() => undefined)));
  }

  get isCancelled(): boolean {
    return this.cancelled !== null;
  }

  /** One fresh Judge on a snapshot. Statuses are results; only misuse and an unwritable ledger throw. */
  async judge(t: PreparedTask, snapshot: string, ref: RunRef = {}, opts: JudgeOptions = {}): Promise<JudgeResult> {
    if (this.cancelled !== null) throw judgeError('JUDGE_CANCELLED', `judging was cancelled (${this.cancelled})`);
    const gpus = [...(opts.gpus ?? [])];
    if (gpus.length !== t.plan.verifier.gpus) {
      throw judgeError(
        'JUDGE_BAD_REQUEST',
        `the verifier needs ${t.plan.verifier.gpus} GPU(s) (metadata.rsi_harness.verifier.gpus), but ${gpus.length} were handed to this Judge`,
        { gpus },
      );
    }
    if (!(await this.d.snapshots.has(snapshot))) {
      throw judgeError(
        'JUDGE_SNAPSHOT_NOT_FOUND',
        `snapshot ${snapshot} is not in the store; judge a directory with --snapshot DIR, or import the snapshot first`,
        { snapshot },
      );
    }
    const { runtime, recorder, clock } = this.d;
    const judgeId = this.d.ids.next();
    const stream = judgeStream(judgeId);
    const dir = join(this.d.judgesDir, judgeId);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const ownerFile = join(dir, 'owner.json');
    const startedAt = clock.now();
    fs.writeFileSync(
      ownerFile,
      `${JSON.stringify({ owner: this.d.owners.self, judge: judgeId, home: this.d.homeTag, startedAt: startedAt.toISOString() })}\n`,
      { mode: 0o600 },
    );
    const capture = new OutputCapture(join(dir, 'output.log'), t.limits.outputCapBytes);
    const events: RecordedPosition[] = [];
    const base = { judge: judgeId, ...ref };
    const image = t.images.judge.id;
    const elapsed = () => clock.now().getTime() - startedAt.getTime();

    const finishRule = async (f: { rule: string; detail: string }): Promise<JudgeResult> => {
      const out = capture.finish();
      events.push(
        ...(await this.record(
          stream,
          [
            { type: 'RuleViolation', data: ruleViolationData({ ...ref, rule: f.rule, detail: f.detail }) },
            {
              type: 'JudgeCompleted',
              data: judgeCompletedData({
                ...base,
                status: 'submission_error',
                exitCode: null,
                durationMs: elapsed(),
                outputDigest: out.digest,
                outputBytes: out.totalBytes,
                detail: `rule ${f.rule} broken: ${f.detail}`,
              }),
            },
          ],
          'no_stream',
        )),
      );
      return this.done(dir, ownerFile, {
        judge: judgeId,
        stream,
        status: 'submission_error',
        exitCode: null,
        durationMs: elapsed(),
        rewards: null,
        primaryMetric: null,
        primaryScore: 0,
        detail: oneLine(`rule ${f.rule} broken: ${f.detail}`),
        snapshot,
        image,
        testsDigest: t.testsDigest,
        network: null,
        limits: null,
        rule: { rule: oneLine(f.rule), detail: oneLine(f.detail) },
        output: out,
        events,
        dir,
      });
    };

    // 1. rules
    let finding: RuleFinding | null;
    try {
      finding = await this.checkRules(snapshot, t.settings.snapshot);
    } catch (e) {
      return this.finishInfra(
        t,
        { dir, ownerFile, judgeId, stream, base, snapshot, capture, events, elapsed },
        `reading the snapshot's manifests failed: ${message(e)}`,
        null,
      );
    }
    if (finding) return finishRule(finding);

    // 2. materialise (full-rootfs: an image made from the snapshot instead of a directory), into a private
    //    directory outside ASSAY_HOME (stagingDir), recorded in owner.json so a sweep can remove it
    let work = join(dir, 'snapshot');
    const r = t.settings.snapshot;
    let rootfsImage: string | null = null;
    try {
      if (t.rootfs)
        rootfsImage = await importRootfsImage(
          { runtime, snapshots: this.d.snapshots, judgeRuntimeDir: this.d.judgeRuntimeDir },
          image,
          snapshot,
          judgeId,
          this.labels(judgeId),
        );
      else {
        work = this.stagingFor(ownerFile, judgeId, startedAt);
        await this.d.snapshots.materialise(snapshot, join(work, 'snapshot'), {
          maxFiles: r.maxFiles,
          maxFileBytes: r.maxFileBytes,
          maxTotalBytes: r.maxBytes,
          maxDepth: r.maxDepth,
        });
      }
    } catch (e) {
      fs.rmSync(work, { recursive: true, force: true });
      if (isAssayError(e) && SNAPSHOT_LIMIT_CODES.has(e.code)) return finishRule({ rule: 'snapshot.limits', detail: e.message });
      if (rootfsImage) await runtime.removeImage(rootfsImage).catch(() => undefined);
      return this.finishInfra(
        t,
        { dir, ownerFile, judgeId, stream, base, snapshot, capture, events, elapsed },
        `${t.rootfs ? 'making the Judge image from the snapshot' : 'materialising the snapshot'} failed: ${message(e)}`,
        null,
      );
    }

    // 3..5. create, launch, run, collect
    const volume = judgeVolumeName(judgeId);
    let containerId: string | null = null;
    let launched = false;
    let run: JudgeRun;
    let rewards: RewardParse | null = null;
    let applied: ContainerInfo | null = null;
    let entrypointErr: Buffer = Buffer.alloc(0);
    const notes: string[] = [];
    try {
      const labels = this.labels(judgeId);
      await runtime.createVolume(volume, labels);
      const spec = judgeContainerSpec({
        judgeId,
        imageId: rootfsImage ?? image,
        workdir: t.workdir,
        snapshotHostDir: t.rootfs ? null : join(work, 'snapshot'),
        verifierVolume: volume,
        command: t.plan.verifier.command,
        env: t.env,
        network: t.network,
        limits: t.limits,
        labels,
      });
      containerId = await runtime.createContainer(gpus.length ? { ...spec, gpus: { driver: 'nvidia', deviceIds: gpus } } : spec);
      this.active.add(containerId);
      applied = await runtime.inspectContainer(containerId);
      if (!applied) throw new Error('the container vanished right after it was created');
      const problems = this.appliedProblems(applied, t, gpus);
      if (problems.length) throw new Error(`the daemon did not apply the Judge's isolation (${problems.join('; ')}); refusing to run it`);
      try {
        events.push(
          ...(await recorder.append(
            stream,
            [
              {
                type: 'JudgeLaunched',
                data: judgeLaunchedData({
                  ...base,
                  image,
                  snapshot,
                  testsDigest: t.testsDigest,
                  limits: launchedLimits(t.limits, applied),
                  network: applied.networkMode,
                }),
              },
            ],
            'no_stream',
          )),
        );
      } catch (e) {
        await this.teardown(containerId, volume, work, notes, rootfsImage);
        throw judgeError('JUDGE_RECORD_FAILED', `recording JudgeLaunched failed, so the Judge was not started: ${message(e)}`, { judge: judgeId }, e);
      }
      launched = true;
      if (this.cancelled !== null) throw new Error(`cancelled (${this.cancelled}) before the Judge started`);
      // The container's stderr is the entrypoint's own channel: it points the verifier's stderr at stdout before
      // running it, so nothing test.sh or candidate code prints arrives here (task-runtime/judge/entrypoint).
      const onOutput = (s: 'stdout' | 'stderr', chunk: Buffer): void => {
        capture.write(chunk);
        if (s === 'stderr' && entrypointErr.length < 4096) entrypointErr = Buffer.concat([entrypointErr, chunk.subarray(0, 4096 - entrypointErr.length)]);
      };
      const started = await runtime.start(containerId, { stdin: t.tests, onOutput });
      const w = await runtime.wait(containerId, t.limits.verifierTimeoutSec * 1000);
      if (!w.exited) await runtime.kill(containerId);
      await bounded(started.outputEnded, this.d.drainMs ?? 5000);
      const after = await runtime.inspectContainer(containerId);
      const oomKilled = after?.oomKilled === true;
      if (this.cancelled !== null) {
        run = { kind: 'infrastructure', detail: `cancelled (${this.cancelled}); the Judge was killed` };
      } else if (!w.exited) {
        run = { kind: 'timed_out', timeoutSec: t.limits.verifierTimeoutSec, oomKilled };
      } else if (w.exitCode === ENTRYPOINT_SETUP_FAILED_STATUS && entrypointErr.toString('utf8').startsWith(ENTRYPOINT_SETUP_FAILED_MARK)) {
        run = { kind: 'infrastructure', detail: `the Judge entrypoint could not set up: ${entrypointErr.toString('utf8').split('\n')[0] ?? ''}` };
      } else {
        run = { kind: 'exited', exitCode: w.exitCode, oomKilled };
        rewards = await readRewardFiles(runtime, containerId);
      }
    } catch (e) {
      if (isAssayError(e) && e.code === 'JUDGE_RECORD_FAILED') {
        capture.finish();
        throw e;
      }
      run = { kind: 'infrastructure', detail: message(e) };
    }

    // 6. tear down
    await this.teardown(containerId, volume, work, notes, rootfsImage);

    // 7. verdict and record
    if (run.kind === 'infrastructure' && !launched) {
      return this.finishInfra(t, { dir, ownerFile, judgeId, stream, base, snapshot, capture, events, elapsed }, [run.detail, ...notes].join('; '), applied);
    }
    const out = capture.finish();
    const verdict = decideVerdict({ run, rewards, requestedMetric: t.requestedMetric, memoryLimitBytes: t.limits.memoryBytes });
    const detailParts = [
      verdict.detail,
      out.truncated ? `output truncated: kept the first ${out.keptBytes} of ${out.totalBytes} bytes` : null,
      ...notes,
    ].filter((x): x is string => !!x);
    const detail = detailParts.length ? oneLine(detailParts.join('; ')) : null;
    const durationMs = elapsed();
    const completion: Array<{ type: string; data: Record<string, unknown> }> = [
      {
        type: 'JudgeCompleted',
        data: judgeCompletedData({
          ...base,
          status: verdict.status,
          exitCode: verdict.exitCode,
          durationMs,
          outputDigest: out.digest,
          outputBytes: out.totalBytes,
          detail,
        }),
      },
    ];
    if (verdict.status === 'completed' && verdict.rewards) {
      completion.push({
        type: 'RewardRecorded',
        data: rewardRecordedData({
          ...base,
          rewards: verdict.rewards,
          primaryMetric: verdict.primary?.metric ?? null,
          primaryScore: verdict.primary?.score ?? null,
        }),
      });
    }
    events.push(...(await this.record(stream, completion, 0)));
    return this.done(dir, ownerFile, {
      judge: judgeId,
      stream,
      status: verdict.status,
      exitCode: verdict.exitCode,
      durationMs,
      rewards: verdict.rewards,
      primaryMetric: verdict.primary?.metric ?? null,
      primaryScore: verdict.primary?.score ?? null,
      detail,
      snapshot,
      image,
      testsDigest: t.testsDigest,
      network: applied?.networkMode ?? null,
      limits: applied ? launchedLimits(t.limits, applied) : null,
      rule: null,
      output: out,
      events,
      dir,
    });
  }

  /** N fresh Judges one after the other, and the median of the completed ones' primary scores. */
  async judgeRepeated(t: PreparedTask, snapshot: string, n: number, ref: RunRef = {}, onResult?: (r: JudgeResult, i: number) => void): Promise<RepeatedResult> {
    if (!Number.isSafeInteger(n) || n < 1 || n > 100) throw judgeError('JUDGE_BAD_REQUEST', `--repeat must be an integer from 1 to 100, got ${n}`);
    const results: JudgeResult[] = [];
    if (n > 1) this.progress.start('judging', n);
    for (let i = 0; i < n && this.cancelled === null; i++) {
      const r = await this.judge(t, snapshot, ref);
      results.push(r);
      onResult?.(r, i);
      if (n > 1) this.progress.tick(i + 1, n);
    }
    const scores = results.filter((r) => r.status === 'completed' && r.primaryScore !== null).map((r) => r.primaryScore as number);
    if (n > 1) this.progress.end(`${results.length} Judges`);
    return { results, median: median(scores), completed: results.filter((r) => r.status === 'completed').length };
  }

  private async record(
    stream: string,
    events: Array<{ type: string; data: Record<string, unknown> }>,
    expected: 'no_stream' | number,
  ): Promise<RecordedPosition[]> {
    try {
      return await this.d.recorder.append(stream, events, expected);
    } catch (e) {
      throw judgeError('JUDGE_RECORD_FAILED', `recording ${events.map((x) => x.type).join(' + ')} on ${stream} failed: ${message(e)}`, { stream }, e);
    }
  }

  private async finishInfra(
    t: PreparedTask,
    c: {
      dir: string;
      ownerFile: string;
      judgeId: string;
      stream: string;
      base: RunRef & { judge: string };
      snapshot: string;
      capture: OutputCapture;
      events: RecordedPosition[];
      elapsed: () => number;
    },
    detail: string,
    applied: ContainerInfo | null,
  ): Promise<JudgeResult> {
    const out = c.capture.finish();
    const durationMs = c.elapsed();
    c.events.push(
      ...(await this.record(
        c.stream,
        [
          {
            type: 'JudgeCompleted',
            data: judgeCompletedData({
              ...c.base,
              status: 'infrastructure_error',
              exitCode: null,
              durationMs,
              outputDigest: out.digest,
              outputBytes: out.totalBytes,
              detail,
            }),
          },
        ],
        'no_stream',
      )),
    );
    return this.done(c.dir, c.ownerFile, {
      judge: c.judgeId,
      stream: c.stream,
      status: 'infrastructure_error',
      exitCode: null,
      durationMs,
      rewards: null,
      primaryMetric: null,
      primaryScore: null,
      detail: oneLine(detail),
      snapshot: c.snapshot,
      image: t.images.judge.id,
      testsDigest: t.testsDigest,
      network: applied?.networkMode ?? null,
      limits: applied ? launchedLimits(t.limits, applied) : null,
      rule: null,
      output: out,
      events: c.events,
      dir: c.dir,
    });
  }

  private done(dir: string, ownerFile: string, r: JudgeResult): JudgeResult {
    const { output, ...rest } = r;
    fs.writeFileSync(join(dir, 'result.json'), `${JSON.stringify({ ...rest, output: { ...output } }, null, 2)}\n`, { mode: 0o644 });
    fs.rmSync(ownerFile, { force: true });
    return r;
  }

  private async teardown(containerId: string | null, volume: string, work: string, notes: string[], rootfsImage: string | null = null): Promise<void> {
    const { runtime } = this.d;
    if (containerId) this.active.delete(containerId);
    if (containerId) await runtime.removeContainer(containerId).catch((e: unknown) => notes.push(`teardown: ${message(e)} (left for the next sweep)`));
    await runtime.removeVolume(volume).catch((e: unknown) => notes.push(`teardown: ${message(e)} (left for the next sweep)`));
    if (rootfsImage) await runtime.removeImage(rootfsImage).catch((e: unknown) => notes.push(`teardown: ${message(e)} (left for the next sweep)`));
    try {
      fs.rmSync(work, { recursive: true, force: true });
    } catch (e) {
      notes.push(`teardown: removing ${work}: ${message(e)}`);
    }
  }

  /**
   * Removes what dead processes left behind: containers and volumes labelled as Judges whose owner is gone, and
   * their materialised snapshots; a Judge of this home whose JudgeLaunched has no JudgeCompleted gets one
   * (infrastructure_error), so the ledger tells what happened.
   */
  async sweep(): Promise<SweepReport> {
    const { runtime, owners } = this.d;
    const report: SweepReport = { containers: [], volumes: [], directories: [], completed: [], images: [] };
    const orphans = new Map<string, { owner: string; startedAt: string | null }>();
    const dead = (labels: Readonly<Record<string, string>>): boolean => {
      const owner = labels[LABELS.owner];
      return owner !== undefined && !owners.isAlive(owner);
    };
    for (const c of await runtime.listContainers({ [LABELS.role]: 'judge' })) {
      if (!dead(c.labels)) continue;
      await runtime.removeContainer(c.id);
      report.containers.push(c.name || c.id);
      const j = c.labels[LABELS.judge];
      if (j && c.labels[LABELS.home] === this.d.homeTag) orphans.set(j, { owner: c.labels[LABELS.owner] as string, startedAt: null });
    }
    for (const v of await runtime.listVolumes({ [LABELS.role]: 'judge' })) {
      if (!dead(v.labels)) continue;
      await runtime.removeVolume(v.name);
      report.volumes.push(v.name);
      const j = v.labels[LABELS.judge];
      if (j && v.labels[LABELS.home] === this.d.homeTag && !orphans.has(j)) orphans.set(j, { owner: v.labels[LABELS.owner] as string, startedAt: null });
    }
    for (const i of await runtime.listImages({ [LABELS.role]: ROOTFS_IMAGE_ROLE })) {
      if (!dead(i.labels)) continue;
      await runtime.removeImage(i.id);
      report.images.push(i.tags[0] ?? i.id);
    }
    if (fs.existsSync(this.d.judgesDir)) {
      for (const name of fs.readdirSync(this.d.judgesDir)) {
        const ownerFile = join(this.d.judgesDir, name, 'owner.json');
        let o: { owner?: unknown; startedAt?: unknown; staging?: unknown };
        try {
          o = JSON.parse(fs.readFileSync(ownerFile, 'utf8')) as typeof o;
        } catch {
          continue;
        }
        if (typeof o.owner !== 'string' || owners.isAlive(o.owner)) continue;
        fs.rmSync(join(this.d.judgesDir, name, 'snapshot'), { recursive: true, force: true });
        if (typeof o.staging === 'string' && isAbsolute(o.staging) && STAGING_NAME.test(basename(o.staging)))
          fs.rmSync(o.staging, { recursive: true, force: true });
        fs.rmSync(ownerFile, { force: true });
        report.directories.push(join(this.d.judgesDir, name));
        orphans.set(name, { owner: o.owner, startedAt: typeof o.startedAt === 'string' ? o.startedAt : (orphans.get(name)?.startedAt ?? null) });
      }
    }
    for (const [judgeId, o] of orphans) {
      if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,100}$/.test(judgeId)) continue;
      const stream = judgeStream(judgeId);
      const types = await this.d.recorder.streamTypes(stream);
      if (!types.includes('JudgeLaunched') || types.includes('JudgeCompleted')) continue;
      const log = join(this.d.judgesDir, judgeId, 'output.log');
      let digest = EMPTY_OUTPUT_DIGEST;
      let bytes = 0;
      try {
        const b = fs.readFileSync(log);
        digest = `sha256:${createHash('sha256').update(b).digest('hex')}`;
        bytes = b.length;
      } catch {
        // no log
      }
      const started = o.startedAt ? Date.parse(o.startedAt) : NaN;
      const durationMs = Number.isFinite(started) ? Math.max(0, this.d.clock.now().getTime() - started) : 0;
      await this.d.recorder.append(
        stream,
        [
          {
            type: 'JudgeCompleted',
            data: judgeCompletedData({
              judge: judgeId,
              status: 'infrastructure_error',
              exitCode: null,
              durationMs,
              outputDigest: digest,
              outputBytes: bytes,
              detail: `the judging process ${o.owner} ended before this Judge finished; its container and volume were removed by ${owners.self}`,
            }),
          },
        ],
        types.length - 1,
      );
      report.completed.push(judgeId);
    }
    return report;
  }
}

export type { JudgeLimits };
