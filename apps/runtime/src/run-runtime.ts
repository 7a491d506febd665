/**
 * The research run with real Docker (docs/run.md): the composition root of `assay run`.
 *
 *   JudgeRuntime (images, JudgeRunner, snapshot store, ledger)  ─┐
 *   Work container (sleep; labels org.assay.role=work, org.assay.run=<id>; task limits, network none, cap-drop ALL)
 *     <home>/runs/<id>/workspace  → workdir (seeded from the work image's workdir, else the task's environment/workspace)
 *     <home>/runs/<id>/sock       → /run/assay (submit.sock, token 0400), read-only
 *     <home>/runs/<id>/logs       → /logs/assay (each round's Judge log), read-only
 *     task-runtime/rsi-submit     → /usr/local/bin/rsi-submit, read-only
 *     the agent's directory       → /opt/assay/agent, read-only (reference agent)
 *     task-runtime/egress/...     → /usr/local/bin/assay-egress-forward, read-only (vendor agents: work-egress.ts;
 *                                   the egress proxy listens on sock/egress.sock, Work keeps network none)
 *   SubmissionService (start/resume) + SubmitEndpoint (Unix socket) + real adapters:
 *     WorkControl = docker pause/unpause, Snapshotter = SnapshotHome over the workspace dir,
 *     JudgePort = JudgeRunner.judge(prepared, cid, {run, round}).
 *   The agent runs as `docker exec` in Work; when it exits (or the agent-time/wall budget runs out, or SIGINT), the
 *   run completes with its selection and the Work container is removed.
 */
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { AssayError, randomIds, systemClock } from '@assay/core';
import { StreamDemuxer } from '@assay/containers';
import { parseCid } from '@assay/snapshots';
import type { SnapshotHome } from '@assay/snapshots';
import type { PreparedTask, JudgeRunner } from '@assay/judge';
import { canonicalJson } from '@assay/ledger';
import {
  buildRunRules,
  generateRunToken,
  LedgerRunLedger,
  readRunTaskSettings,
  roundView,
  SubmissionService,
  SubmitEndpoint,
  taskIdOf,
  parseAgent,
  publicLaunch,
  AGENT_MOUNT,
  type Agent,
  type AgentLaunchSpec,
  type EgressProxy,
  redactErrorSecrets,
  SecretStreamRedactor,
  tokenSha256,
  remainingBudgets,
  type JudgeOutcome,
  type JudgePort,
  type JudgeRequest,
  type RoundView,
  type RunState,
  type Snapshotter,
  type SnapshotRequest,
  type WorkControl,
  type WorkspaceChange,
  type WorkspaceSnapshot,
} from '@assay/run';
import { computeTaskDigests, mergeRunSettings, protocolFingerprint, protocolFingerprintInput, type RunSettingsOverrides } from '@assay/task-format';
import { JudgeRuntime, homeTag, type LoadedTask } from './judge-runtime';
import { assayRoot } from './repo-paths';
import { acquireControllerLock } from './controller-lock';
import { carryOverRootfsWork, removeCarriedImages } from './rootfs-carry-over';
import { ContainerSnapshotter } from './rootfs-snapshotter';
import { GpuPool, PooledJudge, planTaskGpus, recordWorkGpuUse, workGpuSpec } from './gpu-pool';
import { checkAgentBinary, planWorkEgress, startEgressProxy, stopEgressProxy } from './work-egress';

export const WORK_LABELS = { role: 'org.assay.role', run: 'org.assay.run', home: 'org.assay.home' } as const;
const HARNESS_VERSION = 'assay/0.1.0';

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
  readonly home: string;
  readonly taskDir: string;
  /** `--agent` as given: reference, command:<cmd>, codex[:model], claude-code[:model]. */
  readonly agent: string;
  readonly overrides?: RunSettingsOverrides;
  readonly runId?: string;
  /** Progress lines (stderr in the CLI). */
  readonly log?: (line: string) => void;
  /** Agent output (stdout/stderr of the exec). */
  readonly agentOutput?: (chunk: Buffer) => void;
  /** Aborting cancels the run (SIGINT). */
  readonly signal?: AbortSignal;
  /** Seconds between periodic workspace snapshots (SnapshotTaken without a round); 0 disables; default 60. */
  readonly snapshotIntervalSec?: number;
  /** `--gpus LIST`, parsed (parseGpuList): the host GPUs this run may use; default none (on resume: run.json's). */
  readonly gpus?: readonly string[];
}

interface RunMeta {
  readonly run: string;
  readonly taskDir: string;
  /** The --agent spec (never a secret: keys are read from the environment when the agent starts). */
  readonly agent: string;
  /** `--gpus` as given at the start (host device ids). */
  readonly gpus?: readonly string[];
}

function runPaths(home: string, run: string) {
  const dir = join(resolve(home), 'runs', run);
  return { dir, workspace: join(dir, 'workspace'), sock: join(dir, 'sock'), logs: join(dir, 'logs'), meta: join(dir, 'run.json') };
}

/** Snapshots of the run's workspace directory into the store under ASSAY_HOME (no events: the run records them). */
export class WorkspaceSnapshotter implements Snapshotter {
  ms = 0;
  constructor(
    private readonly home: SnapshotHome,
    private readonly dir: string,
  ) {}

  async snapshot(_req: SnapshotRequest): Promise<WorkspaceSnapshot> {
    const t = Date.now();
    const r = await this.home.create(this.dir, { previous: null, label: null });
    this.ms += Date.now() - t;
    return { root: r.rootCid, files: r.files, bytes: r.bytes, durationMs: r.durationMs, policyDigest: r.policyDigest, source: this.dir, flagged: r.outsideSymlinks.slice(0, 100) };
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
  ) {}

  async judge(req: JudgeRequest): Promise<JudgeOutcome> {
    const t = Date.now();
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
      this.ms += Date.now() - t;
    }
  }
}

/** docker pause / unpause of the Work container. */
export class DockerWorkControl implements WorkControl {
  constructor(private readonly c: Docker.Container) {}
  async freeze(): Promise<void> {
    await this.c.pause();
  }
  async thaw(): Promise<void> {
    await this.c.unpause();
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
  try {
    await rt.containers.start(id, { onOutput: () => undefined });
    const w = await rt.containers.wait(id, 120_000);
    return w.exited && w.exitCode === 0;
  } finally {
    await rt.containers.removeContainer(id).catch(() => undefined);
  }
}

async function removeRunContainers(rt: JudgeRuntime, run: string): Promise<string[]> {
  const found = [
    ...(await rt.containers.listContainers({ [WORK_LABELS.role]: 'work', [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(rt.home) })),
    ...(await rt.containers.listContainers({ [WORK_LABELS.role]: 'seed', [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(rt.home) })),
  ];
  for (const c of found) {
    try {
      await new Docker().getContainer(c.id).unpause();
    } catch {
      /* not paused */
    }
    await rt.containers.removeContainer(c.id).catch(() => undefined);
  }
  return found.map((c) => c.id);
}

function rounds(s: RunState): RunRoundLine[] {
  return s.rounds.map((r) => {
    const v: RoundView = roundView(s, r);
    return { round: v.round, status: v.status, score: v.score, rule: v.rule, detail: v.detail };
  });
}

/** Starts a new run (or resumes one when `resume` is set) and drives it to completion. */
export async function runResearch(o: RunStartOptions & { resume?: boolean }): Promise<RunReport> {
  const t0 = Date.now();
  const log = o.log ?? (() => undefined);
  const home = resolve(o.home);
  const run = o.runId ?? `run-${randomIds.next().slice(0, 8)}`;
  const p = runPaths(home, run);
  let meta: RunMeta;
  if (o.resume) {
    if (!existsSync(p.meta)) throw new AssayError('RUN_NOT_FOUND', 'not_found', `run ${run}: ${p.meta} does not exist (nothing to resume in ${home})`, { details: { run, home } });
    meta = JSON.parse(readFileSync(p.meta, 'utf8')) as RunMeta;
  } else {
    if (existsSync(p.dir)) throw new AssayError('RUN_EXISTS', 'conflict', `run ${run} already exists in ${p.dir}; use --resume ${run}`, { details: { run, dir: p.dir } });
    meta = { run, taskDir: resolve(o.taskDir), agent: o.agent, ...(o.gpus?.length ? { gpus: [...o.gpus] } : {}) };
  }
  // GPUs: a task that needs more than --gpus gives is refused before anything starts (no image, no container, no event)
  const gpuPlan = await planTaskGpus(meta.taskDir, o.gpus ?? meta.gpus ?? []);
  // One live controller per run: taken before anything of the run (containers, sockets, workspace) is touched, so a
  // resume never removes the containers of a controller that is still running.
  mkdirSync(p.dir, { recursive: true });
  const lock = acquireControllerLock(p.dir);
  if (lock.tookOver) log(`controller pid ${lock.tookOver.pid} (since ${lock.tookOver.since}) is gone; taking the run over`);
  try {
    const rt = await JudgeRuntime.open({ home });
    const docker = new Docker();
    let workId: string | null = null;
    let endpoint: SubmitEndpoint | null = null;
    let secrets: AgentLaunchSpec | null = null; // whose values never leave in an error message
    let proxy: EgressProxy | null = null;
    try {
      await rt.containers.ping();
      await rt.runner.sweep();
      log(`task ${meta.taskDir}: building or reusing images`);
      const task: LoadedTask = await rt.loadTask(meta.taskDir, { metric: o.overrides?.primaryMetric ?? null, hostEnv: process.env, gpusFromPool: true });
      // full-rootfs resume: the old Work's file system is the agent's work; carry it over before its container goes
      const carried = o.resume && task.prepared.rootfs ? await carryOverRootfsWork(rt.containers, WORK_LABELS, { run, homeTag: homeTag(home), workImage: task.images.work.id, unpause: (id) => docker.getContainer(id).unpause().catch(() => undefined), log }) : null;
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

      mkdirSync(p.logs, { recursive: true });
      mkdirSync(p.sock, { recursive: true, mode: 0o700 });
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

      const ledger = new LedgerRunLedger(rt.ledgerHome.ledger);
      // full-rootfs mode (workdir "/"): no workspace directory; snapshots are `docker export`s of Work (rootfs-snapshotter.ts)
      const snapshotter = task.prepared.rootfs ? new ContainerSnapshotter(rt.snapshotHome, rt.containers, () => workId) : new WorkspaceSnapshotter(rt.snapshotHome, p.workspace);
      const judge = new RunnerJudge(rt.runner, task.prepared, p.logs);
      const gpuPool = new GpuPool(gpuPlan, systemClock);
      if (gpuPlan.available.length) log(`GPUs: Work ${gpuPlan.work.join(',') || 'none'}, each Judge ${gpuPlan.judge.join(',') || 'none'}${gpuPlan.handOver ? ' (hand-over: Work stays paused while a Judge runs)' : ''}`);

      // Work
      const labels = { [WORK_LABELS.role]: 'work', [WORK_LABELS.run]: run, [WORK_LABELS.home]: homeTag(home) };
      const mounts = [
        ...(task.prepared.rootfs ? [] : [{ type: 'bind' as const, source: p.workspace, target: workdir, readOnly: false }]),
        { type: 'bind' as const, source: p.sock, target: '/run/assay', readOnly: true },
        { type: 'bind' as const, source: p.logs, target: '/logs/assay', readOnly: true },
        { type: 'bind' as const, source: join(assayRoot(), 'task-runtime', 'rsi-submit', 'rsi-submit'), target: '/usr/local/bin/rsi-submit', readOnly: true },
        ...(agent.mountDir ? [{ type: 'bind' as const, source: agent.mountDir, target: AGENT_MOUNT, readOnly: true }] : []),
        ...egress.mounts,
      ];
      const cpus = plan.environment.cpus ?? 1;
      const memoryBytes = (plan.environment.memoryMb ?? 1024) * 1048576;
      workId = await rt.containers.createContainer({
        name: `assay-work-${homeTag(home)}-${run}`,
        image: workImage,
        cmd: ['sleep', 'infinity'],
        entrypoint: [],
        env: { ...task.prepared.env, ASSAY_WORKSPACE: workdir, ASSAY_RUN: run },
        workingDir: workdir,
        labels,
        mounts,
        networkMode: 'none',
        readOnlyRootfs: false,
        capDrop: ['ALL'],
        capAdd: [],
        noNewPrivileges: true,
        pidsLimit: 512,
        memoryBytes,
        nanoCpus: Math.round(cpus * 1e9),
        init: true,
        openStdin: false,
        ...workGpuSpec(gpuPlan),
      });
      await rt.containers.start(workId, { onOutput: () => undefined });
      gpuPool.startWork();
      const container = docker.getContainer(workId);
      const work = new DockerWorkControl(container);
      await checkAgentBinary(container, agent, task.images.work.id); // a missing codex/claude fails before RunStarted

      const deps = { run, ledger, snapshotter, judge: new PooledJudge(judge, gpuPool), work, clock: systemClock, ids: randomIds, options: { logPathOf: (n: number) => `/logs/assay/round-${n}.log`, keepWorkPausedDuringJudge: gpuPlan.pauseWorkDuringJudge } };
      let svc: SubmissionService;
      if (o.resume) {
        const r = await SubmissionService.resume(deps);
        svc = r.service;
        if (r.recovery.round !== null) log(`round ${r.recovery.round} was open: ${r.recovery.outcome}`);
      } else {
        const settings = mergeRunSettings(plan.runSettings, o.overrides ?? {});
        const runTask = readRunTaskSettings(plan.metadata);
        if (!runTask.ok) throw new Error(runTask.problems.join('\n'));
        const digests = await computeTaskDigests(meta.taskDir, { digest: (d: string) => rt.snapshots.digestDirectory(d) });
        const input = protocolFingerprintInput({ taskDigest: digests.task, judgeImageDigest: task.images.judge.id, settings, harnessVersion: HARNESS_VERSION });
        const { protocol, selection } = buildRunRules({
          settings,
          agentTimeoutSec: plan.agent.timeoutSec,
          editablePaths: runTask.value.editablePaths,
          tokenSha256: tokenSha256(token),
          fingerprintInput: JSON.parse(JSON.stringify(input)),
        });
        svc = await SubmissionService.start(deps, {
          run,
          task: taskIdOf(plan.name),
          taskDigest: digests.task,
          agent: agent.name,
          model: agent.model,
          fingerprint: protocolFingerprint(input, canonicalJson),
          protocol,
          selection,
        });
      }
      if (svc.current.completed) {
        log(`run ${run} had already completed`);
      } else {
        await svc.workStarted(workId, workImage, { cpus, memoryBytes, pidsLimit: 512, ...egress.limits, ...(gpuPlan.work.length ? { gpus: [...gpuPlan.work] } : {}), ...(carried ? { carriedFrom: carried.from } : {}) });
        if (svc.current.baselineRoot === null) await svc.recordWorkspace();
        const sockPath = join(p.sock, 'submit.sock');
        endpoint = await SubmitEndpoint.listen({ socketPath: sockPath, gateway: svc });
        chmodSync(sockPath, 0o666);
        log(`run ${run}: Work ${workId.slice(0, 12)} up; agent ${agent.name} starting`);
        // Work's GPU-seconds since the last record: BudgetConsumed gpu_seconds {holder: work}
        const recordWorkGpus = async () => {
          await recordWorkGpuUse(gpuPool, svc).catch((e: unknown) => log(`recording Work's GPU use failed: ${e instanceof Error ? e.message : String(e)}`));
        };

        // the agent
        const agentLimitSec = Math.min(plan.agent.timeoutSec ?? Infinity, o.overrides?.timeBudgetSec ?? Infinity);
        proxy = await startEgressProxy({ sockDir: p.sock, agent, log });
        const exec = await container.exec({ Cmd: [...egress.launch.argv], Env: Object.entries(egress.launch.env).map(([k, v]) => `${k}=${v}`), WorkingDir: workdir, AttachStdout: true, AttachStderr: true });
        const stream = await exec.start({ hijack: true, stdin: false });
        const redactors = new Map<string, SecretStreamRedactor>();
        const redactorOf = (s: string) => redactors.get(s) ?? redactors.set(s, new SecretStreamRedactor(agent)).get(s)!;
        const demux = new StreamDemuxer((s, chunk) => o.agentOutput?.(agent.secretEnv.length ? Buffer.from(redactorOf(s).push(chunk)) : chunk));
        stream.on('data', (c: Buffer) => demux.push(c));
        const ta = Date.now();
        let cancelled = false;
        const ended = new Promise<void>((res) => {
          stream.on('end', () => res());
          stream.on('close', () => res());
          stream.on('error', () => res());
        });
        let timer: NodeJS.Timeout | null = null;
        let gpuTimer: NodeJS.Timeout | null = null;
        let gpuExhausted: () => void = () => undefined;
        const stop = new Promise<'timeout' | 'cancel' | 'gpu_budget'>((res) => {
          if (Number.isFinite(agentLimitSec)) timer = setTimeout(() => res('timeout'), agentLimitSec * 1000);
          // Work's GPUs alone exhaust the GPU budget at this time (Judges only bring it closer: checked between snapshots)
          gpuExhausted = () => res('gpu_budget');
          const gpuLeftSec = gpuPool.secondsUntilExhausted(remainingBudgets(svc.current, new Date()).gpu_seconds);
          if (gpuLeftSec !== null) gpuTimer = setTimeout(gpuExhausted, Math.min(gpuLeftSec * 1000, 2 ** 31 - 1));
          if (o.signal) {
            if (o.signal.aborted) res('cancel');
            o.signal.addEventListener('abort', () => res('cancel'), { once: true });
          }
        });
        // periodic snapshots between submissions (recorded only when the workspace changed) and wall-time ticks
        const everySec = o.snapshotIntervalSec ?? 60;
        let periodic: Promise<unknown> = Promise.resolve();
        const between = async () => {
          await svc.recordWorkspace().catch((e: unknown) => log(`periodic snapshot failed: ${e instanceof Error ? e.message : String(e)}`));
          if (svc.current.started?.protocol.budgets.wall_time !== null) await svc.tick().catch(() => undefined);
          await recordWorkGpus();
          if (remainingBudgets(svc.current, new Date()).gpu_seconds === 0) gpuExhausted();
        };
        const interval = everySec > 0 ? setInterval(() => (periodic = periodic.then(between)), everySec * 1000) : null;
        const why = await Promise.race([ended.then(() => 'exited' as const), stop]);
        if (timer) clearTimeout(timer);
        if (gpuTimer) clearTimeout(gpuTimer);
        if (interval) clearInterval(interval);
        await periodic;
        gpuPool.stopWork(); // the agent is done: Work's GPUs count up to here (the container is removed right after)
        const agentMs = Date.now() - ta;
        for (const r of redactors.values()) o.agentOutput?.(Buffer.from(r.end()));
        let agentExit: number | null = null;
        if (why === 'exited') {
          agentExit = await exec.inspect().then((i) => i.ExitCode ?? null, () => null);
          log(`agent exited with status ${agentExit}`);
        } else {
          cancelled = why === 'cancel';
          log(why === 'cancel' ? 'cancelled: stopping the agent' : why === 'gpu_budget' ? 'the GPU budget is used up: stopping the agent' : `the agent ran out of time (${agentLimitSec} s)`);
          stream.destroy();
        }
        await recordWorkGpus();
        if (cancelled) {
          await svc.cancel();
        } else {
          await svc.consume('agent_time', Math.round(agentMs / 1000)).catch(() => undefined);
          if (everySec > 0) await between(); // the workspace as the agent left it
          await svc.complete();
        }
        await endpoint.close();
        endpoint = null;
        if (proxy) await stopEgressProxy(proxy, { runDir: p.dir, agent, log });
        proxy = null;
        const s = svc.current;
        return report(run, s, agentExit, p.dir, { totalMs: Date.now() - t0, agentMs, judgeMs: judge.ms, snapshotMs: snapshotter.ms });
      }
      return report(run, svc.current, null, p.dir, { totalMs: Date.now() - t0, agentMs: 0, judgeMs: judge.ms, snapshotMs: snapshotter.ms });
    } catch (e) {
      throw redactErrorSecrets(e, secrets);
    } finally {
      if (endpoint) await endpoint.close().catch(() => undefined);
      if (proxy && secrets) await stopEgressProxy(proxy, { runDir: p.dir, agent: secrets, log }).catch(() => undefined);
      if (workId) {
        await docker.getContainer(workId).unpause().catch(() => undefined);
        await rt.containers.removeContainer(workId).catch(() => undefined);
        await removeCarriedImages(rt.containers, WORK_LABELS, { run, homeTag: homeTag(home) }).catch(() => undefined);
      }
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
