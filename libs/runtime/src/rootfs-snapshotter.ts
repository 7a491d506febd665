/**
 * Full-rootfs mode of `assay run` (docs/run.md, "Full-rootfs mode"): for a task whose workdir is `/`, Work has no
 * workspace directory; a snapshot is Work's whole file system, streamed from `docker export` into the snapshot
 * store (libs/snapshots ingestTar) with the rootfs exclusions (ROOTFS_EXCLUDES: /proc, /sys, /dev, /tmp, Docker's
 * per-container files, Assay's own mounts and injected files). The caller freezes Work around `snapshot()` (the
 * SubmissionService pauses it), so the export sees one consistent file system.
 */
import { systemClock, type Clock } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import { parseCid, rootfsPolicy, type SnapshotHome, type SnapshotPolicy } from '@assay/snapshots';
import type { Snapshotter, SnapshotRequest, WorkspaceChange, WorkspaceSnapshot } from '@assay/run';

/** The policy of full-rootfs snapshots: the rootfs exclusions; fifos and device nodes outside them are left out. */
export function rootfsSnapshotPolicy(extra: Partial<SnapshotPolicy> = {}): Partial<SnapshotPolicy> {
  return rootfsPolicy({ specialFiles: 'skip', ...extra });
}

export class ContainerSnapshotter implements Snapshotter {
  ms = 0;
  constructor(
    private readonly home: SnapshotHome,
    private readonly containers: ContainerRuntime,
    /** The Work container (known once it was created). */
    private readonly container: () => string | null,
    private readonly policy: Partial<SnapshotPolicy> = rootfsSnapshotPolicy(),
    private readonly clock: Clock = systemClock,
  ) {}

  async snapshot(_req: SnapshotRequest): Promise<WorkspaceSnapshot> {
    const id = this.container();
    if (!id) throw new Error('internal: no Work container to snapshot yet');
    const t = this.clock.now().getTime();
    const stream = await this.containers.exportContainer(id);
    const r = await this.home.ingestTar(stream, { policy: this.policy, previous: null, label: null });
    this.ms += this.clock.now().getTime() - t;
    return {
      root: r.rootCid,
      files: r.files,
      bytes: r.bytes,
      durationMs: r.durationMs,
      policyDigest: r.policyDigest,
      source: `container:${id.slice(0, 12)}:/`,
      // In a root file system an absolute target (or a `..` above the root) stays inside it: nothing to flag.
      flagged: [],
    };
  }

  async *changes(from: string, to: string): AsyncIterable<WorkspaceChange> {
    for await (const c of this.home.diff(parseCid(from), parseCid(to))) {
      yield { path: c.path, change: c.change, kind: c.kind, sizeBefore: c.sizeBefore, sizeAfter: c.sizeAfter };
    }
  }
}
