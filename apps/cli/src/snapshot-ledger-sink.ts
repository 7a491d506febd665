/**
 * Records what the snapshot commands do in the ledger under ASSAY_HOME: SnapshotTaken and WorkspaceEdited, in the
 * catalogue's shape (docs/events.md), signed by the runtime key. Without a ledger in ASSAY_HOME, snapshots still
 * work and a one-line notice says that nothing was recorded.
 *
 * The sink is a provider of the CLI's snapshot application (see `snapshotsRecordedInLedger`): it appends through
 * LedgerModule's LedgerHomeProvider, so one call opens the ledger once, and its events carry the module's clock and
 * ids.
 */
import { existsSync } from 'node:fs';
import type { DynamicModule } from '@nestjs/common';
import type { Clock, IdGenerator } from '@assay/core';
import { homePaths, type JsonObject, type LedgerHomeProvider } from '@assay/ledger';
import type { SnapshotEventSink, SnapshotTakenData, WorkspaceEditedData } from '@assay/snapshots';
import { libs } from './libs';

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
    private readonly ledger: LedgerHomeProvider,
    /** Where the one-line notice goes when ASSAY_HOME has no ledger. */
    private readonly notice: (line: string) => void,
    private readonly stream = SNAPSHOT_STREAM,
  ) {}

  private async append(type: string, data: JsonObject): Promise<void> {
    if (!existsSync(homePaths(this.ledger.home).config)) {
      this.notice(`assay: note: no ledger in ${this.ledger.home}; ${type} not recorded (run \`assay ledger init\` to record snapshots)`);
      return;
    }
    await (await this.ledger.get()).ledger.append(this.stream, [{ type, data }]);
  }

  snapshotTaken(d: SnapshotTakenData): Promise<void> {
    return this.append('SnapshotTaken', snapshotTakenEvent(d));
  }

  workspaceEdited(d: WorkspaceEditedData): Promise<void> {
    return this.append('WorkspaceEdited', workspaceEditedEvent(d));
  }
}

/**
 * The snapshot store's module (SnapshotsModule) with the ledger's module imported and LedgerSnapshotSink bound as
 * where SnapshotTaken / WorkspaceEdited go.
 */
export function snapshotsRecordedInLedger(home: string, notice: (line: string) => void, o: { clock?: Clock; ids?: IdGenerator } = {}): DynamicModule {
  const ledger = libs.ledger();
  return libs.snapshots().SnapshotsModule.forHome(home, {
    ...(o.clock ? { clock: o.clock } : {}),
    bindSink: {
      imports: [ledger.LedgerModule.forHome(home, o)],
      inject: [ledger.LedgerHomeProvider],
      useFactory: (l: LedgerHomeProvider) => new LedgerSnapshotSink(l, notice),
    },
  });
}
