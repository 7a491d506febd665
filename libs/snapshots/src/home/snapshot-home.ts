import { join } from 'node:path';
import type { CID } from 'multiformats/cid';
import { systemClock, type Clock, type Progress } from '@assay/core';
import type { SnapshotEventSink, WorkspaceEditedData } from '../domain/events';
import type { DiffChange } from '../domain/diff';
import type { SnapshotPolicy } from '../domain/policy';
import { FsBlobStore } from '../adapters/fs-blob-store.adapter';
import { SqliteStatCache } from '../adapters/sqlite-stat-cache.adapter';
import { FsTreeSource } from '../adapters/fs-tree-source.adapter';
import { checkoutSnapshot, type CheckoutReport } from '../application/fs-checkout';
import { exportCar, importCar, type ExportReport, type ImportReport } from '../application/car';
import { takeSnapshot, type SnapshotResult } from '../application/take-snapshot';
import { verifySnapshot, type VerifyReport } from '../application/verify';
import { diffSnapshots, listSnapshot, summarizeSnapshots, type Listing } from '../application/browse';
import { collectGarbage, type GcReport } from '../application/gc';
import { ingestTar, type IngestTarOptions } from '../application/tar-ingest';
import type { PinRecord } from '../ports/blob-store.port';

export interface SnapshotHomeOptions {
  readonly clock?: Clock;
  /** Where SnapshotTaken / WorkspaceEdited go; none by default. */
  readonly sink?: SnapshotEventSink | null;
  /** Hashing threads (default: one per core, at most 8; 0 = calling thread only). */
  readonly workers?: number;
  readonly durability?: 'batch' | 'none';
  /** List directories with the native lister when it is built (default true); false lists through node:fs. */
  readonly nativeLister?: boolean;
}

export interface CreateOptions {
  readonly dryRun?: boolean;
  readonly policy?: Partial<SnapshotPolicy>;
  /** Defaults to the directory's real path. */
  readonly label?: string | null;
  readonly previous?: CID | string | 'auto' | null;
  readonly useCache?: boolean;
  readonly progress?: Progress;
}

/**
 * The root CID a snapshot of `dir` would have (a task directory's digests, docs/snapshots-format.md): the tree is
 * read and hashed, and nothing is written anywhere: no store, no stat cache, no events. Needs no Assay home.
 */
export async function digestDirectory(dir: string, o: Pick<SnapshotHomeOptions, 'clock' | 'workers' | 'nativeLister'> = {}): Promise<string> {
  const source = new FsTreeSource(dir, {
    ...(o.workers === undefined ? {} : { workers: o.workers }),
    ...(o.nativeLister === undefined ? {} : { nativeLister: o.nativeLister }),
  });
  const r = await takeSnapshot({ source, store: null, cache: null, clock: o.clock ?? systemClock, sink: null }, { dryRun: true, label: null, previous: null });
  return r.rootCid;
}

/**
 * Snapshots as kept under an Assay home: blobs in `<home>/blobs`, the stat cache in
 * `<home>/snapshot-cache.sqlite`. The composition root for the CLI and the runtime.
 */
export class SnapshotHome {
  private storeHandle: FsBlobStore | null = null;
  private cacheHandle: SqliteStatCache | null = null;
  private readonly clock: Clock;

  /** Opens nothing yet: the blob store and the stat cache are opened on first use (a dry run uses neither). */
  constructor(
    readonly home: string,
    private readonly options: SnapshotHomeOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** The blob store, opened (and created) on first use: a dry run without the stat cache writes nothing. */
  get store(): FsBlobStore {
    this.storeHandle ??= new FsBlobStore(join(this.home, 'blobs'), { clock: this.clock, durability: this.options.durability ?? 'batch' });
    return this.storeHandle;
  }

  get cache(): SqliteStatCache {
    this.cacheHandle ??= new SqliteStatCache(join(this.home, 'snapshot-cache.sqlite'));
    return this.cacheHandle;
  }

  async create(dir: string, o: CreateOptions = {}): Promise<SnapshotResult> {
    const source = new FsTreeSource(dir, {
      ...(this.options.workers === undefined ? {} : { workers: this.options.workers }),
      ...(this.options.nativeLister === undefined ? {} : { nativeLister: this.options.nativeLister }),
    });
    return takeSnapshot(
      {
        source,
        store: o.dryRun ? null : this.store,
        cache: o.useCache === false ? null : this.cache,
        clock: this.clock,
        sink: this.options.sink ?? null,
        ...(o.progress ? { progress: o.progress } : {}),
      },
      {
        dryRun: o.dryRun === true,
        label: o.label === undefined ? source.id : o.label,
        previous: o.previous ?? 'auto',
        ...(o.policy ? { policy: o.policy } : {}),
      },
    );
  }

  /** The root CID a snapshot of `dir` would have, with this home's hashing settings; writes nothing (digestDirectory). */
  digest(dir: string): Promise<string> {
    return digestDirectory(dir, this.options);
  }

  /** Ingests a tar stream (e.g. `docker export`) as one snapshot: the same root CID as the same tree on disk. */
  ingestTar(source: AsyncIterable<Uint8Array>, o: IngestTarOptions & { progress?: Progress } = {}): Promise<SnapshotResult> {
    return ingestTar({ store: this.store, clock: this.clock, sink: this.options.sink ?? null, ...(o.progress ? { progress: o.progress } : {}) }, source, o);
  }

  verify(root: CID, progress?: Progress): Promise<VerifyReport> {
    return verifySnapshot(this.store, root, progress ? { progress } : {});
  }

  ls(root: CID, path = ''): Promise<Listing> {
    return listSnapshot(this.store, root, path);
  }

  diff(a: CID, b: CID): AsyncGenerator<DiffChange> {
    return diffSnapshots(this.store, a, b);
  }

  summary(a: CID, b: CID, maxPaths?: number): Promise<WorkspaceEditedData> {
    return summarizeSnapshots(this.store, a, b, maxPaths);
  }

  checkout(root: CID, dir: string, o: { policy?: Partial<SnapshotPolicy>; progress?: Progress } = {}): Promise<CheckoutReport> {
    return checkoutSnapshot(this.store, root, dir, o);
  }

  /** `withholdRootEntries`: root directory entries whose blocks are left out (a task's hidden parts in a bundle). */
  exportCar(roots: readonly CID[], file: string, progress?: Progress, o: { withholdRootEntries?: readonly string[] } = {}): Promise<ExportReport> {
    return exportCar(this.store, roots, file, { ...(progress ? { progress } : {}), ...o });
  }

  importCar(file: string, progress?: Progress): Promise<ImportReport> {
    return importCar(this.store, file, { clock: this.clock, ...(progress ? { progress } : {}) });
  }

  gc(o: { graceMs?: number; dryRun?: boolean; progress?: Progress } = {}): Promise<GcReport> {
    return collectGarbage(this.store, { clock: this.clock, cache: this.cache, ...o });
  }

  pins(): Promise<PinRecord[]> {
    return this.store.pins();
  }

  unpin(cid: CID): Promise<boolean> {
    return this.store.unpin(cid);
  }

  async close(): Promise<void> {
    await this.cacheHandle?.close();
    this.cacheHandle = null;
    await this.storeHandle?.close();
    this.storeHandle = null;
  }
}
