/**
 * A run's result bundle exported from an ASSAY_HOME: the composition `assay bundle export` and the API's
 * `POST /runs/:id/bundle` share. It binds exportBundle's ports to the home's snapshot store (the CARs of the run's
 * snapshots and of the task directory, its tests/ and solution/ withheld) and to the run's directory (its logs).
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AssayError } from '@assay/core';
import type { LedgerHome, SigningKey } from '@assay/ledger';
import { parseCid, type SnapshotHome } from '@assay/snapshots';
import { exportBundle, type ExportResult } from '../application/export-bundle';
import { WITHHELD_TASK_ENTRIES, type LogMode, type SnapshotMode } from '../domain/bundle-format';

export interface ExportFromHomeOptions {
  /** The ASSAY_HOME directory (its blobs and `runs/<run>/`). */
  readonly homeDir: string;
  /** The home's ledger, opened for writing (exporting signs a checkpoint, and `--logs redacted` records LogRedacted). */
  readonly home: LedgerHome;
  /**
   * The home's snapshot store, opened by the caller's module (SnapshotsModule's provider) and left open here; its
   * sink must be none: the task directory's snapshot is not a run's and records no event.
   */
  readonly snapshotStore: () => Promise<SnapshotHome>;
  readonly publisher: SigningKey;
  readonly run: string;
  readonly out: string;
  readonly snapshots: SnapshotMode;
  readonly logs: LogMode;
  /** A cosigned checkpoint note to prove against (default: one signed now). */
  readonly checkpoint?: string;
  /** The task directory whose public files the bundle carries (task.car). */
  readonly taskDir?: string;
  readonly hostnames: readonly string[];
  readonly progress?: (done: number, total: number) => void;
}

export async function exportRunBundleFromHome(o: ExportFromHomeOptions): Promise<ExportResult> {
  const writeCar = async (roots: readonly string[], file: string) => {
    const store = await o.snapshotStore();
    await store.exportCar(
      roots.map((r) => parseCid(r)),
      file,
    );
  };
  const taskDir = o.taskDir;
  const writeTaskCar =
    taskDir === undefined
      ? undefined
      : async (file: string) => {
          if (!existsSync(taskDir) || !statSync(taskDir).isDirectory())
            throw new AssayError('CLI_USAGE', 'invalid_input', `--task ${taskDir} is not a directory`, { details: { taskDir } });
          const store = await o.snapshotStore();
          const snap = await store.create(taskDir, { previous: null, label: null, useCache: false });
          await store.exportCar([parseCid(snap.rootCid)], file, undefined, { withholdRootEntries: WITHHELD_TASK_ENTRIES });
          return { root: snap.rootCid };
        };
  return exportBundle(o.home.ledger, {
    run: o.run,
    out: o.out,
    publisher: o.publisher,
    snapshots: o.snapshots,
    writeCar,
    ...(o.checkpoint !== undefined ? { checkpoint: o.checkpoint } : {}),
    logs: o.logs,
    ...(writeTaskCar ? { writeTaskCar } : {}),
    runDir: join(o.homeDir, 'runs', o.run),
    hostnames: o.hostnames,
    ...(o.progress ? { progress: o.progress } : {}),
  });
}
