/**
 * The runtime node as a NestJS module: the composition root of the runtime's use cases for the CLI. It imports
 * ContainersModule (CONTAINER_RUNTIME: the dockerode adapter, or what the caller passes: tests give the in-memory
 * fake), SnapshotsModule (the store under the home), LedgerModule, which binds the Clock and the IdGenerator (CLOCK,
 * ID_GENERATOR) and the buses, and JudgeModule, whose ports it binds to the home's ledger and store; so a run, a task
 * check, a baseline or Judges on a snapshot stamp time and ids from the same providers as the ledger's own commands.
 */
import { resolve } from 'node:path';
import { Inject, Injectable, Module, type DynamicModule } from '@nestjs/common';
import { CommandHandler, QueryHandler, type ICommandHandler, type IQueryHandler } from '@nestjs/cqrs';
import { CLOCK, ID_GENERATOR, type Clock, type IdGenerator } from '@assay/core';
import { CONTAINER_RUNTIME, ContainersModule, type ContainerRuntime } from '@assay/containers';
import { LedgerHomeProvider, LedgerModule } from '@assay/ledger';
import { SnapshotHomeProvider, SnapshotsModule } from '@assay/snapshots';
import { JudgeRuntime, judgeHostSettings, judgePortsOf, type JudgeRuntimeSource } from '../judge-runtime';
import {
  LedgerRunLedger,
  RunModule,
  RunPorts,
  readRunEventsFrom,
  type GpuProbe,
  type GpuRuntimeCheck,
  type RunBinding,
  type RunEventRecord,
  type RunStatusView,
} from '@assay/run';
import { DockerGpuRuntimeCheck, NvidiaSmiGpuProbe, daemonInfoOf } from '../gpu-host';
import type { BaselineList } from '../run-views';
import { listBaselines, listRuns, recordedRunLogs } from '../run-views';
import { importTask, taskDigests, type TaskImport } from '../task-import';
import { rejudgeBundle } from '../rejudge-bundle';
import type { ExportRejudgeResult, ExportResult, RejudgeReport } from '@assay/bundles';
import { exportRejudgeReport, exportRunBundle } from '../bundle-export';
import type { TaskDigests } from '@assay/task-format';
import { runResearch, type RunReport } from '../run-runtime';
import { checkTask, type TaskCheckReport } from '../task-check';
import { recordBaseline, type BaselineReport } from '../baseline';
import { judgeSnapshot, type JudgeSnapshotReport } from '../judge-snapshot';
import { ensureBaseImage, ensureTaskImages } from '../images';
import type { BaseImageResult } from '../base-image';
import { JudgeComposer, JudgeModule, type JudgeBinding, type TaskImages } from '@assay/judge';
import {
  BuildBaseImageCommand,
  BuildTaskImagesCommand,
  CheckTaskCommand,
  ExportRejudgeBundleCommand,
  ExportRunBundleCommand,
  ImportTaskCommand,
  JudgeSnapshotCommand,
  TaskDigestsQuery,
  ListBaselinesQuery,
  ListRunsQuery,
  RecordedRunLogsQuery,
  RejudgeBundleCommand,
  RunEventsSinceQuery,
  RecordBaselineCommand,
  RunResearchCommand,
} from './runtime.commands';

/**
 * What every handler takes from the module: time, ids, the container runtime, and the module's JudgeRuntime: the
 * Judges and image builds JudgeModule composes over the module's own ledger (LedgerModule's LedgerHomeProvider) and
 * snapshot store (SnapshotsModule's SnapshotHomeProvider), so a command opens each once and closing its JudgeRuntime
 * closes nothing the module holds.
 */
@Injectable()
export class RuntimeComposition {
  constructor(
    @Inject(CLOCK) readonly clock: Clock,
    @Inject(ID_GENERATOR) readonly ids: IdGenerator,
    @Inject(CONTAINER_RUNTIME) readonly containers: ContainerRuntime,
    private readonly ledger: LedgerHomeProvider,
    private readonly store: SnapshotHomeProvider,
    private readonly judge: JudgeComposer,
    /** RunModule's: the run ledger and the host's GPU probes. */
    readonly run: RunPorts,
  ) {}

  readonly judgeRuntime: JudgeRuntimeSource = async ({ progress }) => {
    const judge = await this.judge.compose(progress ? { progress } : {});
    const ledgerHome = await this.ledger.get();
    return new JudgeRuntime(ledgerHome.paths.home, this.containers, ledgerHome, await this.store.writer(), judge, undefined, async () => undefined);
  };

  /** What a use case is composed with: the module's providers, its JudgeRuntime included. */
  get composed() {
    return { clock: this.clock, ids: this.ids, containers: this.containers, judgeRuntime: this.judgeRuntime };
  }
}

@CommandHandler(RunResearchCommand)
export class RunResearchHandler implements ICommandHandler<RunResearchCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: RunResearchCommand): Promise<RunReport> {
    const { run } = this.c;
    return runResearch({
      ...cmd.options,
      ...this.c.composed,
      runLedger: () => run.ledger(),
      gpuProbe: run.gpuProbe,
      gpuRuntimeCheck: run.gpuRuntimeCheck,
    });
  }
}

@CommandHandler(CheckTaskCommand)
export class CheckTaskHandler implements ICommandHandler<CheckTaskCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: CheckTaskCommand): Promise<TaskCheckReport> {
    const { clock, ids, containers, run } = this.c;
    return checkTask(cmd.taskDir, { ...cmd.options, clock, ids, containers, gpuRuntimeCheck: run.gpuRuntimeCheck });
  }
}

@CommandHandler(RecordBaselineCommand)
export class RecordBaselineHandler implements ICommandHandler<RecordBaselineCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: RecordBaselineCommand): Promise<BaselineReport> {
    return recordBaseline(cmd.taskDir, { ...cmd.options, ...this.c.composed });
  }
}

@CommandHandler(JudgeSnapshotCommand)
export class JudgeSnapshotHandler implements ICommandHandler<JudgeSnapshotCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: JudgeSnapshotCommand): Promise<JudgeSnapshotReport> {
    return judgeSnapshot({ ...cmd.options, ...this.c.composed });
  }
}

@CommandHandler(BuildBaseImageCommand)
export class BuildBaseImageHandler implements ICommandHandler<BuildBaseImageCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: BuildBaseImageCommand): Promise<BaseImageResult> {
    return ensureBaseImage({ ...cmd.options, ...this.c.composed });
  }
}

@CommandHandler(BuildTaskImagesCommand)
export class BuildTaskImagesHandler implements ICommandHandler<BuildTaskImagesCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: BuildTaskImagesCommand): Promise<TaskImages & { task: string }> {
    return ensureTaskImages(cmd.taskDir, { ...cmd.options, ...this.c.composed });
  }
}

@QueryHandler(ListRunsQuery)
export class ListRunsHandler implements IQueryHandler<ListRunsQuery> {
  constructor(private readonly ledger: LedgerHomeProvider) {}
  async execute(): Promise<RunStatusView[]> {
    return listRuns((await this.ledger.reader()).ledger, this.ledger.home);
  }
}

@QueryHandler(RecordedRunLogsQuery)
export class RecordedRunLogsHandler implements IQueryHandler<RecordedRunLogsQuery> {
  constructor(private readonly ledger: LedgerHomeProvider) {}
  async execute(q: RecordedRunLogsQuery): Promise<Map<number, { digest: string; position: number }>> {
    return recordedRunLogs((await this.ledger.reader()).ledger, q.run, q.of);
  }
}

@QueryHandler(ListBaselinesQuery)
export class ListBaselinesHandler implements IQueryHandler<ListBaselinesQuery> {
  constructor(private readonly ledger: LedgerHomeProvider) {}
  async execute(q: ListBaselinesQuery): Promise<BaselineList> {
    return listBaselines(async () => (await this.ledger.reader()).ledger, q.taskDir);
  }
}

@CommandHandler(ImportTaskCommand)
export class ImportTaskHandler implements ICommandHandler<ImportTaskCommand> {
  constructor(
    private readonly c: RuntimeComposition,
    private readonly ledger: LedgerHomeProvider,
  ) {}
  execute(cmd: ImportTaskCommand): Promise<TaskImport> {
    return importTask({ taskDir: cmd.taskDir, containers: this.c.containers, ledger: async () => (await this.ledger.get()).ledger });
  }
}

@QueryHandler(TaskDigestsQuery)
export class TaskDigestsHandler implements IQueryHandler<TaskDigestsQuery> {
  execute(q: TaskDigestsQuery): Promise<TaskDigests> {
    return taskDigests(q.taskDir);
  }
}

@CommandHandler(RejudgeBundleCommand)
export class RejudgeBundleHandler implements ICommandHandler<RejudgeBundleCommand> {
  constructor(private readonly c: RuntimeComposition) {}
  execute(cmd: RejudgeBundleCommand): Promise<RejudgeReport> {
    return rejudgeBundle({ ...cmd.options, ...this.c.composed });
  }
}

@QueryHandler(RunEventsSinceQuery)
export class RunEventsSinceHandler implements IQueryHandler<RunEventsSinceQuery> {
  constructor(private readonly ledger: LedgerHomeProvider) {}
  async execute(q: RunEventsSinceQuery): Promise<{ events: RunEventRecord[]; next: number }> {
    return readRunEventsFrom((await this.ledger.reader()).ledger, q.run, q.fromPosition, q.known);
  }
}

@CommandHandler(ExportRunBundleCommand)
export class ExportRunBundleHandler implements ICommandHandler<ExportRunBundleCommand> {
  constructor(
    private readonly ledger: LedgerHomeProvider,
    private readonly store: SnapshotHomeProvider,
  ) {}
  async execute(cmd: ExportRunBundleCommand): Promise<ExportResult & { signer: string }> {
    return exportRunBundle(await this.ledger.get(), this.ledger.home, () => this.store.writer(), cmd.options);
  }
}

@CommandHandler(ExportRejudgeBundleCommand)
export class ExportRejudgeBundleHandler implements ICommandHandler<ExportRejudgeBundleCommand> {
  constructor(private readonly ledger: LedgerHomeProvider) {}
  async execute(cmd: ExportRejudgeBundleCommand): Promise<ExportRejudgeResult & { signer: string }> {
    return exportRejudgeReport(await this.ledger.get(), this.ledger.home, cmd.options);
  }
}

export const RUNTIME_HANDLERS = [
  RunResearchHandler,
  CheckTaskHandler,
  RecordBaselineHandler,
  JudgeSnapshotHandler,
  BuildBaseImageHandler,
  BuildTaskImagesHandler,
  ListRunsHandler,
  RecordedRunLogsHandler,
  ListBaselinesHandler,
  ImportTaskHandler,
  TaskDigestsHandler,
  RejudgeBundleHandler,
  RunEventsSinceHandler,
  ExportRunBundleHandler,
  ExportRejudgeBundleHandler,
];

@Module({})
export class RuntimeModule {
  /**
   * The runtime over `home`. `gpu` replaces the host's GPU probes (`nvidia-smi`, `docker info` through the container
   * runtime) for a run or a task check: tests pass FakeGpuProbe and FakeGpuRuntimeCheck.
   */
  static forHome(
    home: string,
    o: { clock?: Clock; ids?: IdGenerator; containers?: ContainerRuntime; gpu?: { probe?: GpuProbe; runtimeCheck?: GpuRuntimeCheck } } = {},
  ): DynamicModule {
    // each module once: JudgeModule imports the same three, so its ports bind to the providers the handlers use
    const ledger = LedgerModule.forHome(home, { ...(o.clock ? { clock: o.clock } : {}), ...(o.ids ? { ids: o.ids } : {}) });
    const snapshots = SnapshotsModule.forHome(home, o.clock ? { clock: o.clock } : {});
    const containers = ContainersModule.forRuntime(o.containers);
    const judge = JudgeModule.forRootAsync({
      imports: [ledger, snapshots, containers],
      inject: [LedgerHomeProvider, SnapshotHomeProvider],
      useFactory: (l: LedgerHomeProvider, s: SnapshotHomeProvider): JudgeBinding => ({
        ports: async () => judgePortsOf(await l.get(), await s.writer()),
        host: () => judgeHostSettings(resolve(l.home)),
      }),
    });
    const run = RunModule.forRootAsync({
      imports: [ledger, containers],
      inject: [LedgerHomeProvider, CONTAINER_RUNTIME],
      useFactory: (l: LedgerHomeProvider, c: ContainerRuntime): RunBinding => ({
        ledger: async () => new LedgerRunLedger((await l.get()).ledger),
        gpuProbe: o.gpu?.probe ?? new NvidiaSmiGpuProbe(),
        gpuRuntimeCheck: o.gpu?.runtimeCheck ?? new DockerGpuRuntimeCheck(daemonInfoOf(c)),
      }),
    });
    return {
      module: RuntimeModule,
      imports: [ledger, snapshots, containers, judge, run],
      providers: [RuntimeComposition, ...RUNTIME_HANDLERS],
      exports: [ContainersModule],
    };
  }
}
