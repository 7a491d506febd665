/**
 * The runtime node's use cases as commands (@nestjs/cqrs), dispatched by the CLI through the same buses as the
 * ledger's: a research run, a task check, a baseline, Judges on a snapshot, images. They carry plain options; the handlers (runtime.handlers.ts)
 * add the Clock, the ids and the container runtime that RuntimeModule binds.
 */
import { Command, Query } from '@nestjs/cqrs';
import type { RunEventRecord, RunStatusView } from '@assay/run';
import type { BaselineList } from '../run-views';
import type { TaskImport } from '../task-import';
import type { RejudgeBundleOptions } from '../rejudge-bundle';
import type { ExportRejudgeResult, ExportResult, RejudgeReport } from '@assay/bundles';
import type { BundleSigning, ExportRunBundleOptions } from '../bundle-export';
import type { TaskDigests } from '@assay/task-format';
import type { RunReport, RunStartOptions } from '../run-runtime';
import type { TaskCheckOptions, TaskCheckReport } from '../task-check';
import type { BaselineOptions, BaselineReport } from '../baseline';
import type { JudgeSnapshotOptions, JudgeSnapshotReport } from '../judge-snapshot';
import type { ImagesOptions } from '../images';
import type { BaseImageResult } from '../base-image';
import type { TaskImages } from '@assay/judge';

/**
 * What the composition root gives the runtime's use cases, so a command never carries them: the providers, the
 * module's JudgeRuntime, and the run's shared ports (RunModule's: the run ledger, the GPU probes).
 */
type Composed = 'clock' | 'ids' | 'containers' | 'judgeRuntime' | 'runLedger' | 'gpuProbe' | 'gpuRuntimeCheck';

/** `assay run TASK_DIR` and `assay run --resume RUN_ID`. */
export class RunResearchCommand extends Command<RunReport> {
  constructor(public readonly options: Omit<RunStartOptions, Composed> & { resume?: boolean }) {
    super();
  }
}

/** `assay task check TASK_DIR`. */
export class CheckTaskCommand extends Command<TaskCheckReport> {
  constructor(
    public readonly taskDir: string,
    public readonly options: Omit<TaskCheckOptions, Composed> = {},
  ) {
    super();
  }
}

/** `assay baseline TASK_DIR`. */
export class RecordBaselineCommand extends Command<BaselineReport> {
  constructor(
    public readonly taskDir: string,
    public readonly options: Omit<BaselineOptions, Composed>,
  ) {
    super();
  }
}

/** `assay judge TASK_DIR --snapshot CID|DIR [--repeat N]`. */
export class JudgeSnapshotCommand extends Command<JudgeSnapshotReport> {
  constructor(public readonly options: Omit<JudgeSnapshotOptions, Composed>) {
    super();
  }
}

/** `assay images base`. */
export class BuildBaseImageCommand extends Command<BaseImageResult> {
  constructor(public readonly options: Omit<ImagesOptions, Composed>) {
    super();
  }
}

/** `assay images build TASK_DIR`. */
export class BuildTaskImagesCommand extends Command<TaskImages & { task: string }> {
  constructor(
    public readonly taskDir: string,
    public readonly options: Omit<ImagesOptions, Composed>,
  ) {
    super();
  }
}

/** `assay run ls` / `assay run status`: every run of the ledger, folded (read-only). */
export class ListRunsQuery extends Query<RunStatusView[]> {}

/** `assay run logs`: the digests the ledger recorded of a run's Judge logs or agent transcripts (read-only). */
export class RecordedRunLogsQuery extends Query<Map<number, { digest: string; position: number }>> {
  constructor(
    public readonly run: string,
    public readonly of: 'judge' | 'agent',
  ) {
    super();
  }
}

/** `assay baseline ls [--task DIR]` (and the baselines `assay run status` compares with): read-only. */
export class ListBaselinesQuery extends Query<BaselineList> {
  constructor(public readonly taskDir?: string) {
    super();
  }
}

/** `assay task import DIR`: validated, digested, its images looked up, TaskRegistered once per digest. */
export class ImportTaskCommand extends Command<TaskImport> {
  constructor(public readonly taskDir: string) {
    super();
  }
}

/** `assay task show DIR`'s digests (nothing stored). */
export class TaskDigestsQuery extends Query<TaskDigests> {
  constructor(public readonly taskDir: string) {
    super();
  }
}

/** `assay rejudge FILE --task DIR`: a result bundle's selected snapshot judged again, RejudgeCompleted recorded. */
export class RejudgeBundleCommand extends Command<RejudgeReport> {
  constructor(public readonly options: Omit<RejudgeBundleOptions, Composed>) {
    super();
  }
}

/**
 * `assay watch RUN_ID`: the run's events stored from `fromPosition` on and the position to read from next (read-only;
 * `known`: whether the run's own stream had started before this read).
 */
export class RunEventsSinceQuery extends Query<{ events: RunEventRecord[]; next: number }> {
  constructor(
    public readonly run: string,
    public readonly fromPosition: number,
    public readonly known: boolean,
  ) {
    super();
  }
}

/** `assay bundle export RUN -o FILE`: a run's result bundle from this home's ledger. */
export class ExportRunBundleCommand extends Command<ExportResult & { signer: string }> {
  constructor(public readonly options: ExportRunBundleOptions) {
    super();
  }
}

/** `assay bundle export-rejudge ID -o FILE`: a re-judge report's own bundle. */
export class ExportRejudgeBundleCommand extends Command<ExportRejudgeResult & { signer: string }> {
  constructor(public readonly options: BundleSigning & { readonly rejudge: string; readonly out: string }) {
    super();
  }
}
