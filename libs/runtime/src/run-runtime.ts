/**
 * The research run with real Docker (docs/run.md): the composition root of `assay run`.
 *
 *   JudgeRuntime (images, JudgeRunner, snapshot store, ledger)  ─┐
 *   Work container (first process waits on the lifeline fifo, so Work stops when this controller dies; labels
 *   org.assay.role=work, org.assay.run=<id>; task limits, network none, cap-drop ALL; split mode: the agent's
 *   unprivileged user, read-only root, /tmp and /var/tmp tmpfs of the task's storage: work-containment.ts)
 *     <home>/runs/<id>/workspace  → workdir (seeded from the work image's workdir, else the task's environment/workspace;
 *                                   during a session from <run>/workfs, a loop-mounted file system of storage_mb)
 *     <home>/runs/<id>/sock       → /run/assay (submit.sock, token 0400), read-only
 *     <home>/runs/<id>/logs       → /logs/assay (each round's Judge log), read-only
 *     task-runtime/rsi-submit     → /usr/local/bin/rsi-submit, read-only
 *     the agent's directory       → /opt/assay/agent, read-only (reference agent)
 *     task-runtime/egress/...     → /usr/local/bin/assay-egress-forward, read-only (vendor agents: work-egress.ts;
 *                                   the egress proxy listens on sock/egress.sock, Work keeps network none)
 *   SubmissionService (start/resume) + SubmitEndpoint (Unix socket) + real adapters:
 *     WorkControl = ContainerWorkControl (docker pause/unpause through the container port),
 *     Snapshotter = SnapshotHome over the workspace dir,
 *     JudgePort = JudgeRunner.judge(prepared, cid, {run, round}).
 *   The agent runs as `docker exec` in Work (ContainerRuntime.exec), its output escaped and marked line by line, and
 *   is supervised by superviseAgent (libs/run): when it exits (or what is left of the agent-time/wall budget runs out,
 *   or SIGINT), the run completes with its selection and the Work container is killed and removed (never unpaused).
 *
 * This file prepares (images, the run's directory, workspace and token, Work's container spec, the agent's command)
 * and ends the controller (transcripts, the last checkpoint); one controller session, from creating Work to removing
 * it, is runWorkSession (libs/run/src/application/work-session.ts), given the ports and hooks built here.
 */
import {
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
  writeSync,
  chmodSync,
  chownSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { hostname } from 'node:os';
import { createHash } from 'node:crypto';
import { AssayError, escapeTerminalText, isAssayError, MarkedLineStream, randomIds, systemClock, type Clock, type IdGenerator } from '@assay/core';
import { DockerodeRuntime, remapsUsers, type ContainerRuntime, type ContainerSpec } from '@assay/containers';
import { parseCid } from '@assay/snapshots';
import type { SnapshotHome } from '@assay/snapshots';
import type { PreparedTask, JudgeRunner } from '@assay/judge';
import {
  buildRunRules,
  generateRunToken,
  LedgerRunLedger,
  readRunTaskSettings,
  roundView,
  SubmitEndpoint,
  taskIdOf,
  parseAgent,
  publicLaunch,
  AGENT_MOUNT,
  type Agent,
  type AgentLaunchSpec,
  redactErrorSecrets,
  SecretStreamRedactor,
  tokenSha256,
  runWorkSession,
  removeLeftoverContainers,
  type WorkSessionPlan,
  type JudgeOutcome,
  type JudgePort,
  type JudgeRequest,
  type RoundView,
  type RunState,
  type Snapshotter,
  type SnapshotRequest,
  type WorkspaceChange,
  type WorkspaceSnapshot,
  ContainerWorkControl,
  recordTranscripts,
  type TranscriptFacts,
  RUN_CANCEL_REQUEST,
  type GpuProbe,
  type GpuRuntimeCheck,
  type RunLedger,
  type ProbedGpu,
} from '@assay/run';
import { type RunSettingsOverrides } from '@assay/task-format';
import type { LedgerHead } from '@assay/ledger';
import { runFingerprint } from './run-fingerprint';
import { judgeRuntimeFor, homeTag, type JudgeRuntime, type JudgeRuntimeSource, type LoadedTask } from './judge-runtime';
import { assayRoot } from './repo-paths';
import { acquireControllerLock } from './controller-lock';
import { carryOverRootfsWork, removeCarriedImages } from './rootfs-carry-over';
import { ContainerSnapshotter, rootfsSnapshotPolicy } from './rootfs-snapshotter';
import { GpuPool, PooledJudge, planTaskGpus, planUsesGpus, recordWorkGpuUse, workGpuSpec } from './gpu-pool';
import { DockerGpuRuntimeCheck, NvidiaSmiGpuProbe, daemonInfoOf } from './gpu-host';
import { checkAgentBinary, planWorkEgress, startEgressProxy, stopEgressProxy } from './work-egress';
import {
  agentIdentity,
  claimWorkspace,
  ensurePrivateDir,
  LIFELINE_CMD,
  mountBoundedWorkspace,
  openLifeline,
  startWorkWarden,
  recoverBoundedWorkspace,
  stripSetIdBits,
  type BoundedWorkspace,
  type Lifeline,
  type WorkWarden,
} from './work-containment';

export const WORK_LABELS = { role: 'org.assay.role', run: 'org.assay.run', home: 'org.assay.home' } as const;
/** Work's tmpfs size (each of /tmp and /var/tmp) when the task sets no `storage_mb`. */
export const DEFAULT_STORAGE_MB = 1024;
/** Periodic snapshots of a controller session that stay pinned (besides the baseline and every round's). */
export const PERIODIC_SNAPSHOTS_KEPT = 3;
/** Seconds between records of the agent's time while it runs. */
export const AGENT_TIME_RECORD_SEC = 30;
/** Work's process limit. */
export const WORK_PIDS_LIMIT = 512;
/**
 * Seconds between measurements of a full-rootfs Work's writable layer (`docker inspect --size`: SizeRw) against the
 * task's storage_mb. Docker walks the layer to measure it, so this is not done often: the bound is checked, not
 * enforced by the kernel, and an agent can write for up to this long past it (docs/run.md, "Containment").
 */
export const ROOTFS_WRITE_CHECK_SEC = 10;

/** The reference agent's directory (examples/agents/reference-agent). */
export function referenceAgentDir(): string {
  return join(assayRoot(), 'examples', 'agents', 'reference-agent');
}

/** Parses `--agent` (reference, command:<cmd>, codex[:model], claude-code[:model]); throws on a bad spec. */
export function agentOf(spec: string): Agent {
  return parseAgent(spec, { referenceDir: referenceAgentDir() });
}

export interface RunRoundLine {
  readonly round: number;
  readonly status: string;
  readonly score: number | null;
  readonly rule: string | null;
  readonly detail: string | null;
}

export interface RunReport {
  readonly run: string;
  readonly task: string;
  readonly status: string;
  readonly bestRound: number | null;
  readonly bestScore: number | null;
  readonly bestSnapshot: string | null;
  readonly rounds: RunRoundLine[];
  readonly agentExitCode: number | null;
  readonly dir: string;
  readonly timings: { readonly totalMs: number; readonly agentMs: number; readonly judgeMs: number; readonly snapshotMs: number };
}

export interface RunStartOptions {
  /**
   * The run's time and ids: what its events say (and the budgets measured against them: agent and wall time), the
   * phases' durations, the run id when none is given. The system's by default; tests give a ManualClock.
   */
  readonly clock?: Clock;
  readonly ids?: IdGenerator;
  readonly home: string;
  readonly taskDir: string;
  /** `--agent` as given: reference, command:<cmd>, codex[:model], claude-code[:model]. */
  readonly agent: string;
  readonly overrides?: RunSettingsOverrides;
  readonly runId?: string;
  /** Progress lines (stderr in the CLI). */
  readonly log?: (line: string) => void;
  /**
   * Agent output (stdout/stderr of the exec): whole lines, secrets redacted, every control character shown as an
   * escape (escapeTerminalText) and every line marked `agent| ` (AGENT_LINE_PREFIX): safe to write to a terminal.
   */
  readonly agentOutput?: (chunk: Buffer) => void;
  /** Aborting cancels the run (SIGINT). */
  readonly signal?: AbortSignal;
  /** Seconds between periodic workspace snapshots (SnapshotTaken without a round); 0 disables; default 60. */
  readonly snapshotIntervalSec?: number;
  /**
   * Seconds between checkpoints signed while the run goes on, when events were appended since the last one (so the
   * read models, the API's live views and the web pages follow the run: they show only what a signed checkpoint
   * covers); 0 disables; default 10. The run's end always signs one.
   */
  readonly checkpointIntervalSec?: number;
  /** Seconds between measurements of a full-rootfs Work's writes against storage_mb; default ROOTFS_WRITE_CHECK_SEC. */
  readonly rootfsWriteCheckSec?: number;
  /** `--gpus LIST`, parsed (parseGpuList): the host GPUs this run may use; default none (on resume: run.json's). */
  readonly gpus?: readonly string[];
  /**
   * `--allow-root-agent`: a full-rootfs task's agent may run as root in Work although the Docker daemon does not remap
   * users (docs/run.md, "Containment"); kept in run.json, so a resume keeps the choice. Without it such a run is
   * refused before anything starts (RUN_ROOT_AGENT_REFUSED).
   */
  readonly allowRootAgent?: boolean;
  /**
   * `--allow-unbounded-workspace`: a split-mode run may go on where its workspace cannot be bounded by the task's
   * storage_mb (a controller that is not root, or outside the Docker daemon's mount namespace, or without mkfs.ext4
   * or loop devices); kept in run.json, so a resume keeps the choice. Without it such a run is refused
   * (RUN_WORKSPACE_UNBOUNDED), a new one leaving nothing behind.
   */
  readonly allowUnboundedWorkspace?: boolean;
  /**
   * A GPU run's check that the Docker daemon can give containers NVIDIA GPUs (docs/run.md, "GPUs"), before anything
   * starts; default DockerGpuRuntimeCheck (`docker info`). Tests pass FakeGpuRuntimeCheck.
   */
  readonly gpuRuntimeCheck?: GpuRuntimeCheck;
  /** A GPU run's probe of the host's GPUs behind `--gpus`, recorded as GpusProbed; default NvidiaSmiGpuProbe. */
  readonly gpuProbe?: GpuProbe;
  /**
   * The container runtime for Work and the Judges; default DockerodeRuntime. Tests of GPU tasks on machines without
   * a GPU pass SimulatedGpuDockerRuntime (@assay/containers' testing entry); a whole run on the in-memory
   * FakeContainerRuntime is tests/run/run-fake-runtime.int.spec.ts.
   */
  readonly containers?: ContainerRuntime;
  /**
   * Ties Work's container to this controller from outside: given Work's id, closed when the session ends (or by
   * this process's death). Default startWorkWarden, a detached process that kills the container through Docker;
   * a run on another container runtime passes its own.
   */
  readonly workWarden?: (workId: string) => WorkWarden;
  /** The module's JudgeRuntime (RuntimeModule binds it: its ledger and store); absent: one opened over `home`. */
  readonly judgeRuntime?: JudgeRuntimeSource;
  /**
   * Where the run's events go (RuntimeModule binds RunModule's, over the module's ledger), asked for when the run
   * opens; absent: a LedgerRunLedger over the JudgeRuntime's ledger (the same ledger).
   */
  readonly runLedger?: () => Promise<RunLedger>;
}

interface RunMeta {
  readonly run: string;
  readonly taskDir: string;
  /** The --agent spec (never a secret: keys are read from the environment when the agent starts). */
  readonly agent: string;
  /** `--gpus` as given at the start (host device ids). */
  readonly gpus?: readonly string[];
  /** `--allow-root-agent` given at the start. */
  readonly allowRootAgent?: boolean;
  /** `--allow-unbounded-workspace` given at the start. */
  readonly allowUnboundedWorkspace?: boolean;
}

function runPaths(home: string, run: string) {
  const dir = join(resolve(home), 'runs', run);
  return { dir, workspace: join(dir, 'workspace'), sock: join(dir, 'sock'), logs: join(dir, 'logs'), agent: join(dir, 'agent'), meta: join(dir, 'run.json') };
}

/** A controller session keeps at most this much of the agent's output (after the cap, a line says how much was dropped). */
export const MAX_TRANSCRIPT_BYTES = 16 * 1024 * 1024;

/**
 * The agent's transcript of one controller session, `<run>/agent/session-<n>.log`: its stdout and stderr as they came
 * (secrets already redacted), interleaved in arrival order, at most MAX_TRANSCRIPT_BYTES. `assay run logs` shows it.
 */
export class AgentTranscript {
  private fd: number | null;
  private kept = 0;
  private dropped = 0;
  private readonly hash = createHash('sha256');
  private digest = '';
  readonly path: string;
  readonly session: number;

  constructor(dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.session = readdirSync(dir).filter((f) => TRANSCRIPT_FILE_RE.test(f)).length + 1;
    this.path = join(dir, `session-${this.session}.log`);
    this.fd = openSync(this.path, 'wx', 0o600);
  }

  write(chunk: Buffer | string): void {
    if (this.fd === null) return;
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const room = Math.max(MAX_TRANSCRIPT_BYTES - this.kept, 0);
    const part = b.subarray(0, Math.min(room, b.length));
    if (part.length > 0) {
      writeSync(this.fd, part);
      this.hash.update(part);
    }
    this.kept += part.length;
    this.dropped += b.length - part.length;
  }

  /** Closes the file (the cut line written when output was dropped): what was kept and its digest. */
  close(): TranscriptFacts & { path: string } {
    if (this.fd !== null) {
      if (this.dropped > 0) {
        const cut = Buffer.from(`\n[assay: transcript cut at ${MAX_TRANSCRIPT_BYTES} bytes; ${this.dropped} more bytes of agent output were not kept]\n`);
        writeSync(this.fd, cut);
        this.hash.update(cut);
      }
      closeSync(this.fd);
      this.fd = null;
      this.digest = `sha256:${this.hash.digest('hex')}`;
    }
    return { path: this.path, session: this.session, digest: this.digest, bytes: this.kept, dropped: this.dropped, recovered: false };
  }
}

const TRANSCRIPT_FILE_RE = /^session-(\d+)\.log$/;

/**
 * The transcripts of earlier sessions of this run that the ledger has not recorded (their controller was killed):
 * their files as they are now, to be recorded as `recovered`.
 */
function strayTranscripts(dir: string, mine: ReadonlySet<number>): TranscriptFacts[] {
  if (!existsSync(dir)) return [];
  const out: TranscriptFacts[] = [];
  for (const f of readdirSync(dir)) {
    const m = TRANSCRIPT_FILE_RE.exec(f);
    if (!m || mine.has(Number(m[1]))) continue;
    const bytes = readFileSync(join(dir, f));
    out.push({ session: Number(m[1]), digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, bytes: bytes.length, dropped: 0, recovered: true });
  }
  return out;
}

/** Snapshots of the run's workspace directory into the store under ASSAY_HOME (no events: the run records them). */
export class WorkspaceSnapshotter implements Snapshotter {
  ms = 0;
  /** Setuid/setgid bits cleared in the workspace after snapshots. */
  stripped = 0;
  constructor(
    private readonly home: SnapshotHome,
    private readonly dir: string,
    private readonly clock: Clock = systemClock,
  ) {}

  async snapshot(_req: SnapshotRequest): Promise<WorkspaceSnapshot> {
    const t = this.clock.now().getTime();
    const r = await this.home.create(this.dir, { previous: null, label: null });
    // Work is frozen while this runs: clear setuid/setgid bits the agent set (snapshots never record them)
    this.stripped += stripSetIdBits(this.dir).length;
    this.ms += this.clock.now().getTime() - t;
    return {
      root: r.rootCid,
      files: r.files,
      bytes: r.bytes,
      durationMs: r.durationMs,
      policyDigest: r.policyDigest,
      source: this.dir,
      flagged: r.outsideSymlinks.slice(0, 100),
    };
  }

  async *changes(from: string, to: string): AsyncIterable<WorkspaceChange> {
    for await (const c of this.home.diff(parseCid(from), parseCid(to))) {
      yield { path: c.path, change: c.change, kind: c.kind, sizeBefore: c.sizeBefore, sizeAfter: c.sizeAfter };
    }
  }
}

/** The JudgePort over JudgeRunner: one fresh Judge per round; its log is copied where Work reads it. */
export class RunnerJudge implements JudgePort {
  ms = 0;
  constructor(
    private readonly runner: JudgeRunner,
    private readonly prepared: PreparedTask,
    private readonly logsDir: string,
    private readonly clock: Clock = systemClock,
  ) {}

  async judge(req: JudgeRequest): Promise<JudgeOutcome> {
    const t = this.clock.now().getTime();
    const onAbort = () => void this.runner.cancel('the run was cancelled');
    req.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const r = await this.runner.judge(this.prepared, req.snapshot, { run: req.run, round: req.round }, { gpus: req.gpus ?? [] });
      const name = `round-${req.round}.log`;
      let log: string | null = null;
      try {
        copyFileSync(r.output.path, join(this.logsDir, name));
        chmodSync(join(this.logsDir, name), 0o444);
        log = `/logs/assay/${name}`;
      } catch {
        log = null;
      }
      return { judge: r.judge, status: r.status, rewards: r.rewards, primaryScore: r.primaryScore, detail: r.detail, log, gpuSeconds: 0 };
    } finally {
      req.signal?.removeEventListener('abort', onAbort);
      this.ms += this.clock.now().getTime() - t;
    }
  }
}

/** Copies the work image's workdir into the host workspace directory (a short-lived container, network none). */
async function seedFromImage(rt: JudgeRuntime, image: string, workdir: string, dest: string, run: string): Promise<boolean> {
  if (workdir === '/') return false;
  const id = await rt.containers.createContainer({
    image,
    cmd: ['sh', '-c', 'if [ -d "$0" ]; then cp -a "$0"/. /assay-seed/; else exit 3; fi', workdir],
    entrypoint: [],
    env: {},
    labels: { [WORK_LABELS.role]: 'seed', [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(rt.home) },
    mounts: [{ type: 'bind', source: dest, target: '/assay-seed', readOnly: false }],
    networkMode: 'none',
    readOnlyRootfs: false,
    capDrop: ['ALL'],
    capAdd: ['CHOWN', 'FOWNER', 'DAC_OVERRIDE'],
    noNewPrivileges: true,
    pidsLimit: 64,
    memoryBytes: 256 * 1048576,
    nanoCpus: 1e9,
    init: false,
    openStdin: false,
  });
  return runToCompletion(rt, id, 120_000);
}

/** Starts a created helper container, waits for it, removes it: whether it exited 0 within `timeoutMs`. */
async function runToCompletion(rt: JudgeRuntime, id: string, timeoutMs: number): Promise<boolean> {
  try {
    await rt.containers.start(id, { onOutput: () => undefined });
    const w = await rt.containers.wait(id, timeoutMs);
    return w.exited && w.exitCode === 0;
  } finally {
    await rt.containers.removeContainer(id).catch(() => undefined);
  }
}

/**
 * A short-lived container of the run's own that asks the daemon one question (labelled `seed`, so a dead controller's
 * is swept with the run's): no network, no capability, a read-only root, small limits.
 */
function probeSpec(rt: JudgeRuntime, image: string, run: string, o: Pick<ContainerSpec, 'cmd' | 'mounts' | 'rootfsSizeBytes'>): ContainerSpec {
  return {
    image,
    entrypoint: [],
    env: {},
    labels: { [WORK_LABELS.role]: 'seed', [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(rt.home) },
    networkMode: 'none',
    readOnlyRootfs: true,
    capDrop: ['ALL'],
    capAdd: [],
    noNewPrivileges: true,
    pidsLimit: 16,
    memoryBytes: 64 * 1048576,
    nanoCpus: 1e9,
    init: false,
    openStdin: false,
    ...o,
  };
}

/**
 * Whether the daemon's storage driver can bound a container's writable layer (Docker's `--storage-opt size`; overlay2
 * on XFS with project quotas can): a container created with the limit and never started, then removed.
 */
async function daemonLimitsWritableLayer(rt: JudgeRuntime, image: string, run: string, bytes: number): Promise<boolean> {
  let id: string;
  try {
    id = await rt.containers.createContainer(probeSpec(rt, image, run, { cmd: ['true'], mounts: [], rootfsSizeBytes: bytes }));
  } catch (e) {
    if (isAssayError(e) && e.code === 'CONTAINER_STORAGE_QUOTA_UNSUPPORTED') return false;
    throw e;
  }
  await rt.containers.removeContainer(id).catch(() => undefined);
  return true;
}

/** Whether a container bind-mounting `dir` sees what is in it here (a marker file), i.e. the daemon sees our mounts. */
async function daemonSeesMount(rt: JudgeRuntime, image: string, dir: string, run: string): Promise<boolean> {
  const marker = `.assay-mount-check-${randomIds.next().slice(0, 8)}`;
  writeFileSync(join(dir, marker), '');
  try {
    const id = await rt.containers.createContainer(
      probeSpec(rt, image, run, {
        cmd: ['test', '-e', `/assay-check/${marker}`],
        mounts: [{ type: 'bind', source: dir, target: '/assay-check', readOnly: true }],
      }),
    );
    return await runToCompletion(rt, id, 60_000);
  } catch {
    return false;
  } finally {
    rmSync(join(dir, marker), { force: true });
  }
}

/** Kills and removes this run's leftover Work and seed containers (a dead controller's). */
function removeRunContainers(rt: JudgeRuntime, run: string): Promise<string[]> {
  const mine = { [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(rt.home) };
  return removeLeftoverContainers(rt.containers, [
    { [WORK_LABELS.role]: 'work', ...mine },
    { [WORK_LABELS.role]: 'seed', ...mine },
  ]);
}

function rounds(s: RunState): RunRoundLine[] {
  return s.rounds.map((r) => {
    const v: RoundView = roundView(s, r);
    return { round: v.round, status: v.status, score: v.score, rule: v.rule, detail: v.detail };
  });
}

/** Starts a new run (or resumes one when `resume` is set) and drives it to completion. */
export async function runResearch(o: RunStartOptions & { resume?: boolean }): Promise<RunReport> {
  const clock = o.clock ?? systemClock;
  const ids = o.ids ?? randomIds;
  const nowMs = () => clock.now().getTime();
  const t0 = nowMs();
  // Progress lines may quote what the agent chose (file names in a snapshot error, egress targets): one line each,
  // escaped, so they can neither act on the terminal nor start a line of their own.
  const log = (line: string) => o.log?.(escapeTerminalText(line, { newlines: true }));
  const home = resolve(o.home);
  // One container runtime for the whole run: the GPU check, the Judges and Work (the dockerode adapter by default).
  const containers = o.containers ?? new DockerodeRuntime();
  const run = o.runId ?? `run-${ids.next().slice(0, 8)}`;
  const p = runPaths(home, run);
  let meta: RunMeta;
  if (o.resume) {
    if (!existsSync(p.meta))
      throw new AssayError('RUN_NOT_FOUND', 'not_found', `run ${run}: ${p.meta} does not exist (nothing to resume in ${home})`, { details: { run, home } });
    meta = JSON.parse(readFileSync(p.meta, 'utf8')) as RunMeta;
  } else {
    if (existsSync(p.dir))
      throw new AssayError('RUN_EXISTS', 'conflict', `run ${run} already exists in ${p.dir}; use --resume ${run}`, { details: { run, dir: p.dir } });
    meta = {
      run,
      taskDir: resolve(o.taskDir),
      agent: o.agent,
      ...(o.gpus?.length ? { gpus: [...o.gpus] } : {}),
      ...(o.allowRootAgent ? { allowRootAgent: true } : {}),
      ...(o.allowUnboundedWorkspace ? { allowUnboundedWorkspace: true } : {}),
    };
  }
  // GPUs: a task that needs more than --gpus gives is refused before anything starts (no image, no container, no event)
  const gpuPlan = await planTaskGpus(meta.taskDir, o.gpus ?? meta.gpus ?? []);
  // A GPU run: the daemon must be able to give containers GPUs (NVIDIA Container Toolkit), and every --gpus id must be
  // a GPU this host has (nvidia-smi); both before anything starts. The probe is recorded (GpusProbed) once the run
  // stream is open, in every controller session: a resume may run on another node, or after the GPUs changed.
  let probed: ProbedGpu[] | null = null;
  const node = hostname();
  if (planUsesGpus(gpuPlan)) {
    const support = await (o.gpuRuntimeCheck ?? new DockerGpuRuntimeCheck(daemonInfoOf(containers))).check(gpuPlan.available);
    probed = await (o.gpuProbe ?? new NvidiaSmiGpuProbe()).probe(gpuPlan.available);
    log(
      `GPUs on ${node} (${support.via === 'runtime' ? 'Docker runtime "nvidia"' : `CDI spec ${join(support.dir, support.file)}`}): ${probed
        .map((g) => `${g.device} = ${g.uuid} ${g.model}${g.memoryMiB !== null ? ` ${g.memoryMiB} MiB` : ''}`)
        .join('; ')}; driver ${probed[0]?.driver ?? '?'}, CUDA ${probed[0]?.cuda ?? 'N/A'}`,
    );
  }
  // Run directories are private to the operator (0700): the workspace holds what the agent wrote, the sock/
  // directory its token. A group/other-accessible ASSAY_HOME is made private (logged); one owned by another user is
  // refused (RUN_HOME_UNSAFE).
  ensurePrivateDir(home, 'ASSAY_HOME', log);
  ensurePrivateDir(join(home, 'runs'), 'the runs directory', log);
  ensurePrivateDir(p.dir, 'the run directory', log);
  // One live controller per run: taken before anything of the run (containers, sockets, workspace) is touched, so a
  // resume never removes the containers of a controller that is still running.
  const lock = acquireControllerLock(p.dir);
  if (lock.tookOver) log(`controller pid ${lock.tookOver.pid} (since ${lock.tookOver.since}) is gone; taking the run over`);
  // A cancel asked of an earlier controller that ended before acting on it does not cancel this one.
  rmSync(join(p.dir, RUN_CANCEL_REQUEST), { force: true });
  try {
    const rt = await judgeRuntimeFor({ home, clock, ids, containers, ...(o.judgeRuntime ? { judgeRuntime: o.judgeRuntime } : {}) });
    const work: { id: string | null } = { id: null }; // Work's container, once the session created it
    let secrets: AgentLaunchSpec | null = null; // whose values never leave in an error message
    const transcripts: AgentTranscript[] = [];
    let lifeline: Lifeline | null = null;
    let liveCheckpoints: { stop(): Promise<void> } | null = null;
    let bounded: BoundedWorkspace | null = null;
    let task0: LoadedTask | null = null;
    try {
      await rt.containers.ping();
      await rt.runner.sweep();
      log(`task ${meta.taskDir}: building or reusing images`);
      const task: LoadedTask = await rt.loadTask(meta.taskDir, { metric: o.overrides?.primaryMetric ?? null, hostEnv: process.env, gpusFromPool: true });
      task0 = task;
      // Full-rootfs Work runs the agent as root (it installs packages, edits /etc): only where that root is not the
      // host's (a daemon with user-namespace remapping), or where the operator said so; before anything starts.
      const remapped = task.prepared.rootfs ? remapsUsers(await rt.containers.daemonInfo()) : false;
      if (task.prepared.rootfs && !remapped && !(o.allowRootAgent || meta.allowRootAgent))
        throw new AssayError(
          'RUN_ROOT_AGENT_REFUSED',
          'refused',
          `task ${meta.taskDir} is a full-rootfs task (workdir "/"): its agent runs as root in Work, and this Docker daemon does not remap users (no userns-remap), so that root would be the host's uid 0 inside the container; run the daemon with userns-remap, or pass --allow-root-agent to accept it (docs/run.md, "Containment")`,
          { details: { run, task: meta.taskDir } },
        );
      // full-rootfs resume: the old Work's file system is the agent's work; carry it over before its container goes
      const carried =
        o.resume && task.prepared.rootfs
          ? await carryOverRootfsWork(rt.containers, WORK_LABELS, {
              run,
              homeTag: homeTag(home),
              workImage: task.images.work.id,
              stop: (id) => rt.containers.kill(id).catch(() => undefined),
              log,
              clock,
            })
          : null;
      const removed = await removeRunContainers(rt, run);
      if (removed.length) log(`removed ${removed.length} leftover Work container(s) of ${run}`);
      await removeCarriedImages(rt.containers, WORK_LABELS, { run, homeTag: homeTag(home), ...(carried ? { keep: carried.image } : {}) });
      const workImage = carried?.image ?? task.images.work.id;
      const plan = task.plan;
      const workdir = task.prepared.workdir;
      const agent = agentOf(meta.agent).launch({ workdir, instruction: plan.instruction, operatorEnv: process.env });
      secrets = agent;
      const egress = planWorkEgress(agent); // vendor agents: Work stays network none, CONNECT proxy on a Unix socket
      log(`agent ${JSON.stringify(publicLaunch(agent).argv.slice(0, 3))} env ${JSON.stringify(publicLaunch(agent).env)}`);

      // Inside the private run directory; Work's user must enter them (mounted read-only at /logs/assay, /run/assay).
      mkdirSync(p.logs, { recursive: true });
      chmodSync(p.logs, 0o755);
      mkdirSync(p.sock, { recursive: true, mode: 0o755 });
      chmodSync(p.sock, 0o755);
      const ident = agentIdentity();
      const tokenFile = join(p.sock, 'token');
      let token: string;
      if (o.resume) {
        token = readFileSync(tokenFile, 'utf8').trim();
      } else {
        mkdirSync(p.workspace, { recursive: true });
        const seeded = await seedFromImage(rt, task.images.work.id, workdir, p.workspace, run).catch((e: unknown) => {
          log(`could not copy ${workdir} out of the work image (${e instanceof Error ? e.message : String(e)})`);
          return false;
        });
        const seed = join(meta.taskDir, 'environment', 'workspace');
        if (!seeded && existsSync(seed)) cpSync(seed, p.workspace, { recursive: true });
        log(`workspace ${p.workspace} seeded from ${seeded ? `the work image's ${workdir}` : existsSync(seed) ? seed : 'nothing (empty)'}`);
        const t = generateRunToken();
        token = t.token;
        writeFileSync(tokenFile, `${token}\n`, { mode: 0o400 });
        writeFileSync(p.meta, `${JSON.stringify(meta, null, 2)}\n`);
      }
      const storageBytes = (task.plan.environment.storageMb ?? DEFAULT_STORAGE_MB) * 1048576;
      const rootfsCheckSec = o.rootfsWriteCheckSec ?? ROOTFS_WRITE_CHECK_SEC;
      let workDir = p.workspace; // where the agent's workspace lives during this session (split mode)
      if (!task.prepared.rootfs) {
        // the token is readable by the agent's user only; the workspace is the agent's user's, without setuid/setgid bits
        if ((process.getuid?.() ?? 0) === 0) chownSync(tokenFile, ident.uid, ident.gid);
        if (o.resume) recoverBoundedWorkspace(p.dir, p.workspace, log);
        const claimed = claimWorkspace(p.workspace, ident);
        if (claimed.stripped.length)
          log(`cleared setuid/setgid bits of ${claimed.stripped.length} workspace path(s): ${claimed.stripped.slice(0, 5).join(', ')}`);
        // the workspace bounded by the task's storage for this session (a loop-mounted file system); where it cannot
        // be, the run is refused unless the operator allowed an unbounded workspace
        const mounted = mountBoundedWorkspace(p.dir, p.workspace, storageBytes, ident, log);
        let unbounded = 'unbounded' in mounted ? mounted.unbounded : null;
        if (!('unbounded' in mounted)) {
          if (await daemonSeesMount(rt, task.images.work.id, mounted.dir, run)) bounded = mounted;
          else {
            // a daemon in another mount namespace would bind the empty directory under the mount: never use it then
            mounted.release();
            unbounded = 'the Docker daemon does not see mounts made here (the controller runs in another mount namespace)';
          }
        }
        if (unbounded !== null) {
          if (!(o.allowUnboundedWorkspace || meta.allowUnboundedWorkspace)) {
            // nothing of a new run is recorded yet: without run.json its directory goes too, so its id can be used again
            if (!o.resume) rmSync(p.meta, { force: true });
            throw new AssayError(
              'RUN_WORKSPACE_UNBOUNDED',
              'refused',
              `run ${run}: the workspace cannot be bounded by the task's storage_mb (${Math.round(storageBytes / 1048576)} MiB): ${unbounded}; run the controller as root, in the Docker daemon's mount namespace, with mkfs.ext4 and loop devices, or pass --allow-unbounded-workspace to accept a workspace bounded only by the snapshot limits (docs/run.md, "Containment")`,
              { details: { run, why: unbounded } },
            );
          }
          log(`the workspace is not size-bounded (--allow-unbounded-workspace): ${unbounded}`);
        }
        if (bounded) workDir = bounded.dir;
      }

      // full-rootfs: the kernel bounds Work's writable layer where the storage driver can; elsewhere a check does
      const layerLimited = task.prepared.rootfs ? await daemonLimitsWritableLayer(rt, task.images.work.id, run, storageBytes) : false;
      if (task.prepared.rootfs)
        log(
          layerLimited
            ? `Work's file system is limited to the task's storage_mb (${Math.round(storageBytes / 1048576)} MiB) by the storage driver`
            : `Work's file system is bounded by a check every ${rootfsCheckSec} s, not by the kernel: this Docker daemon's storage driver cannot limit a container's writable layer (overlay2 can on XFS with project quotas)`,
        );

      const judge = new RunnerJudge(rt.runner, task.prepared, p.logs, clock);
      const gpuPool = new GpuPool(gpuPlan, clock);
      if (gpuPlan.available.length)
        log(
          `GPUs: Work ${gpuPlan.work.join(',') || 'none'}, each Judge ${gpuPlan.judge.join(',') || 'none'}${gpuPlan.handOver ? ' (hand-over: Work stays paused while a Judge runs)' : ''}`,
        );

      // Work (split mode: the agent's unprivileged user, read-only root, the workspace and size-bounded tmpfs mounts
      // /tmp and /var/tmp, the task's storage charged to Work's memory; full-rootfs mode: the root file system is the
      // agent's work, root and writable, exported into the store, which keeps no owners or setuid bits)
      const split = !task.prepared.rootfs;
      const cpus = plan.environment.cpus ?? 1;
      const memoryBytes = (plan.environment.memoryMb ?? 1024) * 1048576;
      const mounts = [
        ...(split ? [{ type: 'bind' as const, source: workDir, target: workdir, readOnly: false }] : []),
        { type: 'bind' as const, source: p.sock, target: '/run/assay', readOnly: true },
        { type: 'bind' as const, source: p.logs, target: '/logs/assay', readOnly: true },
        { type: 'bind' as const, source: join(assayRoot(), 'task-runtime', 'rsi-submit', 'rsi-submit'), target: '/usr/local/bin/rsi-submit', readOnly: true },
        ...(agent.mountDir ? [{ type: 'bind' as const, source: agent.mountDir, target: AGENT_MOUNT, readOnly: true }] : []),
        ...egress.mounts,
        ...(split
          ? [
              { type: 'tmpfs' as const, target: '/tmp', sizeBytes: storageBytes, mode: 0o1777 },
              { type: 'tmpfs' as const, target: '/var/tmp', sizeBytes: storageBytes, mode: 0o1777 },
            ]
          : []),
      ];
      const workSpec: ContainerSpec = {
        name: `assay-work-${homeTag(home)}-${run}`,
        image: workImage,
        cmd: LIFELINE_CMD, // Work stops when this controller dies: its first process reads the lifeline until end-of-file
        entrypoint: [],
        env: { HOME: '/tmp', ...task.prepared.env, ASSAY_WORKSPACE: workdir, ASSAY_RUN: run },
        workingDir: workdir,
        ...(split ? { user: `${ident.uid}:${ident.gid}` } : {}),
        labels: { [WORK_LABELS.role]: 'work', [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(home) },
        mounts,
        networkMode: 'none',
        readOnlyRootfs: split,
        capDrop: ['ALL'],
        capAdd: [],
        noNewPrivileges: true,
        pidsLimit: WORK_PIDS_LIMIT,
        memoryBytes,
        nanoCpus: Math.round(cpus * 1e9),
        init: true,
        openStdin: false,
        ...(layerLimited ? { rootfsSizeBytes: storageBytes } : {}),
        ...workGpuSpec(gpuPlan),
      };
      const workLimits = {
        cpus,
        memoryBytes,
        pidsLimit: WORK_PIDS_LIMIT,
        ...(split
          ? { user: `${ident.uid}:${ident.gid}`, readOnlyRootfs: true, tmpfsBytes: storageBytes, workspaceBytes: bounded ? storageBytes : null }
          : {
              user: '0:0',
              userNamespaceRemap: remapped,
              rootfsWriteBytes: storageBytes,
              rootfsWriteBound: layerLimited ? 'kernel' : 'checked',
              rootfsWriteCheckSec: rootfsCheckSec,
            }),
        ...egress.limits,
        ...(gpuPlan.work.length ? { gpus: [...gpuPlan.work] } : {}),
        ...(carried ? { carriedFrom: carried.from } : {}),
      };
      let open: WorkSessionPlan['open'] = { resume: true };
      if (!o.resume) {
        const runTask = readRunTaskSettings(plan.metadata);
        if (!runTask.ok) throw new Error(runTask.problems.join('\n'));
        // the same computation as `assay baseline` (run-fingerprint.ts), so matched baselines share the fingerprint
        const { settings, digests, input, fingerprint } = await runFingerprint({
          plan,
          taskDir: meta.taskDir,
          judgeImageDigest: task.images.judge.id,
          ...(o.overrides ? { overrides: o.overrides } : {}),
          digestDirectory: (d: string) => rt.snapshots.digestDirectory(d),
        });
        const { protocol, selection } = buildRunRules({
          settings,
          agentTimeoutSec: plan.agent.timeoutSec,
          editablePaths: runTask.value.editablePaths,
          tokenSha256: tokenSha256(token),
          fingerprintInput: input,
        });
        open = {
          resume: false,
          input: { run, task: taskIdOf(plan.name), taskDigest: digests.task, agent: agent.name, model: agent.model, fingerprint, protocol, selection },
        };
      }
      // The agent's output: secrets redacted, kept in this session's transcript, then escaped and marked line by line
      // (agentOutput's contract), so nothing it prints acts on the operator's terminal or passes for Assay's lines.
      let transcript: AgentTranscript | null = null;
      const redactors = new Map<string, SecretStreamRedactor>();
      const redactorOf = (s: string) => redactors.get(s) ?? redactors.set(s, new SecretStreamRedactor(agent)).get(s)!;
      const marked = new Map<string, MarkedLineStream>();
      const markedOf = (s: string) => marked.get(s) ?? marked.set(s, new MarkedLineStream()).get(s)!;
      const show = (text: string) => {
        if (text) o.agentOutput?.(Buffer.from(text));
      };
      let snapshotter: WorkspaceSnapshotter | ContainerSnapshotter | null = null;
      const sockPath = join(p.sock, 'submit.sock');
      liveCheckpoints = startLiveCheckpoints(rt.ledgerHome, (o.checkpointIntervalSec ?? 10) * 1000, log);
      lifeline = openLifeline(p.sock);
      const session = await runWorkSession(
        {
          containers: rt.containers,
          ledger: o.runLedger ? await o.runLedger() : new LedgerRunLedger(rt.ledgerHome.ledger),
          judge: new PooledJudge(judge, gpuPool),
          clock,
          ids,
          // full-rootfs mode (workdir "/"): no workspace directory; snapshots are `docker export`s of Work
          snapshotterFor: (id) =>
            (snapshotter = split
              ? new WorkspaceSnapshotter(rt.snapshotHome, workDir, clock)
              : new ContainerSnapshotter(rt.snapshotHome, rt.containers, () => id, rootfsSnapshotPolicy(), clock)),
          workControlFor: (id) => new ContainerWorkControl(rt.containers, id),
          listen: async (gateway) => {
            const endpoint = await SubmitEndpoint.listen({ socketPath: sockPath, gateway });
            chmodSync(sockPath, 0o666);
            return endpoint;
          },
          unpinSnapshot: async (root) => {
            await rt.snapshotHome.unpin(parseCid(root));
          },
          cancelRequested: () => existsSync(join(p.dir, RUN_CANCEL_REQUEST)),
          log,
        },
        {
          run,
          work: workSpec,
          workLimits,
          agent: { name: agent.name, argv: egress.launch.argv, env: egress.launch.env, workingDir: workdir },
          open,
          probed: probed ? { node, gpus: probed } : null,
          service: {
            // only a log that was written (a round ruled out before any Judge, e.g. workspace.not_editable, has none)
            logPathOf: (n: number) => (existsSync(join(p.logs, `round-${n}.log`)) ? `/logs/assay/round-${n}.log` : null),
            keepWorkPausedDuringJudge: gpuPlan.pauseWorkDuringJudge,
          },
          supervision: {
            snapshotIntervalSec: o.snapshotIntervalSec ?? 60,
            agentTimeRecordSec: AGENT_TIME_RECORD_SEC,
            cancelPollMs: CANCEL_POLL_MS,
            keepPeriodic: PERIODIC_SNAPSHOTS_KEPT,
            storageBytes,
            storageCheckSec: rootfsCheckSec,
            ...(o.signal ? { signal: o.signal } : {}),
          },
        },
        {
          // A Work paused when this controller dies cannot read its lifeline: the warden kills it from outside.
          guardWork: (id) => {
            work.id = id;
            return (o.workWarden ?? startWorkWarden)(id);
          },
          // a missing codex/claude fails before RunStarted
          checkWork: (id) => checkAgentBinary(rt.containers, id, agent, task.images.work.id),
          beforeAgent: async () => {
            transcripts.push((transcript = new AgentTranscript(p.agent)));
            const started = await startEgressProxy({ sockDir: p.sock, agent, log });
            return started ? { stop: async () => void (await stopEgressProxy(started, { runDir: p.dir, agent, log })) } : null;
          },
          agentOutput: (stream, chunk) => {
            const clean = agent.secretEnv.length ? redactorOf(stream).push(chunk) : chunk;
            transcript?.write(clean);
            show(markedOf(stream).push(clean));
          },
          agentStopped: () => {
            for (const [k, r] of redactors) show(markedOf(k).push(r.end()));
            for (const m of marked.values()) show(m.end());
          },
          gpus: {
            startWork: () => gpuPool.startWork(),
            secondsUntilExhausted: (left) => gpuPool.secondsUntilExhausted(left),
            stopWork: () => gpuPool.stopWork(),
            // Work's GPU-seconds since the last record: BudgetConsumed gpu_seconds {holder: work}
            record: (svc) => recordWorkGpuUse(gpuPool, svc),
          },
          // Full-rootfs Work writes into its container's own layer, on the host's disk: measured against storage_mb.
          writtenBytes: split ? null : (id) => rt.containers.writableLayerBytes(id),
        },
      );
      const snapshotMs = (snapshotter as { ms: number } | null)?.ms ?? 0;
      return report(run, session.state, session.agentExitCode, p.dir, { totalMs: nowMs() - t0, agentMs: session.agentMs, judgeMs: judge.ms, snapshotMs });
    } catch (e) {
      throw redactErrorSecrets(e, secrets);
    } finally {
      const kept = transcripts.map((t) => t.close());
      for (const k of kept)
        log(`agent transcript: ${k.path} (${k.bytes} bytes${k.dropped > 0 ? `, ${k.dropped} more not kept` : ''}, ${k.digest}); \`assay run logs ${run}\``);
      // Their digests go into the ledger (with those of earlier sessions whose controller was killed), before the
      // checkpoint below; a failure is reported, never hides the run's own outcome.
      if (existsSync(p.meta)) {
        const sessions = [...kept, ...strayTranscripts(p.agent, new Set(kept.map((k) => k.session)))];
        await recordTranscripts(rt.ledgerHome.ledger, run, sessions)
          .then((done) =>
            done.filter((d) => d.recovered).forEach((d) => log(`agent transcript of session ${d.session} recorded (its controller had ended without it)`)),
          )
          .catch((e: unknown) => log(`the agent transcripts' digests were not recorded: ${(e as Error).message}`));
      }
      // Work itself was killed and removed by the session; images carried over from an earlier Work go with it
      if (work.id) await removeCarriedImages(rt.containers, WORK_LABELS, { run, homeTag: homeTag(home) }).catch(() => undefined);
      lifeline?.close();
      // the bounded workspace goes back into workspace/ (Work is gone: nothing writes it any more)
      if (bounded) bounded.release();
      if (existsSync(p.workspace) && !task0?.prepared.rootfs) stripSetIdBits(p.workspace);
      await liveCheckpoints?.stop();
      // The run ended (completed, cancelled or failed): sign a checkpoint of the whole log, so the newest checkpoint
      // covers every event of the run. Only for a recorded run; a failure to sign is reported, never hides the run's.
      if (existsSync(p.meta))
        await rt.ledgerHome.ledger
          .checkpoint()
          .then((cp) => log(`checkpoint signed: ${cp.treeSize} events`))
          .catch((e: unknown) => log(`no checkpoint signed at the end of the run: ${(e as Error).message}`));
      await rt.close();
    }
  } finally {
    lock.release();
    // A new run that failed before it was recorded (a missing API key, an image that does not build) leaves nothing
    // behind, so its run id can be used again.
    if (!o.resume && !existsSync(p.meta)) rmSync(p.dir, { recursive: true, force: true });
  }
}

function report(run: string, s: RunState, agentExitCode: number | null, dir: string, timings: RunReport['timings']): RunReport {
  const c = s.completed;
  return {
    run,
    task: s.started?.task ?? '',
    status: c?.status ?? 'running',
    bestRound: c?.bestRound ?? null,
    bestScore: c?.bestScore ?? null,
    bestSnapshot: c?.bestSnapshot ?? null,
    rounds: rounds(s),
    agentExitCode,
    dir,
    timings,
  };
}

const CANCEL_POLL_MS = 1000;

/**
 * Calls `tick` every `intervalMs` until the returned function is called. The default is a Node interval that does not
 * keep the process alive; a test passes its own and fires the ticks itself, so nothing it asserts rests on how soon
 * a loaded machine runs a timer.
 */
export type Ticker = (tick: () => Promise<void>, intervalMs: number) => () => void;

const intervalTicker: Ticker = (tick, intervalMs) => {
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
};

/**
 * Signs a checkpoint every `intervalMs` while the run goes on, when the log grew since the latest one: what the
 * read models (and so `assay serve`'s live views) may show is what a signed checkpoint covers. One signing at a
 * time (a tick while one is under way does nothing); a failure is logged once and tried again at the next tick.
 * `stop()` waits for a signing under way.
 */
export function startLiveCheckpoints(
  home: { head(): Promise<LedgerHead>; ledger: { checkpoint(): Promise<unknown> } },
  intervalMs: number,
  log: (line: string) => void,
  ticker: Ticker = intervalTicker,
): { stop(): Promise<void> } {
  if (!(intervalMs > 0)) return { stop: async () => undefined };
  let busy: Promise<void> | null = null;
  let failed = false;
  const tick = (): Promise<void> => {
    if (busy) return busy;
    busy = (async () => {
      const { events, checkpoint } = await home.head();
      if (events > (checkpoint?.treeSize ?? 0)) await home.ledger.checkpoint();
      failed = false;
    })()
      .catch((e: unknown) => {
        if (!failed) log(`a live checkpoint was not signed (tried again in ${Math.round(intervalMs / 1000)} s): ${(e as Error).message}`);
        failed = true;
      })
      .finally(() => {
        busy = null;
      });
    return busy;
  };
  const cancel = ticker(tick, intervalMs);
  return {
    stop: async () => {
      cancel();
      await busy;
    },
  };
}
