/**
 * The Judge's snapshot port over the snapshot store kept under ASSAY_HOME (`<home>/blobs`, @assay/snapshots).
 */
import { isAssayError } from '@assay/core';
import { tarHeader, tarPadding } from '@assay/containers';
import { NodeReader, parseCid, type SnapshotHome } from '@assay/snapshots';
import { judgeError, type JudgeSnapshots, type MaterialiseLimits, type SnapshotEntry } from '@assay/judge';

export class SnapshotStoreAdapter implements JudgeSnapshots {
  constructor(private readonly home: SnapshotHome) {}

  private cid(text: string) {
    try {
      return parseCid(text);
    } catch (e) {
      if (isAssayError(e)) throw judgeError('JUDGE_SNAPSHOT_INVALID', e.message, { snapshot: text }, e);
      throw e;
    }
  }

  async snapshotDirectory(dir: string): Promise<string> {
    const r = await this.home.create(dir, { previous: null, label: null });
    return r.rootCid;
  }

  async has(cid: string): Promise<boolean> {
    return this.home.store.has(this.cid(cid));
  }

  async *walk(cid: string): AsyncIterable<SnapshotEntry> {
    const reader = new NodeReader(this.home.store);
    const stack: Array<{ cid: ReturnType<typeof parseCid>; path: string }> = [{ cid: this.cid(cid), path: '' }];
    while (stack.length > 0) {
      const { cid: dirCid, path } = stack.pop() as { cid: ReturnType<typeof parseCid>; path: string };
      const m = await reader.readDir(dirCid, path);
      const subdirs: Array<{ cid: ReturnType<typeof parseCid>; path: string }> = [];
      for (const e of m.entries) {
        const p = path === '' ? e.name : `${path}/${e.name}`;
        if (e.kind === 'dir') {
          yield { path: p, kind: 'dir', size: 0, target: null };
          subdirs.push({ cid: e.cid, path: p });
        } else if (e.kind === 'file') {
          yield { path: p, kind: 'file', size: e.size, target: null };
        } else {
          yield { path: p, kind: 'symlink', size: 0, target: e.target };
        }
      }
      for (const s of subdirs.reverse()) stack.push(s);
    }
  }

  async materialise(cid: string, dest: string, limits: MaterialiseLimits): Promise<{ files: number; bytes: number }> {
    const r = await this.home.checkout(this.cid(cid), dest, {
      policy: {
        maxFiles: limits.maxFiles,
        maxFileBytes: Math.min(limits.maxFileBytes, 128 * 2 ** 30),
        maxTotalBytes: limits.maxTotalBytes,
        maxDepth: limits.maxDepth,
      },
    });
    return { files: r.files, bytes: r.bytes };
  }

  /** The snapshot as tar entries (no end marker), every block checked against its CID as it is read. */
  async *archive(cid: string, skip: (path: string) => boolean): AsyncIterable<Uint8Array> {
    const reader = new NodeReader(this.home.store);
    const store = this.home.store;
    async function* dir(dirCid: ReturnType<typeof parseCid>, path: string): AsyncGenerator<Uint8Array> {
      const m = await reader.readDir(dirCid, path);
      for (const e of m.entries) {
        const p = path === '' ? e.name : `${path}/${e.name}`;
        if (skip(p)) continue;
        if (e.kind === 'dir') {
          yield tarHeader({ path: p, type: 'dir', mode: 0o755 });
          yield* dir(e.cid, p);
        } else if (e.kind === 'symlink') {
          yield tarHeader({ path: p, type: 'symlink', mode: 0o777, linkTarget: e.target });
        } else {
          yield tarHeader({ path: p, type: 'file', mode: e.mode, size: e.size });
          let n = 0;
          if (e.cid.code === 0x55) {
            const b = await store.get(e.cid);
            n = b.length;
            yield b;
          } else {
            const node = await reader.readFileNode(e.cid, p);
            for (const c of node.chunks) {
              const b = await store.get(c);
              n += b.length;
              yield b;
            }
          }
          if (n !== e.size) throw new Error(`${p}: the snapshot's content is ${n} bytes, its manifest says ${e.size}`);
          yield tarPadding(e.size);
        }
      }
    }
    yield* dir(this.cid(cid), '');
  }

  digestDirectory(dir: string): Promise<string> {
    return this.home.digest(dir);
  }
}
