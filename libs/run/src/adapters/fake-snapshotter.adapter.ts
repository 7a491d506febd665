/**
 * An in-memory Snapshotter for tests: the workspace is a map of path -> content; a snapshot's root is the SHA-256
 * of its sorted content (base16, so it is a lowercase CID-shaped string); changes are computed between stored trees.
 * `fail` makes the next snapshot throw; `gate` holds snapshots until it resolves.
 */
import { createHash } from 'node:crypto';
import type { SnapshotRequest, Snapshotter, WorkspaceChange, WorkspaceSnapshot } from '../ports/snapshotter.port';

export class FakeSnapshotter implements Snapshotter {
  /** The workspace: relative path -> file content. */
  readonly files = new Map<string, string>();
  readonly calls: SnapshotRequest[] = [];
  private readonly trees = new Map<string, Map<string, string>>();
  fail: Error | null = null;
  gate: Promise<void> | null = null;

  constructor(initial: Record<string, string> = {}) {
    for (const [k, v] of Object.entries(initial)) this.files.set(k, v);
  }

  static rootOf(files: ReadonlyMap<string, string>): string {
    const h = createHash('sha256');
    for (const k of [...files.keys()].sort()) h.update(`${k}\0${files.get(k)}\0`);
    return `f${h.digest('hex')}`;
  }

  /** The files of a snapshot taken earlier (undefined when unknown). */
  tree(root: string): ReadonlyMap<string, string> | undefined {
    return this.trees.get(root);
  }

  async snapshot(req: SnapshotRequest): Promise<WorkspaceSnapshot> {
    this.calls.push(req);
    if (this.gate) await this.gate;
    if (this.fail) {
      const e = this.fail;
      this.fail = null;
      throw e;
    }
    const tree = new Map(this.files);
    const root = FakeSnapshotter.rootOf(tree);
    this.trees.set(root, tree);
    let bytes = 0;
    for (const v of tree.values()) bytes += Buffer.byteLength(v);
    return { root, files: tree.size, bytes, durationMs: 1, policyDigest: `sha256:${'0'.repeat(64)}`, source: 'memory' };
  }

  async *changes(from: string, to: string): AsyncIterable<WorkspaceChange> {
    const a = this.trees.get(from) ?? new Map<string, string>();
    const b = this.trees.get(to) ?? new Map<string, string>();
    const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
    for (const path of paths) {
      const x = a.get(path);
      const y = b.get(path);
      const size = (v: string | undefined) => (v === undefined ? null : Buffer.byteLength(v));
      if (x === undefined) yield { path, change: 'added', kind: 'file', sizeBefore: null, sizeAfter: size(y) };
      else if (y === undefined) yield { path, change: 'removed', kind: 'file', sizeBefore: size(x), sizeAfter: null };
      else if (x !== y) yield { path, change: 'changed', kind: 'file', sizeBefore: size(x), sizeAfter: size(y) };
    }
  }
}
