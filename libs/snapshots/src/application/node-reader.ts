import type { CID } from 'multiformats/cid';
import { decodeNode, type DirManifest, type FileNode, type SnapshotNode } from '../domain/format';
import { atPath, snapshotError, showPath } from '../domain/snapshot.errors';
import type { DirReader } from '../domain/diff';

export interface BlockGetter {
  get(cid: CID): Promise<Uint8Array>;
}

/** Manifests known without reading the store (CID string -> manifest); a miss is read from the store. */
export interface KnownManifests {
  get(cid: string): DirManifest | undefined;
}

/** Reads and validates snapshot nodes from a store (every read hash-checked by the store). */
export class NodeReader implements DirReader {
  /**
   * `built`: manifests this process has just encoded itself or can rebuild and check (see take-snapshot's
   * ManifestMemo), served without reading them from the store or decoding them again.
   */
  constructor(
    private readonly blocks: BlockGetter,
    private readonly built: KnownManifests | null = null,
  ) {}

  async readNode(cid: CID, where: string): Promise<SnapshotNode> {
    let bytes: Uint8Array;
    try {
      bytes = await this.blocks.get(cid);
    } catch (e) {
      throw atPath(e, where);
    }
    return decodeNode(cid, bytes, where);
  }

  async readDir(cid: CID, where: string): Promise<DirManifest> {
    const mine = this.built?.get(cid.toString());
    if (mine) return mine;
    const n = await this.readNode(cid, where);
    if (n.type !== 'dir') {
      throw snapshotError('SNAPSHOT_MANIFEST_INVALID', `${showPath(where)}: block ${cid.toString()} is a file node, expected a directory manifest`, {
        path: where,
        cid: cid.toString(),
      });
    }
    return n;
  }

  async readFileNode(cid: CID, where: string): Promise<FileNode> {
    const n = await this.readNode(cid, where);
    if (n.type !== 'file') {
      throw snapshotError('SNAPSHOT_MANIFEST_INVALID', `${showPath(where)}: block ${cid.toString()} is a directory manifest, expected a file node`, {
        path: where,
        cid: cid.toString(),
      });
    }
    return n;
  }
}
