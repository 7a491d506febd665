// @assay/runtime, the runtime node: the composition of Docker, the snapshot store and the ledger for the Judges
// (JudgeRuntime), task images, task checks and baselines, and the research run's Work container (runResearch).
// Only apps import it (lib-layers-runtime): it is the outermost lib, built on judge, run and the layers below.
export {
  JudgeRuntime,
  composeJudgeRuntime,
  homeTag,
  judgeRuntimeFor,
  openJudgeRuntime,
  type JudgeRuntimeOptions,
  type JudgeRuntimeParts,
  type JudgeRuntimeSource,
  type LoadedTask,
} from './judge-runtime';
export { SnapshotStoreAdapter } from './snapshot-store.adapter';
export { ContainerSnapshotter, rootfsSnapshotPolicy } from './rootfs-snapshotter';
export { buildBaseImage, type BaseImageResult } from './base-image';
export { assayRoot } from './repo-paths';
export { runResearch, agentOf, type RunReport, type RunStartOptions } from './run-runtime';
export { parseGpuList } from './gpu-pool';
export { controllerLockState } from './controller-lock';
export { recordBaseline, type BaselineReport } from './baseline';
export { checkTask, type TaskCheckReport } from './task-check';
export { ensureBaseImage, ensureTaskImages, type ImagesOptions } from './images';
export { listBaselines, listRuns, recordedRunLogs, type BaselineList } from './run-views';
export { importTask, taskDigests, type TaskImport } from './task-import';
export { rejudgeBundle, type RejudgeBundleOptions } from './rejudge-bundle';
export { exportRunBundle, exportRejudgeReport, type ExportRunBundleOptions, type BundleSigning } from './bundle-export';
export { judgeSnapshot, type JudgeSnapshotOptions, type JudgeSnapshotReport, type JudgeSnapshotReady } from './judge-snapshot';
export { RuntimeComposition, RuntimeModule, RUNTIME_HANDLERS } from './nest/runtime.module';
export {
  RunResearchCommand,
  CheckTaskCommand,
  RecordBaselineCommand,
  JudgeSnapshotCommand,
  BuildBaseImageCommand,
  BuildTaskImagesCommand,
  ListRunsQuery,
  RecordedRunLogsQuery,
  ListBaselinesQuery,
  ImportTaskCommand,
  TaskDigestsQuery,
  RejudgeBundleCommand,
  RunEventsSinceQuery,
  ExportRunBundleCommand,
  ExportRejudgeBundleCommand,
} from './nest/runtime.commands';
