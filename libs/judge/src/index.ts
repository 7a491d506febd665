// Public entry of @assay/judge: judging snapshots in fresh, isolated containers (docs/judge.md).

// domain: pure rules
export * from './domain/reward';
export { parseStrictJson, type StrictJson, type StrictJsonParse } from './domain/strict-json';
export * from './domain/verdict';
export * from './domain/judge-settings';
export * from './domain/judge-plan';
export * from './domain/judge-events';
export * from './domain/dockerfile';
export * from './domain/image-guidance';
export * from './judge.errors';

// ports and adapters
export * from './ports/judge-snapshots.port';
export * from './ports/judge-recorder.port';
export * from './ports/owner.port';
export { LedgerJudgeRecorder } from './adapters/ledger-judge-recorder.adapter';
export { ProcessOwnerRegistry } from './adapters/process-owner.adapter';

// application
export { OutputCapture, type CapturedOutput } from './application/output-capture';
export { readVerifierFiles, MAX_VERIFIER_ARCHIVE_BYTES, type VerifierFiles } from './application/reward-files';
export { dirTar, dirTarBuffer, type DirTarLimits, type DirTarStats } from './application/dir-tar';
export * from './application/task-images';
export * from './application/judge-runner';
export { importRootfsImage, rootfsImageTag, ROOTFS_IMAGE_ROLE, ROOTFS_HARNESS_PATHS } from './application/rootfs-image';
export * from './application/judge-composition';

// the Judge as a NestJS module (its ports bound by the importing module)
export { JudgeModule, JudgeComposer, JUDGE_BINDING, JUDGE_OWNERS, type JudgeBinding, type JudgeModuleOptions } from './nest/judge.module';
