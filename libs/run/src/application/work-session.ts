/**
 * One controller session of a research run (docs/run.md, "The agent's session"), from Work's container to the end
 * of the agent: the phases after the run was prepared (task images built, workspace seeded, Work's container spec
 * and the agent's command decided by the runtime).
 *
 *   1. start Work: create and start its container, hand its id to the watchdog (guardWork), check what the agent
 *      needs is in it (checkWork), all before the run's first event of this session;
 *   2. open the run: RunStarted for a new run, or replay the ledger and settle the round a killed controller left
 *      open; GpusProbed; for a run that had already completed, nothing more;
 *   3. record Work: WorkStarted with its limits, the baseline snapshot (or, on resume, the workspace as it is now,
 *      so an edit made while no controller ran is recorded as WorkspaceEdited before the agent continues) and the
 *      agent time the dead session never recorded;
 *   4. the agent: the submission endpoint listens, egress starts, the agent's process runs as an exec in Work,
 *      supervised by superviseAgent until it stops and the run completes or is cancelled;
 *   5. finish: the endpoint and egress stop, and Work is killed and removed (never unpaused), whatever happened.
 *
 * Application code: Work is reached only through the ContainerRuntime port, the ledger, Judge and snapshots through
 * the run's ports, and the host's own parts (the watchdog, the egress proxy, the agent's output pipeline, the
 * Unix-socket endpoint) through the hooks below, so a whole session runs against the in-memory container runtime
 * (work-session.unit.spec.ts) as against Docker (libs/runtime run-runtime.ts).
 */
import type { Clock, IdGenerator } from '@assay/core';
import type { ContainerRuntime, ContainerSpec, ExecSpec, LabelFilter, OutputStream } from '@assay/containers';
import { formatRoundLine } from '../domain/feedback';
import type { ProbedGpu } from '../domain/gpu-host';
import type { RunStartInput } from '../domain/decide';
import type { RunState } from '../domain/run-state';
import type { JsonObject } from '../domain/run-events';
import type { JudgePort } from '../ports/judge.port';
import type { RunLedger } from '../ports/run-ledger.port';
import type { Snapshotter } from '../ports/snapshotter.port';
import type { SubmissionGateway } from '../ports/submission-gateway.port';
import type { WorkControl } from '../ports/work-control.port';
import { SubmissionService, type SubmissionServiceOptions } from './submission-service';
import { superviseAgent, type AgentSupervisionOptions, type WorkGpuMeter } from './supervise-agent';

/** What a session reaches the world through. */
export interface WorkSessionPorts {
  readonly containers: ContainerRuntime;
  readonly ledger: RunLedger;
  /** The Judge of each round (already sharing GPUs with Work where the run has any). */
  readonly judge: JudgePort;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  /** The run's snapshotter, made once Work's container exists (a full-rootfs Work is snapshotted by exporting it). */
  snapshotterFor(workId: string): Snapshotter;
  /** Freezes and thaws Work while a round's snapshot is taken (docker pause / unpause). */
  workControlFor(workId: string): WorkControl;
  /** Starts listening for the agent's submissions (the Unix-socket HTTP endpoint in Work's /run/assay). */
  listen(gateway: SubmissionGateway): Promise<{ close(): Promise<void> }>;
  /** Lets a periodic snapshot's root be collected. */
  unpinSnapshot(root: string): Promise<void>;
  /** True once a cancel was asked through the API. */
  cancelRequested(): boolean;
  /** Assay's own progress lines. */
  log(line: string): void;
}

/** The host's parts of a session, each optional. */
export interface WorkSessionHooks {
  /** Work's container exists: tie its lifetime to this controller (a watchdog); closed when the session ends. */
  guardWork?(workId: string): { close(): void };
  /** Before the run's first event of this session: what the agent needs is in Work (a vendor agent's binary). */
  checkWork?(workId: string): Promise<void>;
  /**
   * Just before the agent starts (its transcript opened, a vendor agent's egress proxy started); what it returns is
   * stopped when the session ends.
   */
  beforeAgent?(): Promise<{ stop(): Promise<void> } | null>;
  /** Every chunk of the agent's output as it comes (the runtime redacts, keeps and escapes it). */
  agentOutput?(stream: OutputStream, chunk: Buffer): void;
  /** The agent stopped (flush what agentOutput holds back). */
  agentStopped?(): void;
  /** Work's GPUs; none by default. */
  readonly gpus?: WorkGpus;
  /** Bytes written to Work's own layer (a full-rootfs Work), measured against the storage bound; null: not measured. */
  readonly writtenBytes?: ((workId: string) => Promise<number | null>) | null;
}

export interface WorkSessionPlan {
  readonly run: string;
  /** Work's container as it is created (the runtime's containment decides it: user, mounts, tmpfs, limits). */
  readonly work: ContainerSpec;
  /** WorkStarted's `limits`. */
  readonly workLimits: JsonObject;
  /** The agent's process in Work. */
  readonly agent: ExecSpec & { readonly name: string };
  /** A new run (its RunStarted) or a resumed one. */
  readonly open: { readonly resume: false; readonly input: RunStartInput } | { readonly resume: true };
  /** The host's GPUs behind the run's `--gpus`, recorded as GpusProbed; null: a run without GPUs. */
  readonly probed: { readonly node: string; readonly gpus: readonly ProbedGpu[] } | null;
  readonly service?: SubmissionServiceOptions;
  readonly supervision: AgentSupervisionOptions;
}

export interface WorkSessionResult {
  readonly state: RunState;
  readonly workId: string;
  /** The run had already completed: nothing was started but Work (removed again). */
  readonly alreadyCompleted: boolean;
  readonly agentExitCode: number | null;
  readonly agentMs: number;
}

/** Work's GPUs as a session uses them (GpuPool in the runtime). */
export interface WorkGpus extends Omit<WorkGpuMeter, 'record'> {
  /** Work started: its GPUs count from here. */
  startWork(): void;
  /** Records Work's GPU use since the last record through the run's service. */
  record(service: SubmissionService): Promise<void>;
}

const NO_GPUS: WorkGpus = {
  startWork: () => undefined,
  secondsUntilExhausted: () => null,
  stopWork: () => undefined,
  record: async () => undefined,
};

/**
 * Kills and removes the containers these labels find: killed, never unpaused, so a paused orphan (its controller died
 * mid-snapshot) receives SIGKILL while frozen and cannot touch the workspace after the last record. Their ids.
 */
export async function removeLeftoverContainers(containers: ContainerRuntime, filters: readonly LabelFilter[]): Promise<string[]> {
  const found = (await Promise.all(filters.map((f) => containers.listContainers(f)))).flat();
  for (const c of found) {
    await containers.kill(c.id).catch(() => undefined);
    await containers.removeContainer(c.id).catch(() => undefined);
  }
  return found.map((c) => c.id);
}

/**
 * On resume, read before this session appends anything: the agent time of the session that died that it never
 * recorded. A lower bound: from its last agent-time record (or its WorkStarted) to the last event it wrote.
 */
export async function unrecordedAgentSec(ledger: RunLedger, run: string): Promise<number> {
  const events = (await ledger.read(run, 0)).filter((e) => e.stream === `run-${run}`);
  let from = -1;
  for (let i = events.length - 1; i >= 0 && from < 0; i--) if (events[i]!.type === 'WorkStarted') from = i;
  if (from < 0 || events.some((e) => e.type === 'RunCompleted')) return 0;
  let since = Date.parse(events[from]!.time);
  let last = since;
  for (let i = from + 1; i < events.length; i++) {
    const e = events[i]!;
    const t = Date.parse(e.time);
    if (e.type === 'BudgetConsumed' && e.data.budget === 'agent_time') since = t;
    last = Math.max(last, t);
  }
  return Math.max(0, Math.round((last - since) / 10) / 100);
}

/** Runs one controller session (the phases above); Work is gone when it returns or throws. */
export async function runWorkSession(ports: WorkSessionPorts, plan: WorkSessionPlan, hooks: WorkSessionHooks = {}): Promise<WorkSessionResult> {
  const { containers, log, clock } = ports;
  const gpus = hooks.gpus ?? NO_GPUS;
  // 1. start Work
  const workId = await containers.createContainer(plan.work);
  let guard: { close(): void } | null = null;
  let endpoint: { close(): Promise<void> } | null = null;
  let started: { stop(): Promise<void> } | null = null;
  try {
    guard = hooks.guardWork?.(workId) ?? null;
    await containers.start(workId, { onOutput: () => undefined });
    gpus.startWork();
    await hooks.checkWork?.(workId);

    // 2. open the run
    const deps = {
      run: plan.run,
      ledger: ports.ledger,
      snapshotter: ports.snapshotterFor(workId),
      judge: ports.judge,
      work: ports.workControlFor(workId),
      clock,
      ids: ports.ids,
      ...(plan.service ? { options: plan.service } : {}),
    };
    // before this session appends anything (the recovery below would look like the dead session's last event)
    const killedAgentSec = plan.open.resume ? await unrecordedAgentSec(ports.ledger, plan.run) : 0;
    let svc: SubmissionService;
    if (plan.open.resume) {
      svc = new SubmissionService(deps);
      const recovery = await svc.resume();
      if (recovery.round !== null) log(`round ${recovery.round} was open: ${recovery.outcome}`);
    } else {
      svc = await new SubmissionService(deps).start(plan.open.input);
    }
    if (plan.probed && !svc.current.completed) await svc.gpusProbed(plan.probed.node, plan.probed.gpus, plan.open.resume);
    if (svc.current.completed) {
      log(`run ${plan.run} had already completed`);
      return { state: svc.current, workId, alreadyCompleted: true, agentExitCode: null, agentMs: 0 };
    }

    // 3. record Work
    await svc.workStarted(workId, plan.work.image, plan.workLimits);
    if (svc.current.baselineRoot === null) await svc.recordWorkspace();
    else if (plan.open.resume) {
      // Whatever happened to the workspace since the last record (an orphaned agent before it was killed, a hand
      // edit) is recorded before the agent continues: SnapshotTaken + WorkspaceEdited when it differs.
      const r = await svc.recordWorkspace();
      log(r.changed ? `the workspace differs from the last recorded snapshot: recorded as WorkspaceEdited (${r.root})` : 'the workspace is as last recorded');
    }
    if (killedAgentSec > 0) {
      await svc.consume('agent_time', killedAgentSec);
      log(`the previous session's agent time since its last record: ${killedAgentSec} s (recorded)`);
    }

    // 4. the agent
    // Assay's own line per settled round, whatever the agent prints (formatRoundLine)
    endpoint = await ports.listen({
      submit: async (req) => {
        const reply = await svc.submit(req);
        const line = reply.round !== null ? formatRoundLine(svc.current, reply.round) : null;
        if (line) log(line);
        return reply;
      },
      history: (req) => svc.history(req),
    });
    log(`run ${plan.run}: Work ${workId.slice(0, 12)} up; agent ${plan.agent.name} starting`);
    started = (await hooks.beforeAgent?.()) ?? null;
    const { name: _name, ...execSpec } = plan.agent;
    const exec = await containers.exec(workId, execSpec, (stream, chunk) => hooks.agentOutput?.(stream, chunk));
    const written = hooks.writtenBytes;
    const supervised = await superviseAgent(
      { ended: exec.outputEnded, exitCode: () => exec.exitCode(), detach: () => exec.detach() },
      {
        service: svc,
        clock,
        gpus: { secondsUntilExhausted: (left) => gpus.secondsUntilExhausted(left), stopWork: () => gpus.stopWork(), record: () => gpus.record(svc) },
        unpinSnapshot: (root) => ports.unpinSnapshot(root),
        cancelRequested: () => ports.cancelRequested(),
        writtenBytes: written ? () => written(workId) : null,
        log,
        ...(hooks.agentStopped ? { onStopped: hooks.agentStopped } : {}),
      },
      plan.supervision,
    );
    return { state: svc.current, workId, alreadyCompleted: false, agentExitCode: supervised.exitCode, agentMs: supervised.agentMs };
  } finally {
    // 5. finish
    if (endpoint) await endpoint.close().catch(() => undefined);
    if (started) await started.stop().catch((e: unknown) => log(`what was started for the agent did not stop cleanly: ${(e as Error).message}`));
    await containers.kill(workId).catch(() => undefined);
    await containers.removeContainer(workId).catch(() => undefined);
    guard?.close();
  }
}
