/**
 * The runtime node's Judges and images over a home: the container runtime (dockerode by default), the snapshot
 * store under ASSAY_HOME, and the signing ledger. RuntimeModule composes it from JudgeModule (whose ports it binds
 * with `judgePortsOf` and `judgeHostSettings`) and its own ledger and store; `openJudgeRuntime` opens a home's parts
 * for a use case run outside the module. The Judge's recorder signs with the runtime and judge keys only: the
 * controller key is never in the Ledger it appends through, so an event type that needs it cannot be signed from there.
 */
import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { randomIds, silentProgress, systemClock, type Clock, type IdGenerator, type Progress } from '@assay/core';
import { DockerodeRuntime, type ContainerRuntime } from '@assay/containers';
import { LedgerHome } from '@assay/ledger';
import { SnapshotHome } from '@assay/snapshots';
import { loadTaskPlan, type HostEnv, type TaskPlan } from '@assay/task-format';
import {
  LedgerJudgeRecorder,
  ProcessOwnerRegistry,
  composeJudge,
  judgeError,
  type ComposedJudge,
  type JudgeHostSettings,
  type JudgePorts,
  type JudgeRecorder,
  type JudgeRunner,
  type JudgeSnapshots,
  type OwnerRegistry,
  type PreparedTask,
  type TaskImageBuilder,
  type TaskImages,
} from '@assay/judge';
import { assayRoot } from './repo-paths';
import { SnapshotStoreAdapter } from './snapshot-store.adapter';

export interface JudgeRuntimeOptions {
  readonly home: string;
  readonly clock?: Clock;
  readonly ids?: IdGenerator;
  readonly progress?: Progress;
  /** Default: dockerode on DOCKER_HOST or /var/run/docker.sock. */
  readonly containers?: ContainerRuntime;
  readonly owners?: OwnerRegistry;
  /** Default: <repository>/task-runtime/judge. */
  readonly judgeRuntimeDir?: string;
  readonly hostCpus?: number;
  /** Output cap per Judge (bytes); default 1 MiB. */
  readonly outputCapBytes?: number;
  /** Whether Judges hide other users' processes in /proc; default: ASSAY_JUDGE_PROC (`hidden` unless `visible`). */
  readonly procVisibility?: 'hidden' | 'visible';
}

/**
 * ASSAY_JUDGE_PROC: `hidden` (the default) or `visible` (for a host whose security module forbids the /proc
 * remount in containers; every JudgeLaunched then records procHidden: false). Anything else is refused.
 */
export function procVisibilityFromEnv(env: NodeJS.ProcessEnv = process.env): 'hidden' | 'visible' {
  const v = env.ASSAY_JUDGE_PROC;
  if (v === undefined || v === '' || v === 'hidden') return 'hidden';
  if (v === 'visible') return 'visible';
  throw judgeError('JUDGE_HOST_SETTINGS_INVALID', `ASSAY_JUDGE_PROC must be hidden or visible, got ${JSON.stringify(v.slice(0, 40))}`, {
    variable: 'ASSAY_JUDGE_PROC',
  });
}

export interface LoadedTask {
  readonly plan: TaskPlan;
  readonly images: TaskImages;
  readonly prepared: PreparedTask;
}

export function homeTag(home: string): string {
  return createHash('sha256').update(resolve(home)).digest('hex').slice(0, 16);
}

/** What a JudgeRuntime is composed of: the home's opened ledger and snapshot store, and the runtime's providers. */
export interface JudgeRuntimeParts extends Omit<JudgeRuntimeOptions, 'home' | 'clock' | 'ids' | 'containers'> {
  readonly ledgerHome: LedgerHome;
  readonly snapshotHome: SnapshotHome;
  readonly containers: ContainerRuntime;
  readonly clock: Clock;
  readonly ids: IdGenerator;
}

export class JudgeRuntime {
  readonly snapshots: JudgeSnapshots;
  readonly recorder: JudgeRecorder;
  readonly runner: JudgeRunner;
  readonly images: TaskImageBuilder;

  /** Use `composeJudgeRuntime` (parts already opened), `openJudgeRuntime` (opens the home's parts) or RuntimeModule. */
  constructor(
    readonly home: string,
    readonly containers: ContainerRuntime,
    readonly ledgerHome: LedgerHome,
    readonly snapshotHome: SnapshotHome,
    judge: ComposedJudge,
    private readonly outputCapBytes: number | undefined,
    /** Closes what was opened for this runtime alone (nothing when its parts belong to a module). */
    private readonly release: () => Promise<void>,
  ) {
    this.snapshots = judge.snapshots;
    this.recorder = judge.recorder;
    this.runner = judge.runner;
    this.images = judge.images;
  }

  /** Validates the task, builds (or reuses) its images, and prepares what every Judge of it shares. */
  async loadTask(taskDir: string, o: { metric?: string | null; hostEnv?: HostEnv; forceBuild?: boolean; gpusFromPool?: boolean } = {}): Promise<LoadedTask> {
    const dir = resolve(taskDir);
    const plan = await loadTaskPlan(dir);
    const images = await this.images.ensure(dir, plan, { force: o.forceBuild === true });
    const prepared = await this.runner.prepare(dir, plan, images, {
      metric: o.metric ?? null,
      hostEnv: o.hostEnv ?? {},
      ...(this.outputCapBytes !== undefined ? { outputCapBytes: this.outputCapBytes } : {}),
      ...(o.gpusFromPool ? { gpusFromPool: true } : {}),
    });
    return { plan, images, prepared };
  }

  /** `--snapshot`: an existing directory is snapshotted into the store first; anything else must be a CID. */
  async resolveSnapshot(arg: string): Promise<{ cid: string; from: 'directory' | 'cid' }> {
    if (existsSync(arg) && statSync(arg).isDirectory()) return { cid: await this.snapshots.snapshotDirectory(resolve(arg)), from: 'directory' };
    if (!(await this.snapshots.has(arg))) {
      throw judgeError('JUDGE_SNAPSHOT_NOT_FOUND', `--snapshot ${arg}: neither a directory nor a snapshot in ${join(this.home, 'blobs')}`, { snapshot: arg });
    }
    return { cid: arg, from: 'cid' };
  }

  /** Releases what was opened for this runtime alone; a module's ledger and store stay open for the module. */
  async close(): Promise<void> {
    await this.release();
  }
}

/**
 * The Judge's recorder and snapshot port over a home's opened ledger and store: the recorder signs through the
 * home's ledger (its checkpoint witness included) with the runtime and judge keys only (JUDGE_KEYS_MISSING without
 * them), so an event type that needs the controller key cannot be signed from there. JudgeModule's binding in
 * RuntimeModule and `composeJudgeRuntime` both use it.
 */
export function judgePortsOf(ledgerHome: LedgerHome, snapshotHome: SnapshotHome): Omit<JudgePorts, 'owners'> {
  const home = ledgerHome.paths.home;
  const keys = ledgerHome.keys.filter((k) => k.role === 'runtime' || k.role === 'judge');
  for (const role of ['runtime', 'judge'] as const) {
    if (!keys.some((k) => k.role === role)) {
      throw judgeError(
        'JUDGE_KEYS_MISSING',
        `no ${role} key in ${join(home, 'keys')}; the runtime signs Judge events with the runtime and judge keys (\`assay ledger init\` creates them)`,
        { role },
      );
    }
  }
  return { recorder: new LedgerJudgeRecorder(ledgerHome.ledgerSigningAs(['runtime', 'judge'])), snapshots: new SnapshotStoreAdapter(snapshotHome) };
}

/** Where a home's Judges keep their files and how they run (ASSAY_JUDGE_PROC read here, when a Judge is composed). */
export function judgeHostSettings(home: string, o: Pick<JudgeRuntimeOptions, 'hostCpus' | 'judgeRuntimeDir' | 'procVisibility'> = {}): JudgeHostSettings {
  return {
    judgesDir: join(home, 'judges'),
    imageLogsDir: join(home, 'images', 'logs'),
    homeTag: homeTag(home),
    hostCpus: o.hostCpus ?? availableParallelism(),
    judgeRuntimeDir: o.judgeRuntimeDir ?? join(assayRoot(), 'task-runtime', 'judge'),
    procVisibility: o.procVisibility ?? procVisibilityFromEnv(),
  };
}

/**
 * A JudgeRuntime over parts already opened (a home's ledger and snapshot store), composed as JudgeModule composes
 * one (`composeJudge` of @assay/judge over `judgePortsOf` and `judgeHostSettings`). `release` is what its close()
 * does; nothing by default, since the parts' owner closes them.
 */
export function composeJudgeRuntime(parts: JudgeRuntimeParts, release: () => Promise<void> = async () => undefined): JudgeRuntime {
  const { ledgerHome, snapshotHome, containers, clock, ids } = parts;
  const home = ledgerHome.paths.home;
  const ports = { ...judgePortsOf(ledgerHome, snapshotHome), owners: parts.owners ?? new ProcessOwnerRegistry() };
  const judge = composeJudge({
    runtime: containers,
    ports,
    clock,
    ids,
    host: judgeHostSettings(home, parts),
    progress: parts.progress ?? silentProgress,
  });
  return new JudgeRuntime(home, containers, ledgerHome, snapshotHome, judge, parts.outputCapBytes, release);
}

/**
 * A JudgeRuntime of its own over `o.home`: opens the home's ledger and snapshot store (closed by its close()), with
 * the system's clock, random ids and the dockerode adapter unless given. For a home no module holds (a task check's
 * scratch home, a test); RuntimeModule's commands use the module's (`RuntimeUseCaseOptions.judgeRuntime`).
 */
export async function openJudgeRuntime(o: JudgeRuntimeOptions): Promise<JudgeRuntime> {
  const home = resolve(o.home);
  const clock = o.clock ?? systemClock;
  const ids = o.ids ?? randomIds;
  const ledgerHome = new LedgerHome(home, { clock, ids });
  let snapshotHome: SnapshotHome | null = null;
  try {
    snapshotHome = new SnapshotHome(home, { clock });
    const opened = snapshotHome;
    return composeJudgeRuntime({ ...o, ledgerHome, snapshotHome: opened, containers: o.containers ?? new DockerodeRuntime(), clock, ids }, async () => {
      await opened.close();
      await ledgerHome.close();
    });
  } catch (e) {
    await snapshotHome?.close();
    await ledgerHome.close();
    throw e;
  }
}

/** What a runtime use case is composed with (RuntimeModule binds the clock, the ids and the container runtime). */
export interface RuntimeUseCaseOptions {
  readonly home: string;
  readonly clock?: Clock;
  readonly ids?: IdGenerator;
  readonly containers?: ContainerRuntime;
  readonly progress?: Progress;
  /** The module's JudgeRuntime for this call (RuntimeModule binds it); absent: the use case opens its own. */
  readonly judgeRuntime?: JudgeRuntimeSource;
}

/** A JudgeRuntime over a module's opened parts, with this call's progress display; closing it closes nothing shared. */
export type JudgeRuntimeSource = (o: { readonly progress?: Progress }) => Promise<JudgeRuntime>;

/** What a sweep of dead judging processes removed. */
export type JudgeSweep = Awaited<ReturnType<JudgeRunner['sweep']>>;

/**
 * The JudgeRuntime of a use case: the module's (`o.judgeRuntime`, over RuntimeModule's ledger and store) when the
 * use case is dispatched, else one of its own over `o.home`.
 */
export function judgeRuntimeFor(o: RuntimeUseCaseOptions): Promise<JudgeRuntime> {
  const { judgeRuntime, ...own } = o;
  if (judgeRuntime) return judgeRuntime(o.progress ? { progress: o.progress } : {});
  return openJudgeRuntime(own);
}
