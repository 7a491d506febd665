// Public entry of @assay/snapshots: content-addressed snapshots of workspaces.
export { SNAPSHOT_ERROR_KINDS, snapshotError, type SnapshotErrorCode } from './domain/snapshot.errors';
export * from './domain/format';
export { MAX_NAME_BYTES, compareNames, decodeUtf8Strict, findNfcCollision, validateEntryName } from './domain/names';
export * from './domain/policy';
export * from './domain/exclude';
export * from './domain/symlinks';
export * from './domain/stat-cache';
export * from './domain/events';
export * from './domain/diff';
export * from './ports/blob-store.port';
export * from './ports/stat-cache.port';
export * from './ports/tree-source.port';
export { NodeReader, type BlockGetter } from './application/node-reader';
export * from './application/take-snapshot';
export * from './application/verify';
export * from './application/browse';
export * from './application/gc';
export { ingestTar, rootfsPolicy, ROOTFS_EXCLUDES, type IngestTarDeps, type IngestTarOptions } from './application/tar-ingest';
export { MemoryBlobStore } from './adapters/memory-blob-store.adapter';
export { MemoryStatCache } from './adapters/memory-stat-cache.adapter';
export { MemoryTree } from './adapters/memory-tree-source.adapter';
export { FsBlobStore, FS_STORE_FORMAT, FS_STORE_FORMAT_LOOSE, type FsBlobStoreOptions } from './adapters/fs-blob-store.adapter';
export { PackIndex, type Loc as PackLocation } from './adapters/pack-index';
export { SqliteStatCache } from './adapters/sqlite-stat-cache.adapter';
export { FsTreeSource, type FsTreeSourceOptions } from './adapters/fs-tree-source.adapter';
export { childListings, decodeListing, nativeLister, nativeListerStatus, summarizeListing, type NativeLister } from './adapters/native-lister';
export { checkoutSnapshot, type CheckoutOptions, type CheckoutReport } from './application/fs-checkout';
export { exportCar, importCar, MAX_CAR_ROOTS, type ExportReport, type ImportReport } from './application/car';
export { CarCheck, carMalformed, carTruncated, MAX_CAR_HEADER_BYTES, MAX_CAR_SECTION_BYTES } from './domain/car-check';
export * from './home/snapshot-home';
export * from './nest/snapshots.commands';
export {
  SnapshotsModule,
  SnapshotHomeProvider,
  SNAPSHOT_EVENT_SINK,
  SNAPSHOT_HANDLERS,
  type SnapshotSinkBinding,
  type SnapshotsModuleOptions,
} from './nest/snapshots.module';
