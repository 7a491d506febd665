/**
 * The snapshot store's use cases as commands and queries (@nestjs/cqrs), dispatched by the CLI (`assay snapshot ...`)
 * through SnapshotsModule. They carry plain arguments; the handlers (snapshots.module.ts) run them on the module's
 * SnapshotHome.
 */
import { Command, Query } from '@nestjs/cqrs';
import type { CID } from 'multiformats/cid';
import type { Progress } from '@assay/core';
import type { CreateOptions } from '../home/snapshot-home';
import type { DiffChange } from '../domain/diff';
import type { SnapshotResult } from '../application/snapshot-common';

type HomeOf = import('../home/snapshot-home').SnapshotHome;
type ResultOf<M extends keyof HomeOf> = HomeOf[M] extends (...a: never[]) => Promise<infer R> ? R : never;

/** `snapshot create DIR`: the directory into the store (SnapshotTaken / WorkspaceEdited through the module's sink). */
export class CreateSnapshotCommand extends Command<SnapshotResult> {
  constructor(
    public readonly dir: string,
    public readonly options: CreateOptions = {},
  ) {
    super();
  }
}

/** `snapshot import FILE`: a CAR file's snapshots into the store, each checked. */
export class ImportSnapshotsCommand extends Command<ResultOf<'importCar'>> {
  constructor(
    public readonly file: string,
    public readonly progress?: Progress,
  ) {
    super();
  }
}

/** `snapshot checkout CID DIR`: a snapshot materialised into a new or empty directory. */
export class CheckoutSnapshotCommand extends Command<ResultOf<'checkout'>> {
  constructor(
    public readonly root: CID,
    public readonly dir: string,
    public readonly progress?: Progress,
  ) {
    super();
  }
}

/** `snapshot export CID... -o FILE`: snapshots written as one CAR file. */
export class ExportSnapshotsCommand extends Command<ResultOf<'exportCar'>> {
  constructor(
    public readonly roots: readonly CID[],
    public readonly file: string,
    public readonly progress?: Progress,
  ) {
    super();
  }
}

/** `snapshot gc`: blobs no pinned snapshot reaches, older than the grace period, removed (or counted). */
export class CollectSnapshotGarbageCommand extends Command<ResultOf<'gc'>> {
  constructor(public readonly options: { graceMs?: number; dryRun?: boolean; progress?: Progress } = {}) {
    super();
  }
}

/** `snapshot unpin CID`: whether a pin was removed. */
export class UnpinSnapshotCommand extends Command<boolean> {
  constructor(public readonly root: CID) {
    super();
  }
}

/** `snapshot verify CID`: every blob of a snapshot checked against its CID. */
export class VerifySnapshotQuery extends Query<ResultOf<'verify'>> {
  constructor(
    public readonly root: CID,
    public readonly progress?: Progress,
  ) {
    super();
  }
}

/** `snapshot ls CID [PATH]`. */
export class ListSnapshotQuery extends Query<ResultOf<'ls'>> {
  constructor(
    public readonly root: CID,
    public readonly path = '',
  ) {
    super();
  }
}

/** `snapshot diff A B`: each change handed to `onChange` in path order (a diff is not held in memory). */
export class DiffSnapshotsQuery extends Query<number> {
  constructor(
    public readonly from: CID,
    public readonly to: CID,
    public readonly onChange: (change: DiffChange) => void,
  ) {
    super();
  }
}

/** `snapshot pins`. */
export class ListPinsQuery extends Query<ResultOf<'pins'>> {}
