/**
 * The Judge composed over its ports: one JudgeRunner and one TaskImageBuilder sharing the container runtime, the
 * snapshot store, the recorder, the clock and the host's settings. What JudgeModule (nest/judge.module.ts) and the
 * runtime's `openJudgeRuntime` both build, so a Judge dispatched through the module and one opened by hand are made
 * the same way.
 */
import type { Clock, IdGenerator, Progress } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import type { JudgeRecorder } from '../ports/judge-recorder.port';
import type { JudgeSnapshots } from '../ports/judge-snapshots.port';
import type { OwnerRegistry } from '../ports/owner.port';
import { JudgeRunner } from './judge-runner';
import { TaskImageBuilder } from './task-images';

/** The Judge's ports bound to adapters: where events go, where snapshots come from, who owns a leftover. */
export interface JudgePorts {
  readonly recorder: JudgeRecorder;
  readonly snapshots: JudgeSnapshots;
  readonly owners: OwnerRegistry;
}

/** Where on this host Judges keep their files, and how they are run. */
export interface JudgeHostSettings {
  /** `<home>/judges`: each Judge's owner file and staging. */
  readonly judgesDir: string;
  /** `<home>/images/logs`: image build logs. */
  readonly imageLogsDir: string;
  /** Short, stable tag of the home (container labels), so a sweep records completions only in its own ledger. */
  readonly homeTag: string;
  readonly hostCpus: number;
  /** task-runtime/judge: the entrypoint and run-as-candidate baked into judge images. */
  readonly judgeRuntimeDir: string;
  /** Whether Judges hide other users' processes in /proc (JudgeRunnerDeps.procVisibility). */
  readonly procVisibility: 'hidden' | 'visible';
}

export interface JudgeCompositionDeps {
  readonly runtime: ContainerRuntime;
  readonly ports: JudgePorts;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly host: JudgeHostSettings;
  /** This call's progress display (a terminal's, or none). */
  readonly progress?: Progress;
}

/** A runner and an image builder over the same ports: what one command judges and builds with. */
export interface ComposedJudge extends JudgePorts {
  readonly runner: JudgeRunner;
  readonly images: TaskImageBuilder;
}

export function composeJudge(d: JudgeCompositionDeps): ComposedJudge {
  const { runtime, ports, clock, ids, host } = d;
  const progress = d.progress ? { progress: d.progress } : {};
  const runner = new JudgeRunner({
    runtime,
    snapshots: ports.snapshots,
    recorder: ports.recorder,
    owners: ports.owners,
    clock,
    ids,
    judgesDir: host.judgesDir,
    homeTag: host.homeTag,
    hostCpus: host.hostCpus,
    judgeRuntimeDir: host.judgeRuntimeDir,
    procVisibility: host.procVisibility,
    ...progress,
  });
  const images = new TaskImageBuilder({
    runtime,
    snapshots: ports.snapshots,
    recorder: ports.recorder,
    clock,
    logsDir: host.imageLogsDir,
    judgeRuntimeDir: host.judgeRuntimeDir,
    ...progress,
  });
  return { ...ports, runner, images };
}
