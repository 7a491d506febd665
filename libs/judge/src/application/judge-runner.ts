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
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAssayError, silentProgress, type Clock, type IdGenerator, type Progress } from '@assay/core';
import type { ContainerInfo, ContainerRuntime } from '@assay/containers';
import type { TaskPlan } from '@assay/task-format';
import { judgeLaunchedData, judgeStream, launchedLimits, type RunRef } from '../domain/judge-events';
import {
  ENTRYPOINT_SETUP_FAILED_MARK,
  ENTRYPOINT_SETUP_FAILED_STATUS,
  JUDGE_SYSCTLS,
  judgeContainerSpec,
  judgeVolumeName,
  type JudgeLimits,
} from '../domain/judge-plan';
import { SnapshotRuleChecker, type RuleFinding, type SnapshotRules } from '../domain/judge-settings';
import { median, type JudgeRun } from '../domain/verdict';
import { judgeError } from '../judge.errors';
import type { JudgeRecorder } from '../ports/judge-recorder.port';
import type { JudgeSnapshots } from '../ports/judge-snapshots.port';
import type { OwnerRegistry } from '../ports/owner.port';
import { prepareTask, type PrepareOptions, type PreparedTask } from './judge-prepare';
import { finishInfra, finishRule, finishVerdict, message, type JudgeContext, type JudgeResult } from './judge-results';
import { LABELS, sweepJudges, type SweepReport } from './judge-sweep';
import { OutputCapture } from './output-capture';
import { readVerifierFiles, type VerifierFiles } from './reward-files';
import type { TaskImages } from './task-images';
import { importRootfsImage } from './rootfs-image';

export type { PrepareOptions, PreparedTask } from './judge-prepare';
export { LABELS, type SweepReport } from './judge-sweep';
export type { JudgeResult } from './judge-results';

export interface RepeatedResult {
  readonly results: readonly JudgeResult[];
  /** Median of the primary scores of the completed Judges; null when none has one. */
  readonly median: number | null;
  readonly completed: number;
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
  /**
   * `hidden` (default): a Judge whose image is the task author's remounts /proc with hidepid=invisible in its first
   * step, with setup-only SYS_ADMIN and SETPCAP (judge-plan.ts). `visible`: the operator's choice on a host whose
   * security module forbids that mount (ASSAY_JUDGE_PROC=visible); recorded as procHidden: false in JudgeLaunched.
   */
  readonly procVisibility?: 'hidden' | 'visible';
}

/** Per-Judge options. */
export interface JudgeOptions {
  /** Host GPU device ids for this Judge: exactly `verifier.gpus` of them when the verifier needs GPUs. */
  readonly gpus?: readonly string[];
}

const SNAPSHOT_LIMIT_CODES = new Set(['SNAPSHOT_TOO_MANY_FILES', 'SNAPSHOT_FILE_TOO_LARGE', 'SNAPSHOT_TOO_LARGE', 'SNAPSHOT_TOO_DEEP']);

async function bounded<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The snapshot as the container gets it: a directory to bind-mount (`work`), or (full-rootfs) an image made from it. */
interface StagedSnapshot {
  readonly work: string;
  readonly rootfsImage: string | null;
}

/** A Judge's volume and container as far as they got: what teardown removes and the verdict reads. */
interface JudgeContainer {
  readonly volume: string;
  id: string | null;
  applied: ContainerInfo | null;
  /** The candidate's memory cgroup limit the container was given (null: none). */
  candidateMemoryBytes: number | null;
  launched: boolean;
  /** Teardown failures, added to the recorded detail. */
  readonly notes: string[];
}

/** How the container phase ended. */
interface ContainerPhase {
  readonly container: JudgeContainer;
  readonly run: JudgeRun;
  /** What the verifier left in /logs/verifier; null unless test.sh exited. */
  readonly files: VerifierFiles | null;
}

export class JudgeRunner {
  private readonly progress: Progress;
  private readonly active = new Set<string>();
  private cancelled: string | null = null;
  /** The daemon's cgroup version, asked once (the candidate-memory setup step supports cgroup v1 hosts). */
  private cgroupVersion: Promise<1 | 2 | null> | null = null;
  /** False once the daemon refused to limit a container's writable layer (asked again only by a new runner). */
  private layerLimits = true;

  constructor(private readonly d: JudgeRunnerDeps) {
    this.progress = d.progress ?? silentProgress;
  }

  /** Everything about a task that does not change between Judges: checked once, reused by `--repeat`. */
  async prepare(taskDir: string, plan: TaskPlan, images: TaskImages, o: PrepareOptions = {}): Promise<PreparedTask> {
    return prepareTask(this.d, taskDir, plan, images, o);
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

  /**
   * Whether the Judge gets the entrypoint's setup step (judge-plan.ts): only when its image is the task author's (in
   * full-rootfs mode root runs the agent's interpreters) and the operator did not choose ASSAY_JUDGE_PROC=visible.
   */
  private setupFor(t: PreparedTask): boolean {
    return !t.rootfs && (this.d.procVisibility ?? 'hidden') === 'hidden';
  }

  /**
   * The candidate's memory cgroup limit for a Judge with the setup step, on a host whose containers get cgroup v1
   * (judge-setup's candidate-memory step); null elsewhere: candidate code is then bounded by its tmpfs places and
   * oom_score_adj alone, and JudgeLaunched says so (limits.candidateMemoryBytes null).
   */
  private async candidateMemoryFor(t: PreparedTask, setup: boolean): Promise<number | null> {
    if (!setup) return null;
    this.cgroupVersion ??= this.d.runtime.daemonInfo().then(
      (i) => i.cgroupVersion,
      (e: unknown) => {
        this.cgroupVersion = null;
        throw e;
      },
    );
    return (await this.cgroupVersion) === 1 ? t.limits.candidateMemoryBytes : null;
  }

  /** Checks that the daemon applied what was asked; a Judge never runs with weaker isolation than planned. */
  private appliedProblems(info: ContainerInfo, t: PreparedTask, gpus: string[], readOnlyRootfs: boolean): string[] {
    const p: string[] = [];
    const appliedGpus = (info.deviceRequests ?? []).flatMap((r) => r.deviceIds);
    if (appliedGpus.join(',') !== gpus.join(',')) p.push(`GPUs [${appliedGpus.join(',')}], expected [${gpus.join(',')}]`);
    if (info.networkMode !== t.network) p.push(`network mode ${info.networkMode}, expected ${t.network}`);
    if (info.readOnlyRootfs !== readOnlyRootfs) p.push(`read-only root file system ${String(info.readOnlyRootfs)}`);
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
    const gpus = await this.checkRequest(t, snapshot, opts);
    const c = this.startJudge(t, snapshot, ref);

    // 1. rules
    const broken = await this.judgeRules(t, c);
    if (broken) return broken;

    // 2. materialise (full-rootfs: an image made from the snapshot instead of a directory)
    const staged = await this.stageSnapshot(t, c);
    if ('result' in staged) return staged.result;

    // 3..5. create, launch, run, collect
    const { container, run, files } = await this.runContainer(t, c, staged, gpus);

    // 6. tear down
    await this.teardown(container, staged);

    // 7. verdict and record
    if (run.kind === 'infrastructure' && !container.launched) {
      return finishInfra(this.d.recorder, t, c, [run.detail, ...container.notes].join('; '), container.applied);
    }
    return finishVerdict(this.d.recorder, t, c, run, files, container.notes, container.applied);
  }

  /** Refuses a Judge that cannot run: judging cancelled, the wrong number of GPUs, a snapshot not in the store. */
  private async checkRequest(t: PreparedTask, snapshot: string, opts: JudgeOptions): Promise<string[]> {
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
    return gpus;
  }

  /** A new Judge: its id, and its directory with owner.json (found by the sweep if this process dies) and output.log. */
  private startJudge(t: PreparedTask, snapshot: string, ref: RunRef): JudgeContext {
    const { clock } = this.d;
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
    return {
      judgeId,
      stream,
      dir,
      ownerFile,
      startedAt,
      ref,
      base: { judge: judgeId, ...ref },
      snapshot,
      image: t.images.judge.id,
      capture: new OutputCapture(join(dir, 'output.log'), t.limits.outputCapBytes),
      events: [],
      elapsed: () => clock.now().getTime() - startedAt.getTime(),
    };
  }

  /** 1. The snapshot's manifests against the task's snapshot rules: the Judge's result when it ends here, else null. */
  private async judgeRules(t: PreparedTask, c: JudgeContext): Promise<JudgeResult | null> {
    let finding: RuleFinding | null;
    try {
      finding = await this.checkRules(c.snapshot, t.settings.snapshot);
    } catch (e) {
      return finishInfra(this.d.recorder, t, c, `reading the snapshot's manifests failed: ${message(e)}`, null);
    }
    return finding ? finishRule(this.d.recorder, t, c, finding) : null;
  }

  /**
   * 2. Materialises the snapshot into a private directory outside ASSAY_HOME (stagingDir), recorded in owner.json so
   * a sweep can remove it; full-rootfs, makes an image from it instead. A snapshot over the limits ends the Judge as a
   * broken rule, any other failure as infrastructure_error (the Judge's `result`).
   */
  private async stageSnapshot(t: PreparedTask, c: JudgeContext): Promise<StagedSnapshot | { result: JudgeResult }> {
    const { runtime } = this.d;
    let work = join(c.dir, 'snapshot');
    const r = t.settings.snapshot;
    let rootfsImage: string | null = null;
    try {
      if (t.rootfs)
        rootfsImage = await importRootfsImage(
          { runtime, snapshots: this.d.snapshots, judgeRuntimeDir: this.d.judgeRuntimeDir },
          c.image,
          c.snapshot,
          c.judgeId,
          this.labels(c.judgeId),
        );
      else {
        work = this.stagingFor(c.ownerFile, c.judgeId, c.startedAt);
        await this.d.snapshots.materialise(c.snapshot, join(work, 'snapshot'), {
          maxFiles: r.maxFiles,
          maxFileBytes: r.maxFileBytes,
          maxTotalBytes: r.maxBytes,
          maxDepth: r.maxDepth,
        });
      }
    } catch (e) {
      fs.rmSync(work, { recursive: true, force: true });
      if (isAssayError(e) && SNAPSHOT_LIMIT_CODES.has(e.code))
        return { result: await finishRule(this.d.recorder, t, c, { rule: 'snapshot.limits', detail: e.message }) };
      if (isAssayError(e) && e.code === 'JUDGE_SNAPSHOT_UNIMPORTABLE')
        return { result: await finishRule(this.d.recorder, t, c, { rule: 'snapshot.refused', detail: e.message }) };
      if (rootfsImage) await runtime.removeImage(rootfsImage).catch(() => undefined);
      return {
        result: await finishInfra(
          this.d.recorder,
          t,
          c,
          `${t.rootfs ? 'making the Judge image from the snapshot' : 'materialising the snapshot'} failed: ${message(e)}`,
          null,
        ),
      };
    }
    return { work, rootfsImage };
  }

  /**
   * 3..5. Creates the volume and the container, records JudgeLaunched, runs the verifier and collects its rewards.
   * Any failure becomes an infrastructure run, except a JudgeLaunched that could not be recorded, which throws
   * (JUDGE_RECORD_FAILED, after its own teardown).
   */
  private async runContainer(t: PreparedTask, c: JudgeContext, staged: StagedSnapshot, gpus: string[]): Promise<ContainerPhase> {
    const container: JudgeContainer = { volume: judgeVolumeName(c.judgeId), id: null, applied: null, candidateMemoryBytes: null, launched: false, notes: [] };
    try {
      const applied = await this.createContainer(t, c, staged, gpus, container);
      await this.recordLaunched(t, c, staged, container, applied);
      container.launched = true;
      if (this.cancelled !== null) throw new Error(`cancelled (${this.cancelled}) before the Judge started`);
      return { container, ...(await this.runVerifier(t, c, container.id as string)) };
    } catch (e) {
      if (isAssayError(e) && e.code === 'JUDGE_RECORD_FAILED') {
        c.capture.finish();
        throw e;
      }
      return { container, run: { kind: 'infrastructure', detail: message(e) }, files: null };
    }
  }

  /** 3. The labelled volume and the container, and a check that the daemon applied the Judge's isolation. */
  private async createContainer(t: PreparedTask, c: JudgeContext, staged: StagedSnapshot, gpus: string[], container: JudgeContainer): Promise<ContainerInfo> {
    const { runtime } = this.d;
    const labels = this.labels(c.judgeId);
    await runtime.createVolume(container.volume, labels);
    const setup = this.setupFor(t);
    container.candidateMemoryBytes = await this.candidateMemoryFor(t, setup);
    const spec = judgeContainerSpec({
      judgeId: c.judgeId,
      imageId: staged.rootfsImage ?? c.image,
      workdir: t.workdir,
      snapshotHostDir: t.rootfs ? null : join(staged.work, 'snapshot'),
      verifierVolume: container.volume,
      command: t.plan.verifier.command,
      env: t.env,
      network: t.network,
      limits: t.limits,
      labels,
      setup,
      candidateMemoryBytes: container.candidateMemoryBytes,
    });
    const full = gpus.length ? { ...spec, gpus: { driver: 'nvidia' as const, deviceIds: gpus } } : spec;
    // writable_rootfs without the setup step writes into Docker's own layer: limited by the storage driver where it
    // can (overlay2 on XFS with project quotas), else unbounded, and JudgeLaunched says which
    const layerLimit = !spec.readOnlyRootfs && this.layerLimits ? t.limits.rootfsWriteBytes : null;
    const containerId =
      layerLimit === null
        ? await runtime.createContainer(full)
        : await runtime.createContainer({ ...full, rootfsSizeBytes: layerLimit }).catch((e: unknown) => {
            if (!isAssayError(e) || e.code !== 'CONTAINER_STORAGE_QUOTA_UNSUPPORTED') throw e;
            this.layerLimits = false;
            return runtime.createContainer(full);
          });
    container.id = containerId;
    this.active.add(containerId);
    const applied = await runtime.inspectContainer(containerId);
    container.applied = applied;
    if (!applied) throw new Error('the container vanished right after it was created');
    const problems = this.appliedProblems(applied, t, gpus, spec.readOnlyRootfs);
    if (problems.length) throw new Error(`the daemon did not apply the Judge's isolation (${problems.join('; ')}); refusing to run it`);
    return applied;
  }

  /** 3. JudgeLaunched (runtime key), before the container starts; when it cannot be recorded nothing runs. */
  private async recordLaunched(t: PreparedTask, c: JudgeContext, staged: StagedSnapshot, container: JudgeContainer, applied: ContainerInfo): Promise<void> {
    try {
      c.events.push(
        ...(await this.d.recorder.append(
          c.stream,
          [
            {
              type: 'JudgeLaunched',
              data: judgeLaunchedData({
                ...c.base,
                image: c.image,
                snapshot: c.snapshot,
                testsDigest: t.testsDigest,
                limits: launchedLimits(t.limits, applied, container.candidateMemoryBytes),
                network: applied.networkMode,
              }),
            },
          ],
          'no_stream',
        )),
      );
    } catch (e) {
      await this.teardown(container, staged);
      throw judgeError('JUDGE_RECORD_FAILED', `recording JudgeLaunched failed, so the Judge was not started: ${message(e)}`, { judge: c.judgeId }, e);
    }
  }

  /**
   * 4..5. Starts the container with the hidden tests on its stdin, kills it past the verifier timeout, drains its
   * output, and tells how the run ended; the reward files are read when the verifier exited.
   */
  private async runVerifier(t: PreparedTask, c: JudgeContext, containerId: string): Promise<{ run: JudgeRun; files: VerifierFiles | null }> {
    const { runtime } = this.d;
    let entrypointErr: Buffer = Buffer.alloc(0);
    // The container's stderr is the entrypoint's own channel: it points the verifier's stderr at stdout before
    // running it, so nothing test.sh or candidate code prints arrives here (task-runtime/judge/entrypoint).
    const onOutput = (s: 'stdout' | 'stderr', chunk: Buffer): void => {
      c.capture.write(chunk);
      if (s === 'stderr' && entrypointErr.length < 4096) entrypointErr = Buffer.concat([entrypointErr, chunk.subarray(0, 4096 - entrypointErr.length)]);
    };
    const started = await runtime.start(containerId, { stdin: t.tests, onOutput });
    const w = await runtime.wait(containerId, t.limits.verifierTimeoutSec * 1000);
    if (!w.exited) await runtime.kill(containerId);
    await bounded(started.outputEnded, this.d.drainMs ?? 5000);
    const after = await runtime.inspectContainer(containerId);
    const oomKilled = after?.oomKilled === true;
    let run: JudgeRun;
    let files: VerifierFiles | null = null;
    if (this.cancelled !== null) {
      run = { kind: 'infrastructure', detail: `cancelled (${this.cancelled}); the Judge was killed` };
    } else if (!w.exited) {
      run = { kind: 'timed_out', timeoutSec: t.limits.verifierTimeoutSec, oomKilled };
    } else if (w.exitCode === ENTRYPOINT_SETUP_FAILED_STATUS && entrypointErr.toString('utf8').startsWith(ENTRYPOINT_SETUP_FAILED_MARK)) {
      run = { kind: 'infrastructure', detail: `the Judge entrypoint could not set up: ${entrypointErr.toString('utf8').split('\n')[0] ?? ''}` };
    } else {
      run = { kind: 'exited', exitCode: w.exitCode, oomKilled };
      files = await readVerifierFiles(runtime, containerId);
    }
    return { run, files };
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

  private async teardown(container: JudgeContainer, staged: StagedSnapshot): Promise<void> {
    const { runtime } = this.d;
    const { id: containerId, volume, notes } = container;
    const { work, rootfsImage } = staged;
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
    return sweepJudges(this.d);
  }
}

export type { JudgeLimits };
