/**
 * Supervising the agent (docs/run.md, "The agent's session"): the phase of a run from the moment the agent's process
 * runs in Work to the end of the session. It decides when the agent stops and records what its session used:
 *
 *   - it stops the agent at the first of: the process ended by itself ('exited'); what is left of the agent-time and
 *     wall-time budgets, as recorded, ran out ('timeout': a resume is not granted them again); Work's GPUs alone used
 *     up the GPU budget ('gpu_budget'); the run ended by itself, e.g. the refund cap ('ended'); Ctrl-C or a cancel
 *     asked through the API ('cancel'); a full-rootfs Work's own layer grew past the task's storage ('storage');
 *   - every `agentTimeRecordSec` it records the agent's time (BudgetConsumed agent_time), so a controller that is
 *     killed loses at most one interval of it; at the end it records the rest, whatever stopped the agent (at most
 *     what was left when the controller stopped it at the limit: the stop's own latency is not the agent's);
 *   - every `snapshotIntervalSec` it records the workspace (only when it changed), a wall-time tick and Work's GPU
 *     use; of this session's periodic snapshots only the newest `keepPeriodic` stay pinned, unless a round or the
 *     baseline uses the same root;
 *   - at the end it completes the run (after a last snapshot of the workspace as the agent left it), or cancels it.
 *
 * Application code: it sees the agent's process, Work's GPUs and the snapshot store only through the interfaces
 * below, so it runs against fakes (libs/run/src/application/supervise-agent.unit.spec.ts) as against Docker
 * (libs/runtime run-runtime.ts, which starts the agent with `docker exec` and wires its output).
 */
import type { Clock } from '@assay/core';
import { remainingBudgets } from '../domain/decide';
import type { SubmissionService } from './submission-service';

/** Why the agent's session ended. */
export type AgentStopReason = 'exited' | 'timeout' | 'cancel' | 'gpu_budget' | 'ended' | 'storage';

/** The agent's process in Work (a `docker exec` in the real runtime), as the supervision sees it. */
export interface AgentProcess {
  /** Settles when the process's output ends: it exited, or its stream broke. */
  readonly ended: Promise<void>;
  /** Its exit status once it ended; null when it cannot be known. */
  exitCode(): Promise<number | null>;
  /** Stops following the process (the controller kills Work afterwards). */
  detach(): void;
}

/** Work's GPUs as the supervision needs them (GpuPool in the runtime). */
export interface WorkGpuMeter {
  /** Seconds until Work's GPUs alone use up `remainingGpuSeconds`; null when they never do (or no budget). */
  secondsUntilExhausted(remainingGpuSeconds: number | null): number | null;
  /** The agent is done: Work's GPUs stop counting here. */
  stopWork(): void;
  /** Records Work's GPU use since the last record. */
  record(): Promise<void>;
}

export interface AgentSupervisionDeps {
  readonly service: SubmissionService;
  readonly clock: Clock;
  readonly gpus: WorkGpuMeter;
  /** Lets a periodic snapshot's root be collected (it stays in the store until `assay snapshot gc`). */
  unpinSnapshot(root: string): Promise<void>;
  /** True once a cancel was asked through the API (the run's cancel.request file). */
  cancelRequested(): boolean;
  /** Bytes written to Work's own file system (full-rootfs Work); null: not measured. */
  readonly writtenBytes: (() => Promise<number | null>) | null;
  /** Assay's own progress lines. */
  log(line: string): void;
  /** Called once the agent stopped and Work's GPUs stopped counting (the runtime flushes the agent's output here). */
  onStopped?(): void;
}

export interface AgentSupervisionOptions {
  /** Seconds between periodic snapshots of the workspace (and wall-time ticks); 0: none, and no last snapshot. */
  readonly snapshotIntervalSec: number;
  /** Seconds between records of the agent's time. */
  readonly agentTimeRecordSec: number;
  /** How often the cancel request is looked for, in milliseconds. */
  readonly cancelPollMs: number;
  /** Periodic snapshots of this session that stay pinned. */
  readonly keepPeriodic: number;
  /** The task's storage bound, in bytes: what `writtenBytes` is measured against. */
  readonly storageBytes: number;
  /** Seconds between measurements of `writtenBytes`. */
  readonly storageCheckSec: number;
  /** Ctrl-C. */
  readonly signal?: AbortSignal;
}

export interface AgentSupervisionResult {
  readonly why: AgentStopReason;
  /** The agent's exit status when it exited by itself. */
  readonly exitCode: number | null;
  /** How long the agent ran, by the injected clock. */
  readonly agentMs: number;
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Supervises the agent's process until it stops, records its session, and completes (or cancels) the run. */
export async function superviseAgent(agent: AgentProcess, d: AgentSupervisionDeps, o: AgentSupervisionOptions): Promise<AgentSupervisionResult> {
  const svc = d.service;
  const nowMs = () => d.clock.now().getTime();
  const log = (line: string) => d.log(line);
  const left = remainingBudgets(svc.current, d.clock.now());
  const agentLimitSec = Math.min(left.agent_time ?? Infinity, left.wall_time ?? Infinity);
  const recordWorkGpus = async () => {
    await d.gpus.record().catch((e: unknown) => log(`recording Work's GPU use failed: ${message(e)}`));
  };
  const ta = nowMs();
  let agentRecordedMs = ta;
  const recordAgentTime = async (atMostLeft = false) => {
    const now = nowMs();
    let sec = Math.round((now - agentRecordedMs) / 10) / 100;
    const leftSec = remainingBudgets(svc.current, new Date(now)).agent_time;
    if (atMostLeft && leftSec !== null) sec = Math.min(sec, leftSec);
    if (sec <= 0 || svc.current.completed) return;
    agentRecordedMs = now;
    await svc.consume('agent_time', sec).catch((e: unknown) => log(`recording agent time failed: ${message(e)}`));
  };

  const timers: NodeJS.Timeout[] = [];
  const intervals: NodeJS.Timeout[] = [];
  let gpuExhausted: () => void = () => undefined;
  let written = 0;
  const stop = new Promise<Exclude<AgentStopReason, 'exited'>>((res) => {
    if (svc.ended.aborted) res('ended');
    svc.ended.addEventListener('abort', () => res('ended'), { once: true });
    if (Number.isFinite(agentLimitSec)) timers.push(setTimeout(() => res('timeout'), Math.min(agentLimitSec * 1000, 2 ** 31 - 1)));
    // Work's GPUs alone exhaust the GPU budget at this time (Judges only bring it closer: checked between snapshots)
    gpuExhausted = () => res('gpu_budget');
    const gpuLeftSec = d.gpus.secondsUntilExhausted(remainingBudgets(svc.current, d.clock.now()).gpu_seconds);
    if (gpuLeftSec !== null) timers.push(setTimeout(gpuExhausted, Math.min(gpuLeftSec * 1000, 2 ** 31 - 1)));
    if (o.signal) {
      if (o.signal.aborted) res('cancel');
      o.signal.addEventListener('abort', () => res('cancel'), { once: true });
    }
    intervals.push(
      setInterval(() => {
        if (d.cancelRequested()) {
          log('cancel requested (POST /runs/:id/cancel)');
          res('cancel');
        }
      }, o.cancelPollMs),
    );
    const measure = d.writtenBytes;
    if (measure) {
      let measuring = false;
      intervals.push(
        setInterval(() => {
          if (measuring) return;
          measuring = true;
          void measure()
            .then((bytes) => {
              if (bytes !== null && bytes > o.storageBytes) {
                written = bytes;
                res('storage');
              }
            })
            .catch(() => undefined)
            .finally(() => (measuring = false));
        }, o.storageCheckSec * 1000),
      );
    }
  });

  let periodic: Promise<unknown> = Promise.resolve();
  const periodicRoots: string[] = [];
  const releaseOldPeriodic = async (root: string) => {
    if (!periodicRoots.includes(root)) periodicRoots.push(root);
    while (periodicRoots.length > o.keepPeriodic) {
      const old = periodicRoots.shift() as string;
      const st = svc.current;
      if (old === st.baselineRoot || st.rounds.some((r) => r.snapshot?.root === old)) continue;
      await d.unpinSnapshot(old).catch((e: unknown) => log(`unpinning periodic snapshot ${old} failed: ${message(e)}`));
    }
  };
  const between = async () => {
    const snap = await svc.recordWorkspace().catch((e: unknown) => log(`periodic snapshot failed: ${message(e)}`));
    if (snap) await releaseOldPeriodic(snap.root);
    if (svc.current.started?.protocol.budgets.wall_time !== null) await svc.tick().catch(() => undefined);
    await recordWorkGpus();
    if (remainingBudgets(svc.current, d.clock.now()).gpu_seconds === 0) gpuExhausted();
  };
  if (o.snapshotIntervalSec > 0) intervals.push(setInterval(() => (periodic = periodic.then(between)), o.snapshotIntervalSec * 1000));
  intervals.push(setInterval(() => (periodic = periodic.then(() => recordAgentTime())), o.agentTimeRecordSec * 1000));

  const why = await Promise.race([agent.ended.then(() => 'exited' as const), stop]);
  timers.forEach(clearTimeout);
  intervals.forEach(clearInterval);
  await periodic;
  d.gpus.stopWork();
  const agentMs = nowMs() - ta;
  d.onStopped?.();
  let exitCode: number | null = null;
  if (why === 'exited') {
    exitCode = await agent.exitCode().catch(() => null);
    log(`agent exited with status ${exitCode}`);
  } else {
    log(
      why === 'cancel'
        ? 'cancelled: stopping the agent'
        : why === 'gpu_budget'
          ? 'the GPU budget is used up: stopping the agent'
          : why === 'storage'
            ? `Work's file system grew past the task's storage_mb: ${written} bytes written, the bound is ${o.storageBytes}: stopping the agent`
            : why === 'ended'
              ? `the run ended (${svc.current.completed?.status ?? 'completed'}): stopping the agent`
              : `the agent ran out of time (${agentLimitSec} s)`,
    );
    agent.detach();
  }
  await recordWorkGpus();
  await recordAgentTime(why === 'timeout'); // Ctrl-C included: the time the agent ran is recorded whatever ended it
  if (why === 'cancel') {
    await svc.cancel();
  } else {
    if (o.snapshotIntervalSec > 0) await between(); // the workspace as the agent left it
    await svc.complete();
  }
  return { why, exitCode, agentMs };
}
