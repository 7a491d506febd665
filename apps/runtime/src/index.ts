// The runtime node (apps/runtime): composition of Docker, the snapshot store and the ledger for Judges and images.
export { JudgeRuntime, homeTag, type JudgeRuntimeOptions, type LoadedTask } from './judge-runtime';
export { SnapshotStoreAdapter } from './snapshot-store.adapter';
export { ContainerSnapshotter, rootfsSnapshotPolicy } from './rootfs-snapshotter';
export { buildBaseImage, type BaseImageResult } from './base-image';
export { assayRoot } from './repo-paths';
