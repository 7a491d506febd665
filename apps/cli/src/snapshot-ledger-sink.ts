/**
 * Records what the snapshot commands do in the ledger under ASSAY_HOME: SnapshotTaken and WorkspaceEdited, in the
 * catalogue's shape (docs/events.md), signed by the runtime key. Without a ledger in ASSAY_HOME, snapshots still
 * work and a one-line notice says that nothing was recorded.
 */
import { existsSync } from 'node:fs';
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome, homePaths, type JsonObject } from '@assay/ledger';
import type { SnapshotEventSink, SnapshotTakenData, WorkspaceEditedData } from '@assay/snapshots';
import type { CliContext } from './cli-context';

export const SNAPSHOT_STREAM = 'snapshot-cli';

export function snapshotTakenEvent(d: SnapshotTakenData): JsonObject {
  return {
    root: d.rootCid,
    format: d.format,
    files: d.files,
    directories: d.directories,
    symlinks: d.symlinks,
    bytes: d.bytes,
    newBytes: d.newBytes,
    durationMs: Math.round(d.durationMs),
    policyDigest: d.policyDigest,
    ...(d.source !== null ? { source: d.source.slice(0, 4096) } : {}),
    ...(d.outsideSymlinks.count > 0 ? { flagged: d.outsideSymlinks.paths.slice(0, 100) } : {}),
  };
}

export function workspaceEditedEvent(d: WorkspaceEditedData): JsonObject {
  const side = (change: string): string[] => d.paths.filter((p) => p.change === change).map((p) => p.path);
  return {
    from: d.fromCid,
    to: d.toCid,
    added: d.added.files + d.added.symlinks + d.added.directories,
    removed: d.removed.files + d.removed.symlinks + d.removed.directories,
    changed: d.changed.files + d.changed.symlinks + d.changed.modeOnly,
    bytesAdded: d.added.bytes,
    bytesRemoved: d.removed.bytes,
    paths: { added: side('added'), removed: side('removed'), changed: side('changed') },
    truncated: d.pathsTruncated,
  };
}

export class LedgerSnapshotSink implements SnapshotEventSink {
  constructor(
    private readonly ctx: CliContext,
    private readonly stream = SNAPSHOT_STREAM,
  ) {}

  private async append(type: string, data: JsonObject): Promise<void> {
    if (!existsSync(homePaths(this.ctx.home).config)) {
      this.ctx.err(`assay: note: no ledger in ${this.ctx.home}; ${type} not recorded (run \`assay ledger init\` to record snapshots)`);
      return;
    }
    const home = await LedgerHome.open(this.ctx.home, { clock: systemClock, ids: randomIds });
    try {
      await home.ledger.append(this.stream, [{ type, data }]);
    } finally {
      await home.close();
    }
  }

  snapshotTaken(d: SnapshotTakenData): Promise<void> {
    return this.append('SnapshotTaken', snapshotTakenEvent(d));
  }

  workspaceEdited(d: WorkspaceEditedData): Promise<void> {
    return this.append('WorkspaceEdited', workspaceEditedEvent(d));
  }
}
