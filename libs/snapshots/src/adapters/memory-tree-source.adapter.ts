import { CHUNK_SIZE, chunkCount, rawBlock } from '../domain/format';
import type { SourceKind, SourceStat } from '../domain/stat-cache';
import { snapshotError, showPath } from '../domain/snapshot.errors';
import { decodeUtf8Strict } from '../domain/names';
import type { BlobBatch } from '../ports/blob-store.port';
import type { ContentHasher, HashRequest, HashedFile, SourceEntry, TreeSource } from '../ports/tree-source.port';

interface MemInode {
  kind: SourceKind;
  data: Uint8Array;
  mode: number;
  ino: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  nlink: number;
  target?: Uint8Array;
  children?: Map<string, MemInode>; // key: name bytes as latin1
}

const latin1 = (b: Uint8Array) => Buffer.from(b).toString('latin1');
const fromLatin1 = (s: string) => Uint8Array.from(Buffer.from(s, 'latin1'));

/**
 * The in-memory fake of a tree source, for unit tests of the walk: names may be any bytes, listings come in a
 * chosen order, files can be hard-linked, and timestamps are set explicitly.
 */
export class MemoryTree implements TreeSource {
  private nextIno = 2n;
  private readonly root: MemInode;
  /** Order in which listDir returns entries. */
  order: 'insertion' | 'reverse' | 'sorted' = 'insertion';
  /** Timestamp given to new and modified inodes (ns). */
  now = 1_000_000_000_000_000_000n;

  private static count = 0;

  constructor(readonly id = `memory:/tree-${++MemoryTree.count}`) {
    this.root = this.inode('dir', 0o755);
  }

  /** Every change moves the fake clock on by a microsecond, as a real file system's timestamps would. */
  private touch(): bigint {
    this.now += 1000n;
    return this.now;
  }

  private inode(kind: SourceKind, mode: number): MemInode {
    const t = this.touch();
    const n: MemInode = { kind, data: new Uint8Array(0), mode, ino: this.nextIno++, mtimeNs: t, ctimeNs: t, nlink: 1 };
    if (kind === 'dir') n.children = new Map();
    return n;
  }

  private parentOf(path: string | Uint8Array[]): { dir: MemInode; name: string } {
    const parts: Uint8Array[] = typeof path === 'string' ? path.split('/').map((p) => new TextEncoder().encode(p)) : path;
    let dir = this.root;
    for (const p of parts.slice(0, -1)) {
      const k = latin1(p);
      let next = dir.children?.get(k);
      if (!next) {
        next = this.inode('dir', 0o755);
        dir.children?.set(k, next);
      }
      dir = next;
    }
    const last = parts[parts.length - 1];
    if (!last) throw new Error('empty path');
    return { dir, name: latin1(last) };
  }

  private lookup(rel: string): MemInode | undefined {
    if (rel === '') return this.root;
    let cur: MemInode | undefined = this.root;
    for (const p of rel.split('/')) cur = cur?.children?.get(latin1(new TextEncoder().encode(p)));
    return cur;
  }

  file(path: string | Uint8Array[], content: string | Uint8Array, mode = 0o644): this {
    const { dir, name } = this.parentOf(path);
    const existing = dir.children?.get(name);
    const n = existing && existing.kind === 'file' ? existing : this.inode('file', mode);
    n.data = typeof content === 'string' ? new TextEncoder().encode(content) : content;
    n.mode = mode;
    n.mtimeNs = this.touch();
    n.ctimeNs = this.now;
    dir.children?.set(name, n);
    return this;
  }

  dir(path: string): this {
    const { dir, name } = this.parentOf(path);
    if (!dir.children?.has(name)) dir.children?.set(name, this.inode('dir', 0o755));
    return this;
  }

  symlink(path: string, target: string | Uint8Array): this {
    const { dir, name } = this.parentOf(path);
    const n = this.inode('symlink', 0o777);
    n.target = typeof target === 'string' ? new TextEncoder().encode(target) : target;
    dir.children?.set(name, n);
    return this;
  }

  special(path: string, kind: 'fifo' | 'socket' | 'char-device' | 'block-device'): this {
    const { dir, name } = this.parentOf(path);
    dir.children?.set(name, this.inode(kind, 0o644));
    return this;
  }

  hardlink(path: string, existing: string): this {
    const n = this.lookup(existing);
    if (!n || n.kind !== 'file') throw new Error(`no file ${existing}`);
    const { dir, name } = this.parentOf(path);
    n.nlink += 1;
    dir.children?.set(name, n);
    return this;
  }

  chmod(path: string, mode: number): this {
    const n = this.lookup(path);
    if (!n) throw new Error(`no ${path}`);
    n.mode = mode;
    n.ctimeNs = this.touch();
    return this;
  }

  remove(path: string): this {
    const { dir, name } = this.parentOf(path);
    dir.children?.delete(name);
    return this;
  }

  private statOf(n: MemInode): SourceStat {
    const typeBits = n.kind === 'dir' ? 0o040000 : n.kind === 'symlink' ? 0o120000 : 0o100000;
    return {
      kind: n.kind,
      size: n.kind === 'symlink' ? (n.target?.length ?? 0) : n.data.length,
      mode: typeBits | n.mode,
      dev: 1n,
      ino: n.ino,
      nlink: n.nlink,
      mtimeNs: n.mtimeNs,
      ctimeNs: n.ctimeNs,
    };
  }

  async statRoot(): Promise<SourceStat> {
    return this.statOf(this.root);
  }

  async listDir(rel: string, expected: SourceStat): Promise<SourceEntry[]> {
    const n = this.lookup(rel);
    if (!n || n.kind !== 'dir' || n.ino !== expected.ino) {
      throw snapshotError('SNAPSHOT_TREE_CHANGED', `directory ${showPath(rel)} changed during the snapshot`, { path: rel });
    }
    const raw = [...(n.children ?? new Map<string, MemInode>()).entries()].map(([k, c]) => ({ bytes: fromLatin1(k), stat: this.statOf(c) }));
    if (this.order === 'reverse') raw.reverse();
    if (this.order === 'sorted') raw.sort((a, b) => Buffer.compare(a.bytes, b.bytes));
    return raw.map(({ bytes, stat }) => {
      const name = decodeUtf8Strict(bytes);
      return name === null ? { name: '', invalidName: bytes, stat } : { name, stat };
    });
  }

  async readLink(rel: string): Promise<Uint8Array> {
    const n = this.lookup(rel);
    if (!n || n.kind !== 'symlink' || !n.target) throw snapshotError('SNAPSHOT_FILE_CHANGED', `${rel} is no longer a symlink`);
    return n.target;
  }

  openHasher(batch: BlobBatch | null): ContentHasher {
    return {
      ready: async () => {},
      close: async () => {},
      hash: async (req: HashRequest): Promise<HashedFile> => {
        const n = this.lookup(req.rel);
        if (!n || n.kind !== 'file' || n.ino !== req.stat.ino) {
          throw snapshotError('SNAPSHOT_FILE_CHANGED', `${showPath(req.rel)} changed while it was being read`, { path: req.rel });
        }
        const data = n.data;
        const count = chunkCount(data.length);
        const digests = new Uint8Array(32 * count);
        for (let i = 0; i < count; i++) {
          const block = rawBlock(data.subarray(i * CHUNK_SIZE, Math.min(data.length, (i + 1) * CHUNK_SIZE)));
          digests.set(block.cid.multihash.digest, i * 32);
          if (batch) await batch.put(block);
        }
        return { size: data.length, digests, stat: this.statOf(n) };
      },
    };
  }
}
